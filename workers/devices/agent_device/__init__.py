"""The agent-device backend: the daemon's wire (`wire`, `replies`), the device port over one
session (`device.AgentDeviceDevice`, its effect check `quick`, pictures `shots`, secrets
`secrets`), the daemon's process and ownership (`daemon`, `owner`, `launch`, `keeper`), app
resets (`reset`, `linux_app`), the worker's host (`host.AgentDeviceHost`) and the backend's
entry in the registry (`backend.AGENT_DEVICE`)."""

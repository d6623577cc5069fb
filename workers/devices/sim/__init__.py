"""The sim backend: in-process scripted apps behind the `DevicePort` (`device.SimDevice`), the
apps (`apps`, `screens`), their latency and fault options (`options`), the worker's host
(`host.SimHost`) and the backend's entry in the registry (`backend.SIM`)."""

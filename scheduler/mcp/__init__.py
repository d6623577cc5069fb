"""`goalfleet mcp`: the fleet as MCP tools and resources, for a coding agent (docs/mcp.md).

    tools.py   what each tool takes (the API's own request models: their JSON Schema is the
               tool's input schema) and does, through `FleetClient` alone
    server.py  the MCP SDK's low-level server around them: stdio, or streamable HTTP where
               each request's bearer token is the token the API sees

The server holds no path to Redis: every tool is an API call with a token, so the API's
validation, roles and messages are the tools' too.
"""

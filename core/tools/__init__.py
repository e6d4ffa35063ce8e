"""The MCP server's tools as the agent sees them: starting the server process, the one stdio
session, the schemas offered to the model and the groups a route may use."""

"""The person's other MCP servers (core/servers)."""

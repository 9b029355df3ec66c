"""MCP (the Model Context Protocol) in reactlab: a task's tools taken from an MCP server,
recorded and replayed (docs/mcp.md)."""

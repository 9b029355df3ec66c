"""MCP, the Model Context Protocol, with the official Python SDK (``mcp``, pinned): the
project's tools served to any MCP client (:mod:`reactlab.mcp.server`, docs/mcp.md)."""

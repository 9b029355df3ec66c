"""MCP, the Model Context Protocol, with the official Python SDK (``mcp``, pinned): the
project's tools served to any MCP client (:mod:`reactlab.mcp.server`), a task's tools taken
from an MCP server, its results held to their declared output schemas, recorded and
replayed (:mod:`reactlab.mcp.source`, :mod:`reactlab.mcp.output_schema`,
:mod:`reactlab.mcp.recording`) (docs/mcp.md).
"""

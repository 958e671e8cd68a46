"""The MCP server of the ``mcp_tool_loop`` driver: the two tools served over stdio
(``mcp`` 2.x ``MCPServer``, 1.x ``FastMCP``). It knows nothing of otelmw: it runs under
``otelmw run`` because the client starts it with the client's environment. What each
tool received goes, one JSON line per call, to the file ``ONE_PLUGIN_MCP_RECEIVED``
names (the client reports it as the tools' ``received``)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager

try:
    from mcp.server.mcpserver import MCPServer  # 2.x
except ImportError:  # 1.x
    from mcp.server.fastmcp import FastMCP as MCPServer

from _support.one_plugin_hosts import RECEIVED
from _support.one_plugin_hosts import delete_file as _delete_file
from _support.one_plugin_hosts import get_weather as _get_weather

server = MCPServer("weather")


@contextmanager
def _reporting_received() -> Iterator[None]:
    """After the tool's body, even one that raised: what it received, to the file."""
    try:
        yield
    finally:
        with open(os.environ["ONE_PLUGIN_MCP_RECEIVED"], "a", encoding="utf-8") as out:
            out.write(json.dumps(RECEIVED.pop()) + "\n")


@server.tool()
def get_weather(city: str) -> str:
    """Current weather for a city."""
    with _reporting_received():
        return _get_weather(city)


@server.tool()
def delete_file(path: str) -> str:
    """Delete a file."""
    with _reporting_received():
        return _delete_file(path)


if __name__ == "__main__":
    server.run()

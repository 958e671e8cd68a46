"""An MCP server for ``tests/test_host_mcp.py`` (``mcp`` 2.x ``MCPServer`` or 1.x
``FastMCP``). Imported in process by the driver, or run as a stdio subprocess: then it
configures otelmw's telemetry itself (its spans go to the same OTLP receiver as the
client's), instruments MCP and registers the plugins ``MCP_TEST_SERVER_PLUGINS`` names.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

CANARY = "CANARY-RESULT-4e1b"
RAN: list[str] = []  # the tool bodies that ran (in process: the driver reads it)


def _server() -> Any:
    try:
        from mcp.server.mcpserver import MCPServer  # 2.x
    except ImportError:
        from mcp.server.fastmcp import FastMCP as MCPServer  # 1.x
    return MCPServer("weather")


server = _server()


@server.tool()
def get_weather(city: str) -> str:
    """Current weather for a city."""
    RAN.append(f"get_weather:{city}")
    return f"sunny in {city} {CANARY}"


@server.tool()
def broken(city: str) -> str:
    """A tool that always raises."""
    RAN.append(f"broken:{city}")
    raise ValueError("tool exploded")


@server.tool()
def rpc_error(city: str) -> str:
    """A tool whose failure is a JSON-RPC error (2.x: MCPError passes through)."""
    RAN.append(f"rpc_error:{city}")
    try:
        from mcp.shared.exceptions import MCPError
    except ImportError:
        raise RuntimeError("upstream unavailable") from None
    raise MCPError(code=-32001, message="upstream unavailable")


@server.tool()
def forbidden(city: str) -> str:
    """A tool a plugin blocks."""
    RAN.append(f"forbidden:{city}")
    return f"ran for {city}"


def main() -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from plugins import register

    from otelmw.instrumentation.mcp import MCPInstrumentor
    from otelmw.telemetry import configure

    tel = configure(service_name="mcp-server")
    if not os.environ.get("MCP_TEST_SERVER_BARE"):
        MCPInstrumentor().instrument()
    register("server", json.loads(os.environ.get("MCP_TEST_SERVER_PLUGINS", "[]")))
    try:
        server.run()
    finally:
        tel.shutdown(15)


if __name__ == "__main__":
    main()

"""An MCP server for ``tests/test_host_mcp.py`` (``mcp`` 2.x ``MCPServer`` or 1.x
``FastMCP``). Imported in process by the driver, or run as a stdio subprocess: then it
configures otelmw's telemetry itself (its spans go to the same OTLP receiver as the
client's), instruments MCP and registers the plugins ``MCP_TEST_SERVER_PLUGINS`` names.
With ``--http``: the same over streamable HTTP on 127.0.0.1 (``serve_http``).
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


def serve_http() -> None:
    """Streamable HTTP on 127.0.0.1, an ephemeral port printed as ``LISTENING <port>``;
    the server stops by itself when its stdin closes (the test's signal that the client
    is done) or after two minutes."""
    import asyncio
    import threading

    import uvicorn

    config = uvicorn.Config(server.streamable_http_app(), host="127.0.0.1", port=0,
                            log_level="warning")
    http = uvicorn.Server(config)

    def stop_on_eof() -> None:
        sys.stdin.read()
        http.should_exit = True

    threading.Thread(target=stop_on_eof, daemon=True).start()
    deadline = threading.Timer(120, lambda: setattr(http, "should_exit", True))
    deadline.daemon = True
    deadline.start()

    async def serve() -> None:
        task = asyncio.create_task(http.serve())
        while not http.started and not task.done():
            await asyncio.sleep(0.02)
        if http.started:
            port = http.servers[0].sockets[0].getsockname()[1]
            print(f"LISTENING {port}", flush=True)
        await task

    asyncio.run(serve())


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
        if "--http" in sys.argv:
            serve_http()
        else:
            server.run()
    finally:
        tel.shutdown(15)


if __name__ == "__main__":
    main()

"""One MCP client scenario for ``tests/test_host_mcp.py``, in a fresh process.

``argv[1]`` is a JSON spec: ``transport`` (``memory``: in process, ``mcp.Client(server)``
on 2.x, a ``ClientSession`` over memory streams on 1.x; ``stdio``: the server as a
subprocess, through ``mcp.Client`` on 2.x or ``stdio_client`` + ``ClientSession`` on 1.x;
``session``: 2.x ``Client.session``'s ``ClientSession`` over stdio; ``http``: streamable
HTTP to the server at ``url``), ``calls``
(``[tool, city]`` pairs), ``client_plugins``, ``server_plugins``, ``bare`` (no otelmw
instrumentation), ``client_bare`` (none in the client only), ``nested`` (the calls are
made inside a tool call the pipeline runs, as a framework's MCP tool would),
``server_env`` / ``server_env_unset`` (the stdio server's environment beyond the
client's), ``forge`` (the caller sends its own word on
the contract, signed with that key: ``forged_meta``). The last stdout
line is ``RESULT <json>``: each call's text and ``isError``, or the error it raised.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))  # tests/, for the suite's _support
from _support.driver import print_result  # noqa: E402

SPEC: dict[str, Any] = json.loads(sys.argv[1])


def text_of(result: Any) -> str:
    return "\n".join(b.text for b in result.content if getattr(b, "type", None) == "text")


def is_error(result: Any) -> bool:
    return bool(getattr(result, "is_error", getattr(result, "isError", False)))


def forged_meta(name: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
    """``forge``: a word on the contract, claiming this process's plugins ran, that the
    caller signs itself with the key ``forge`` names (not otelmw's client sending it)."""
    key = SPEC.get("forge")
    if key is None:
        return None
    from otelmw.core import tool_plugins
    from otelmw.instrumentation.mcp import contract_word

    contract_word.use_key(key)
    try:
        word = contract_word.word_for(name, arguments, tool_plugins())
    finally:
        contract_word.use_key(None)
    return {contract_word.META_KEY: word}


async def run_calls(call_tool: Any) -> list[dict[str, Any]]:
    out = []
    for name, city in SPEC["calls"]:
        try:
            meta = forged_meta(name, {"city": city})
            result = await (call_tool(name, {"city": city}) if meta is None
                            else call_tool(name, {"city": city}, meta=meta))
        except Exception as exc:
            out.append({"raised": f"{type(exc).__name__}: {exc}"})
        else:
            out.append({"text": text_of(result), "is_error": is_error(result),
                        "type": type(result).__name__})
    return out


def server_params() -> Any:
    from mcp import StdioServerParameters

    env = {**os.environ, "MCP_TEST_SERVER_PLUGINS": json.dumps(SPEC.get("server_plugins", [])),
           **SPEC.get("server_env", {})}
    for name in SPEC.get("server_env_unset", ()):
        env.pop(name, None)
    if SPEC.get("bare"):
        env["MCP_TEST_SERVER_BARE"] = "1"
    return StdioServerParameters(command=sys.executable,
                                 args=[os.path.join(HERE, "weather_server.py")], env=env)


async def scenario() -> list[dict[str, Any]]:
    transport = SPEC.get("transport", "memory")
    if transport == "memory":
        from weather_server import server

        try:
            from mcp import Client
        except ImportError:  # 1.x: a ClientSession over in-process memory streams
            from mcp.shared.memory import create_connected_server_and_client_session

            async with create_connected_server_and_client_session(server) as session:
                return await run_calls(session.call_tool)
        async with Client(server) as client:
            return await run_calls(client.call_tool)
    if transport == "http":  # streamable HTTP to the server at SPEC["url"]
        return await http_scenario(SPEC["url"])
    try:
        from mcp import Client
    except ImportError:  # 1.x
        from mcp import ClientSession
        from mcp.client.stdio import stdio_client

        async with stdio_client(server_params()) as (read, write), ClientSession(
                read, write) as session:
            await session.initialize()
            return await run_calls(session.call_tool)
    async with Client(server_params()) as client:
        if transport == "session":  # the session API under the high-level client
            return await run_calls(client.session.call_tool)
        return await run_calls(client.call_tool)


async def http_scenario(url: str) -> list[dict[str, Any]]:
    try:
        from mcp import Client
    except ImportError:  # 1.x
        from mcp import ClientSession
        from mcp.client.streamable_http import streamablehttp_client

        async with streamablehttp_client(url) as (read, write, _), ClientSession(
                read, write) as session:
            await session.initialize()
            return await run_calls(session.call_tool)
    async with Client(url) as client:
        return await run_calls(client.call_tool)


async def nested(inner: Any) -> Any:
    """The calls inside a framework's tool call (one pipeline tool call around them)."""
    from otelmw import get_pipeline

    box: dict[str, Any] = {}

    async def framework_tool(args: Any) -> str:
        box["out"] = await inner()
        return "framework tool done"

    await get_pipeline().arun_tool("ask_weather_service", {"q": "weather"}, framework_tool,
                                   tool_call_id="call_framework_1", runtime_id="framework")
    return box["out"]


def main() -> None:
    from otelmw.telemetry import configure

    tel = configure(service_name="mcp-client")
    if not SPEC.get("bare") and not SPEC.get("client_bare"):
        from otelmw.instrumentation.mcp import MCPInstrumentor

        MCPInstrumentor().instrument()
    from plugins import SEEN, register

    register("client", SPEC.get("client_plugins", []))
    if SPEC.get("transport", "memory") == "memory":
        register("server", SPEC.get("server_plugins", []))  # one process: one pipeline
    results = asyncio.run(nested(scenario) if SPEC.get("nested") else scenario())
    out: dict[str, Any] = {"results": results, "seen": SEEN}
    if SPEC.get("transport", "memory") == "memory":
        from weather_server import RAN

        out["ran"] = RAN
    print_result(out, tel)


if __name__ == "__main__":
    main()

"""MCP: an openai tool loop whose tools are served by an MCP server over stdio
(``mcp_weather_server``, a subprocess the client starts with its own environment, so
under ``otelmw run`` both processes are instrumented). The loop lists the server's tools
for the model and sends each tool call the model makes as one MCP ``tools/call``
(``mcp.Client.call_tool`` on 2.x, ``ClientSession.call_tool`` on 1.x), as users of MCP
write one; it is made an agent turn with otelmw's ``@agent_turn`` (a loop of the user's,
like ``openai_sdk``), the ``chat`` spans come from ``otelmw_openai`` and the tool calls
from ``otelmw_mcp``.

The user's plugin is the client program's: the server runs with an otelmw home of its
own (``OTELMW_HOME``), where no plugin is enabled, so its spans join the turn's trace
and the plugin's effects are the client's alone (a server's own plugins:
``tests/test_host_mcp.py``)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from contextlib import asynccontextmanager
from typing import Any

from openai import AsyncOpenAI

from otelmw.decorators import agent_turn

from . import PROMPT, RECEIVED, SYSTEM

MODEL = "scripted-model"


def server_parameters(received: str) -> Any:
    from mcp import StdioServerParameters

    env = {**os.environ, "ONE_PLUGIN_MCP_RECEIVED": received,
           "OTELMW_HOME": tempfile.mkdtemp(prefix="mcp-server-otelmw-home-")}
    return StdioServerParameters(command=sys.executable, env=env,
                                 args=["-m", "_support.one_plugin_hosts.mcp_weather_server"])


@asynccontextmanager
async def mcp_session(params: Any) -> Any:
    """An object with ``list_tools`` and ``call_tool``: 2.x ``mcp.Client``, 1.x a
    ``ClientSession`` over ``stdio_client``."""
    try:
        from mcp import Client
    except ImportError:  # 1.x
        from mcp import ClientSession
        from mcp.client.stdio import stdio_client

        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            yield s
    else:
        async with Client(params) as client:
            yield client


def result_text(result: Any) -> str:
    return "\n".join(b.text for b in result.content if getattr(b, "type", None) == "text")


@agent_turn(name="weather-agent")
async def ask(model: AsyncOpenAI, received: str, prompt: str) -> str:
    """The turn connects to its tool server (so the session's own requests are the
    turn's too: one trace)."""
    async with mcp_session(server_parameters(received)) as mcp:
        return await tool_loop(model, mcp, prompt)


async def tool_loop(model: AsyncOpenAI, mcp: Any, prompt: str) -> str:
    listed = await mcp.list_tools()
    tools: Any = []
    for tool in listed.tools:
        shape = tool.model_dump(by_alias=True)
        tools.append({"type": "function", "function": {
            "name": shape["name"], "description": shape.get("description") or "",
            "parameters": shape["inputSchema"]}})
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM},
                                      {"role": "user", "content": prompt}]
    for _ in range(5):
        reply = await model.chat.completions.create(model=MODEL, messages=messages,
                                                    tools=tools)
        message = reply.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = await mcp.call_tool(call.function.name,
                                         json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id,
                             "content": result_text(result)})
    raise RuntimeError("no answer after 5 model requests")


async def turn(server_url: str, received: str) -> str:
    model = AsyncOpenAI(base_url=f"{server_url}/v1", api_key="sk-scripted", max_retries=0)
    return await ask(model, received, PROMPT)


def run_turn(server_url: str) -> dict[str, Any]:
    fd, received = tempfile.mkstemp(prefix="mcp-received-", suffix=".jsonl")
    os.close(fd)
    final = asyncio.run(turn(server_url, received))
    with open(received, encoding="utf-8") as lines:  # what the server's tools received
        RECEIVED.extend(json.loads(x) for x in lines if x.strip())
    return {"final": final}

"""An MCP client program that knows nothing about otelmw (run under ``otelmw run``): it
starts ``plain_server.py`` over stdio with its own environment and calls one tool."""

import asyncio
import os
import sys

from mcp import StdioServerParameters

PARAMS = StdioServerParameters(
    command=sys.executable, env=dict(os.environ),
    args=[os.path.join(os.path.dirname(os.path.abspath(__file__)), "plain_server.py")])


async def main() -> str:
    try:
        from mcp import Client
    except ImportError:  # 1.x
        from mcp import ClientSession
        from mcp.client.stdio import stdio_client

        async with stdio_client(PARAMS) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            result = await s.call_tool("get_weather", {"city": "Paris"})
    else:
        async with Client(PARAMS) as client:
            result = await client.call_tool("get_weather", {"city": "Paris"})
    return result.content[0].text


print("RESULT", asyncio.run(main()))

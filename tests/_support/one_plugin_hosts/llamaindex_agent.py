"""LlamaIndex: a ``FunctionAgent`` with the two tools as plain functions, its model
LlamaIndex's ``OpenAI`` LLM at the scripted server; one ``await agent.run(...)``."""

from __future__ import annotations

import asyncio
from typing import Any

from . import PROMPT, SYSTEM, delete_file, get_weather


def run_turn(server_url: str) -> dict[str, Any]:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.llms.openai import OpenAI

    llm = OpenAI(model="gpt-4o-mini", api_base=f"{server_url}/v1", api_key="sk-scripted",
                 max_retries=0)
    agent = FunctionAgent(name="weather-agent", tools=[get_weather, delete_file], llm=llm,
                          system_prompt=SYSTEM)

    async def main() -> str:
        return str(await agent.run(PROMPT))

    return {"final": asyncio.run(main())}

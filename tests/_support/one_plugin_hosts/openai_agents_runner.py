"""The OpenAI Agents SDK: an ``Agent`` with the two tools as ``@function_tool``s, its
model the SDK's chat-completions model on an ``AsyncOpenAI`` client of the scripted
server; one ``Runner.run_sync``. The SDK's own trace export is off
(``OPENAI_AGENTS_DISABLE_TRACING``): it would call the OpenAI platform."""

from __future__ import annotations

import os
from typing import Any

from . import PROMPT, SYSTEM, delete_file, get_weather


def run_turn(server_url: str) -> dict[str, Any]:
    os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=f"{server_url}/v1", api_key="sk-scripted", max_retries=0)
    agent = Agent(name="weather-agent", instructions=SYSTEM,
                  tools=[function_tool(get_weather), function_tool(delete_file)],
                  model=OpenAIChatCompletionsModel(model="scripted-model", openai_client=client))
    return {"final": str(Runner.run_sync(agent, PROMPT).final_output)}

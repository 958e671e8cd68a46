"""pydantic-ai: an ``Agent`` with the two tools as ``@agent.tool_plain`` functions, its
model pydantic-ai's OpenAI chat model at ``OPENAI_BASE_URL``; one ``run_sync``."""

from __future__ import annotations

import os
from typing import Any

from . import PROMPT, SYSTEM, delete_file, get_weather


def run_turn(server_url: str) -> dict[str, Any]:
    os.environ["OPENAI_BASE_URL"] = f"{server_url}/v1"
    os.environ["OPENAI_API_KEY"] = "sk-scripted"
    from pydantic_ai import Agent

    agent = Agent("openai-chat:scripted-model", name="weather-agent", instructions=SYSTEM)
    agent.tool_plain(get_weather)
    agent.tool_plain(delete_file)
    return {"final": agent.run_sync(PROMPT).output}

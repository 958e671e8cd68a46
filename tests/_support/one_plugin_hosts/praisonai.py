"""PraisonAI: an ``Agent`` with the two tools as plain functions (PraisonAI builds their
schemas); it reaches the model through the openai SDK at ``OPENAI_BASE_URL``."""

from __future__ import annotations

import os
from typing import Any

from . import PROMPT, SYSTEM, delete_file, get_weather


def run_turn(server_url: str) -> dict[str, Any]:
    os.environ["OPENAI_BASE_URL"] = f"{server_url}/v1"
    os.environ["OPENAI_API_KEY"] = "sk-scripted"
    from praisonaiagents import Agent

    agent = Agent(name="weather-agent", instructions=SYSTEM, llm="gpt-4o-mini",
                  tools=[get_weather, delete_file], output="silent")
    return {"final": str(agent.chat(PROMPT))}

"""CrewAI: an ``Agent`` with the two tools as ``@tool`` functions, its model CrewAI's
native OpenAI provider (``LLM("openai/scripted-model", base_url=...)``); one
``Agent.kickoff``. CrewAI's own telemetry is off (``CREWAI_DISABLE_TELEMETRY``,
``CREWAI_DISABLE_TRACKING``): it would call telemetry.crewai.com."""

from __future__ import annotations

import os
from typing import Any

from . import PROMPT, SYSTEM, delete_file, get_weather


def run_turn(server_url: str) -> dict[str, Any]:
    os.environ["CREWAI_DISABLE_TELEMETRY"] = "true"
    os.environ["CREWAI_DISABLE_TRACKING"] = "true"
    from crewai import LLM, Agent
    from crewai.tools import tool

    llm = LLM(model="openai/scripted-model", base_url=f"{server_url}/v1", api_key="sk-scripted",
              max_retries=0)
    agent = Agent(role="weather-agent", goal="Answer the user", backstory=SYSTEM, llm=llm,
                  tools=[tool(get_weather), tool(delete_file)])
    return {"final": str(agent.kickoff(PROMPT).raw)}

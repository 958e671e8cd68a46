"""Strands Agents: an ``Agent`` with the two tools as ``@tool`` functions, its model
Strands' ``OpenAIModel`` at the server's ``/v1``; one ``agent(prompt)``."""

from __future__ import annotations

from typing import Any

from . import PROMPT, SYSTEM, delete_file, get_weather


def run_turn(server_url: str) -> dict[str, Any]:
    from strands import Agent, tool
    from strands.models.openai import OpenAIModel

    model = OpenAIModel(client_args={"base_url": f"{server_url}/v1", "api_key": "sk-scripted"},
                        model_id="scripted-model")
    agent = Agent(model=model, tools=[tool(get_weather), tool(delete_file)],
                  system_prompt=SYSTEM, name="weather-agent", callback_handler=None)
    return {"final": str(agent(PROMPT))}

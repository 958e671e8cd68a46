"""LangChain: ``create_agent`` with the two tools as ``@tool`` functions and a
``ChatOpenAI`` model on the scripted server; one ``invoke``."""

from __future__ import annotations

from typing import Any

from . import PROMPT, SYSTEM, delete_file, get_weather


def run_turn(server_url: str) -> dict[str, Any]:
    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="scripted-model", base_url=f"{server_url}/v1",
                       api_key="sk-scripted", max_retries=0)
    agent = create_agent(model, tools=[tool(get_weather), tool(delete_file)],
                         system_prompt=SYSTEM, name="weather-agent")
    out = agent.invoke({"messages": [{"role": "user", "content": PROMPT}]})
    return {"final": str(out["messages"][-1].content)}

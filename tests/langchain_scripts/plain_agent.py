"""An unmodified LangChain program (it never imports otelmw): one ``create_agent`` turn
with a tool, sync then async. The model is whatever ``OPENAI_BASE_URL`` serves."""

from __future__ import annotations

import asyncio

from langchain.agents import create_agent
from langchain_core.tools import tool

TOOL_ARGS: list[dict[str, str]] = []


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    TOOL_ARGS.append({"city": city})
    return f"sunny in {city}"


agent = create_agent("openai:scripted-model", tools=[get_weather], name="plain")
question = {"messages": [{"role": "user", "content": "What is the weather in Paris?"}]}
print("SYNC", agent.invoke(question)["messages"][-1].content, flush=True)
out = asyncio.run(agent.ainvoke(question))
print("ASYNC", out["messages"][-1].content, flush=True)
print("TOOL_ARGS", TOOL_ARGS, flush=True)

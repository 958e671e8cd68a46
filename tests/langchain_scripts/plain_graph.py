"""An unmodified LangGraph program as LangGraph's docs write one (it never imports otelmw
nor ``langchain``): a ``StateGraph`` of a model node (``ChatOpenAI(...).bind_tools``)
and a prebuilt ``ToolNode``, routed by ``tools_condition``; one run each of ``invoke``,
``stream``, ``ainvoke`` and ``astream``. The model is whatever ``OPENAI_BASE_URL`` serves."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

TOOL_ARGS: list[dict[str, str]] = []


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    TOOL_ARGS.append({"city": city})
    return f"sunny in {city}"


model = ChatOpenAI(model="scripted-model").bind_tools([get_weather])


def call_model(state: MessagesState) -> dict[str, Any]:
    return {"messages": [model.invoke(state["messages"])]}


async def acall_model(state: MessagesState) -> dict[str, Any]:
    return {"messages": [await model.ainvoke(state["messages"])]}


def build(node: Any) -> Any:
    graph = StateGraph(MessagesState)
    graph.add_node("model", node)
    graph.add_node("tools", ToolNode([get_weather]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile(name="plain-graph")


app, aapp = build(call_model), build(acall_model)
question = {"messages": [{"role": "user", "content": "What is the weather in Paris?"}]}
print("INVOKE", app.invoke(question)["messages"][-1].content, flush=True)
for update in app.stream(question, stream_mode="values"):
    last = update["messages"][-1].content
print("STREAM", last, flush=True)


async def arun() -> None:  # one event loop: the model's async client stays on it
    out = await aapp.ainvoke(question)
    print("AINVOKE", out["messages"][-1].content, flush=True)
    async for update in aapp.astream(question, stream_mode="values"):
        last = update["messages"][-1].content
    print("ASTREAM", last, flush=True)


asyncio.run(arun())
print("TOOL_ARGS", TOOL_ARGS, flush=True)
print("LANGCHAIN_IMPORTED", "langchain" in sys.modules, flush=True)

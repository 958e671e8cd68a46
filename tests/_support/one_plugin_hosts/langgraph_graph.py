"""LangGraph: a plain ``StateGraph`` of a model node (``ChatOpenAI`` with the two tools
bound, on the scripted server) and a prebuilt ``ToolNode``, routed by
``tools_condition``; one ``invoke``. No ``create_agent``, no agent middleware, no
``langchain`` (LangGraph's docs install ``langgraph langchain-openai``): otelmw reaches
the model and the tools through its fallback seams, and the graph run is the turn."""

from __future__ import annotations

import sys
from typing import Any

from . import PROMPT, SYSTEM, delete_file, get_weather


def run_turn(server_url: str) -> dict[str, Any]:
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    tools = [tool(get_weather), tool(delete_file)]
    model = ChatOpenAI(model="scripted-model", base_url=f"{server_url}/v1",
                       api_key="sk-scripted", max_retries=0).bind_tools(tools)

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    app = graph.compile(name="weather-graph")
    out = app.invoke({"messages": [{"role": "system", "content": SYSTEM},
                                   {"role": "user", "content": PROMPT}]})
    if "langchain" in sys.modules:  # neither the program nor otelmw imports it
        raise AssertionError("a LangGraph program without create_agent imported langchain")
    return {"final": str(out["messages"][-1].content)}

"""One LangChain/LangGraph scenario for ``tests/test_host_langchain.py``, in a fresh
process.

``argv[1]`` is a JSON spec; the last stdout line is ``RESULT <json>``: the run's final
messages and what the tools and the user's own middleware saw. A real
``create_agent`` (``"agent"``) or a plain ``StateGraph`` with a model node and a
``ToolNode`` (``"plain"``) talks to the scripted server named by ``OPENAI_BASE_URL``;
with ``"otelmw": true`` (default) telemetry goes through ``otelmw.telemetry.configure()``
to ``OTEL_EXPORTER_OTLP_ENDPOINT``, else otelmw is never imported.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the suite's _support
from _support.driver import instrumented, print_result

SPEC: dict[str, Any] = json.loads(sys.argv[1])
TOOL_ARGS: list[dict[str, Any]] = []
NOTES: list[str] = []
PROMPT = "What is the weather in Paris? CANARY-PROMPT-3b1f"


def tools() -> list[Any]:
    from langchain_core.tools import ToolException, tool

    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        TOOL_ARGS.append({"tool": "get_weather", "city": city})
        return f"sunny in {city}"

    @tool
    def broken(city: str) -> str:
        """A weather tool whose vendor is down."""
        TOOL_ARGS.append({"tool": "broken", "city": city})
        raise ToolException("vendor is down")

    broken.handle_tool_error = True  # LangChain answers ToolMessage(status="error")

    if SPEC.get("tool") == "mcp":
        return [mcp_weather_tool()]
    return [broken] if SPEC.get("tool") == "broken" else [get_weather]


def mcp_weather_tool() -> Any:
    """``get_weather`` as a LangChain MCP adapter tool makes it: a LangChain tool whose
    body is an MCP ``tools/call`` (``mcp.Client`` to the in-process weather server of
    ``tests/mcp_scripts``); sync and async, as LangChain runs either."""
    from langchain_core.tools import StructuredTool

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "mcp_scripts"))
    from mcp import Client
    from weather_server import server

    async def acall(city: str) -> str:
        TOOL_ARGS.append({"tool": "get_weather", "city": city})
        async with Client(server) as client:
            result = await client.call_tool("get_weather", {"city": city})
        return "\n".join(b.text for b in result.content if getattr(b, "type", None) == "text")

    def call(city: str) -> str:
        return asyncio.run(acall(city))

    return StructuredTool.from_function(func=call, coroutine=acall, name="get_weather",
                                        description="Current weather for a city.")


def user_middleware() -> list[Any]:
    """A user's own middleware: ``before_agent``, a ``wrap_model_call`` that retries the
    first model call once (the second answer wins), a ``wrap_tool_call`` that notes the
    arguments it is handed."""
    if not SPEC.get("user_middleware"):
        return []
    from langchain.agents.middleware import AgentMiddleware

    retried: list[bool] = []

    class Audit(AgentMiddleware):  # type: ignore[misc]
        def before_agent(self, state: Any, runtime: Any) -> Any:
            NOTES.append(f"before_agent:{len(state['messages'])}")
            return None

        async def abefore_agent(self, state: Any, runtime: Any) -> Any:
            return self.before_agent(state, runtime)

        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            NOTES.append(f"model:{len(request.messages)}")
            answer = handler(request)
            if not retried:
                retried.append(True)
                NOTES.append("retry")
                answer = handler(request)
            return answer

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            NOTES.append(f"model:{len(request.messages)}")
            answer = await handler(request)
            if not retried:
                retried.append(True)
                NOTES.append("retry")
                answer = await handler(request)
            return answer

        def wrap_tool_call(self, request: Any, handler: Any) -> Any:
            NOTES.append(f"tool:{json.dumps(request.tool_call['args'])}")
            return handler(request)

        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            NOTES.append(f"tool:{json.dumps(request.tool_call['args'])}")
            return await handler(request)

    return [Audit()]


def agent_graph() -> Any:
    from langchain.agents import create_agent

    return create_agent("openai:scripted-model", tools=tools(), name="weather",
                        system_prompt="Answer briefly.", middleware=user_middleware())


def plain_graph() -> Any:
    from langchain_core.runnables import RunnableLambda
    from langchain_openai import ChatOpenAI
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    found = tools()
    model = ChatOpenAI(model="scripted-model", max_retries=0).bind_tools(found)

    def call_model(state: Any) -> Any:
        return {"messages": [model.invoke(state["messages"])]}

    async def acall_model(state: Any) -> Any:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", RunnableLambda(call_model, afunc=acall_model))
    graph.add_node("tools", ToolNode(found))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile(name="plain-graph")


def run(graph: Any, mode: str) -> tuple[list[Any], int]:
    """(the final messages, how many message chunks a stream gave)."""
    question = {"messages": [{"role": "user", "content": PROMPT}]}
    if mode == "invoke":
        return graph.invoke(question)["messages"], 0
    if mode == "ainvoke":
        return asyncio.run(graph.ainvoke(question))["messages"], 0
    modes = ["messages", "values"]
    final: Any = None
    chunks = 0
    if mode == "stream":
        for kind, item in graph.stream(question, stream_mode=modes):
            chunks += kind == "messages"
            final = item if kind == "values" else final
        return final["messages"], chunks

    async def consume() -> tuple[list[Any], int]:
        final: Any = None
        chunks = 0
        async for kind, item in graph.astream(question, stream_mode=modes):
            chunks += kind == "messages"
            final = item if kind == "values" else final
        return final["messages"], chunks

    if mode == "astream":
        return asyncio.run(consume())
    raise ValueError(mode)


def described(message: Any) -> dict[str, Any]:
    return {"type": message.type, "content": message.content,
            "status": getattr(message, "status", None),
            "tool_calls": [{"name": c["name"], "args": c["args"]}
                           for c in getattr(message, "tool_calls", None) or ()]}


def main() -> None:
    tel = None
    if SPEC.get("otelmw", True):
        from otelmw import PluginManager
        from otelmw.instrumentation.langchain import LangChainInstrumentor

        tel = instrumented(SPEC, "langchain-host-test", LangChainInstrumentor(),
                           ["openai", "langchain"])
        if SPEC.get("tool") == "mcp":
            from otelmw.instrumentation.mcp import MCPInstrumentor

            MCPInstrumentor().instrument()
        if SPEC.get("plugin"):
            sys.path.insert(0, str(Path(__file__).parent))
            import lc_plugin

            os.environ["LC_PLUGIN"] = ",".join(SPEC["plugin"])
            PluginManager().add_plugin("lc-plugin", lc_plugin.register)
    graph = plain_graph() if SPEC.get("graph") == "plain" else agent_graph()
    out: dict[str, Any] = {}
    try:
        messages, chunks = run(graph, SPEC.get("mode", "invoke"))
        out["messages"], out["chunks"] = [described(m) for m in messages], chunks
    except Exception as exc:
        out["error"] = f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}"
    out["tool_args"], out["notes"] = TOOL_ARGS, NOTES
    out["imported_langchain"] = "langchain" in sys.modules  # a plain graph never does
    print_result(out, tel)


if __name__ == "__main__":
    main()

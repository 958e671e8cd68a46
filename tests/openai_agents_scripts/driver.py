"""One OpenAI Agents SDK scenario for ``tests/test_host_openai_agents.py``, in a fresh
process.

``argv[1]`` is a JSON spec; the last stdout line is ``RESULT <json>`` with what the test
checks besides the telemetry the OTLP receiver got: what the run returned, what each
tool received, what the SDK's own ``RunHooks`` and tracing processor saw. Real Agents
SDK runs talk to the scripted LLM server named by ``OPENAI_BASE_URL`` through the SDK's
default client; the SDK's own trace export is replaced by a recording processor
(``set_trace_processors``), so nothing leaves 127.0.0.1. Telemetry goes through
``otelmw.telemetry.configure()`` to ``OTEL_EXPORTER_OTLP_ENDPOINT``; with
``"otelmw": false`` otelmw is not imported at all (the baseline run).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the suite's _support
from _support.driver import instrumented, print_result

SPEC: dict[str, Any] = json.loads(sys.argv[1])
TOOL_RECEIVED: list[dict[str, Any]] = []
HOOKS_SEEN: list[str] = []
SDK_SPANS: list[str] = []
CANARY = "CANARY-RESULT-7f3a"
RUN_ERRORS: list[str] = []


def build() -> tuple[Any, Any, Any]:
    from agents import (
        Agent,
        RunHooks,
        ToolGuardrailFunctionOutput,
        function_tool,
        tool_input_guardrail,
    )
    from agents.tracing import TracingProcessor

    class Recorder(TracingProcessor):
        def on_trace_start(self, trace: Any) -> None:
            SDK_SPANS.append("trace")

        def on_trace_end(self, trace: Any) -> None:
            pass

        def on_span_start(self, span: Any) -> None:
            pass

        def on_span_end(self, span: Any) -> None:
            SDK_SPANS.append(type(span.span_data).__name__)

        def shutdown(self) -> None:
            pass

        def force_flush(self) -> None:
            pass

    class Hooks(RunHooks):  # the user's own hooks: each event, by agent or tool
        async def on_agent_start(self, context: Any, agent: Any) -> None:
            HOOKS_SEEN.append(f"agent_start:{agent.name}")

        async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
            HOOKS_SEEN.append(f"agent_end:{agent.name}")

        async def on_llm_start(self, context: Any, agent: Any, *args: Any) -> None:
            HOOKS_SEEN.append(f"llm_start:{agent.name}")

        async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
            HOOKS_SEEN.append(f"llm_end:{agent.name}")

        async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
            HOOKS_SEEN.append(f"tool_start:{tool.name}:{context.tool_call_id}")

        async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
            HOOKS_SEEN.append(f"tool_end:{tool.name}:{result}")

        async def on_handoff(self, context: Any, from_agent: Any, to_agent: Any) -> None:
            HOOKS_SEEN.append(f"handoff:{from_agent.name}->{to_agent.name}")

    @tool_input_guardrail
    def no_secrets(data: Any) -> Any:
        if "secret" in data.context.tool_arguments:
            return ToolGuardrailFunctionOutput.reject_content("guardrail: no secrets")
        return ToolGuardrailFunctionOutput.allow()

    @function_tool(tool_input_guardrails=[no_secrets])
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        TOOL_RECEIVED.append({"tool": "get_weather", "city": city,
                              "main_thread": threading.current_thread() is
                              threading.main_thread()})
        return f"sunny in {city} {CANARY}"

    @function_tool
    async def aget_weather(city: str) -> str:
        """Current weather for a city (async)."""
        TOOL_RECEIVED.append({"tool": "aget_weather", "city": city})
        return f"sunny in {city} {CANARY}"

    @function_tool
    def broken(city: str) -> str:
        """A tool that always raises."""
        TOOL_RECEIVED.append({"tool": "broken", "city": city})
        raise ValueError("tool exploded")

    @function_tool
    def forbidden(city: str) -> str:
        """A tool the plugin blocks."""
        TOOL_RECEIVED.append({"tool": "forbidden", "city": city})
        return "should not run"

    tools = {"get_weather": get_weather, "aget_weather": aget_weather, "broken": broken,
             "forbidden": forbidden}
    chosen = [tools[name] for name in SPEC.get("tools", ["get_weather"])]
    billing = Agent(name="Billing", instructions="Handle billing.", tools=chosen,
                    model="scripted-model")
    agent = Agent(name=SPEC.get("agent", "Weather"), instructions="Answer briefly.",
                  tools=chosen, model="scripted-model",
                  handoffs=[billing] if SPEC.get("handoff") else [])
    return agent, Hooks(), Recorder()


def run_all(agent: Any, hooks: Any, runs: int) -> list[Any]:
    """``runs`` runs of ``agent``; the async modes on one event loop (the SDK's default
    client is bound to the loop of its first request)."""
    from agents import Runner

    prompt = SPEC.get("prompt", "What is the weather? CANARY-PROMPT-52d0")
    mode = SPEC.get("mode", "run_sync")
    results: list[Any] = []

    def failed(exc: Exception) -> None:
        results.append(None)
        RUN_ERRORS.append(f"{type(exc).__module__}.{type(exc).__qualname__}")

    if mode == "run_sync":
        for _ in range(runs):
            try:
                results.append(Runner.run_sync(agent, prompt, hooks=hooks).final_output)
            except Exception as exc:
                failed(exc)
        return results

    async def one() -> Any:
        if SPEC.get("mcp"):  # the agent's tools come from an MCP server over stdio
            return await with_mcp_server(agent, prompt, hooks)
        if mode == "run":
            return (await Runner.run(agent, prompt, hooks=hooks)).final_output
        result = Runner.run_streamed(agent, prompt, hooks=hooks)
        async for _ in result.stream_events():
            pass
        return result.final_output

    async def main() -> None:
        for _ in range(runs):
            try:
                results.append(await one())
            except Exception as exc:
                failed(exc)

    asyncio.run(main())
    return results


async def with_mcp_server(agent: Any, prompt: str, hooks: Any) -> Any:
    from agents import Runner
    from agents.mcp import MCPServerStdio

    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mcp_weather_server.py")
    async with MCPServerStdio(params={"command": sys.executable, "args": [script]},
                              cache_tools_list=True) as server:
        mcp_agent = agent.clone(tools=[], mcp_servers=[server])
        return (await Runner.run(mcp_agent, prompt, hooks=hooks)).final_output


def plugin_seen() -> list[str]:
    module = sys.modules.get("acme_agents_plugin")
    return list(module.SEEN) if module is not None else []


def main() -> None:
    from agents import set_default_openai_api, set_trace_processors

    tel = None
    if SPEC.get("otelmw", True):
        from otelmw.core.plugins import get_plugin_manager
        from otelmw.instrumentation.openai_agents import OpenAIAgentsInstrumentor

        tel = instrumented(SPEC, "openai-agents-host-test", OpenAIAgentsInstrumentor(),
                           ["openai", "openai_agents"])
        if SPEC.get("plugin"):
            from acme_agents_plugin import plugin

            get_plugin_manager().add_plugin("acme", plugin)
    agent, hooks, recorder = build()
    set_trace_processors([recorder])  # the SDK's own tracing, recorded, never exported
    if SPEC.get("api"):
        set_default_openai_api(SPEC["api"])
    out: dict[str, Any] = {"results": run_all(agent, hooks, SPEC.get("runs", 1))}
    out.update(errors=RUN_ERRORS, tool_received=TOOL_RECEIVED, hooks_seen=HOOKS_SEEN,
               plugin_seen=plugin_seen(), sdk_spans=SDK_SPANS,
               tracing_env=os.environ.get("OPENAI_AGENTS_DISABLE_TRACING"))
    print_result(out, tel)


if __name__ == "__main__":
    main()

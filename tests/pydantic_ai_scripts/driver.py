"""One pydantic-ai scenario for ``tests/test_host_pydantic_ai.py``, in a fresh process.

``argv[1]`` is a JSON spec; the last stdout line is ``RESULT <json>`` with what the
test checks besides the telemetry the OTLP receiver got: each run's output, what each
tool received, what the user's own pydantic-ai capability saw, otelmw's failure
counts. A real pydantic-ai ``Agent`` talks through the real openai SDK to the scripted
LLM server named by ``OPENAI_BASE_URL``; telemetry goes through
``otelmw.telemetry.configure()`` to ``OTEL_EXPORTER_OTLP_ENDPOINT``. With
``"otelmw": false`` nothing of otelmw is set up (the same run without otelmw).
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
TOOL_CALLS: list[dict[str, Any]] = []  # what each tool received
SEEN: list[Any] = []  # what the user's own capability saw, in order
WRAPPED: list[str] = []  # otelmw tool_execution wrapper runs
RETRIED: list[int] = []


def otelmw_plugin(ctx: Any) -> None:
    """An otelmw plugin (otelmw's own API): must apply inside pydantic-ai's runs."""
    plugin = SPEC.get("plugin") or {}

    def rewrite_request(**kw: Any) -> Any:
        req = kw["request"]
        messages = [dict(m) for m in req["messages"]]
        for m in messages:
            if m["role"] == "user" and isinstance(m["content"], str):
                m["content"] = m["content"] + " [via otelmw]"
        return {"request": {**req, "max_tokens": 77, "messages": messages},
                "reason": "token budget"}

    def rewrite_args(**kw: Any) -> Any:
        return {"args": {**kw["args"], "city": "Oslo"}, "reason": "city policy"}

    def wrap_tool(**kw: Any) -> Any:
        WRAPPED.append(kw["tool_name"])
        return kw["next_call"](kw["args"])

    def block(**kw: Any) -> Any:
        if kw["tool_name"] == plugin.get("block"):
            return {"action": "block", "message": "blocked by policy"}
        return None

    def transform(**kw: Any) -> Any:
        return f"transformed: {kw['result']}"

    if plugin.get("llm_request"):
        ctx.register_middleware("llm_request", rewrite_request)
    if plugin.get("tool_request"):
        ctx.register_middleware("tool_request", rewrite_args)
    if plugin.get("tool_execution"):
        ctx.register_middleware("tool_execution", wrap_tool)
    if plugin.get("block"):
        ctx.register_hook("pre_tool_call", block)
    if plugin.get("transform"):
        ctx.register_hook("transform_tool_result", transform)


def user_capability() -> Any:
    """The user's own pydantic-ai capability: records what it sees, changes the
    tool's arguments (``units``) and the settings, as a real one would."""
    from dataclasses import replace

    from pydantic_ai.capabilities import AbstractCapability

    class Recorder(AbstractCapability[Any]):
        async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
            SEEN.append({"hook": "before_model_request",
                         "messages": len(request_context.messages)})
            settings = dict(request_context.model_settings or {})
            settings["temperature"] = 0.25
            return replace(request_context, model_settings=settings)

        async def before_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any,
                                      args: Any) -> Any:
            SEEN.append({"hook": "before_tool_execute", "tool": call.tool_name,
                         "args": dict(args)})
            return {**args, "units": "metric"}

        async def after_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any, args: Any,
                                     result: Any) -> Any:
            SEEN.append({"hook": "after_tool_execute", "tool": call.tool_name,
                         "result": result})
            return result

    return Recorder()


def user_hooks() -> Any:
    """The user's hook functions on pydantic-ai's ``Hooks`` capability: one changes the
    tool's arguments, one answers ``broken`` without running it (``SkipToolExecution``),
    one only notes the model's answers; a tool hook filtered to a tool the model does
    not call never fires."""
    from pydantic_ai.capabilities import Hooks
    from pydantic_ai.exceptions import SkipToolExecution

    hooks = Hooks()

    @hooks.on.before_tool_execute(tools=["get_weather"])
    async def add_units(ctx: Any, *, call: Any, tool_def: Any, args: Any) -> Any:
        SEEN.append({"hook": "before_tool_execute", "tool": call.tool_name,
                     "args": dict(args)})
        return {**args, "units": "kelvin"}

    @hooks.on.before_tool_execute(tools=["broken"])
    async def skip_broken(ctx: Any, *, call: Any, tool_def: Any, args: Any) -> Any:
        SEEN.append({"hook": "before_tool_execute", "tool": call.tool_name})
        raise SkipToolExecution("broken is answered by the hook")

    @hooks.on.after_model_request
    def note_answer(ctx: Any, *, request_context: Any, response: Any) -> Any:
        SEEN.append({"hook": "after_model_request", "parts": len(response.parts)})
        return response

    @hooks.on.before_tool_validate(tools=["flaky"])
    async def never(ctx: Any, *, call: Any, tool_def: Any, args: Any) -> Any:
        SEEN.append({"hook": "before_tool_validate", "tool": call.tool_name})
        return args

    return hooks


def make_agent() -> Any:
    from pydantic_ai import Agent, ModelRetry
    from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider = OpenAIProvider(base_url=os.environ["OPENAI_BASE_URL"], api_key="dummy")
    kind = OpenAIResponsesModel if SPEC.get("api") == "responses" else OpenAIChatModel
    model = kind("scripted-model", provider=provider)
    caps = [user_capability()] if SPEC.get("user_capability") else []
    if SPEC.get("user_hooks"):
        caps.append(user_hooks())
    agent = Agent(model, name=SPEC.get("name", "Weather"), instructions="Answer briefly.",
                  capabilities=caps)
    if SPEC.get("native"):
        agent.instrument = True

    @agent.tool_plain
    def get_weather(city: str, units: str = "imperial") -> dict[str, Any]:
        """Current weather for a city."""
        TOOL_CALLS.append({"tool": "get_weather", "city": city, "units": units})
        return {"city": city, "sky": "sunny", "units": units}

    @agent.tool_plain
    def flaky(city: str) -> str:
        """A tool that asks the model to call again once."""
        TOOL_CALLS.append({"tool": "flaky", "city": city})
        if not RETRIED:
            RETRIED.append(1)
            raise ModelRetry("try another city")
        return f"fine in {city}"

    @agent.tool_plain
    def broken(city: str) -> str:
        """A tool that always raises."""
        TOOL_CALLS.append({"tool": "broken", "city": city})
        raise ValueError("tool exploded")

    return agent


def tool_order(agent: Any) -> None:
    """The scripted model calls the first tool offered: offer the scenario's first."""
    first = SPEC.get("tool", "get_weather")
    tools = agent._function_toolset.tools
    ordered = {first: tools[first], **{k: v for k, v in tools.items() if k != first}}
    tools.clear()
    tools.update(ordered)


async def run_async(agent: Any, mode: str, prompt: str) -> Any:
    if mode == "run":
        return (await agent.run(prompt)).output
    if mode == "run_stream":
        async with agent.run_stream(prompt) as result:
            return "".join([t async for t in result.stream_text(delta=True)])
    if mode == "iter":
        async with agent.iter(prompt) as run:
            async for _node in run:
                pass
            assert run.result is not None
            return run.result.output
    if mode == "run_stream_events":
        out = None
        async with agent.run_stream_events(prompt) as events:
            async for event in events:
                if type(event).__name__ == "AgentRunResultEvent":
                    out = event.result.output
        return out
    raise ValueError(mode)


def drive(agent: Any, mode: str, prompt: str) -> Any:
    if mode == "run_sync":
        return agent.run_sync(prompt).output
    return asyncio.run(run_async(agent, mode, prompt))


def main() -> None:
    tel = None
    if SPEC.get("otelmw", True):
        import otelmw
        from otelmw.instrumentation.pydantic_ai import PydanticAIInstrumentor

        inst = PydanticAIInstrumentor()
        import pydantic_ai.agent as agent_module

        original_iter = vars(agent_module.Agent)["iter"]
        tel = instrumented(SPEC, "pydantic-ai-host-test", inst, ["pydantic-ai", "openai"])
        if SPEC.get("plugin"):
            otelmw.PluginManager().add_plugin("probe", otelmw_plugin)
        if SPEC.get("break"):  # an otelmw bug: before the model call, after the tool
            from otelmw.core.pipeline import Pipeline

            async def bad_llm(self: Any, request: Any, execute: Any, **kw: Any) -> Any:
                raise RuntimeError("otelmw bug before the call")

            async def bad_tool(self: Any, name: str, args: Any, execute: Any,
                               **kw: Any) -> Any:
                await execute(args)
                raise RuntimeError("otelmw bug after the call")

            Pipeline.arun_llm = bad_llm  # type: ignore[method-assign]
            Pipeline.arun_tool = bad_tool  # type: ignore[method-assign]
    elif SPEC.get("native"):  # pydantic-ai's own spans, exported the stock way
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
    out: dict[str, Any] = {"results": [], "errors": []}
    agent = make_agent()
    tool_order(agent)
    for i in range(SPEC.get("turns", 1)):
        try:
            out["results"].append(drive(agent, SPEC.get("mode", "run_sync"),
                                        SPEC.get("prompt", f"Weather in Paris? (turn {i})")))
        except Exception as exc:
            out["results"].append(None)
            out["errors"].append(f"{type(exc).__qualname__}: {exc}")
    if SPEC.get("uninstrument"):
        inst.uninstrument()
        out["restored"] = vars(agent_module.Agent)["iter"] is original_iter
        out["after_result"] = drive(make_agent(), "run_sync", "And in Rome?")
    out["tool_calls"] = TOOL_CALLS
    out["seen"] = SEEN
    out["wrapped"] = WRAPPED
    if tel is None:
        from opentelemetry import trace

        shutdown = getattr(trace.get_tracer_provider(), "shutdown", None)
        if shutdown is not None:
            shutdown()
    print_result(out, tel)


if __name__ == "__main__":
    main()

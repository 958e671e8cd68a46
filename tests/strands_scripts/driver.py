"""One Strands Agents scenario for ``tests/test_host_strands.py``, in a fresh process.

``argv[1]`` is a JSON spec; the last stdout line is ``RESULT <json>``: the run's
answer, what the tool received, what the user's own Strands hook and middleware saw,
otelmw's failure counts. A real Strands ``Agent`` talks through its ``OpenAIModel``
(the real openai SDK) to the scripted LLM server named by ``OPENAI_BASE_URL``;
telemetry goes through ``otelmw.telemetry.configure()`` to
``OTEL_EXPORTER_OTLP_ENDPOINT``. With ``"otelmw": false`` nothing of otelmw is set up,
and no tracer provider either (the same run without otelmw); with ``"tracing": true``
too, the OpenTelemetry SDK's own tracer provider exports Strands' spans there (Strands'
tracing without otelmw).
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
TOOL_CALLS: list[dict[str, Any]] = []  # what the tool received
HOOK_SAW: list[Any] = []  # what the user's BeforeToolCallEvent / AfterToolCallEvent hooks saw
MIDDLEWARE_SAW: list[Any] = []  # what the user's own Strands middleware saw
WRAPPED: list[str] = []  # otelmw tool_execution wrapper runs
STREAMED: list[Any] = []  # a streaming tool's events, as the user's callback handler saw them


def otelmw_plugin(ctx: Any) -> None:
    """An otelmw plugin (otelmw's own API): must apply inside Strands' runs."""
    plugin = SPEC.get("plugin") or {}

    def rewrite_request(**kw: Any) -> Any:
        return {"request": {**kw["request"], "max_tokens": 77}, "reason": "token budget"}

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

    def answer_llm(**kw: Any) -> Any:
        return "a cached answer"  # not a stream of the model's events

    if plugin.get("answer_llm"):
        ctx.register_middleware("llm_execution", answer_llm)
    if plugin.get("llm_request"):
        ctx.register_middleware("llm_request", rewrite_request)
    if plugin.get("tool_request"):
        ctx.register_middleware("tool_request", rewrite_args)
    if plugin.get("wrap"):
        ctx.register_middleware("tool_execution", wrap_tool)
    if plugin.get("block"):
        ctx.register_hook("pre_tool_call", block)
    if plugin.get("transform"):
        ctx.register_hook("transform_tool_result", transform)


def build_agent() -> Any:
    from strands import Agent, tool
    from strands.hooks import AfterToolCallEvent, BeforeToolCallEvent
    from strands.middleware import ExecuteToolStage, InvokeModelStage
    from strands.models.openai import OpenAIModel

    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        TOOL_CALLS.append({"city": city})
        return f"sunny in {city}"

    @tool(name="get_weather")
    async def streaming_weather(city: str) -> Any:
        """Current weather for a city, with progress."""
        TOOL_CALLS.append({"city": city})
        yield f"looking up {city}"
        for _ in range(200):  # the user's callback handler has the progress event by now
            if STREAMED:
                break
            await asyncio.sleep(0.01)
        yield f"sunny in {city} ({'live' if STREAMED else 'late'} progress)"

    @tool(name="get_weather")
    def broken_weather(city: str) -> str:
        """Current weather for a city (the service is down)."""
        TOOL_CALLS.append({"city": city})
        raise ConnectionError("weather service down")

    chosen = {"stream": streaming_weather, "broken": broken_weather}.get(
        SPEC.get("tool", ""), get_weather)

    def callback_handler(**event: Any) -> None:
        streamed = event.get("tool_stream_event")
        if streamed is not None:
            STREAMED.append(streamed["data"])

    model = OpenAIModel(client_args={"base_url": os.environ["OPENAI_BASE_URL"],
                                     "api_key": "sk-scripted", "max_retries": 0},
                        model_id="scripted-model")
    agent = Agent(model=model, tools=[chosen], name="Weather",
                  system_prompt="You are terse.", callback_handler=callback_handler)

    def before_tool(event: Any) -> None:
        HOOK_SAW.append(["before", event.tool_use["name"], event.tool_use["input"]])

    def after_tool(event: Any) -> None:
        HOOK_SAW.append(["after", event.tool_use["name"], event.result["status"],
                         event.result["content"]])

    agent.hooks.add_callback(BeforeToolCallEvent, before_tool)
    agent.hooks.add_callback(AfterToolCallEvent, after_tool)

    async def model_layer(context: Any, next_fn: Any) -> Any:
        MIDDLEWARE_SAW.append(["model", len(context.messages)])
        async for event in next_fn(context):
            yield event

    async def tool_layer(context: Any, next_fn: Any) -> Any:
        MIDDLEWARE_SAW.append(["tool", context.tool_use["name"], context.tool_use["input"]])
        async for event in next_fn(context):
            yield event

    agent.add_middleware(InvokeModelStage, model_layer)
    agent.add_middleware(ExecuteToolStage, tool_layer)
    return agent


async def model_only(model: Any, prompt: str) -> str:
    """The model's own stream, outside an agent's event loop (no Strands span over it):
    the text of its answer, and the names of the tools it calls."""
    said = []
    async for event in model.stream([{"role": "user", "content": [{"text": prompt}]}]):
        delta = (event.get("contentBlockDelta") or {}).get("delta") or {}
        start = ((event.get("contentBlockStart") or {}).get("start") or {}).get("toolUse")
        said.append(delta.get("text") or (start or {}).get("name") or "")
    return "".join(said)


async def streamed(agent: Any, prompt: str) -> str:
    final = ""
    async for event in agent.stream_async(prompt):
        if "result" in event:
            final = str(event["result"])
    return final


def plain_tracing() -> Any:
    """The SDK's tracer provider exporting to the OTLP endpoint, otelmw nowhere."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider


def main() -> None:
    telemetry = None
    provider = plain_tracing() if SPEC.get("tracing") and not SPEC.get("otelmw", True) else None
    if SPEC.get("otelmw", True):
        import otelmw
        from otelmw.instrumentation.strands import StrandsInstrumentor

        telemetry = instrumented(SPEC, "strands-host-test", StrandsInstrumentor(),
                                 ("openai", "strands"))
        if SPEC.get("plugin"):
            otelmw.PluginManager().add_plugin("probe", otelmw_plugin)
        if SPEC.get("break"):  # an otelmw bug: the pipeline raises before each call runs
            from otelmw.core.pipeline import Pipeline

            async def broken(self: Any, *args: Any, **kw: Any) -> Any:
                raise RuntimeError("otelmw bug before the call")

            Pipeline.arun_llm = broken  # type: ignore[method-assign]
            Pipeline.arun_tool = broken  # type: ignore[method-assign]
    agent = build_agent()
    prompt = "What is the weather in Paris?"
    mode = SPEC.get("mode", "call")
    if mode == "direct":  # the user calls the tool; no model, no turn
        answer = json.dumps(agent.tool.get_weather(city="Paris")["content"])
    elif mode == "model":
        answer = asyncio.run(model_only(agent.model, prompt))
    elif mode == "call":
        try:
            answer = str(agent(prompt))
        except Exception as exc:  # the provider's error (a scenario of a failing model)
            answer = f"raised {type(exc).__name__}"
    elif mode == "invoke_async":
        answer = str(asyncio.run(agent.invoke_async(prompt)))
    else:
        answer = asyncio.run(streamed(agent, prompt))
    if provider is not None:
        provider.shutdown()  # exported before the result says the run is over
    print_result({"answer": answer.strip(), "tool_calls": TOOL_CALLS, "hooks": HOOK_SAW,
                  "middleware": MIDDLEWARE_SAW, "wrapped": WRAPPED,
                  "streamed": STREAMED}, telemetry)


main()

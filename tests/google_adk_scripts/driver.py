"""One Google ADK scenario for ``tests/test_host_google_adk.py``, in a fresh process.

``argv[1]`` is a JSON spec; the last stdout line is ``RESULT <json>`` with what the test
checks besides the telemetry the OTLP receiver got: the events ADK yielded, what each tool
received, what the user's own ADK callbacks and ADK plugin saw, otelmw's failure counts.
A real ADK ``LlmAgent`` run by an ``InMemoryRunner`` talks to the scripted LLM server at
``SCRIPTED_ROOT`` through ADK's LiteLLM route (``LiteLlm("openai/scripted-model",
api_base=...)``, the server's OpenAI chat route) or its native ``Gemini`` model
(``base_url=...``, the server's Gemini route). Telemetry goes through
``otelmw.telemetry.configure()`` to ``OTEL_EXPORTER_OTLP_ENDPOINT``; with ``"otelmw":
false`` nothing of otelmw is set up and, with ``"adk_tracer": true``, the program has a
tracer provider of its own (ADK's own spans, exported to the same endpoint: the same run
without otelmw). ``"adk_tracing": false``: otelmw's telemetry on a tracer provider that is
not the global one, so ADK's own spans do not record; with ``"global_meters": true`` its
meter provider is the global one all the same (exported over OTLP), where ADK's meter
records too.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the suite's _support
from _support.driver import print_result

SPEC: dict[str, Any] = json.loads(sys.argv[1])
ROOT = os.environ["SCRIPTED_ROOT"]
RECEIVED: list[dict[str, Any]] = []  # what each tool received
SEEN: list[dict[str, Any]] = []  # what the user's ADK callbacks and plugin saw, in order
WRAPPED: list[str] = []  # otelmw tool_execution wrapper runs
TOOL_ERRORS: list[str] = []  # what ADK's on_tool_error_callback got


def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city."""
    RECEIVED.append({"tool": "get_weather", "args": {"city": city}})
    return {"city": city, "sky": "sunny"}


def delete_file(path: str) -> str:
    """Delete a file."""
    RECEIVED.append({"tool": "delete_file", "args": {"path": path}})
    return f"deleted {path}"


def broken(city: str) -> str:
    """A tool that always raises."""
    RECEIVED.append({"tool": "broken", "args": {"city": city}})
    raise ValueError("tool exploded")


TOOLS = {"get_weather": get_weather, "delete_file": delete_file, "broken": broken}


def otelmw_plugin(ctx: Any) -> None:
    """An otelmw plugin (otelmw's own API): must apply inside ADK's runs."""
    plugin = SPEC.get("plugin") or {}

    def budget(**kw: Any) -> Any:
        request = dict(kw["request"])
        config = request["config"]
        request["config"] = config.model_copy(update={"max_output_tokens": 77})
        return {"request": request, "reason": "token budget"}

    def city(**kw: Any) -> Any:
        if kw["tool_name"] != "get_weather":
            return None
        return {"args": {**kw["args"], "city": "Oslo"}, "reason": "city policy"}

    def wrap_tool(**kw: Any) -> Any:
        WRAPPED.append(kw["tool_name"])
        return kw["next_call"](kw["args"])

    def block(**kw: Any) -> Any:
        if kw["tool_name"] == plugin.get("block"):
            return {"action": "block", "message": "blocked by policy"}
        return None

    def answer(**kw: Any) -> Any:
        from google.adk.models.llm_response import LlmResponse
        from google.genai import types

        return LlmResponse(content=types.Content(
            role="model", parts=[types.Part(text="answered by otelmw")]))

    if plugin.get("llm_request"):
        ctx.register_middleware("llm_request", budget)
    if plugin.get("tool_request"):
        ctx.register_middleware("tool_request", city)
    if plugin.get("tool_execution"):
        ctx.register_middleware("tool_execution", wrap_tool)
    if plugin.get("llm_answer"):
        ctx.register_middleware("llm_execution", answer)
    if plugin.get("block"):
        ctx.register_hook("pre_tool_call", block)


def callbacks() -> dict[str, Any]:
    """The user's own ADK agent callbacks: they note what they see; with
    ``"short_circuit"`` the named ones answer instead of the model or the tool."""
    from google.adk.models.llm_response import LlmResponse
    from google.genai import types

    short = set(SPEC.get("short_circuit") or ())

    def before_model(callback_context: Any, llm_request: Any) -> Any:
        SEEN.append({"hook": "before_model", "contents": len(llm_request.contents)})
        if "before_model" in short:
            return LlmResponse(content=types.Content(
                role="model", parts=[types.Part(text="answered by before_model")]))
        return None

    def after_model(callback_context: Any, llm_response: Any) -> Any:
        parts = (llm_response.content.parts or []) if llm_response.content else []
        SEEN.append({"hook": "after_model", "partial": bool(llm_response.partial),
                     "calls": [p.function_call.name for p in parts if p.function_call]})
        return None

    def before_tool(tool: Any, args: dict[str, Any], tool_context: Any) -> Any:
        SEEN.append({"hook": "before_tool", "tool": tool.name, "args": dict(args)})
        if "before_tool" in short:
            return {"answered_by": "before_tool"}
        return None

    def after_tool(tool: Any, args: dict[str, Any], tool_context: Any,
                   tool_response: Any) -> Any:
        SEEN.append({"hook": "after_tool", "tool": tool.name, "response": tool_response})
        if "after_tool" in short:
            return {"altered_by": "after_tool"}
        return None

    def on_tool_error(tool: Any, args: dict[str, Any], tool_context: Any,
                      error: Exception) -> Any:
        TOOL_ERRORS.append(f"{type(error).__name__}: {error}")
        return {"error": "handled by on_tool_error"}

    def on_model_error(callback_context: Any, llm_request: Any, error: Exception) -> Any:
        SEEN.append({"hook": "on_model_error", "error": type(error).__name__})
        return LlmResponse(content=types.Content(
            role="model", parts=[types.Part(text="recovered by on_model_error")]))

    return {"before_model_callback": before_model, "after_model_callback": after_model,
            "on_model_error_callback": on_model_error,
            "before_tool_callback": before_tool, "after_tool_callback": after_tool,
            "on_tool_error_callback": on_tool_error}


def adk_plugin() -> Any:
    """The user's own ADK plugin (``BasePlugin``): notes the model and tool calls."""
    from google.adk.plugins.base_plugin import BasePlugin

    class Recorder(BasePlugin):
        async def before_model_callback(self, *, callback_context: Any,
                                        llm_request: Any) -> Any:
            SEEN.append({"hook": "plugin_before_model"})
            return None

        async def before_tool_callback(self, *, tool: Any, tool_args: dict[str, Any],
                                       tool_context: Any) -> Any:
            SEEN.append({"hook": "plugin_before_tool", "tool": tool.name,
                         "args": dict(tool_args)})
            return None

    return Recorder(name="recorder")


def model() -> Any:
    if SPEC.get("route", "litellm") == "gemini":
        from google.adk.models.google_llm import Gemini

        return Gemini(model="scripted-model", base_url=ROOT)
    from google.adk.models.lite_llm import LiteLlm

    return LiteLlm(model="openai/scripted-model", api_base=f"{ROOT}/v1", api_key="x")


def make_agent() -> Any:
    from google.adk.agents import LlmAgent

    tools = [TOOLS[name] for name in SPEC.get("tools", ["get_weather"])]
    kw = callbacks() if SPEC.get("callbacks") else {}
    if SPEC.get("sub_agent"):
        helper = LlmAgent(name="helper", model=model(), instruction="Help.",
                          description="Answers weather questions.", tools=tools)
        return LlmAgent(name="coordinator", model=model(), instruction="Delegate.",
                        sub_agents=[helper], **kw)
    return LlmAgent(name="weather", model=model(), instruction="Answer briefly.",
                    tools=tools, **kw)


def event_of(event: Any) -> dict[str, Any]:
    parts = (event.content.parts or []) if event.content else []
    out: dict[str, Any] = {"author": event.author, "partial": bool(event.partial)}
    texts = [p.text for p in parts if p.text]
    if texts:
        out["text"] = "".join(texts)
    calls = [{"name": p.function_call.name, "args": p.function_call.args}
             for p in parts if p.function_call]
    if calls:
        out["calls"] = calls
    answers = [{"name": p.function_response.name, "response": p.function_response.response}
               for p in parts if p.function_response]
    if answers:
        out["answers"] = answers
    return out


def run_turn() -> dict[str, Any]:
    from google.adk.agents.run_config import RunConfig, StreamingMode
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    plugins = [adk_plugin()] if SPEC.get("adk_plugin") else []
    runner = InMemoryRunner(agent=make_agent(), app_name="weather-app", plugins=plugins)
    mode = SPEC.get("mode", "run_async")
    config = RunConfig(streaming_mode=StreamingMode.SSE if mode == "sse" else StreamingMode.NONE)
    message = types.Content(role="user", parts=[types.Part(text="Weather in Paris?")])
    session = asyncio.run(runner.session_service.create_session(
        app_name="weather-app", user_id="user", session_id="session-1"))
    if mode == "run":  # the sync generator (ADK runs the async run on a thread of its own)
        events = [event_of(e) for e in runner.run(user_id="user", session_id=session.id,
                                                   new_message=message, run_config=config)]
    else:
        async def collect() -> list[dict[str, Any]]:
            return [event_of(e) async for e in runner.run_async(
                user_id="user", session_id=session.id, new_message=message,
                run_config=config)]

        events = asyncio.run(collect())
    return {"session": session.id, "events": events}


def main() -> None:
    os.environ.setdefault("GOOGLE_API_KEY", "scripted")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    telemetry = None
    if SPEC.get("otelmw", True):
        from otelmw import get_plugin_manager
        from otelmw.instrumentation.google_adk import GoogleADKInstrumentor
        from otelmw.instrumentation.google_genai import GoogleGenAIInstrumentor
        from otelmw.instrumentation.litellm import LiteLLMInstrumentor

        if SPEC.get("adk_tracing", True):
            from otelmw.telemetry import configure

            telemetry = configure(service_name="google-adk-host-test")
        else:
            telemetry = private_telemetry()
        for instrumentor in (GoogleADKInstrumentor(), LiteLLMInstrumentor(),
                             GoogleGenAIInstrumentor()):
            instrumentor.instrument()
        if SPEC.get("plugin"):
            get_plugin_manager().add_plugin("adk_test_plugin", otelmw_plugin)
    elif SPEC.get("adk_tracer"):
        own_tracer_provider()
    out = run_turn()
    out.update(received=RECEIVED, seen=SEEN, wrapped=WRAPPED, tool_errors=TOOL_ERRORS)
    print_result(out, telemetry)


def own_tracer_provider() -> None:
    """A program's own tracer provider (ADK's spans, exported over OTLP), no otelmw."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(insecure=True)))
    trace.set_tracer_provider(provider)


class _PrivateTelemetry:
    """otelmw's observer on a tracer provider of its own, never the global one."""

    def __init__(self) -> None:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        from otelmw import get_pipeline
        from otelmw.telemetry import TelemetryObserver

        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(insecure=True)))
        self.meters = MeterProvider()
        if SPEC.get("global_meters"):
            from opentelemetry import metrics
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
                OTLPMetricExporter,
            )
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

            self.meters = MeterProvider(metric_readers=[PeriodicExportingMetricReader(
                OTLPMetricExporter(insecure=True), export_interval_millis=3_600_000)])
            metrics.set_meter_provider(self.meters)
        observer = TelemetryObserver(self.provider, self.meters, LoggerProvider(),
                                     failures=get_pipeline().failures)
        get_pipeline().observer = observer

    def shutdown(self, timeout: float) -> None:
        self.provider.shutdown()
        self.meters.shutdown()


def private_telemetry() -> Any:
    return _PrivateTelemetry()


if __name__ == "__main__":
    main()

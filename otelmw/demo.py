"""The built-in demo agent: fully offline, exercises every part of the contract.

A scripted provider adapter answers like an OpenAI-compatible model (tool calls,
then a final answer); a few tools run through the tool pipeline; demo plugins
rewrite a request (with source/reason), wrap execution, short-circuit one call
from a cache, fail once before ``next_call``, and a vendor-shaped failing tool
result is normalized by a registered normalizer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final

from .core.contract import runtime_context
from .core.memory import ListMemoryAdapter
from .core.pipeline import Pipeline
from .core.plugins import PluginContext, PluginManager
from .core.results import MiddlewareContext, NormalizedToolResult, RuntimeMiddlewareRegistry
from .terminal import BOLD, Style

DEMO_RUNTIME = "demo_harness"
DEMO_MODEL = "demo-model-1"


class DemoHarnessNormalizer:
    """Normalizes the demo harness' vendor envelopes ``{"status", "data"|"message"}``."""

    @property
    def runtime_id(self) -> str:
        return DEMO_RUNTIME

    def normalize(self, result: Any, tool_name: str, ctx: MiddlewareContext
                  ) -> NormalizedToolResult:
        meta: dict[str, Any] = {"vendor": "demo_harness", "version": "1.0", "region": "local"}
        if isinstance(result, dict) and result.get("status") == "error":
            return NormalizedToolResult(content=None, success=False,
                                        error_message=str(result.get("message")),
                                        metadata=meta, raw_result=result)
        data = result.get("data", result) if isinstance(result, dict) else result
        meta["cache_hit"] = bool(isinstance(result, dict) and result.get("cached"))
        return NormalizedToolResult(content=data, metadata=meta, raw_result=result)


def _weather(args: dict[str, Any]) -> Any:
    return {"status": "ok", "data": f"sunny in {args.get('city', '?')}, 21C"}


def _stock(args: dict[str, Any]) -> Any:
    return {"status": "error", "message": f"ticker {args.get('ticker')!r} not found"}


def _calc(args: dict[str, Any]) -> Any:
    raise ZeroDivisionError("division by zero in expression " + str(args.get("expr")))


TOOLS = {"get_weather": _weather, "get_stock": _stock, "calculate": _calc}


@dataclass
class ScriptedProvider:
    """An in-process stand-in for an OpenAI-compatible chat endpoint."""

    calls: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(request)
        messages = request.get("messages", [])
        n_tool = sum(1 for m in messages if m.get("role") == "tool")
        plan = [("get_weather", {"city": "Lisbon"}), ("get_stock", {"ticker": "ZZZZ"}),
                ("calculate", {"expr": "1/0"})]
        usage = {"prompt_tokens": 12 + 9 * len(messages), "completion_tokens": 7}
        rid = f"chatcmpl-demo-{len(self.calls)}"
        if n_tool < len(plan):
            name, args = plan[n_tool]
            tool_call = {"id": f"call_{n_tool + 1}", "type": "function",
                         "function": {"name": name, "arguments": json.dumps(args)}}
            msg = {"role": "assistant", "content": None, "tool_calls": [tool_call]}
            finish = "tool_calls"
        else:
            msg = {"role": "assistant", "content": "Lisbon is sunny; ZZZZ is unknown."}
            finish = "stop"
        return {"id": rid, "object": "chat.completion", "model": request.get("model"),
                "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                "usage": usage}


def register_demo_plugins(ctx: PluginContext) -> None:
    cache: dict[str, Any] = {}
    failed_once: list[bool] = []

    def route_model(**kw: Any) -> Any:
        request = dict(kw["request"])
        request["temperature"] = 0.0
        return {"request": request, "source": "demo-router", "reason": "pinned temperature"}

    def time_llm(**kw: Any) -> Any:
        return kw["next_call"](kw["request"])

    def flaky_guard(**kw: Any) -> Any:
        if not failed_once:
            failed_once.append(True)
            raise RuntimeError("demo guard failed once before next_call")
        return kw["next_call"](kw["args"])

    def cache_tools(**kw: Any) -> Any:
        key = f"{kw['tool_name']}:{json.dumps(dict(kw['args']), sort_keys=True)}"
        if key in cache:
            return {**cache[key], "cached": True}  # short-circuit: next_call not called
        result = kw["next_call"](kw["args"])
        if isinstance(result, dict):
            cache[key] = result
        return result

    def audit(**kw: Any) -> None:  # an observer hook: read-only, exported as a log event
        return None

    def audit_request(**kw: Any) -> None:
        return None

    ctx.register_hook("pre_tool_call", audit)
    ctx.register_hook("post_tool_call", audit)
    ctx.register_hook("pre_api_request", audit_request)
    ctx.register_middleware("llm_request", route_model)
    ctx.register_middleware("llm_execution", time_llm)
    ctx.register_middleware("tool_execution", flaky_guard)
    ctx.register_middleware("tool_execution", cache_tools)


def run_agent(pipeline: Pipeline, provider: ScriptedProvider, question: str) -> str:
    """A minimal tool-calling loop over the pipeline (ids come from the turn)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    with runtime_context(agent_name="demo-agent", runtime_id=DEMO_RUNTIME):
        for _ in range(8):
            response = pipeline.run_llm({"model": DEMO_MODEL, "messages": list(messages)},
                                        provider, provider="demo", api_mode="chat_completions")
            msg = response["choices"][0]["message"]
            messages.append(msg)
            if not msg.get("tool_calls"):
                return str(msg.get("content"))
            for tc in msg["tool_calls"]:
                fn = tc["function"]
                tool = TOOLS[fn["name"]]
                out = pipeline.run_tool(fn["name"], fn["arguments"], tool,
                                        tool_call_id=tc["id"])
                messages.append({"role": "tool", "tool_call_id": tc["id"],
                                 "content": out if isinstance(out, str) else json.dumps(out)})
    return "(no answer)"


def build_demo_pipeline() -> tuple[Pipeline, ListMemoryAdapter]:
    normalizers = RuntimeMiddlewareRegistry()
    normalizers.register(DEMO_RUNTIME, DemoHarnessNormalizer())
    pipeline = Pipeline(normalizers=normalizers)
    memory = ListMemoryAdapter()
    pipeline.add_memory_adapter(memory)
    return pipeline, memory


# Why the demo prints two traces: one line each, printed above its tree.
TURNS: Final = (
    ("Weather in Lisbon, and the price of ZZZZ?",
     "turn 1 is one trace: three tool calls; the guard fails once (fail-open), "
     "get_stock's vendor error is normalized, calculate raises"),
    ("Same again, please.",
     "turn 2 is a new turn, so a new trace: get_weather and get_stock now come from "
     "the cache plugin (short_circuit); calculate raises again"),
)


def run_demo(quiet: bool = False, style: Style | None = None) -> int:
    """Run two demo turns with telemetry configured from the environment, then
    print their traces as waterfalls (and where the embedded store put them)."""
    import logging
    import sys
    import tempfile
    from pathlib import Path

    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import (
        InMemoryLogRecordExporter,
        SimpleLogRecordProcessor,
    )
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from .telemetry.filestore import data_dir, store_write_errors
    from .telemetry.setup import configure, exporter_choice

    log = logging.getLogger("otelmw")
    if not log.handlers and not logging.getLogger().handlers:
        # The demo fails once on purpose: show that warning plainly (on stderr).
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[log %(levelname)s] %(message)s"))
        log.addHandler(handler)
    pipeline, memory = build_demo_pipeline()
    telemetry = configure("otelmw-demo", pipeline=pipeline)
    shown_spans = InMemorySpanExporter()
    shown_events = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    if isinstance(telemetry.tracer_provider, TracerProvider):
        telemetry.tracer_provider.add_span_processor(SimpleSpanProcessor(shown_spans))
    if isinstance(telemetry.logger_provider, LoggerProvider):
        telemetry.logger_provider.add_log_record_processor(
            SimpleLogRecordProcessor(shown_events))
    with tempfile.TemporaryDirectory() as home:
        PluginManager(pipeline, home=Path(home)).add_plugin("demo", register_demo_plugins)
    providers = []
    answer = ""
    for question, _ in TURNS:
        provider = ScriptedProvider()
        providers.append(provider)
        with pipeline.turn("demo-agent", session_id="demo-session", runtime_id=DEMO_RUNTIME):
            reply = run_agent(pipeline, provider, question)
        answer = answer or reply
    telemetry.force_flush()
    print(f"answer: {answer}")
    if not quiet:
        _print_traces(shown_spans.get_finished_spans(), shown_events.get_finished_logs(),
                      style or Style())
    failures = pipeline.failures.total()
    calls = sum(len(p.calls) for p in providers)
    print(f"\nran {len(TURNS)} turns: {calls} provider calls, {len(memory.records)} tool "
          f"calls, {failures} middleware failure{'s' if failures != 1 else ''} "
          "absorbed (fail-open)")
    if "file" in exporter_choice("traces"):
        failed = store_write_errors()
        if failed:
            print(f"not stored: {'; '.join(failed)}")
            return 1
        else:
            print(f"stored in {data_dir().resolve()} — `otelmw traces list` shows them")
    return 0


def _print_traces(spans: Any, events: Any, style: Style) -> None:
    """The demo's traces, drawn as ``otelmw traces show`` draws them."""
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from .telemetry.filestore import to_otlp_json
    from .telemetry.treeview import (
        events_from_requests,
        group_traces,
        render_trace,
        spans_from_requests,
    )

    if not spans:
        return
    span_requests = [json.loads(to_otlp_json(encode_spans(spans)))]
    event_requests = [json.loads(to_otlp_json(encode_logs(events)))] if events else []
    traces = group_traces(spans_from_requests(span_requests),
                          events_from_requests(event_requests))
    for (tid, roots), (_, why) in zip(traces.items(), TURNS, strict=False):
        print(f"\n{style.paint(why, BOLD)}")
        print(render_trace(tid, roots, style))

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
from .core.pipeline import Pipeline
from .core.plugins import PluginContext
from .core.results import (
    ListMemoryAdapter,
    MiddlewareContext,
    NormalizedToolResult,
    NormalizerRegistry,
)

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
    normalizers = NormalizerRegistry()
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

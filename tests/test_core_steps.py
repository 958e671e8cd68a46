"""Each pipeline step is written once (``otelmw/core/calls.py``; ``calls_sync.py``
is generated from it): the same scripted calls, made once through ``run_*`` and once through
``arun_*``, export the same telemetry — spans (names, kinds, status, attributes,
events, parents), log records and metric points, normalized for what differs between
two runs (ids, times, durations). Every operation is covered, with request rewrites
that rewrite, keep, fail and return a bad shape; wrappers that pass, short-circuit and
fail before and after ``next_call``; every hook point (hook events ``all``), a
``pre_tool_call`` block and a ``transform_tool_result`` replacement; a normalizer;
memory; arguments that do not parse; failing tools and models; and streams.

The synchronous observer-only LLM call takes a fast path of its own
(``Pipeline.run_llm``); it is compared with the general path here too."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from _support.calls import ASYNC, PLUGIN, SYNC, TOOL, AsyncItems, BaseCall, callback
from _support.telemetry import (
    TelemetryHarness,
    add_rewriters,
    add_wrappers,
    payload_for,
    response_for,
)

from otelmw import ListMemoryAdapter, NormalizedToolResult
from otelmw.core import calls_sync
from otelmw.telemetry.content.policy import SPAN_AND_EVENT

pytestmark = pytest.mark.timeout(60)

# Attribute keys whose values differ between two runs of the same call (a stack trace
# names the frames of the path taken).
_NOISY = ("duration", "time", "_ns", "latency", "id", "stacktrace")


def _value(key: str, value: Any) -> Any:
    if any(part in key for part in _NOISY) and isinstance(value, int | float | str):
        return f"<{type(value).__name__}>"
    if isinstance(value, float):
        return "<float>"
    if isinstance(value, tuple | list):
        return [_value(key, v) for v in value]
    return value


def _attrs(attrs: Any) -> dict[str, Any]:
    return {str(k): _value(str(k), v) for k, v in sorted(dict(attrs or {}).items())}


def exported(h: TelemetryHarness) -> list[str]:
    """Everything ``h`` exported, normalized and sorted (one JSON line per item)."""
    spans = h.spans()
    names = {s.context.span_id: s.name for s in spans}
    out = [{"span": s.name, "kind": str(s.kind), "status": str(s.status.status_code),
            "description": s.status.description,
            "parent": names.get(s.parent.span_id, "<outside>") if s.parent else None,
            "attributes": _attrs(s.attributes),
            "events": [{"name": e.name, "attributes": _attrs(e.attributes)}
                       for e in s.events]} for s in spans]
    out += [{"log": r.event_name, "severity": str(r.severity_number),
             "body": _value("body", r.body), "attributes": _attrs(r.attributes)}
            for r in h.logs()]
    for name, points in h.metrics().items():
        for p in points:
            value = getattr(p, "value", None)
            out.append({"metric": name, "attributes": _attrs(p.attributes),
                        "count": getattr(p, "count", None),
                        "value": value if isinstance(value, int) else None})
    return sorted(json.dumps(item, sort_keys=True, default=repr) for item in out)


@dataclass
class Script:
    """One scripted call: what it registers on the pipeline and how it is made."""

    op: str  # "llm", "tool" or "embeddings"
    rewrites: list[str] = field(default_factory=list)
    wrappers: list[str] = field(default_factory=list)
    hooks: dict[str, Callable[..., Any]] = field(default_factory=dict)
    args: Any = None  # the tool's arguments (default: ``payload_for``)
    raises: BaseException | None = None  # the base call raises
    stream: bool = False  # the model answers with a stream
    runtime_id: str | None = None


def _chunks() -> list[dict[str, Any]]:
    base = {"id": "chatcmpl-s1", "object": "chat.completion.chunk", "model": "gpt-test"}
    return [{**base, "choices": [{"index": 0, "delta": {"content": "Hel"}}]},
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {**base, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}}]


class SyncChunks:
    """The stream a synchronous model call answers with."""

    def __init__(self) -> None:
        self._chunks = iter(_chunks())

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        return next(self._chunks)


class AsyncChunks(AsyncItems):
    """The stream an asynchronous model call answers with."""

    def __init__(self) -> None:
        super().__init__(_chunks())


# One type name for both (a wrapper's span shows the type of what it handed back).
SyncChunks.__qualname__ = AsyncChunks.__qualname__ = "Chunks"


def _stream_base(mode: str) -> Callable[[Any], Any]:
    if mode == SYNC:
        return lambda request: SyncChunks()

    async def async_base(request: Any) -> AsyncChunks:
        await asyncio.sleep(0)
        return AsyncChunks()
    return async_base


class Vendor:
    runtime_id = "vendor"

    def normalize(self, result: Any, tool_name: str, ctx: Any) -> NormalizedToolResult:
        return NormalizedToolResult(content=f"vendor:{result}", metadata={"k": "v"},
                                    raw_result=result)


def run(script: Script, mode: str) -> tuple[list[str], Any]:
    """Make ``script``'s call in ``mode`` on a fresh harness; (its telemetry, its answer
    and what memory recorded)."""
    h = TelemetryHarness(SPAN_AND_EVENT, hook_events="all")
    try:
        p = h.pipeline
        memory = ListMemoryAdapter()
        p.add_memory_adapter(memory)
        p.normalizers.register("vendor", Vendor())
        if script.op != "embeddings":
            add_rewriters(h, mode, script.op, script.rewrites)
            add_wrappers(h, mode, script.op, script.wrappers)
        for hook, fn in script.hooks.items():
            p.registry.add_hook(hook, callback(mode, f"hook_{hook}", fn), plugin=PLUGIN)
        try:
            answer = _call(h, script, mode)
        except Exception as exc:  # a failing model call raises to the host
            answer = f"raised {type(exc).__name__}: {exc}"
        h.assert_clean()
        return exported(h), (answer, [(n.content, n.success) for n, _ in memory.records])
    finally:
        h.close()


def _call(h: TelemetryHarness, script: Script, mode: str) -> Any:
    p = h.pipeline
    if script.stream:
        base: Callable[[Any], Any] = _stream_base(mode)
    else:
        base = BaseCall(response_for("llm" if script.op == "embeddings" else script.op),
                        error=script.raises).in_mode(mode)
    payload = script.args if script.args is not None else payload_for(
        "llm" if script.op == "embeddings" else script.op)
    if script.op == "llm":
        if mode == SYNC:
            out = p.run_llm(payload, base, provider="openai")
            return list(out) if script.stream else out

        async def llm() -> Any:
            out = await p.arun_llm(payload, base, provider="openai")
            return [c async for c in out] if script.stream else out
        return asyncio.run(llm())
    if script.op == "embeddings":
        return (p.run_embeddings(payload, base, provider="openai") if mode == SYNC
                else asyncio.run(p.arun_embeddings(payload, base, provider="openai")))
    options = {"tool_call_id": "call-1", "runtime_id": script.runtime_id}
    return (p.run_tool(TOOL, payload, base, **options) if mode == SYNC
            else asyncio.run(p.arun_tool(TOOL, payload, base, **options)))


def _block(**kw: Any) -> Any:
    return {"action": "block", "message": "not today"}


def _note(**kw: Any) -> None:
    return None


SCRIPTS = {
    "llm: rewrites, wrappers passing and failing after next, every hook point": Script(
        "llm", rewrites=["rewrite", "none", "raise", "bad"], wrappers=["pass", "after"],
        hooks={"pre_api_request": _note, "post_api_request": _note}),
    "llm: a wrapper failing before next, the model failing": Script(
        "llm", wrappers=["before", "pass"], raises=ConnectionError("down"),
        hooks={"api_request_error": _note}),
    "llm: a wrapper short-circuiting": Script("llm", rewrites=["rewrite"],
                                              wrappers=["pass", "short", "pass"]),
    "llm: observer only": Script("llm"),
    "llm: observer only, the model failing": Script("llm", raises=TimeoutError("slow")),
    "llm: a stream": Script("llm", stream=True),
    "llm: a stream through wrappers": Script("llm", stream=True, wrappers=["pass"],
                                             rewrites=["rewrite"]),
    "tool: rewrites, wrappers, post and transform hooks": Script(
        "tool", rewrites=["rewrite", "raise", "bad", "none"],
        wrappers=["pass", "before", "after"],
        hooks={"post_tool_call": _note, "transform_tool_result": lambda **kw: "changed"}),
    "tool: blocked by pre_tool_call": Script(
        "tool", rewrites=["rewrite"], wrappers=["pass"], hooks={"pre_tool_call": _block}),
    "tool: a wrapper short-circuiting": Script("tool", wrappers=["short", "pass"]),
    "tool: arguments that do not parse": Script("tool", args="{not json",
                                               hooks={"post_tool_call": _note}),
    "tool: the tool failing": Script("tool", wrappers=["pass"], raises=KeyError("gone")),
    "tool: a normalizer": Script("tool", runtime_id="vendor", wrappers=["pass"]),
    "tool: no middleware": Script("tool"),
    "embeddings": Script("embeddings"),
    "embeddings: failing": Script("embeddings", raises=ConnectionError("down")),
}


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_sync_and_async_calls_export_the_same_telemetry(name: str) -> None:
    script = SCRIPTS[name]
    sync_telemetry, sync_answer = run(script, SYNC)
    async_telemetry, async_answer = run(script, ASYNC)
    assert sync_telemetry, "nothing exported"
    assert sync_answer == async_answer
    assert sync_telemetry == async_telemetry


@pytest.mark.parametrize("raises", [False, True])
def test_the_sync_observer_only_fast_path_matches_the_general_path(raises: bool) -> None:
    """``run_llm`` with only an observer skips ``calls_sync.llm_call``; what it exports
    is what that general path exports for the same call."""
    results = []
    for fast in (True, False):
        h = TelemetryHarness(SPAN_AND_EVENT)
        try:
            base = BaseCall(response_for("llm"), error=ValueError("no") if raises else None)
            request = payload_for("llm")
            try:
                if fast:
                    answer = h.pipeline.run_llm(request, base, provider="openai")
                else:
                    p = h.pipeline
                    call = p._llm_call(request, "openai", None, None, None)
                    call.observation = p.observer.call_started(  # type: ignore[union-attr]
                        call, request)
                    answer = calls_sync.llm_call(p, call, request, base)
            except ValueError as exc:
                answer = repr(exc)
            h.assert_clean()
            results.append((exported(h), answer))
        finally:
            h.close()
    assert results[0][0]
    assert results[0] == results[1]

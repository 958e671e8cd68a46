"""Tool-result normalization inside ``Pipeline.run_tool`` / ``Pipeline.arun_tool``.

Each test states one rule of ``shared/reference/runtime-tool-result-middleware.md``
(normalize after the tool runs and before the ``post_tool_call`` hook and memory;
bypass for the native runtime; fail-open normalizers; "Tool Error: " surfacing),
as implemented by otelmw's pipeline.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from _support.calls import MODES
from _support.hostile import HostileStrError

import otelmw
from otelmw import ListMemoryAdapter, Pipeline, runtime_context
from otelmw.core.results import (
    MiddlewareContext,
    NormalizedToolResult,
    PassThroughMiddleware,
    RuntimeMiddlewareRegistry,
)

HARNESS = "my_plugin_harness"


# --------------------------------------------------------------------- helpers

class RecordingNormalizer:
    """A normalizer for ``HARNESS`` that records its calls and returns ``behaviour()``."""

    def __init__(self, behaviour: Callable[[Any, str, MiddlewareContext], Any] | None = None,
                 log: list[Any] | None = None, runtime_id: str = HARNESS) -> None:
        self._rid = runtime_id
        self.behaviour = behaviour
        self.calls: list[tuple[Any, str, MiddlewareContext, float]] = []
        self.log = log

    @property
    def runtime_id(self) -> str:
        return self._rid

    def normalize(self, result: Any, tool_name: str, ctx: MiddlewareContext) -> Any:
        self.calls.append((result, tool_name, ctx, time.time()))
        if self.log is not None:
            self.log.append("normalize")
        if self.behaviour is not None:
            return self.behaviour(result, tool_name, ctx)
        return NormalizedToolResult(content=result, metadata={"normalized_by": "recorder"},
                                    raw_result=result)


class SpyRegistry(RuntimeMiddlewareRegistry):
    """Answers every lookup with a spy normalizer and records that it was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[Any] = []
        self.spy = RecordingNormalizer(runtime_id="spy")

    def lookup(self, runtime_id: str) -> Any:
        self.asked.append(("lookup", runtime_id))
        return self.spy

    def get_middleware(self, runtime_id: str) -> Any:
        self.asked.append(("get_middleware", runtime_id))
        return self.spy

    def has_middleware(self, runtime_id: str) -> bool:
        self.asked.append(("has_middleware", runtime_id))
        return True


class Harness:
    """A pipeline with one normalizer, a post_tool_call hook and a memory adapter."""

    def __init__(self, normalizer: Any = None, *, hooks: bool = True, memory: bool = True,
                 log: list[Any] | None = None) -> None:
        self.normalizers = RuntimeMiddlewareRegistry()
        if normalizer is not None:
            self.normalizers.register(normalizer.runtime_id, normalizer)
        self.p = Pipeline(normalizers=self.normalizers)
        self.log = log
        self.post: list[dict[str, Any]] = []
        self.memory = ListMemoryAdapter()
        if hooks:
            self.p.registry.add_hook("post_tool_call", self._post_hook, plugin="t")
        if memory:
            self.p.add_memory_adapter(self._LoggingMemory(self.memory, log))

    class _LoggingMemory:
        def __init__(self, inner: ListMemoryAdapter, log: list[Any] | None) -> None:
            self.inner, self.log = inner, log

        def record_tool_result(self, normalized: NormalizedToolResult,
                               ctx: MiddlewareContext) -> None:
            if self.log is not None:
                self.log.append("memory")
            self.inner.record_tool_result(normalized, ctx)

    def _post_hook(self, **payload: Any) -> None:
        if self.log is not None:
            self.log.append("post_tool_call")
        self.post.append(payload)

    @property
    def records(self) -> list[tuple[NormalizedToolResult, MiddlewareContext]]:
        return self.memory.records


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "otelmw" and r.levelno == logging.WARNING]


# ------------------------------------------------------------------ ordering

def test_normalization_runs_after_tool_execution_chain_and_before_post_tool_call() -> None:
    log: list[Any] = []
    h = Harness(RecordingNormalizer(log=log), log=log)

    def wrapper(next_call: Callable[..., Any], **_: Any) -> Any:
        log.append("tool_execution:before")
        out = next_call()
        log.append("tool_execution:after")
        return out

    def tool(args: dict[str, Any]) -> str:
        log.append("tool")
        return "raw"

    h.p.registry.add_middleware("tool_execution", wrapper, plugin="t")
    h.p.registry.add_hook("transform_tool_result", lambda **_: log.append("transform"),
                          plugin="t")
    assert h.p.run_tool("lookup", {"q": 1}, tool, runtime_id=HARNESS) == "raw"
    assert log == ["tool_execution:before", "tool", "tool_execution:after", "normalize",
                   "post_tool_call", "memory", "transform"]


def test_normalization_order_is_the_same_in_arun_tool() -> None:
    log: list[Any] = []
    h = Harness(RecordingNormalizer(log=log), log=log)

    async def wrapper(next_call: Callable[..., Any], **_: Any) -> Any:
        log.append("tool_execution:before")
        out = await next_call()
        log.append("tool_execution:after")
        return out

    async def tool(args: dict[str, Any]) -> str:
        log.append("tool")
        return "raw"

    h.p.registry.add_middleware("tool_execution", wrapper, plugin="t")
    assert asyncio.run(h.p.arun_tool("lookup", {}, tool, runtime_id=HARNESS)) == "raw"
    assert log == ["tool_execution:before", "tool", "tool_execution:after", "normalize",
                   "post_tool_call", "memory"]


def test_post_tool_call_sees_what_the_normalizer_returned() -> None:
    produced: list[NormalizedToolResult] = []

    def behave(result: Any, tool_name: str, ctx: MiddlewareContext) -> NormalizedToolResult:
        out = NormalizedToolResult(content=result["data"], raw_result=result)
        produced.append(out)
        return out

    h = Harness(RecordingNormalizer(behave))
    raw = {"status": "ok", "data": "Results for python"}
    assert h.p.run_tool("lookup", {}, lambda a: raw, runtime_id=HARNESS) == "Results for python"
    (payload,) = h.post
    assert payload["normalized"] is produced[0]
    assert payload["result"] == "Results for python"
    assert payload["status"] == "ok"
    assert payload["error_type"] is None and payload["error_message"] is None
    assert payload["tool_name"] == "lookup"
    assert h.records[0][0] is produced[0]


# ----------------------------------------------------------- normalizer context

def test_normalizer_ctx_has_tool_name_runtime_session_and_agent_from_runtime_context() -> None:
    n = RecordingNormalizer()
    h = Harness(n)
    with runtime_context(session_id="sess-1", agent_name="assistant", runtime_id=HARNESS,
                         turn_id="turn-1"):
        h.p.run_tool("lookup", {"q": "python"}, lambda a: "ok", tool_call_id="call-7")
    ((result, tool_name, ctx, _),) = n.calls
    assert result == "ok" and tool_name == "lookup"
    assert isinstance(ctx, MiddlewareContext)
    assert ctx.tool_name == "lookup"
    assert ctx.runtime_id == HARNESS
    assert ctx.session_id == "sess-1"
    assert ctx.agent_id == "assistant"
    assert isinstance(ctx.metadata, dict)
    mem_ctx = h.records[0][1]
    assert (mem_ctx.tool_name, mem_ctx.runtime_id, mem_ctx.session_id, mem_ctx.agent_id) == (
        "lookup", HARNESS, "sess-1", "assistant")


def test_runtime_id_argument_selects_the_normalizer_without_runtime_context() -> None:
    n = RecordingNormalizer()
    h = Harness(n)
    h.p.run_tool("lookup", {}, lambda a: "ok", runtime_id=HARNESS)
    assert len(n.calls) == 1
    ctx = n.calls[0][2]
    assert ctx.runtime_id == HARNESS
    assert ctx.session_id is None and ctx.agent_id is None


def test_ctx_execution_time_ms_is_measured_around_the_base_call() -> None:
    n = RecordingNormalizer()
    h = Harness(n)

    def slow_tool(args: dict[str, Any]) -> str:
        time.sleep(0.05)
        return "done"

    t0 = time.perf_counter()
    h.p.run_tool("slow", {}, slow_tool, runtime_id=HARNESS)
    wall_ms = (time.perf_counter() - t0) * 1000.0
    ctx = n.calls[0][2]
    assert type(ctx.execution_time_ms) is float
    assert 45.0 <= ctx.execution_time_ms <= wall_ms
    normalized = h.post[0]["normalized"]
    assert normalized.execution_time_ms >= 45.0
    assert h.post[0]["duration_ms"] >= 45.0


def test_ctx_execution_time_ms_is_measured_around_the_base_call_async() -> None:
    n = RecordingNormalizer()
    h = Harness(n)

    async def slow_tool(args: dict[str, Any]) -> str:
        await asyncio.sleep(0.05)
        return "done"

    asyncio.run(h.p.arun_tool("slow", {}, slow_tool, runtime_id=HARNESS))
    assert n.calls[0][2].execution_time_ms >= 45.0


@pytest.mark.parametrize("mode", MODES)
def test_ctx_execution_time_ms_excludes_tool_execution_middleware_time(mode: str) -> None:
    """The base call is what is timed: a slow wrapper around it is not tool time
    (both paths: the async one awaits the tool inside the timed region)."""
    n = RecordingNormalizer()
    h = Harness(n)

    def slow_wrapper(next_call: Callable[..., Any], **_: Any) -> Any:
        time.sleep(0.2)
        return next_call()

    def slow_tool(args: dict[str, Any]) -> str:
        time.sleep(0.05)
        return "done"

    async def aslow_tool(args: dict[str, Any]) -> str:
        await asyncio.sleep(0.05)
        return "done"

    h.p.registry.add_middleware("tool_execution", slow_wrapper, plugin="t")
    if mode == "sync":
        h.p.run_tool("slow", {}, slow_tool, runtime_id=HARNESS)
    else:
        asyncio.run(h.p.arun_tool("slow", {}, aslow_tool, runtime_id=HARNESS))
    ms = n.calls[0][2].execution_time_ms
    assert 45.0 <= ms < 200.0, f"execution_time_ms={ms:.1f} includes the wrapper's 200 ms"


@pytest.mark.parametrize("case", ["normalizer", "registered_passthrough",
                                  "unregistered_runtime", "bypass", "tool_raises"])
def test_normalized_timestamp_is_set_at_normalization(case: str) -> None:
    normalizers = {"normalizer": RecordingNormalizer(),
                   "registered_passthrough": PassThroughMiddleware(HARNESS)}
    h = Harness(normalizers.get(case))
    runtime = {"unregistered_runtime": "nobody_registered_this",
               "bypass": None}.get(case, HARNESS)
    tool_ended: list[float] = []

    def tool(args: dict[str, Any]) -> str:
        time.sleep(0.02)
        tool_ended.append(time.time())
        if case == "tool_raises":
            raise RuntimeError("vendor down")
        return "ok"

    started = time.time()
    h.p.run_tool("lookup", {}, tool, runtime_id=runtime)
    finished = time.time()
    normalized = h.post[0]["normalized"]
    assert type(normalized.timestamp) is float
    assert started < tool_ended[0] <= normalized.timestamp <= finished
    assert h.records[0][0].timestamp == normalized.timestamp


# ------------------------------------------------------------------------ bypass

@pytest.mark.parametrize("how", ["missing", "praisonai_argument", "praisonai_context",
                                 "missing_async", "praisonai_context_async"])
def test_native_or_missing_runtime_bypasses_the_normalizer(how: str) -> None:
    spy_registry = SpyRegistry()
    p = Pipeline(normalizers=spy_registry)
    memory = ListMemoryAdapter()
    p.add_memory_adapter(memory)
    post: list[dict[str, Any]] = []
    p.registry.add_hook("post_tool_call", lambda **kw: post.append(kw), plugin="t")
    raw = {"status": "ok", "data": "x"}
    kwargs = {"runtime_id": "praisonai"} if how == "praisonai_argument" else {}
    rid = "praisonai" if "praisonai_context" in how else None

    async def atool(args: dict[str, Any]) -> Any:
        return raw

    with runtime_context(runtime_id=rid):
        if how.endswith("_async"):
            out = asyncio.run(p.arun_tool("lookup", {}, atool, **kwargs))
        else:
            out = p.run_tool("lookup", {}, lambda a: raw, **kwargs)
    assert out is raw
    assert spy_registry.spy.calls == []
    assert spy_registry.asked == []
    normalized = post[0]["normalized"]
    assert normalized.content is raw and normalized.raw_result is raw
    assert normalized.success is True
    assert memory.records[0][0] is normalized


@pytest.mark.parametrize("how", ["missing", "praisonai_context"])
def test_bypass_with_nothing_registered_never_consults_the_normalizers(how: str) -> None:
    spy_registry = SpyRegistry()
    p = Pipeline(normalizers=spy_registry)
    raw = object()
    with runtime_context(runtime_id="praisonai" if how == "praisonai_context" else None):
        assert p.run_tool("lookup", {}, lambda a: raw) is raw
        assert p.run_tool("lookup", {"a": 1}, lambda a: raw, runtime_id="praisonai") is raw
    assert spy_registry.spy.calls == []
    assert spy_registry.asked == []


@pytest.mark.parametrize("how", ["missing", "praisonai_context", "praisonai_argument"])
def test_bypass_with_nothing_registered_allocates_nothing(how: str) -> None:
    spy_registry = SpyRegistry()
    p = Pipeline(normalizers=spy_registry)
    args_dict = {"q": "python tutorials"}
    preallocated = {"status": "ok", "data": "preallocated"}

    def fn(args: dict[str, Any]) -> Any:
        return preallocated

    if how == "praisonai_argument":
        def call() -> Any:
            return p.run_tool("t", args_dict, fn, runtime_id="praisonai")
    else:
        def call() -> Any:
            return p.run_tool("t", args_dict, fn)

    package_files = os.path.join(os.path.dirname(otelmw.__file__), "*")
    only_otelmw = [tracemalloc.Filter(True, package_files)]  # otelmw/*.py, not the tests
    n = 1000
    with runtime_context(runtime_id="praisonai" if how == "praisonai_context" else None):
        for _ in range(200):  # warm up (specialisation, lazy caches)
            call()
        gc.collect()
        was_tracing = tracemalloc.is_tracing()
        if not was_tracing:
            tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot().filter_traces(only_otelmw)
            for _ in range(n):
                if call() is not preallocated:
                    raise AssertionError("bypass must return the tool's own object")
            after = tracemalloc.take_snapshot().filter_traces(only_otelmw)
        finally:
            if not was_tracing:
                tracemalloc.stop()
    grown = [s for s in after.compare_to(before, "lineno") if s.count_diff > 0]
    assert sum(s.count_diff for s in grown) == 0, "\n".join(map(str, grown))
    assert spy_registry.spy.calls == [] and spy_registry.asked == []


# ------------------------------------------------------------- failing normalizers

class VendorBoom(Exception):
    pass


def _raise(result: Any, tool_name: str, ctx: MiddlewareContext) -> Any:
    raise VendorBoom("normalizer exploded")


def _raise_hostile(result: Any, tool_name: str, ctx: MiddlewareContext) -> Any:
    raise HostileStrError()


class UnformattableMessage(str):
    """An ``error_message`` that cannot be formatted into ``"Tool Error: …"``."""

    def __format__(self, spec: str) -> str:
        raise RuntimeError("__format__ raised")

    def __bool__(self) -> bool:
        raise RuntimeError("__bool__ raised")


class Undecided:
    """A ``success`` that cannot be made a bool."""

    def __bool__(self) -> bool:
        raise RuntimeError("__bool__ raised")


class NonStrFormat:
    def __format__(self, spec: str) -> Any:
        return 42


class UnprintableMessage:
    def __format__(self, spec: str) -> str:
        raise RuntimeError("__format__ raised")


BAD_NORMALIZERS: dict[str, Callable[[Any, str, MiddlewareContext], Any]] = {
    "raises": _raise,
    "raises_exception_with_hostile_str": _raise_hostile,
    "returns_dict": lambda r, t, c: {"content": r, "success": True},
    "returns_none": lambda r, t, c: None,
    "returns_string": lambda r, t, c: "normalized text",
    "error_message_cannot_be_formatted": lambda r, t, c: NormalizedToolResult(
        None, success=False, error_message=UnformattableMessage("boom"), raw_result=r),
    "error_message_object_cannot_be_formatted": lambda r, t, c: NormalizedToolResult(
        None, success=False, error_message=UnprintableMessage(), raw_result=r),  # type: ignore[arg-type]
    "success_cannot_be_bool": lambda r, t, c: NormalizedToolResult(
        r, success=Undecided(), raw_result=r),  # type: ignore[arg-type]
    "error_message_format_returns_non_str": lambda r, t, c: NormalizedToolResult(
        None, success=False, error_message=NonStrFormat(), raw_result=r),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("bad", list(BAD_NORMALIZERS))
def test_failing_normalizer_is_caught_logged_once_counted_and_passes_raw_through(
        bad: str, caplog: pytest.LogCaptureFixture) -> None:
    n = RecordingNormalizer(BAD_NORMALIZERS[bad])
    h = Harness(n)
    raws = [{"vendor": "shape", "i": i} for i in range(5)]
    outs: list[Any] = []
    with caplog.at_level(logging.DEBUG, logger="otelmw"):
        for raw in raws:
            outs.append(h.p.run_tool("lookup", {}, lambda a, raw=raw: raw, runtime_id=HARNESS))
    assert len(n.calls) == len(raws)
    assert [o is r for o, r in zip(outs, raws, strict=True)] == [True] * len(raws)
    warnings = _warnings(caplog)
    assert len(warnings) == 1, [w.getMessage() for w in warnings]
    assert p_failures(h.p, "normalize") == len(raws)
    for payload, (mem_norm, _), raw in zip(h.post, h.records, raws, strict=True):
        normalized = payload["normalized"]
        assert normalized.success is True
        assert normalized.content == raw and normalized.content is raw
        assert normalized.raw_result is raw
        assert normalized.error_message is None
        assert payload["status"] == "ok" and payload["result"] is raw
        assert mem_norm is normalized


def test_failing_normalizer_in_arun_tool_passes_raw_through(
        caplog: pytest.LogCaptureFixture) -> None:
    h = Harness(RecordingNormalizer(_raise))
    raw = {"vendor": "shape"}

    async def tool(args: dict[str, Any]) -> Any:
        return raw

    async def main() -> list[Any]:
        return [await h.p.arun_tool("lookup", {}, tool, runtime_id=HARNESS) for _ in range(3)]

    with caplog.at_level(logging.DEBUG, logger="otelmw"):
        outs = asyncio.run(main())
    assert all(o is raw for o in outs)
    assert len(_warnings(caplog)) == 1
    assert p_failures(h.p, "normalize") == 3
    assert all(p["normalized"].success and p["normalized"].content is raw for p in h.post)


def p_failures(p: Pipeline, category: str) -> int:
    return sum(v for k, v in p.failures.counts.items() if k[0] == category)


# ---------------------------------------------------------------- tools that raise

class LookupFailed(Exception):
    pass


@pytest.mark.parametrize("mode", ["sync", "async_tool", "sync_tool_via_arun"])
@pytest.mark.parametrize("runtime", [HARNESS, None])
def test_tool_that_raises_becomes_a_normalized_failure(mode: str, runtime: str | None) -> None:
    n = RecordingNormalizer()
    h = Harness(n)
    exc = LookupFailed("vendor API returned 503")

    def tool(args: dict[str, Any]) -> Any:
        raise exc

    async def atool(args: dict[str, Any]) -> Any:
        raise exc

    if mode == "sync":
        out = h.p.run_tool("lookup", {}, tool, runtime_id=runtime)
    else:
        fn = atool if mode == "async_tool" else tool
        out = asyncio.run(h.p.arun_tool("lookup", {}, fn, runtime_id=runtime))
    assert out == "Tool Error: vendor API returned 503"
    assert type(out) is str
    (payload,) = h.post
    normalized = payload["normalized"]
    assert normalized.success is False
    assert normalized.error_message == str(exc)
    assert normalized.raw_result is exc
    assert payload["status"] == "error"
    assert payload["error_type"] == "LookupFailed"
    assert payload["error_message"] == str(exc)
    assert payload["result"] == out
    ((mem_norm, mem_ctx),) = h.records
    assert mem_norm is normalized
    assert mem_norm.raw_result is exc and mem_norm.success is False
    assert mem_ctx.tool_name == "lookup"


@pytest.mark.parametrize("runtime", [HARNESS, None, "praisonai"])
def test_tool_that_raises_without_hooks_gives_the_caller_tool_error(runtime: str | None) -> None:
    p = Pipeline(normalizers=RuntimeMiddlewareRegistry())

    def tool(args: dict[str, Any]) -> Any:
        raise LookupFailed("quota exceeded")

    assert p.run_tool("lookup", {}, tool, runtime_id=runtime) == "Tool Error: quota exceeded"


@pytest.mark.parametrize("mode", ["sync", "async_tool", "sync_tool_via_arun"])
@pytest.mark.parametrize("hooks", [True, False])
def test_raise_errors_reraises_the_same_exception_after_the_hooks(mode: str,
                                                                  hooks: bool) -> None:
    h = Harness(RecordingNormalizer(), hooks=hooks, memory=hooks)
    exc = LookupFailed("boom")

    def tool(args: dict[str, Any]) -> Any:
        raise exc

    async def atool(args: dict[str, Any]) -> Any:
        raise exc

    with pytest.raises(LookupFailed) as info:
        if mode == "sync":
            h.p.run_tool("lookup", {}, tool, runtime_id=HARNESS, raise_errors=True)
        else:
            fn = atool if mode == "async_tool" else tool
            asyncio.run(h.p.arun_tool("lookup", {}, fn, runtime_id=HARNESS,
                                      raise_errors=True))
    assert info.value is exc
    if hooks:
        assert len(h.post) == 1
        assert h.post[0]["normalized"].raw_result is exc
        assert h.post[0]["normalized"].success is False
        assert h.records[0][0].raw_result is exc


def test_normalizer_reporting_failure_surfaces_as_tool_error() -> None:
    def behave(result: Any, tool_name: str, ctx: MiddlewareContext) -> NormalizedToolResult:
        return NormalizedToolResult(content=None, success=False, error_message="x",
                                    raw_result=result)

    h = Harness(RecordingNormalizer(behave))
    raw = {"status": "error", "message": "x"}
    assert h.p.run_tool("lookup", {}, lambda a: raw, runtime_id=HARNESS) == "Tool Error: x"
    assert asyncio.run(h.p.arun_tool("lookup", {}, lambda a: raw,
                                     runtime_id=HARNESS)) == "Tool Error: x"
    for payload in h.post:
        assert payload["status"] == "error"
        assert payload["error_message"] == "x"
        assert payload["result"] == "Tool Error: x"
        assert payload["normalized"].raw_result is raw
    assert p_failures(h.p, "normalize") == 0


# ------------------------------------------------------ metadata and raw_result

def test_metadata_and_raw_result_reach_post_tool_call_and_memory_intact() -> None:
    metadata = {"vendor": "acme", "version": "2.1", "cache_hit": True, "region": "eu-west-1",
                "nested": {"shards": [1, 2, 3]}}
    raw = {"status": "ok", "data": {"rows": 3}, "trace": ["a", "b"]}

    def behave(result: Any, tool_name: str, ctx: MiddlewareContext) -> NormalizedToolResult:
        return NormalizedToolResult(content=result["data"], metadata=metadata,
                                    raw_result=result)

    h = Harness(RecordingNormalizer(behave))
    h.p.run_tool("db_query", {}, lambda a: raw, runtime_id=HARNESS)
    normalized = h.post[0]["normalized"]
    assert normalized.raw_result is raw
    assert normalized.metadata == {"vendor": "acme", "version": "2.1", "cache_hit": True,
                                   "region": "eu-west-1", "nested": {"shards": [1, 2, 3]}}
    assert normalized.metadata["nested"] is metadata["nested"]
    mem_norm, _ = h.records[0]
    assert mem_norm.raw_result is raw
    assert mem_norm.metadata == normalized.metadata
    assert raw == {"status": "ok", "data": {"rows": 3}, "trace": ["a", "b"]}


# ------------------------------------------------------------ sync / async parity

def _snapshot(h: Harness, n: RecordingNormalizer, out: Any) -> dict[str, Any]:
    (payload,) = h.post
    normalized = payload["normalized"]
    ((mem_norm, mem_ctx),) = h.records
    ((_, tool_name, ctx, _),) = n.calls if n.calls else ((None, None, None, None),)
    return {
        "out": out,
        "content": normalized.content,
        "success": normalized.success,
        "error_message": normalized.error_message,
        "metadata": normalized.metadata,
        "raw_result": normalized.raw_result,
        "status": payload["status"],
        "error_type": payload["error_type"],
        "result": payload["result"],
        "memory_is_hook_object": mem_norm is normalized,
        "memory_ctx": (mem_ctx.tool_name, mem_ctx.runtime_id, mem_ctx.session_id,
                       mem_ctx.agent_id),
        "normalizer_ctx": None if ctx is None else (
            tool_name, ctx.tool_name, ctx.runtime_id, ctx.session_id, ctx.agent_id),
        "payload_keys": sorted(payload),
    }


@pytest.mark.parametrize("outcome", ["ok", "vendor_error", "tool_raises", "bypass"])
def test_sync_and_async_paths_produce_the_same_normalized_result(outcome: str) -> None:
    raw = ({"status": "error", "message": "not found"} if outcome == "vendor_error"
           else {"status": "ok", "data": "Results for python"})
    exc = LookupFailed("network unreachable")
    runtime = None if outcome == "bypass" else HARNESS

    def behave(result: Any, tool_name: str, ctx: MiddlewareContext) -> NormalizedToolResult:
        if result.get("status") == "error":
            return NormalizedToolResult(content=None, success=False,
                                        error_message=result["message"],
                                        metadata={"vendor": "my_harness"}, raw_result=result)
        return NormalizedToolResult(content=result["data"], metadata={"vendor": "my_harness"},
                                    raw_result=result)

    def sync_tool(args: dict[str, Any]) -> Any:
        if outcome == "tool_raises":
            raise exc
        return raw

    async def async_tool(args: dict[str, Any]) -> Any:
        return sync_tool(args)

    snapshots = []
    for mode in ("sync", "async_tool", "sync_tool_via_arun"):
        n = RecordingNormalizer(behave)
        h = Harness(n)
        with runtime_context(session_id="s-1", agent_name="assistant", runtime_id=runtime):
            if mode == "sync":
                out = h.p.run_tool("lookup", {"q": "python"}, sync_tool)
            else:
                fn = async_tool if mode == "async_tool" else sync_tool
                out = asyncio.run(h.p.arun_tool("lookup", {"q": "python"}, fn))
        snapshots.append(_snapshot(h, n, out))
    assert snapshots[0] == snapshots[1] == snapshots[2]
    for s in snapshots:
        assert s["memory_is_hook_object"] is True
        if outcome == "tool_raises":
            assert s["raw_result"] is exc
        else:
            assert s["raw_result"] is raw


# --------------------------------------------------- the document's Common Patterns

class VendorSearchAndDbMiddleware:
    """A harness normalizer written the way the document's Common Patterns describe.

    * Conditional normalization: ``search_*`` tools return ``{"hits": [...]}``,
      ``db_*`` tools return ``{"rows": [...], "rowcount": n}``; anything else is kept.
    * Error handling: ``{"status": "error", "message": ...}`` becomes a failure.
    * Rich metadata: vendor, version, cache hit and region for observability hooks.
    * The original vendor object is always kept in ``raw_result``.
    """

    VENDOR, VERSION = "acme-harness", "3.2.0"

    @property
    def runtime_id(self) -> str:
        return "acme_harness"

    def normalize(self, result: Any, tool_name: str,
                  ctx: MiddlewareContext) -> NormalizedToolResult:
        meta = {"vendor": self.VENDOR, "version": self.VERSION,
                "cache_hit": bool(result.get("cached", False)),
                "region": result.get("region", "unknown")}
        if result.get("status") == "error":
            return NormalizedToolResult(content=None, success=False,
                                        error_message=result.get("message"),
                                        metadata=meta, raw_result=result)
        if tool_name.startswith("search_"):
            content: Any = [hit["title"] for hit in result["hits"]]
            meta["kind"] = "search"
        elif tool_name.startswith("db_"):
            content = result["rows"]
            meta["kind"] = "db"
            meta["rowcount"] = result["rowcount"]
        else:
            content = result
            meta["kind"] = "other"
        return NormalizedToolResult(content=content, metadata=meta, raw_result=result)


@pytest.fixture
def acme() -> Harness:
    return Harness(VendorSearchAndDbMiddleware())


def test_conditional_normalization_by_tool_name_prefix(acme: Harness) -> None:
    search_raw = {"status": "ok", "hits": [{"title": "Python tutorial", "score": 0.9},
                                           {"title": "Asyncio guide", "score": 0.7}],
                  "cached": True, "region": "eu-west-1"}
    db_raw = {"status": "ok", "rows": [{"id": 1}, {"id": 2}], "rowcount": 2,
              "region": "us-east-1"}
    other_raw = {"status": "ok", "value": 42}
    with runtime_context(runtime_id="acme_harness"):
        assert acme.p.run_tool("search_web", {"q": "python"}, lambda a: search_raw) == [
            "Python tutorial", "Asyncio guide"]
        assert acme.p.run_tool("db_query", {"sql": "select"}, lambda a: db_raw) == [
            {"id": 1}, {"id": 2}]
        assert acme.p.run_tool("calculator", {}, lambda a: other_raw) is other_raw
    kinds = [p["normalized"].metadata["kind"] for p in acme.post]
    assert kinds == ["search", "db", "other"]
    assert acme.post[1]["normalized"].metadata["rowcount"] == 2
    assert [n.raw_result for n, _ in acme.records] == [search_raw, db_raw, other_raw]
    assert acme.records[0][0].raw_result is search_raw


def test_rich_metadata_reaches_observability_hooks_and_memory(acme: Harness) -> None:
    raw = {"status": "ok", "hits": [], "cached": True, "region": "ap-south-1"}
    with runtime_context(runtime_id="acme_harness"):
        asyncio.run(acme.p.arun_tool("search_docs", {}, lambda a: raw))
    expected = {"vendor": "acme-harness", "version": "3.2.0", "cache_hit": True,
                "region": "ap-south-1", "kind": "search"}
    assert acme.post[0]["normalized"].metadata == expected
    assert acme.records[0][0].metadata == expected


def test_vendor_error_surfaces_as_tool_error_with_metadata(acme: Harness) -> None:
    raw = {"status": "error", "message": "index unavailable", "region": "eu-west-1"}
    with runtime_context(runtime_id="acme_harness"):
        out = acme.p.run_tool("search_web", {}, lambda a: raw)
    assert out == "Tool Error: index unavailable"
    normalized = acme.post[0]["normalized"]
    assert normalized.success is False and normalized.content is None
    assert normalized.metadata["region"] == "eu-west-1"
    assert normalized.raw_result is raw
    assert acme.post[0]["status"] == "error"


def test_quick_start_middleware_example() -> None:
    """The document's Quick Start: ``{"status": "ok", "data": ...}`` → data."""

    class MyHarnessMiddleware:
        @property
        def runtime_id(self) -> str:
            return "my_plugin_harness"

        def normalize(self, result: Any, tool_name: str,
                      ctx: MiddlewareContext) -> NormalizedToolResult:
            if isinstance(result, dict) and result.get("status") == "error":
                return NormalizedToolResult(content=None, success=False,
                                            error_message=result.get("message"),
                                            metadata={"vendor": "my_harness"},
                                            raw_result=result)
            return NormalizedToolResult(content=result.get("data", result), raw_result=result)

    h = Harness(MyHarnessMiddleware())

    def lookup(args: dict[str, Any]) -> dict[str, Any]:
        return {"status": "ok", "data": f"Results for {args['query']}"}

    with runtime_context(runtime_id="my_plugin_harness"):
        out = h.p.run_tool("lookup", '{"query": "Python tutorials"}', lookup)
        err = h.p.run_tool("lookup", {}, lambda a: {"status": "error", "message": "denied"})
    assert out == "Results for Python tutorials"
    assert err == "Tool Error: denied"
    assert h.post[1]["normalized"].metadata == {"vendor": "my_harness"}

"""Long execution chains: each layer costs two frames, so a few hundred pass-through
layers run in full; beyond what the stack has room for, the chain fails open — the
innermost layers are skipped or the base call runs without the chain, exactly once,
counted and warned once — instead of a RecursionError reaching the host with the
base call never run. Every span started ends."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _support.calls import MODES, named
from _support.telemetry import ObservedPipeline
from opentelemetry import context as otel_context

from otelmw.telemetry.content.policy import ContentPolicy

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def h() -> Iterator[ObservedPipeline]:
    harness = ObservedPipeline(ContentPolicy("NO_CONTENT"))
    yield harness
    harness.close()


def _in_thread(fn: Callable[[], Any]) -> Any:
    """Run at a known, shallow stack depth (a fresh thread), as a host's worker."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # handed back to the test
            out["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def _chain(h: ObservedPipeline, op: str, mode: str, n: int) -> tuple[list[int], list[Any]]:
    entered: list[int] = []
    kind = f"{op}_execution"
    for i in range(n):
        if mode == "sync":
            def layer(next_call: Any, i: int = i, **kw: Any) -> Any:
                entered.append(i)
                return next_call()
        else:
            async def layer(next_call: Any, i: int = i, **kw: Any) -> Any:  # type: ignore[misc]
                entered.append(i)
                return await next_call()
        named(layer, f"pass{i}")
        h.pipeline.registry.add_middleware(kind, layer, "deep")
    return entered, []


def _call(h: ObservedPipeline, op: str, mode: str, base_calls: list[Any]) -> Any:
    def base(p: Any) -> str:
        base_calls.append(p)
        return "base-result"

    # Called directly, not through run_call: how deep the chain gets before the stack
    # runs out is exported, and one more frame would shift it by a layer.
    p = h.pipeline
    if op == "llm":
        req = {"model": "m", "messages": []}
        return (p.run_llm(req, base, provider="openai") if mode == "sync"
                else asyncio.run(p.arun_llm(req, base, provider="openai")))
    return (p.run_tool("t", {"q": 1}, base) if mode == "sync"
            else asyncio.run(p.arun_tool("t", {"q": 1}, base)))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["tool", "llm"])
def test_380_pass_through_layers_all_run(h: ObservedPipeline, op: str, mode: str) -> None:
    entered, base_calls = _chain(h, op, mode, 380)
    assert _in_thread(lambda: _call(h, op, mode, base_calls)) == "base-result"
    assert entered == list(range(380))
    assert len(base_calls) == 1
    assert h.pipeline.failures.total() == 0
    assert h.lifecycle.open == set() and h.complaints == []


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["tool", "llm"])
def test_1000_pass_through_layers_fail_open(h: ObservedPipeline, op: str, mode: str,
                                            caplog: pytest.LogCaptureFixture) -> None:
    entered, base_calls = _chain(h, op, mode, 1000)
    caplog.set_level(logging.WARNING, "otelmw")
    before = otel_context.get_current()
    for _ in range(2):  # counted each time, warned once
        assert _in_thread(lambda: _call(h, op, mode, base_calls)) == "base-result"
    assert len(base_calls) == 2  # once per call
    ran = len(entered) // 2
    assert 300 < ran < 1000 and entered == list(range(ran)) * 2  # outermost layers ran
    counts = {k: v for k, v in h.pipeline.failures.counts.items() if v}
    assert counts == {("middleware", f"{op}_execution", "execution chain"): 2}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "innermost" in warnings[0], warnings
    assert h.lifecycle.open == set() and h.complaints == []
    assert len([s for s in h.spans() if s.name.startswith(f"{op}_execution ")]) == 2 * ran
    assert otel_context.get_current() == before


@pytest.mark.parametrize("mode", MODES)
def test_stack_running_out_inside_middleware_runs_the_base_once(
        h: ObservedPipeline, mode: str, caplog: pytest.LogCaptureFixture) -> None:
    """A middleware that itself uses up the stack before next_call: the chain
    unwinds and the base call runs once without it; counted, warned once."""
    def recurse(n: int) -> int:
        return recurse(n + 1) + 1

    if mode == "sync":
        def deep(next_call: Any, **kw: Any) -> Any:
            recurse(0)
            return next_call()
    else:
        async def deep(next_call: Any, **kw: Any) -> Any:  # type: ignore[misc]
            recurse(0)
            return await next_call()

    h.pipeline.registry.add_middleware("tool_execution", lambda next_call, **kw: next_call(),
                                       "outer")
    h.pipeline.registry.add_middleware("tool_execution", deep, "deep")
    caplog.set_level(logging.WARNING, "otelmw")
    base_calls: list[Any] = []
    assert _in_thread(lambda: _call(h, "tool", mode, base_calls)) == "base-result"
    assert len(base_calls) == 1
    counts = {k: v for k, v in h.pipeline.failures.counts.items() if v}
    assert counts == {("middleware", "tool_execution", "execution chain"): 1}
    assert h.lifecycle.open == set() and h.complaints == []


def test_the_base_calls_own_recursion_error_reaches_the_host(h: ObservedPipeline) -> None:
    h.pipeline.registry.add_middleware("tool_execution", lambda next_call, **kw: next_call(),
                                       "x")
    raised = RecursionError("the tool's own")
    calls: list[Any] = []

    def base(a: Any) -> Any:
        calls.append(a)
        raise raised

    with pytest.raises(RecursionError) as info:
        h.pipeline.run_tool("t", {}, base, raise_errors=True)
    assert info.value is raised and len(calls) == 1

"""Every span otelmw starts ends exactly once on every exit path, ``BaseException``
included: request middleware raising ``KeyboardInterrupt``/``SystemExit``/
``GeneratorExit``, execution wrappers raising them, tasks cancelled while a request
middleware, an execution wrapper, a hook or the base call awaits, inside a turn.
The exception reaches the host untouched (identity) and the OpenTelemetry context
is back to what it was."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _support.calls import EXEC_KIND, MODES, OPS, REQUEST_KIND, TOOL, minimal_payload, run_call
from _support.telemetry import ObservedPipeline
from opentelemetry import context as otel_context

from otelmw.telemetry.content.policy import ContentPolicy

pytestmark = pytest.mark.timeout(60)

INTERRUPTS = [KeyboardInterrupt, SystemExit, GeneratorExit]


def each_interrupt_op_and_mode(test: Callable[..., None]) -> Callable[..., None]:
    """Parametrize ``test`` over ``exc_type`` x ``op`` x ``mode`` (ids as stacked marks)."""
    for mark in (pytest.mark.parametrize("mode", MODES), pytest.mark.parametrize("op", OPS),
                 pytest.mark.parametrize("exc_type", INTERRUPTS)):
        test = mark(test)
    return test


@pytest.fixture
def h() -> Iterator[ObservedPipeline]:
    harness = ObservedPipeline(ContentPolicy("NO_CONTENT"))
    yield harness
    harness.close()


def assert_all_ended(h: ObservedPipeline, expected_names: set[str]) -> None:
    assert h.lifecycle.open == set(), "spans left open"
    assert h.lifecycle.started == h.lifecycle.ended
    names = {s.name for s in h.spans()}
    assert expected_names <= names, names
    assert h.complaints == []


@each_interrupt_op_and_mode
def test_request_middleware_raising_base_exception_ends_its_span(
        h: ObservedPipeline, mode: str, op: str, exc_type: type[BaseException]) -> None:
    raised = exc_type("stop")

    def rewrite(**kw: Any) -> Any:
        raise raised

    h.pipeline.registry.add_middleware(REQUEST_KIND[op], rewrite, "x")
    before = otel_context.get_current()
    ran: list[Any] = []
    with pytest.raises(exc_type) as info:
        run_call(h.pipeline, mode, op, minimal_payload(op), ran.append)
    assert info.value is raised
    assert ran == []
    assert otel_context.get_current() == before
    assert_all_ended(h, {f"{REQUEST_KIND[op]} x.rewrite"})
    (layer_span,) = [s for s in h.spans() if s.name == f"{REQUEST_KIND[op]} x.rewrite"]
    assert layer_span.attributes["otelmw.middleware.outcome"] == "error"
    assert layer_span.attributes["error.type"] == f"builtins.{exc_type.__qualname__}"


@each_interrupt_op_and_mode
def test_execution_wrapper_raising_base_exception_ends_every_span(
        h: ObservedPipeline, mode: str, op: str, exc_type: type[BaseException]) -> None:
    raised = exc_type("stop")

    def wrap(next_call: Any, **kw: Any) -> Any:
        raise raised

    h.pipeline.registry.add_middleware(EXEC_KIND[op], wrap, "x")
    with pytest.raises(exc_type) as info:
        run_call(h.pipeline, mode, op, minimal_payload(op), lambda p: "ok")
    assert info.value is raised
    assert_all_ended(h, {f"{EXEC_KIND[op]} x.wrap"})


async def _slow(**kw: Any) -> None:
    await asyncio.sleep(5)


async def _slow_wrapper(next_call: Any, **kw: Any) -> Any:
    await asyncio.sleep(5)
    return await next_call()


async def _slow_base(p: Any) -> str:
    await asyncio.sleep(5)
    return "late"


@pytest.mark.parametrize("where", ["request", "execution", "hook", "base"])
@pytest.mark.parametrize("op", OPS)
def test_cancelled_while_awaiting_ends_every_span(
        h: ObservedPipeline, op: str, where: str) -> None:
    """``asyncio.wait_for(pipe.arun_tool(...), 0.05)`` inside a turn: the task is
    cancelled while something awaits; every span otelmw started ends."""
    reg = h.pipeline.registry
    if where == "request":
        reg.add_middleware(REQUEST_KIND[op], _slow, "x")
    elif where == "execution":
        reg.add_middleware(EXEC_KIND[op], _slow_wrapper, "x")
    elif where == "hook":
        reg.add_hook("pre_api_request" if op == "llm" else "pre_tool_call", _slow, "x")
    base = _slow_base if where == "base" else (lambda p: "ok")

    async def turn() -> None:
        async with h.pipeline.turn("agent"):
            if op == "llm":
                call = h.pipeline.arun_llm(minimal_payload(op), base, provider="openai",
                                           model="gpt-test")
            else:
                call = h.pipeline.arun_tool(TOOL, minimal_payload(op), base)
            await asyncio.wait_for(call, 0.05)

    before = otel_context.get_current()
    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(turn())
    assert otel_context.get_current() == before
    expected = {"invoke_agent agent", "chat gpt-test" if op == "llm" else f"execute_tool {TOOL}"}
    assert_all_ended(h, expected)
    op_span = next(s for s in h.spans() if s.name in expected - {"invoke_agent agent"})
    assert op_span.attributes["error.type"] == "asyncio.exceptions.CancelledError"

"""One call's state never carries into another call through the context.

* A tool call's ``api_request_id`` comes from an explicit link to the model call that
  asked for it: the host's word (``run_tool(api_request_id=...)``), else the latest
  model call of the same turn (``contract.ModelCallLink``), else a new id. Calls in
  different turns, or outside any turn, are never linked.
* What a task or thread is inside of — its runtime context and the LLM call in
  flight — is read as one typed ``CallContext``, through public accessors.
* ``current_runtime_context()`` is a getter: it never calls into the observer; the
  pipeline leaves a turn finished elsewhere where its next call starts.
"""

from __future__ import annotations

import contextvars
import threading
from typing import Any

import pytest
from _support.calls import MODES, SYNC, run_call
from _support.telemetry import TelemetryHarness, payload_for, response_for

from otelmw import Pipeline, runtime_context
from otelmw.core import contract

pytestmark = pytest.mark.timeout(60)


def _ids(p: Pipeline) -> list[tuple[str, str]]:
    """(operation, api_request_id) of every LLM and tool call, as their hooks see it."""
    seen: list[tuple[str, str]] = []
    p.registry.add_hook("pre_api_request",
                        lambda **kw: seen.append(("llm", kw["api_request_id"])), plugin="x")
    p.registry.add_hook("pre_tool_call",
                        lambda **kw: seen.append(("tool", kw["api_request_id"])), plugin="x")
    return seen


def _llm(p: Pipeline, mode: str, rid: str | None = None) -> None:
    run_call(p, mode, "llm", {"model": "m"}, lambda r: "ok", api_request_id=rid)


def _tool(p: Pipeline, mode: str, **options: Any) -> None:
    run_call(p, mode, "tool", {"q": 1}, lambda a: "found", **options)


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_call_belongs_to_the_latest_model_call_of_its_turn(mode: str) -> None:
    p = Pipeline()
    seen = _ids(p)

    def scenario() -> None:
        with p.turn("agent"):
            _llm(p, mode)
            _llm(p, mode, "req-second")
            _tool(p, mode)
            with runtime_context(task_id="sub-task"):  # the same turn, a narrower context
                _tool(p, mode)
            _tool(p, mode, api_request_id="req-the-host-knows")  # the host's word wins

    contextvars.Context().run(scenario)
    assert [op for op, _ in seen] == ["llm", "llm", "tool", "tool", "tool"]
    assert seen[2:] == [("tool", "req-second"), ("tool", "req-second"),
                        ("tool", "req-the-host-knows")]


@pytest.mark.parametrize("mode", MODES)
def test_calls_in_other_turns_or_outside_any_turn_are_never_linked(mode: str) -> None:
    """Before, the latest model call in the thread or task named every later tool
    call's request, whichever turn (or none) either belonged to."""
    p = Pipeline()
    seen = _ids(p)

    def scenario() -> None:
        _llm(p, mode, "req-outside")
        _tool(p, mode)  # outside any turn: not linked
        with p.turn("agent"):
            _llm(p, mode, "req-turn-1")
        with p.turn("agent"):
            _tool(p, mode)  # a later turn, no model call of its own yet
        with runtime_context(turn_id="t-1"):
            _llm(p, mode, "req-block-1")
            with runtime_context(turn_id="t-2"):  # a turn id of its own: another turn
                _tool(p, mode)
        _tool(p, mode)

    contextvars.Context().run(scenario)
    tool_ids = [rid for op, rid in seen if op == "tool"]
    assert len(tool_ids) == 4 and len(set(tool_ids)) == 4
    assert not {"req-outside", "req-turn-1", "req-block-1"} & set(tool_ids)
    assert tool_ids[2].startswith("t-2:api:")


def test_concurrent_turns_link_their_own_model_calls() -> None:
    p = Pipeline()
    seen = _ids(p)
    barrier = threading.Barrier(2)

    def agent(name: str) -> None:
        with p.turn(name):
            _llm(p, SYNC, f"req-{name}")
            barrier.wait()  # both model calls made before either tool call
            _tool(p, SYNC, tool_call_id=name)

    threads = [threading.Thread(target=agent, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(rid for op, rid in seen if op == "tool") == ["req-a", "req-b"]


@pytest.mark.parametrize("mode", MODES)
def test_the_call_context_holds_the_runtime_context_and_the_llm_call(mode: str) -> None:
    p = Pipeline()
    p.registry.add_hook("pre_api_request", lambda **kw: None, plugin="x")
    inside: list[contract.CallContext] = []

    def base(request: Any) -> str:
        inside.append(contract.current_call_context())
        return "ok"

    def scenario() -> None:
        with runtime_context(session_id="s-1", turn_id="t-1") as rc:
            run_call(p, mode, "llm", {"model": "m"}, base)
            assert contract.current_call_context() == contract.CallContext(rc, None)

    contextvars.Context().run(scenario)
    (ctx,) = inside
    assert ctx.runtime.session_id == "s-1" and ctx.runtime.turn_id == "t-1"
    assert ctx.llm_call is not None and ctx.llm_call.operation == "chat"
    assert contract.current_llm_call() is None


class _TurnObserver:
    """Records the turn callbacks the pipeline makes (the rest: no-ops)."""

    hook_events = "registered"

    def __init__(self) -> None:
        self.left: list[Any] = []

    def turn_started(self, turn: Any) -> Any:
        return "token"

    def turn_finished(self, token: Any, error: Any, failed: bool) -> None:
        pass

    def turn_left(self, token: Any) -> None:
        self.left.append(token)

    def call_started(self, call: Any, payload: Any) -> None:
        pass

    def call_finished(self, call: Any, result: Any, error: Any) -> Any:
        return result

    def tool_result(self, call: Any, normalized: Any, status: str) -> None:
        pass


def test_the_runtime_context_getter_never_calls_the_observer() -> None:
    p = Pipeline()
    obs = _TurnObserver()
    p.observer = obs  # type: ignore[assignment]

    def scenario() -> None:
        turn = p.turn("agent", turn_id="t-9")
        turn.start()
        finisher = threading.Thread(target=turn.finish)
        finisher.start()
        finisher.join()
        # This context still holds the finished turn: the getter skips it, silently.
        assert contract.current_runtime_context().turn_id is None
        assert contract.current_call_context().runtime.turn_id == "t-9"
        assert obs.left == []
        p.run_tool("after", {}, lambda a: "ok")  # the pipeline leaves it here, once
        assert obs.left == ["token"]
        assert contract.current_call_context().runtime.turn_id is None
        p.run_tool("again", {}, lambda a: "ok")
        assert obs.left == ["token"]

    contextvars.Context().run(scenario)


@pytest.mark.parametrize("mode", MODES)
def test_exported_tool_spans_name_only_their_own_turns_model_call(
        h: TelemetryHarness, mode: str) -> None:
    """``otelmw.api_request.id`` on ``execute_tool``: the chat span's inside its turn;
    a tool call outside any turn no longer takes the id of a chat call before it."""
    p = h.pipeline

    def calls() -> None:
        run_call(p, mode, "llm", payload_for("llm"), lambda r: response_for("llm"))
        run_call(p, mode, "tool", payload_for("tool"), lambda a: "sunny", tool="outside")
        with p.turn("agent"):
            run_call(p, mode, "llm", payload_for("llm"), lambda r: response_for("llm"))
            run_call(p, mode, "tool", payload_for("tool"), lambda a: "sunny", tool="inside")

    contextvars.Context().run(calls)
    first_chat, turn_chat = h.named("chat gpt-test")
    key = "otelmw.api_request.id"
    assert h.one("execute_tool inside").attributes[key] == turn_chat.attributes[key]
    outside = h.one("execute_tool outside").attributes[key]
    assert outside != first_chat.attributes[key] and outside.startswith("req-")

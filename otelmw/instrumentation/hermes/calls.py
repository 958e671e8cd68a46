"""Hermes' calls as otelmw calls: the ``CallInfo`` of a provider attempt, a tool call or
a turn-level hook point, built from the context kwargs Hermes passes its middleware and
hooks; and the calls of one turn that were opened ahead of their execution.

A call is opened ("parked") at Hermes' request stage, so its span starts before Hermes'
own request middleware runs; its context is attached only around code that belongs to
it (parallel tool calls opened on one thread must not nest). Once it has run, it stays
findable for the hooks Hermes fires after it (``post_api_request``, ``post_tool_call``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from opentelemetry import context as otel_context

from ...core import (
    LLM_REQUEST,
    TOOL_REQUEST,
    CallInfo,
    HostCall,
    NormalizedToolResult,
    current_runtime_context,
    new_request_id,
    observing,
    unopened_call,
)
from ...core import (
    instrumentation_failed as host_instrumentation_failed,
)
from ...core import (
    open_call as open_host_call,
)
from ...telemetry.setup.context import safe_detach
from .._base import server_of

RUNTIME_ID = AGENT_NAME = "hermes"
# gen_ai.provider.name when Hermes' ``provider`` is "" (a custom base_url)
_PROVIDER_BY_MODE = {"chat_completions": "openai", "codex_responses": "openai",
                     "anthropic_messages": "anthropic", "bedrock_converse": "aws.bedrock"}
LLM_HOOKS = frozenset({"pre_api_request", "post_api_request", "api_request_error"})
TOOL_HOOKS = frozenset({"pre_tool_call", "post_tool_call", "transform_tool_result"})


def text(value: Any) -> str | None:
    """A non-empty string from Hermes' kwargs, else None."""
    return value if isinstance(value, str) and value else None


def instrumentation_failed(where: str, exc: BaseException) -> None:
    """Count (and warn once about) an error of this adapter; the caller fails open."""
    host_instrumentation_failed("hermes", where, exc)


def llm_call(request: Any, context: dict[str, Any]) -> CallInfo:
    """The ``chat`` call of one provider attempt (``api_request_id``)."""
    rc = current_runtime_context()
    model = request.get("model") if isinstance(request, dict) else None
    host, port = server_of(text(context.get("base_url")))
    return CallInfo(
        operation="chat",
        session_id=rc.session_id or text(context.get("session_id")),
        task_id=text(context.get("task_id")) or rc.task_id,
        turn_id=rc.turn_id,
        api_request_id=text(context.get("api_request_id")) or new_request_id(rc.turn_id),
        provider=text(context.get("provider"))
        or _PROVIDER_BY_MODE.get(str(context.get("api_mode")), "unknown"),
        model=model if isinstance(model, str) else text(context.get("model")),
        api_mode=text(context.get("api_mode")),
        runtime_id=rc.runtime_id or RUNTIME_ID,
        agent_name=rc.agent_name,
        server_address=host,
        server_port=port)


def tool_call(tool_name: Any, context: dict[str, Any]) -> CallInfo:
    """The ``execute_tool`` call of one tool call (``tool_call_id``)."""
    rc = current_runtime_context()
    return CallInfo(
        operation="execute_tool",
        session_id=rc.session_id or text(context.get("session_id")),
        task_id=text(context.get("task_id")) or rc.task_id,
        turn_id=rc.turn_id,
        api_request_id=text(context.get("api_request_id")),
        tool_name=text(tool_name) or "unknown",
        tool_call_id=text(context.get("tool_call_id")),
        runtime_id=RUNTIME_ID,
        agent_name=rc.agent_name)


class OpenedCall(NamedTuple):
    """A call the adapter opened (``open_call``), and the span context it made."""

    opened: HostCall
    context: Any  # an OpenTelemetry Context, or None without an observer

    @property
    def call(self) -> CallInfo:
        return self.opened.call


LLM_KEY = "llm"  # the turn's provider attempt in flight (one at a time)


def tool_key(tool_call_id: str | None) -> str:
    return f"tool:{tool_call_id}"


def ended_llm_key(api_request_id: str | None) -> str:
    return f"llm:{api_request_id}"


@dataclass(slots=True)
class TurnCalls:
    """The calls of one turn: opened and not yet run (``LLM_KEY``, ``tool_key``), and
    run (``ended_llm_key``, ``tool_key``), for the hooks Hermes fires afterwards."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    opened: dict[str, OpenedCall] = field(default_factory=dict)
    ended: dict[str, OpenedCall] = field(default_factory=dict)

    def find(self, key: str, api_request_id: str | None = None) -> OpenedCall | None:
        """The opened call under ``key`` (of that provider attempt, when given)."""
        with self.lock:
            return self._match(key, api_request_id)

    def claim(self, key: str, api_request_id: str | None = None) -> OpenedCall | None:
        """As ``find``, and no longer opened: its execution runs it now."""
        with self.lock:
            opened = self._match(key, api_request_id)
            if opened is not None:
                del self.opened[key]
            return opened

    def _match(self, key: str, api_request_id: str | None) -> OpenedCall | None:
        opened = self.opened.get(key)
        if opened is None or (api_request_id is not None
                              and opened.call.api_request_id != api_request_id):
            return None
        return opened

    def supersede(self, key: str) -> list[OpenedCall]:
        """Take out the opened calls a new one under ``key`` replaces, never run: for
        the provider attempt every one (an earlier attempt, or a tool batch that
        never ran), for a tool call an earlier one of that id."""
        with self.lock:
            return [self.opened.pop(k) for k in list(self.opened) if key == LLM_KEY or k == key]

    def add(self, key: str, opened: OpenedCall) -> None:
        with self.lock:
            self.opened[key] = opened

    def open_calls(self) -> list[OpenedCall]:
        with self.lock:
            return list(self.opened.values())

    def record_ended(self, key: str, opened: OpenedCall) -> None:
        with self.lock:
            self.ended[key] = opened

    def find_ended(self, key: str) -> OpenedCall | None:
        with self.lock:
            return self.ended.get(key)


_turn_calls: ContextVar[TurnCalls | None] = ContextVar("otelmw_hermes_turn", default=None)


def turn_calls() -> TurnCalls | None:
    """The calls of the Hermes turn running in this context, if any."""
    return _turn_calls.get()


def enter_turn(calls: TurnCalls) -> Any:
    return _turn_calls.set(calls)


def leave_turn(token: Any) -> None:
    _turn_calls.reset(token)


def open_call(call: CallInfo, payload: Any, park: bool) -> OpenedCall:
    """Open ``call``; with its span context (``park``: not left current)."""
    before = otel_context.get_current()
    opened = open_host_call(call, payload)
    if not opened.observed:
        return OpenedCall(opened, None)
    ctx = otel_context.get_current()
    if park:
        otel_context.attach(before)
    return OpenedCall(opened, ctx)


def unobserved(call: CallInfo) -> OpenedCall:
    """A call of its own that is not opened (a hook firing's target outside a turn)."""
    return OpenedCall(unopened_call(call), None)


def open_ahead(key: str, call: CallInfo, payload: Any) -> OpenedCall:
    """Open ``call`` (parked) under ``key`` in the running turn, ahead of Hermes' request
    stage; outside a turn, or without an observer, it stays a call of its own."""
    calls = _turn_calls.get()
    if calls is None or not observing():
        return unobserved(call)
    for stale in calls.supersede(key):
        finish_unrun(stale)
    opened = open_call(call, payload, park=True)
    calls.add(key, opened)
    return opened


def attach(ctx: Any) -> Any:
    """Make a parked call's context current; the token for ``safe_detach``."""
    return otel_context.attach(ctx) if ctx is not None else None


class ExecutingCall(NamedTuple):
    """A call whose execution starts: the one opened ahead of it (``parked``), or one
    opened now (outside a turn, or when Hermes skipped its request stage)."""

    opened: HostCall
    context: Any  # its span context
    parked: bool

    @property
    def call(self) -> CallInfo:
        return self.opened.call


def start_execution(key: str, payload: Any, new_call: Callable[[], CallInfo],
                    api_request_id: str | None = None) -> ExecutingCall:
    calls = _turn_calls.get()
    opened = calls.claim(key, api_request_id) if calls is not None else None
    if opened is not None:
        return ExecutingCall(opened.opened, opened.context, parked=True)
    now = open_call(new_call(), payload, park=False)
    return ExecutingCall(now.opened, now.context, parked=False)


@contextmanager
def executing(running: ExecutingCall, ended_key: str) -> Iterator[None]:
    """Around a call's execution: a parked call's context attached; afterwards the call
    stays findable under ``ended_key`` for the hooks Hermes fires after it."""
    token = attach(running.context) if running.parked else None
    try:
        yield
    finally:
        safe_detach(token)
        calls = _turn_calls.get()
        if calls is not None and running.context is not None:
            calls.record_ended(ended_key, OpenedCall(running.opened, running.context))


def finish_unrun(opened: OpenedCall | None, status: str | None = None, result: Any = None,
                 message: Any = None) -> None:
    """End a call Hermes blocked, cancelled or abandoned before it ran."""
    if opened is None or not opened.opened.observed:
        return
    if opened.call.operation == "execute_tool" and status is not None:
        why = text(message) or f"tool call {status}"
        if status == "blocked":
            opened.opened.tool_blocked(why, result)
        else:
            opened.opened.report_tool_result(NormalizedToolResult(
                content=result, success=False, raw_result=result, error_message=why),
                "error")
    opened.opened.finish(result, None)


def call_of(name: str, context: dict[str, Any]) -> OpenedCall:
    """The call a hook firing or a request stage (``name``) belongs to, and its span
    context: the turn's opened or run call of that request or tool call id, else a
    call of its own (not started); an agent-level hook point belongs to the turn."""
    calls, rc = _turn_calls.get(), current_runtime_context()
    if name in LLM_HOOKS or name == LLM_REQUEST:
        rid = text(context.get("api_request_id"))
        found = calls.find(LLM_KEY, rid) or calls.find_ended(ended_llm_key(rid)) if (
            calls is not None) else None
        return found or unobserved(llm_call(context.get("request"), context))
    if name in TOOL_HOOKS or name == TOOL_REQUEST:
        key = tool_key(text(context.get("tool_call_id")))
        found = calls.find(key) or calls.find_ended(key) if (
            calls is not None and text(context.get("tool_call_id"))) else None
        return found or unobserved(tool_call(context.get("tool_name"), context))
    return unobserved(CallInfo(
        operation="invoke_agent", session_id=rc.session_id or text(context.get("session_id")),
        task_id=text(context.get("task_id")) or rc.task_id, turn_id=rc.turn_id,
        runtime_id=rc.runtime_id, agent_name=rc.agent_name))

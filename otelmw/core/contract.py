"""The plugin-middleware contract: kinds, schema versions, hook names, call context.

Nothing here imports OpenTelemetry. The names mirror the reference contract
(``shared/reference/plugin-middleware-contract.md``) with otelmw's schema ids.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from random import getrandbits
from typing import Any, Final

from .payloads import EMPTY_LIST_VIEW, freeze

_new_record = object.__new__

TELEMETRY_SCHEMA_VERSION: Final = "otelmw.observer.v1"
MIDDLEWARE_SCHEMA_VERSION: Final = "otelmw.middleware.v1"

LLM_REQUEST: Final = "llm_request"
TOOL_REQUEST: Final = "tool_request"
LLM_EXECUTION: Final = "llm_execution"
TOOL_EXECUTION: Final = "tool_execution"

REQUEST_KINDS: Final = frozenset({LLM_REQUEST, TOOL_REQUEST})
EXECUTION_KINDS: Final = frozenset({LLM_EXECUTION, TOOL_EXECUTION})
MIDDLEWARE_KINDS: Final = REQUEST_KINDS | EXECUTION_KINDS

# Payload key each kind rewrites / forwards through ``next_call``.
PAYLOAD_KEY: Final = {
    LLM_REQUEST: "request",
    LLM_EXECUTION: "request",
    TOOL_REQUEST: "args",
    TOOL_EXECUTION: "args",
}
ORIGINAL_KEY: Final = {"request": "original_request", "args": "original_args"}

PRE_API_REQUEST: Final = "pre_api_request"
POST_API_REQUEST: Final = "post_api_request"
API_REQUEST_ERROR: Final = "api_request_error"
PRE_TOOL_CALL: Final = "pre_tool_call"
POST_TOOL_CALL: Final = "post_tool_call"
TRANSFORM_TOOL_RESULT: Final = "transform_tool_result"

HOOK_NAMES: Final = frozenset(
    {
        PRE_API_REQUEST,
        POST_API_REQUEST,
        API_REQUEST_ERROR,
        PRE_TOOL_CALL,
        POST_TOOL_CALL,
        TRANSFORM_TOOL_RESULT,
    }
)

# Runtime ids whose tool results are already in the native shape: normalization
# is bypassed for them (and for "no runtime id"), as in the result contract.
NATIVE_RUNTIME_IDS: Final = frozenset({"praisonai"})


@dataclass(frozen=True, slots=True)
class RuntimeContext:
    """Ids the host sets for the current session / task / turn."""

    session_id: str | None = None
    task_id: str | None = None
    turn_id: str | None = None
    agent_name: str | None = None
    runtime_id: str | None = None
    # The agent turn this context belongs to (``Pipeline.turn``), if any.
    turn: TurnMark | None = field(default=None, compare=False, repr=False)


_EMPTY_CONTEXT: Final = RuntimeContext()
_runtime_context: contextvars.ContextVar[RuntimeContext] = contextvars.ContextVar(
    "otelmw_runtime_context", default=_EMPTY_CONTEXT
)


class TurnMark:
    """Shared by every context that holds one turn: the thread that started it,
    copies carried into threads and tasks. A turn finished elsewhere (another
    thread, or while a long-lived thread it started keeps its context) is left
    lazily by each context that still holds it, at its next pipeline call."""

    __slots__ = ("closed", "on_leave", "outer", "token")

    def __init__(self, outer: RuntimeContext) -> None:
        self.closed = False
        self.outer = outer
        self.token: contextvars.Token[RuntimeContext] | None = None
        # The observer's part: restore its own context (OpenTelemetry's) here.
        self.on_leave: Callable[[], None] | None = None

    def leave_runtime(self) -> None:
        """Back to the context the turn was started in (this Context's own token
        when it is the starter's, else by value: a copy cannot reset it)."""
        try:
            if self.token is None:
                raise ValueError
            _runtime_context.reset(self.token)
        except (ValueError, RuntimeError):
            _runtime_context.set(self.outer)

    def leave(self) -> RuntimeContext:
        """Leave the finished turn in the calling context; its current context."""
        self.leave_runtime()
        if self.on_leave is not None:
            try:
                self.on_leave()
            except Exception:  # an observer must not break the call path
                pass
        return current_runtime_context()


def current_runtime_context() -> RuntimeContext:
    """The runtime context of the calling task/thread (empty when none is set).
    A context still holding a turn that has finished leaves it first: calls made
    after a turn ended are never attributed (or parented) to it."""
    ctx = _runtime_context.get()
    mark = ctx.turn
    if mark is not None and mark.closed:
        return mark.leave()
    return ctx


def derive_context(outer: RuntimeContext, fields: dict[str, Any],
                   turn: TurnMark | None) -> RuntimeContext:
    """``outer`` with the fields that are set replaced (unset ones inherit)."""
    def pick(name: str) -> Any:
        value = fields.get(name)
        return value if value is not None else getattr(outer, name)

    return RuntimeContext(session_id=pick("session_id"), task_id=pick("task_id"),
                          turn_id=pick("turn_id"), agent_name=pick("agent_name"),
                          runtime_id=pick("runtime_id"),
                          turn=turn if turn is not None else outer.turn)


@contextmanager
def runtime_context(
    *,
    session_id: str | None = None,
    task_id: str | None = None,
    turn_id: str | None = None,
    agent_name: str | None = None,
    runtime_id: str | None = None,
) -> Iterator[RuntimeContext]:
    """Set ids for every pipeline call made inside the block.

    Unset fields inherit from an enclosing block, so a host can set the session
    once and the turn per turn. Contextvars carry it into asyncio tasks.
    """
    outer = current_runtime_context()
    ctx = derive_context(outer, {"session_id": session_id, "task_id": task_id,
                                 "turn_id": turn_id, "agent_name": agent_name,
                                 "runtime_id": runtime_id}, None)
    token = _runtime_context.set(ctx)
    try:
        yield ctx
    finally:
        try:
            _runtime_context.reset(token)
        except ValueError:  # token from another context (generator finalised elsewhere)
            _runtime_context.set(outer)


def new_request_id(prefix: str | None = None) -> str:
    """A per-call id: ``<turn_id>:api:<hex>`` inside a turn, else ``req-<hex>``."""
    # %-format: measurably cheaper than an f-string with a format spec, per call
    if prefix:
        return "%s:api:%012x" % (prefix, getrandbits(48))  # noqa: UP031
    return "req-%012x" % getrandbits(48)  # noqa: UP031


@dataclass(slots=True)
class CallInfo:
    """The context of one LLM or tool call as it moves through the pipeline.

    ``as_kwargs`` produces the runtime-context fields every callback receives.
    Host adapters build it by keyword; the pipelines' own calls come from the named
    constructors ``for_chat`` / ``for_tool`` / ``for_embeddings``.
    """

    operation: str  # "chat", "execute_tool" or "embeddings" ("invoke_agent": host hooks)
    session_id: str | None = None
    task_id: str | None = None
    turn_id: str | None = None
    api_request_id: str | None = None
    provider: str | None = None
    model: str | None = None
    api_mode: str | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    runtime_id: str | None = None
    agent_name: str | None = None
    server_address: str | None = None
    server_port: int | None = None
    middleware_trace: list[dict[str, Any]] = field(default_factory=list)
    # Scratch space for observers (telemetry keeps its span handles here).
    observer_state: Any = None
    _trace_view: Any = None

    # The named constructors set every field by name on a bare instance: on this
    # per-call path the generated ``__init__``'s keyword matching cost as much as
    # the rest of the construction (docs/performance.md, benchmark 2).
    # tests/test_core_pipeline.py checks each against the keyword-built record.
    @classmethod
    def _from_context(cls, operation: str, context: RuntimeContext,
                      api_request_id: str | None) -> CallInfo:
        call = _new_record(cls)
        call.operation = operation
        call.session_id = context.session_id
        call.task_id = context.task_id
        call.turn_id = context.turn_id
        call.api_request_id = api_request_id
        call.provider = call.model = call.api_mode = None
        call.tool_name = call.tool_call_id = None
        call.runtime_id = context.runtime_id
        call.agent_name = context.agent_name
        call.server_address = call.server_port = None
        call.middleware_trace = []
        call.observer_state = call._trace_view = None
        return call

    @classmethod
    def for_chat(cls, context: RuntimeContext, *, api_request_id: str, provider: str | None,
                 model: str | None, api_mode: str | None,
                 server: tuple[str | None, int | None]) -> CallInfo:
        """A ``chat`` call in ``context`` (``server``: address and port, if known)."""
        call = cls._from_context("chat", context, api_request_id)
        call.provider, call.model, call.api_mode = provider, model, api_mode
        call.server_address, call.server_port = server
        return call

    @classmethod
    def for_tool(cls, context: RuntimeContext, *, api_request_id: str, tool_name: str,
                 tool_call_id: str | None, runtime_id: str | None) -> CallInfo:
        """An ``execute_tool`` call in ``context``, of the host runtime ``runtime_id``."""
        call = cls._from_context("execute_tool", context, api_request_id)
        call.tool_name, call.tool_call_id, call.runtime_id = tool_name, tool_call_id, runtime_id
        return call

    @classmethod
    def for_embeddings(cls, context: RuntimeContext, *, provider: str | None,
                       model: str | None, server: tuple[str | None, int | None]) -> CallInfo:
        """An ``embeddings`` call in ``context``. No ``api_request_id``: tool calls
        belong to the latest *chat* request."""
        call = cls._from_context("embeddings", context, None)
        call.provider, call.model = provider, model
        call.server_address, call.server_port = server
        return call

    def trace_view(self) -> Any:
        """Read-only view of ``middleware_trace`` for payloads, built once per call
        (rebuilt only if entries were added since)."""
        trace = self.middleware_trace
        if not trace:
            return EMPTY_LIST_VIEW  # the usual case: nothing rewritten
        view = self._trace_view
        if view is None or len(view) != len(trace):
            view = self._trace_view = freeze(trace)
        return view

    def as_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {
            "telemetry_schema_version": TELEMETRY_SCHEMA_VERSION,
            "middleware_schema_version": MIDDLEWARE_SCHEMA_VERSION,
            "session_id": self.session_id,
            "task_id": self.task_id,
            "turn_id": self.turn_id,
            "api_request_id": self.api_request_id,
        }
        if self.operation == "chat":
            kw["provider"] = self.provider
            kw["model"] = self.model
            kw["api_mode"] = self.api_mode
        else:
            kw["tool_name"] = self.tool_name
            kw["tool_call_id"] = self.tool_call_id
        return kw


def make_trace_entry(
    kind: str, middleware: str, plugin: str, source: Any, reason: Any
) -> dict[str, Any]:
    """One ``middleware_trace`` entry (JSON-able), recorded for an accepted rewrite."""
    return {
        "kind": kind,
        "middleware": middleware,
        "plugin": plugin,
        "source": source if isinstance(source, str) and source else plugin,
        "reason": reason if isinstance(reason, str) else None,
    }

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
from typing import Any, Final, NamedTuple

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


class ModelCallLink:
    """The latest model call of one turn (a ``Pipeline.turn`` or a ``runtime_context``
    block with a turn id of its own): a tool call the turn makes is linked to it
    (``api_request_id``) unless the host names the model call itself. Shared by every
    context that holds the turn (threads and tasks it started); a context outside
    any turn has none, so calls there are never linked to each other."""

    __slots__ = ("api_request_id",)

    def __init__(self) -> None:
        self.api_request_id: str | None = None


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
    # The turn's latest model call, which its tool calls belong to.
    model_call: ModelCallLink | None = field(default=None, compare=False, repr=False)


class CallContext(NamedTuple):
    """What the calling task or thread is inside of, read at once
    (``current_call_context``)."""

    runtime: RuntimeContext
    # The pipeline LLM call in flight, if any: a nested layer (the provider SDK
    # under a host adapter) enriches it instead of opening a second ``chat`` span.
    llm_call: CallInfo | None


_EMPTY_CONTEXT: Final = RuntimeContext()
# Two ContextVars, both of the calling task or thread (a context copy holds both): the
# LLM call in flight changes on every call, and setting a var of its own costs a set,
# where one var holding both needed a new record per call (~3k instructions,
# benchmark 1b). Each is reset by its own token.
_runtime_context: contextvars.ContextVar[RuntimeContext] = contextvars.ContextVar(
    "otelmw_runtime_context", default=_EMPTY_CONTEXT
)
_llm_call: contextvars.ContextVar[CallInfo | None] = contextvars.ContextVar(
    "otelmw_llm_call", default=None
)


def current_call_context() -> CallContext:
    """The call context of the calling task/thread."""
    return CallContext(_runtime_context.get(), _llm_call.get())


def current_llm_call() -> CallInfo | None:
    """The pipeline LLM call in flight in this task/thread, if any."""
    return _llm_call.get()


def set_current_llm_call(call: CallInfo | None) -> contextvars.Token[CallInfo | None]:
    """Make ``call`` (or no call) the current LLM call; undo with ``reset_current_llm_call``.
    Host adapters use it to keep their own middleware outside the request."""
    return _llm_call.set(call)


def reset_current_llm_call(token: contextvars.Token[CallInfo | None]) -> None:
    try:
        _llm_call.reset(token)
    except ValueError:  # token from another context: leave the var as it is there
        pass


def enter_runtime_context(ctx: RuntimeContext) -> contextvars.Token[RuntimeContext]:
    """Make ``ctx`` the runtime context of the calling task/thread (the LLM call in
    flight stays); undo with ``leave_runtime_context``."""
    return _runtime_context.set(ctx)


def leave_runtime_context(token: contextvars.Token[RuntimeContext] | None,
                          outer: RuntimeContext) -> None:
    """Back to ``outer``: by ``token`` when it is this context's own, else by value (a
    copy of the context, or a generator finalised elsewhere, cannot reset it)."""
    try:
        if token is None:
            raise ValueError
        _runtime_context.reset(token)
    except (ValueError, RuntimeError):
        _runtime_context.set(outer)


class TurnMark:
    """Shared by every context that holds one turn: the thread that started it,
    copies carried into threads and tasks. A turn finished elsewhere (another
    thread, or while a long-lived thread it started keeps its context) is left
    by each context that still holds it at its next pipeline call
    (``leave_finished_turns``)."""

    __slots__ = ("closed", "host_measured", "on_leave", "outer", "token")

    def __init__(self, outer: RuntimeContext, host_measured: bool = False) -> None:
        self.closed = False
        self.outer = outer
        # The host records the turn's duration point itself, under otelmw's metric name
        # (Google ADK): as ``CallInfo.host_measured``, for the observer.
        self.host_measured = host_measured
        self.token: contextvars.Token[RuntimeContext] | None = None
        # The observer's part: restore its own context (OpenTelemetry's) here.
        self.on_leave: Callable[[], None] | None = None

    def leave_runtime(self) -> None:
        """Back to the context the turn was started in."""
        leave_runtime_context(self.token, self.outer)

    def leave(self) -> RuntimeContext:
        """Leave the finished turn in the calling context (the observer restores its
        own context); the runtime context then current."""
        self.leave_runtime()
        if self.on_leave is not None:
            try:
                self.on_leave()
            except Exception:  # an observer must not break the call path
                pass
        return _runtime_context.get()


def current_runtime_context() -> RuntimeContext:
    """The runtime context of the calling task/thread (empty when none is set), without
    the turns that have finished: calls made after a turn ended are never attributed
    (or parented) to it. A getter: the calling context keeps holding a finished turn
    until the pipeline leaves it (``leave_finished_turns``)."""
    ctx = _runtime_context.get()
    mark = ctx.turn
    while mark is not None and mark.closed:
        ctx = mark.outer
        mark = ctx.turn
    return ctx


def leave_finished_turns() -> RuntimeContext:
    """Leave, in the calling context, every turn that has finished elsewhere (its
    observer restores its own context), and return the runtime context then current.
    The pipeline calls it where a call or a turn starts."""
    ctx = _runtime_context.get()
    mark = ctx.turn
    while mark is not None and mark.closed:
        ctx = mark.leave()
        mark = ctx.turn
    return ctx


def link_model_call(context: RuntimeContext, api_request_id: str | None) -> None:
    """``api_request_id`` is now the latest model call of ``context``'s turn: the tool
    calls the turn makes next belong to it (``ModelCallLink``)."""
    link = context.model_call
    if link is not None:
        link.api_request_id = api_request_id


def linked_api_request_id(context: RuntimeContext) -> str | None:
    """The api_request_id of the latest model call of ``context``'s turn, if any."""
    link = context.model_call
    return link.api_request_id if link is not None else None



def derive_context(outer: RuntimeContext, fields: dict[str, Any],
                   turn: TurnMark | None) -> RuntimeContext:
    """``outer`` with the fields that are set replaced (unset ones inherit). A turn id
    of its own starts a turn of its own: a new ``ModelCallLink``."""
    def pick(name: str) -> Any:
        value = fields.get(name)
        return value if value is not None else getattr(outer, name)

    turn_id = pick("turn_id")
    link = outer.model_call
    if link is None or turn_id != outer.turn_id:
        link = ModelCallLink()
    return RuntimeContext(session_id=pick("session_id"), task_id=pick("task_id"),
                          turn_id=turn_id, agent_name=pick("agent_name"),
                          runtime_id=pick("runtime_id"),
                          turn=turn if turn is not None else outer.turn, model_call=link)


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
    outer = leave_finished_turns()
    ctx = derive_context(outer, {"session_id": session_id, "task_id": task_id,
                                 "turn_id": turn_id, "agent_name": agent_name,
                                 "runtime_id": runtime_id}, None)
    token = enter_runtime_context(ctx)
    try:
        yield ctx
    finally:
        leave_runtime_context(token, outer)


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
    # The host records this call's own duration (and token usage) metric points under
    # the names otelmw records them (Google ADK): the observer records none of its own
    # then, where the host's points reach the same meter provider (never counted twice).
    host_measured: bool = False
    # What the observer's ``call_started`` returned for this call (telemetry: its span
    # state), handed back to it with the call; the core keeps it and never reads it.
    observation: object | None = None
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
        call.host_measured = False
        call.observation = call._trace_view = None
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

    def request_sent(self, request: Any) -> None:
        """The request sent is not the one the call opened with: the call's ``model`` is
        the one it asks now (a rewrite may change it; the hook records name it)."""
        model = request.get("model") if isinstance(request, dict) else None
        if isinstance(model, str) and model:
            self.model = model

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
        """The runtime-context fields every callback receives, in a new dict (the stages
        add their payload keys to it). One literal per kind of call: ≈ 0.5k instructions
        less than setting the last keys after (benchmark 2b)."""
        if self.operation == "chat":
            return {"telemetry_schema_version": TELEMETRY_SCHEMA_VERSION,
                    "middleware_schema_version": MIDDLEWARE_SCHEMA_VERSION,
                    "session_id": self.session_id, "task_id": self.task_id,
                    "turn_id": self.turn_id, "api_request_id": self.api_request_id,
                    "provider": self.provider, "model": self.model, "api_mode": self.api_mode}
        return {"telemetry_schema_version": TELEMETRY_SCHEMA_VERSION,
                "middleware_schema_version": MIDDLEWARE_SCHEMA_VERSION,
                "session_id": self.session_id, "task_id": self.task_id,
                "turn_id": self.turn_id, "api_request_id": self.api_request_id,
                "tool_name": self.tool_name, "tool_call_id": self.tool_call_id}


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

"""Per-context call state shared by the LLM and tool pipelines."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from time import perf_counter
from typing import TYPE_CHECKING, Any

from . import contract as c
from .payloads import FrozenDict, thaw

if TYPE_CHECKING:
    from .seam import PipelineObserver

# The id of the latest LLM request in this task/thread, given to the tool calls
# it produced (``api_request_id`` in tool middleware and hook payloads).
_last_api_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "otelmw_last_api_request_id", default=None
)


# The LLM call in flight in this context: a nested layer (the SDK under a host
# adapter) enriches it instead of opening a second ``chat`` span.
_current_llm_call: contextvars.ContextVar[c.CallInfo | None] = contextvars.ContextVar(
    "otelmw_current_llm_call", default=None
)


# The pipeline LLM call running in this context, if any: the variable's own ``get``
# (every SDK wrapper asks it first, so no frame of ours around it).
current_llm_call: Callable[[], c.CallInfo | None] = _current_llm_call.get


def llm_terminal_for(execute: Callable[[Any], Any], request: Any, original: Any,
                     call: c.CallInfo, obs: PipelineObserver | None) -> Callable[[Any], Any]:
    """The base call at the end of an LLM call's execution chain. The host gets its
    own object back when nothing was rewritten (or a wrapper restored the original),
    plain mutable structures otherwise. Only in here is ``call`` the current LLM call
    (a model call a wrapper or hook makes is a call of its own, not this one), and the
    observer hears of the request actually sent when it is not the original."""

    def terminal(p: Any) -> Any:
        if p is not original and obs is not None:
            obs.request_rewritten(call, p)
        token = _current_llm_call.set(call)
        try:
            return execute(request if p is original else _base_payload(p, request))
        finally:
            reset_current_llm_call(token)

    return terminal


def allm_terminal_for(execute: Callable[[Any], Any], request: Any, original: Any,
                      call: c.CallInfo, obs: PipelineObserver | None) -> Callable[[Any], Any]:
    """Async twin of ``llm_terminal_for``: the await of the base call is inside."""

    async def terminal(p: Any) -> Any:
        if p is not original and obs is not None:
            obs.request_rewritten(call, p)
        token = _current_llm_call.set(call)
        try:
            r = execute(request if p is original else _base_payload(p, request))
            return (await r) if isawaitable(r) else r
        finally:
            reset_current_llm_call(token)

    return terminal


def set_current_llm_call(call: c.CallInfo | None) -> contextvars.Token[c.CallInfo | None]:
    """Make ``call`` (or no call) the current LLM call; undo with ``reset_current_llm_call``.
    Host adapters use it to keep their own middleware outside the request."""
    return _current_llm_call.set(call)


def reset_current_llm_call(token: contextvars.Token[c.CallInfo | None]) -> None:
    try:
        _current_llm_call.reset(token)
    except ValueError:  # token from another context: leave the var as it is there
        pass


def isawaitable(value: Any) -> bool:
    # Looked up on the type, as ``await`` does: an object whose attribute
    # lookups raise is not mistaken for an error of the call.
    return hasattr(type(value), "__await__")


def discard_awaitable(value: Any) -> None:
    """Close an awaitable that cannot be awaited here (a coroutine returned into a
    synchronous call), whatever its ``close`` attribute or call does."""
    try:
        close = getattr(value, "close", None)
        if close is not None:
            close()
    except Exception:
        pass


def _base_payload(p: Any, request: Any) -> Any:
    """A rewritten payload as the base call gets it: plain mutable structures."""
    if isinstance(p, FrozenDict) or (isinstance(p, dict) and p is not request):
        return thaw(p)
    return p


def timed_terminal_for(execute: Callable[[Any], Any], request: Any, original: Any,
                       elapsed: list[float]) -> Callable[[Any], Any]:
    """A tool call's base call (as ``llm_terminal_for``) that adds its own duration
    to ``elapsed[0]`` (a tool's ``execution_time_ms`` excludes middleware around it)."""

    def terminal(p: Any) -> Any:
        p = request if p is original else _base_payload(p, request)
        t0 = perf_counter()
        try:
            return execute(p)
        finally:
            elapsed[0] += perf_counter() - t0

    return terminal


def atimed_terminal_for(execute: Callable[[Any], Any], request: Any, original: Any,
                        elapsed: list[float]) -> Callable[[Any], Any]:
    """Async twin of ``timed_terminal_for``: ``execute`` may return an awaitable,
    whose await is part of the base call's duration."""

    async def terminal(p: Any) -> Any:
        p = request if p is original else _base_payload(p, request)
        t0 = perf_counter()
        try:
            r = execute(p)
            return (await r) if isawaitable(r) else r
        finally:
            elapsed[0] += perf_counter() - t0

    return terminal

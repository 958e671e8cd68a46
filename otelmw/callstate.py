"""Per-context call state shared by the LLM and tool pipelines."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from time import perf_counter
from typing import Any

from . import contract as c
from .payloads import FrozenDict, thaw

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


def current_llm_call() -> c.CallInfo | None:
    """The pipeline LLM call running in this context, if any."""
    return _current_llm_call.get()


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


def terminal_for(execute: Callable[[Any], Any], request: Any, original: Any
                 ) -> Callable[[Any], Any]:
    """The base call at the end of the execution chain: the host gets its own
    object back when nothing was rewritten (or a wrapper restored the original),
    plain mutable structures otherwise."""

    def terminal(p: Any) -> Any:
        return execute(request if p is original else _base_payload(p, request))

    return terminal


def timed_terminal_for(execute: Callable[[Any], Any], request: Any, original: Any,
                       elapsed: list[float]) -> Callable[[Any], Any]:
    """``terminal_for`` that adds the base call's own duration to ``elapsed[0]``
    (a tool's ``execution_time_ms`` excludes middleware around it)."""

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

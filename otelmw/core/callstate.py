"""Call state shared by the LLM and tool pipelines: the link from a turn's tool calls to
its model call, the base calls at the end of the execution chains."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from time import perf_counter
from typing import TYPE_CHECKING, Any, NamedTuple

from . import contract as c

# The call context's accessors, where the host adapters have always found them.
from .contract import current_llm_call as current_llm_call
from .contract import reset_current_llm_call as reset_current_llm_call
from .contract import set_current_llm_call as set_current_llm_call
from .payloads import FrozenDict, thaw, thaw_rewrite
from .steps import Steps

if TYPE_CHECKING:
    from .seam import PipelineObserver


def link_model_call(context: c.RuntimeContext, api_request_id: str | None) -> None:
    """``api_request_id`` is now the latest model call of ``context``'s turn: the tool
    calls the turn makes next belong to it (``ModelCallLink``)."""
    link = context.model_call
    if link is not None:
        link.api_request_id = api_request_id


def linked_api_request_id(context: c.RuntimeContext) -> str | None:
    """The api_request_id of the latest model call of ``context``'s turn, if any."""
    link = context.model_call
    return link.api_request_id if link is not None else None


def llm_base_steps(execute: Callable[[Any], Any], request: Any, original: Any,
                   call: c.CallInfo, obs: PipelineObserver | None, awaits: bool,
                   p: Any) -> Steps[Any]:
    """The base call at the end of an LLM call's execution chain, on payload ``p``. The
    host gets its own object back when nothing was rewritten (or a wrapper restored
    the original), plain mutable structures otherwise. Only in here is ``call`` the
    current LLM call (a model call a wrapper or hook makes is a call of its own, not
    this one), and the observer hears of the request actually sent when it is not the
    original. In an asynchronous call (``awaits``) ``execute`` may return an
    awaitable, awaited in here."""
    if p is not original:
        call.request_sent(p)
        if obs is not None:
            obs.request_rewritten(call, p)
    token = set_current_llm_call(call)
    try:
        r = execute(request if p is original else _base_payload(p, request, original))
        if awaits and isawaitable(r):
            r = yield r
        return r
    finally:
        reset_current_llm_call(token)


def finished_steps(obs: PipelineObserver | None, call: c.CallInfo,
                   steps: Steps[Any]) -> Steps[Any]:
    """Run a call's ``steps``; the observer hears how the call left the pipeline and
    hands back the result (it may wrap a stream)."""
    try:
        result = yield from steps
    except BaseException as exc:
        if obs is not None:
            obs.call_finished(call, None, exc)
        raise
    return obs.call_finished(call, result, None) if obs is not None else result


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


def _base_payload(p: Any, request: Any, original: Any) -> Any:
    """A rewritten payload as the base call gets it: plain mutable structures, where
    what the rewrite kept of the ``original`` (``freeze(request)``) is the host's own."""
    if isinstance(p, FrozenDict):
        return thaw_rewrite(p, original, request)
    if isinstance(p, dict) and p is not request:
        return thaw(p)
    return p


class ToolInFlight(NamedTuple):
    """The pipeline tool call whose base call (the tool itself) runs in this context,
    and the observer that hears of it."""

    call: c.CallInfo
    observer: PipelineObserver | None


_tool_in_flight: contextvars.ContextVar[ToolInFlight | None] = contextvars.ContextVar(
    "otelmw_tool_in_flight", default=None)


def tool_in_flight() -> ToolInFlight | None:
    """The pipeline tool call whose tool runs in this context, if any: a nested tool
    protocol (an MCP client inside the tool) enriches it instead of opening its own."""
    return _tool_in_flight.get()


def tool_base_steps(execute: Callable[[Any], Any], request: Any, original: Any,
                    elapsed: list[float], in_flight: ToolInFlight, awaits: bool,
                    p: Any) -> Steps[Any]:
    """A tool call's base call (as ``llm_base_steps``) that adds its own duration to
    ``elapsed[0]`` (a tool's ``execution_time_ms`` excludes middleware around it); in
    an asynchronous call the await of what ``execute`` returns is part of it. Only in
    here is the call the tool call in flight (``tool_in_flight``), and the observer hears
    of the arguments the tool actually gets when they are not the original ones."""
    if p is original:
        p = request
    else:
        p = _base_payload(p, request, original)
        if in_flight.observer is not None:
            in_flight.observer.request_rewritten(in_flight.call, p)
    token = _tool_in_flight.set(in_flight)
    t0 = perf_counter()
    try:
        r = execute(p)
        if awaits and isawaitable(r):
            r = yield r
        return r
    finally:
        elapsed[0] += perf_counter() - t0
        try:
            _tool_in_flight.reset(token)
        except ValueError:  # reset from another context: leave it there
            pass

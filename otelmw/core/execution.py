"""The nested execution chain (``llm_execution``/``tool_execution``), sync and async twins.

Rules (from the plugin-middleware contract, tightened):

* Execution callbacks nest in registration order (first is outermost) and get a
  single-use ``next_call``. Raising before ``next_call`` skips the layer;
  raising after it returned keeps the downstream result; a downstream failure
  propagates as the original exception object; not calling it short-circuits.
* Every failure is fail-open, counted and warned once (``FailureLog``).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

from . import seam as o
from .callstate import discard_awaitable
from .contract import CallInfo
from .failures import (
    MIDDLEWARE,
    AsyncMiddlewareInSyncCallError,
    FailureLog,
    describe,
    record_middleware_failure,
)
from .registry import Layer
from .seam import PipelineObserver


class NextCallReusedError(RuntimeError):
    __module__ = "otelmw.chain"  # its exported error.type; see STABLE_MODULES in otelmw
    """Raised inside a middleware that calls ``next_call`` a second time."""


# Per-frame state of next_call: 0 not called, 1 running, 2 returned, 3 raised.
_NOT_CALLED, _RUNNING, _RETURNED, _RAISED = 0, 1, 2, 3


class _Frame:
    """State of one layer's ``next_call`` (and of the base call). Made per layer
    per call without an ``__init__``: ``state`` is set by whoever makes one;
    ``result``/``error``/``pending`` only with the state that says they are."""

    __slots__ = ("error", "pending", "result", "state")
    state: int
    result: Any
    error: BaseException | None
    pending: Any  # async: the coroutine next_call handed out


def _reused(layer: Layer) -> NextCallReusedError:
    return NextCallReusedError(
        f"middleware {layer.name!r} called next_call() more than once; "
        "execution middleware may call it at most once")


def _on_raise(state: int, layer: Layer, exc: BaseException, failures: FailureLog,
              kw: dict[str, Any]) -> str:
    """Classify an exception raised by an execution callback. Returns the outcome."""
    if state in (_RAISED, _RUNNING):
        return o.ERROR
    if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit: never swallowed
        return o.ERROR
    if state == _RETURNED:
        record_middleware_failure(
            failures, layer, "after", exc, "execution middleware raised after next_call")
        return o.FAILED_AFTER_NEXT
    if isinstance(exc, RecursionError):  # the stack ran out: unwind to run_execution
        return o.ERROR
    record_middleware_failure(
        failures, layer, "before", exc, "execution middleware raised before next_call", kw)
    return o.FAILED_BEFORE_NEXT


# Stack use. Each layer costs two Python frames (the callback and the
# ``next_call`` that runs the layers below it, skipped ones in a loop). Chains
# longer than this are checked against the room left on the stack first.
_FRAMES_PER_LAYER = 2
_UNCHECKED_LAYERS = 32
# Frames kept free under the innermost layer: its span, the base call and
# whatever the host's tool or provider call needs.
_STACK_RESERVE = 150
CHAIN = "execution chain"  # the failure name of the chain as a whole


def _stack_depth() -> int:
    depth, frame = 0, sys._getframe(1)
    while frame is not None:
        depth, frame = depth + 1, frame.f_back  # type: ignore[assignment]
    return depth


def _layers_that_fit(layers: tuple[Layer, ...], failures: FailureLog) -> int:
    """How many layers run: all, unless the chain is longer than the stack has
    room for here; then the innermost ones are skipped (counted, warned once)."""
    n = len(layers)
    if n <= _UNCHECKED_LAYERS:
        return n
    room = (sys.getrecursionlimit() - _stack_depth() - _STACK_RESERVE) // _FRAMES_PER_LAYER
    if room >= n:
        return n
    fit = max(room, 0)
    failures.record(
        MIDDLEWARE, layers[0].kind, CHAIN,
        f"execution chain of {n} layers is deeper than the stack allows here; the "
        f"innermost {n - fit} were skipped and the base call ran below layer {fit}",
        signature=("stack", n, fit))
    return fit


def _out_of_stack(layers: tuple[Layer, ...], base: _Frame, exc: RecursionError,
                  failures: FailureLog) -> bool:
    """A RecursionError unwound the whole chain: whether to fail open (run the base
    call once, or keep its result) rather than hand the error to the host — the
    base call's own RecursionError is the host's."""
    if base.state == _RUNNING or base.state == _RAISED:
        return False
    failures.record(
        MIDDLEWARE, layers[0].kind, CHAIN,
        "the stack ran out inside the execution chain; "
        + ("the base call's result was kept" if base.state == _RETURNED
           else "the base call ran without the chain") + f": {describe(exc)}",
        exc, signature=("recursion", base.state))
    return True


def run_execution(layers: tuple[Layer, ...], call: CallInfo, key: str, payload: Any,
                  base_kw: dict[str, Any], terminal: Callable[[Any], Any],
                  obs: PipelineObserver | None, failures: FailureLog) -> Any:
    """Run ``terminal(payload)`` inside the nested execution chain."""
    n = len(layers)
    limit = n if n <= _UNCHECKED_LAYERS else _layers_that_fit(layers, failures)
    # One shared dict per call: ``callback(**kw)`` hands the callee its own copy
    # at call time, so inner layers rebinding these keys is harmless.
    kw = base_kw
    base, entry = _Frame(), _Frame()  # the base call's state (for the out-of-stack
    base.state = entry.state = _NOT_CALLED  # fallback) and the chain's entry's

    # ``run(i, p, frame)`` runs the layers below layer ``i`` (skipped ones in a
    # loop) on input ``p``; layer ``i``'s ``next_call`` is ``partial(run, ...)``
    # with its ``frame``, so each layer costs two Python frames (its callback and
    # ``run``; a partial is C). ``run`` gets itself as ``lk`` instead of through
    # its own closure cell: a self-referencing closure would make every call's
    # kwargs, payloads and closures cyclic garbage.
    def run(lk: Any, i: int, p: Any, frame: _Frame, next_payload: Any = None) -> Any:
        if frame.state != _NOT_CALLED:
            raise _reused(layers[i])
        frame.state = _RUNNING
        q = p if next_payload is None else next_payload
        j = i + 1
        try:
            while True:
                if j >= limit:
                    base.state = _RUNNING
                    r = terminal(q)
                    base.state, base.result = _RETURNED, r
                    break
                layer = layers[j]
                inner = _Frame()
                inner.state = _NOT_CALLED
                kw[key] = q
                kw["next_call"] = partial(lk, lk, j, q, inner)
                token = obs.wrapper_started(call, layer, j, q) if obs is not None else None
                try:
                    ret = layer.callback(**kw)
                    if (inner.state == _NOT_CALLED and ret is not None
                            and inspect.isawaitable(ret)):
                        discard_awaitable(ret)
                        raise AsyncMiddlewareInSyncCallError(
                            "async execution middleware cannot run in a synchronous call")
                except BaseException as exc:
                    outcome = _on_raise(inner.state, layer, exc, failures, kw)
                    if obs is not None:
                        obs.wrapper_finished(call, token, outcome, exc)
                    if outcome == o.ERROR and not (isinstance(exc, NextCallReusedError)
                                                   and inner.state == _RAISED):
                        raise
                else:
                    if obs is not None:
                        obs.wrapper_finished(call, token, o.PASSED if inner.state
                                             != _NOT_CALLED else o.SHORT_CIRCUIT, None, ret)
                    r = ret
                    break
                # Handled outside the except block so a re-raised or downstream
                # exception does not carry this one as its __context__.
                if outcome == o.ERROR:
                    raise inner.error  # type: ignore[misc]  # downstream, not the reuse
                if outcome == o.FAILED_AFTER_NEXT:
                    r = inner.result
                    break
                j += 1  # FAILED_BEFORE_NEXT: skip layer j, same payload
        except BaseException as e:
            frame.state, frame.error = _RAISED, e
            raise
        frame.state, frame.result = _RETURNED, r
        return r

    try:
        return run(run, -1, payload, entry)
    except RecursionError as exc:
        if not _out_of_stack(layers, base, exc, failures):
            raise
        # Unwound: room again for the one base call (or its result, kept).
        return base.result if base.state == _RETURNED else terminal(payload)
    finally:
        # The last ``next_call`` set here is the only way back from ``kw`` to
        # the chain: dropping it leaves nothing cyclic. A ``next_call`` a
        # middleware kept still works (it holds what it needs).
        kw.pop("next_call", None)


async def arun_execution(layers: tuple[Layer, ...], call: CallInfo, key: str, payload: Any,
                         base_kw: dict[str, Any], terminal: Callable[[Any], Any],
                         obs: PipelineObserver | None, failures: FailureLog) -> Any:
    """Async twin: callbacks may be sync or ``async def``; ``next_call`` returns an
    awaitable (a sync callback may simply return it)."""
    n = len(layers)
    limit = n if n <= _UNCHECKED_LAYERS else _layers_that_fit(layers, failures)
    kw = base_kw  # shared, as in run_execution
    base, entry = _Frame(), _Frame()
    base.state = entry.state = _NOT_CALLED

    # As in run_execution: ``arun`` runs the layers below layer ``i`` in a loop;
    # layer i's ``next_call`` (``partial(hand_out, ...)``) hands out ``arun(...)``
    # as the awaitable, so each layer costs two coroutine frames.
    async def arun(lk: Any, i: int, q: Any, frame: _Frame) -> Any:
        j = i + 1
        try:
            while True:
                if j >= limit:
                    base.state = _RUNNING
                    r = terminal(q)
                    if inspect.isawaitable(r):
                        r = await r
                    base.state, base.result = _RETURNED, r
                    break
                layer = layers[j]
                inner = _Frame()
                inner.state = _NOT_CALLED
                kw[key] = q
                kw["next_call"] = partial(hand_out, lk, j, q, inner)
                failed: BaseException | None = None
                token = obs.wrapper_started(call, layer, j, q) if obs is not None else None
                try:
                    result = layer.callback(**kw)
                    if inspect.isawaitable(result):
                        result = await result
                    if (result is not None and inner.state != _NOT_CALLED
                            and result is inner.pending):
                        result = await result  # `return next_call(...)` from an async def
                except BaseException as exc:
                    if inner.state == _RUNNING and inspect.getcoroutinestate(
                            inner.pending) == inspect.CORO_CREATED:
                        inner.pending.close()  # handed out, never awaited: never ran
                        inner.state = _NOT_CALLED
                    outcome = _on_raise(inner.state, layer, exc, failures, kw)
                    if obs is not None:
                        obs.wrapper_finished(call, token, outcome, exc)
                    if outcome == o.ERROR:
                        if not (isinstance(exc, NextCallReusedError)
                                and inner.state == _RAISED):
                            raise
                        failed = inner.error  # re-raised below, outside this handler
                else:
                    outcome = ""
                if failed is not None:
                    raise failed
                if outcome == o.FAILED_AFTER_NEXT:
                    r = inner.result
                    break
                if outcome == o.FAILED_BEFORE_NEXT:
                    j += 1  # skip layer j, same payload
                    continue
                if inner.state == _RUNNING and inspect.getcoroutinestate(
                        inner.pending) == inspect.CORO_CREATED:
                    inner.pending.close()  # discarded without awaiting: short-circuit
                    inner.state = _NOT_CALLED
                if obs is not None:
                    obs.wrapper_finished(call, token, o.SHORT_CIRCUIT if inner.state
                                         == _NOT_CALLED else o.PASSED, None, result)
                r = result
                break
        except BaseException as e:
            frame.state, frame.error = _RAISED, e
            raise
        frame.state, frame.result = _RETURNED, r
        return r

    def hand_out(lk: Any, i: int, p: Any, frame: _Frame, next_payload: Any = None) -> Any:
        """Layer i's ``next_call``: single use, returns the awaitable."""
        if frame.state != _NOT_CALLED:
            raise _reused(layers[i])
        frame.state = _RUNNING
        frame.pending = lk(lk, i, p if next_payload is None else next_payload, frame)
        return frame.pending

    try:
        return await arun(arun, -1, payload, entry)
    except RecursionError as exc:
        if not _out_of_stack(layers, base, exc, failures):
            raise
        if base.state == _RETURNED:
            return base.result
        r = terminal(payload)
        return (await r) if inspect.isawaitable(r) else r
    finally:
        kw.pop("next_call", None)  # as in run_execution: nothing left cyclic

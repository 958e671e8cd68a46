"""The nested execution chain (``llm_execution``/``tool_execution``), one definition for
sync and async calls (``steps.py``).

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
    exported_from,
    record_middleware_failure,
)
from .registry import Layer
from .seam import PipelineObserver
from .steps import Steps, adrive, drive


@exported_from("otelmw.chain")
class NextCallReusedError(RuntimeError):
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


# Stack use. Each layer costs two Python frames (the callback and the driver of
# the ``next_call`` that runs the layers below it, skipped ones in a loop). Chains
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


class _Chain:
    """One run of an execution chain: what its levels share. A level runs the
    layers below one layer (``_level``); layer ``j``'s ``next_call`` runs level
    ``j``, driven by ``drive`` in a synchronous call and handed out as an awaitable
    (``adrive``) in an asynchronous one. Each level has a driver of its own."""

    __slots__ = ("awaits", "base", "call", "failures", "key", "kw", "layers", "limit",
                 "obs", "terminal")

    def __init__(self, layers: tuple[Layer, ...], limit: int, call: CallInfo, key: str,
                 kw: dict[str, Any], terminal: Callable[[Any], Any],
                 obs: PipelineObserver | None, failures: FailureLog, awaits: bool) -> None:
        self.layers, self.limit, self.call, self.key, self.kw = layers, limit, call, key, kw
        self.terminal, self.obs, self.failures, self.awaits = terminal, obs, failures, awaits
        self.base = _Frame()  # the base call's state (for the out-of-stack fallback)
        self.base.state = _NOT_CALLED


def _claim(chain: _Chain, i: int, frame: _Frame) -> None:
    """Layer ``i``'s ``next_call`` is single use."""
    if frame.state != _NOT_CALLED:
        raise _reused(chain.layers[i])
    frame.state = _RUNNING


def _hand_out(chain: _Chain, i: int, p: Any, frame: _Frame, next_payload: Any = None) -> Any:
    """Layer ``i``'s ``next_call`` in an asynchronous call: the awaitable of level ``i``."""
    _claim(chain, i, frame)
    frame.pending = adrive(_level, chain, i, p if next_payload is None else next_payload,
                           frame, _CLAIMED)
    return frame.pending


_CLAIMED: Any = object()  # ``_level``'s ``next_payload`` when its next_call was claimed


def _never_awaited(frame: _Frame) -> bool:
    """An asynchronous ``next_call`` was called but its awaitable was dropped unstarted:
    closed, the layer below never ran (as if ``next_call`` was never called)."""
    if frame.state == _RUNNING and inspect.getcoroutinestate(
            frame.pending) == inspect.CORO_CREATED:
        frame.pending.close()
        frame.state = _NOT_CALLED
        return True
    return False


def _level(chain: _Chain, i: int, q: Any, frame: _Frame,
           next_payload: Any = None) -> Steps[Any]:
    """Run the layers below layer ``i`` on ``q`` (skipped ones in a loop); ``frame``
    records how it ended. Each layer's callback is yielded to the driver: while it
    runs, this generator is suspended, not on the stack. ``next_payload``: what a
    synchronous ``next_call`` was called with (this level claims it first), or
    ``_CLAIMED``."""
    if next_payload is not _CLAIMED:
        _claim(chain, i, frame)
        if next_payload is not None:
            q = next_payload
    layers, kw, key, obs, call = chain.layers, chain.kw, chain.key, chain.obs, chain.call
    failures, awaits, limit = chain.failures, chain.awaits, chain.limit
    j = i + 1
    try:
        while True:
            if j >= limit:
                base = chain.base
                base.state = _RUNNING
                r = chain.terminal(q)
                if awaits and inspect.isawaitable(r):
                    r = yield r
                base.state, base.result = _RETURNED, r
                break
            layer = layers[j]
            inner = _Frame()
            inner.state = _NOT_CALLED
            kw[key] = q
            # Synchronous: ``drive`` runs level j at once (it claims ``next_call`` first).
            kw["next_call"] = (partial(_hand_out, chain, j, q, inner) if awaits
                               else partial(drive, _level, chain, j, q, inner))
            failed: BaseException | None = None
            token = obs.wrapper_started(call, layer, j, q) if obs is not None else None
            try:
                ret = yield (layer.callback, kw)
                if not awaits:
                    if (inner.state == _NOT_CALLED and ret is not None
                            and inspect.isawaitable(ret)):
                        discard_awaitable(ret)
                        raise AsyncMiddlewareInSyncCallError(
                            "async execution middleware cannot run in a synchronous call")
                else:
                    if inspect.isawaitable(ret):
                        ret = yield ret
                    if (ret is not None and inner.state != _NOT_CALLED
                            and ret is inner.pending):
                        ret = yield ret  # `return next_call(...)` from an async def
            except BaseException as exc:
                if awaits:
                    _never_awaited(inner)
                outcome = _on_raise(inner.state, layer, exc, failures, kw)
                if obs is not None:
                    obs.wrapper_finished(call, token, outcome, exc)
                if outcome == o.ERROR:
                    if not (isinstance(exc, NextCallReusedError) and inner.state == _RAISED):
                        raise
                    failed = inner.error  # downstream, not the reuse: re-raised below
            else:
                if awaits:
                    _never_awaited(inner)  # discarded without awaiting: short-circuit
                if obs is not None:
                    obs.wrapper_finished(call, token, o.PASSED if inner.state != _NOT_CALLED
                                         else o.SHORT_CIRCUIT, None, ret)
                r = ret
                break
            # Handled outside the except block so a re-raised or downstream
            # exception does not carry this one as its __context__.
            if failed is not None:
                raise failed
            if outcome == o.FAILED_AFTER_NEXT:
                r = inner.result
                break
            j += 1  # FAILED_BEFORE_NEXT: skip layer j, same payload
    except BaseException as e:
        frame.state, frame.error = _RAISED, e
        raise
    frame.state, frame.result = _RETURNED, r
    return r


def execution_steps(layers: tuple[Layer, ...], call: CallInfo, key: str, payload: Any,
                    chain_kw: dict[str, Any], terminal: Callable[[Any], Any],
                    obs: PipelineObserver | None, failures: FailureLog,
                    awaits: bool) -> Steps[Any]:
    """Run ``terminal(payload)`` inside the nested execution chain. ``chain_kw``: the
    chain's own kwargs, built for it by the caller; the chain sets ``key`` and
    ``next_call`` in it per layer (``callback(**kw)`` hands each callee its own copy
    at call time, so inner layers rebinding keys is harmless). In an
    asynchronous call (``awaits``) callbacks may be ``async def`` and ``next_call``
    returns an awaitable (a sync callback may simply return it); ``terminal`` may
    return an awaitable."""
    n = len(layers)
    limit = n if n <= _UNCHECKED_LAYERS else _layers_that_fit(layers, failures)
    chain = _Chain(layers, limit, call, key, chain_kw, terminal, obs, failures, awaits)
    entry = _Frame()
    entry.state = _NOT_CALLED
    try:
        # The levels are run by drivers of their own, never delegated to by ``yield
        # from``: an exception a callback raises is thrown into its level as it is (a
        # delegating generator would close the level instead of throwing a
        # ``GeneratorExit`` in, and the level would see a new one).
        if awaits:
            return (yield adrive(_level, chain, -1, payload, entry, _CLAIMED))
        return drive(_level, chain, -1, payload, entry, _CLAIMED)
    except RecursionError as exc:
        base = chain.base
        if not _out_of_stack(layers, base, exc, failures):
            raise
        # Unwound: room again for the one base call (or its result, kept).
        if base.state == _RETURNED:
            return base.result
        r = terminal(payload)
        if awaits and inspect.isawaitable(r):
            r = yield r
        return r
    finally:
        # The last ``next_call`` set here is the only way back from ``kw`` to
        # the chain: dropping it leaves nothing cyclic. A ``next_call`` a
        # middleware kept still works (it holds what it needs).
        chain_kw.pop("next_call", None)

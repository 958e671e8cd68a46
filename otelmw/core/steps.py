"""A call's steps: the contract's stages — the request stage (``llm_request`` /
``tool_request``), the hook points, the execution chain (``llm_execution`` /
``tool_execution``) — and the base call at the chain's end, each written once as a
generator, and the step machine that runs them: a synchronous driver (``drive``) or an
asynchronous one (``adrive``). In code order: the step machine, the request stage,
the hook points, the execution chain, the base calls.

A step generator does its work itself and hands the driver only what differs
between a synchronous and an asynchronous call, by yielding it:

* an ``Invoke`` (``(callback, kwargs)``): call ``callback(**kwargs)`` and send back
  what it returned (or throw in what it raised). The execution chain yields its
  callbacks instead of calling them so that, while a callback runs, no generator
  frame is on the stack: each layer costs two frames (the callback and the driver
  of the layer below), as a hand-written chain's would.
* an awaitable: ``adrive`` awaits it and sends back its result (or throws in what it
  raised). Steps yield one only when ``awaits`` is true (they run under ``adrive``);
  in a synchronous call each await point says itself what an awaitable means there
  (refused, counted, or handed back as a value), so ``drive`` never sees one.

A step whose ``except`` clauses look at what was thrown in (the execution chain's
levels, the request stage) runs under a driver of its own rather than by ``yield
from`` (``own_driver``): delegation closes the innermost generator on a
``GeneratorExit`` instead of throwing the raised one in.

Everything between two await points — the contract's rules, the bookkeeping, the
observer calls — exists once; that the two drivers differ only where one awaits is
what ``drive`` and ``adrive`` are.
"""

from __future__ import annotations

import contextvars
import difflib
import inspect
import sys
from collections.abc import Callable, Generator
from functools import partial
from time import perf_counter
from typing import Any, NamedTuple, TypeVar

from . import contract as c
from . import seam as o
from .contract import (
    ORIGINAL_KEY,
    PAYLOAD_KEY,
    CallInfo,
    make_trace_entry,
    reset_current_llm_call,
    set_current_llm_call,
)
from .failures import (
    HOOK,
    MIDDLEWARE,
    AsyncMiddlewareInSyncCallError,
    FailureLog,
    describe,
    exported_from,
    record_middleware_failure,
    safe_str,
    signature_mismatch_hint,
)
from .payloads import FrozenDict, changed_keys, freeze, thaw, thaw_rewrite
from .registry import Layer
from .seam import PipelineObserver

T = TypeVar("T")

# What a step generator yields (an ``Invoke`` or, under ``adrive``, an awaitable),
# what it is sent back, and what it returns.
Steps = Generator[Any, Any, T]
Invoke = tuple[Callable[..., Any], dict[str, Any]]


def drive(steps: Callable[..., Steps[T]], *args: Any) -> T:
    """Run ``steps(*args)`` in a synchronous call: perform each ``Invoke`` it yields."""
    gen = steps(*args)
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            effect = gen.send(value) if error is None else gen.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        error = None
        try:
            value = effect[0](**effect[1])
        except BaseException as exc:  # thrown in at the yield, outside this handler
            value, error = None, exc


async def adrive(steps: Callable[..., Steps[T]], *args: Any) -> T:
    """Run ``steps(*args)`` in an asynchronous call: perform each ``Invoke`` it
    yields, await each awaitable."""
    gen = steps(*args)
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            effect = gen.send(value) if error is None else gen.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        error = None
        try:
            if type(effect) is tuple:
                value = effect[0](**effect[1])
            else:
                value = await effect
        except BaseException as exc:  # thrown in at the yield, outside this handler
            value, error = None, exc


def host_call_steps(execute: Callable[[Any], Any], payload: Any, awaits: bool) -> Steps[Any]:
    """``execute(payload)``, the host's own call; awaited in an asynchronous call when
    it returns an awaitable (in a synchronous one, whatever it returns is the result)."""
    r = execute(payload)
    if awaits and hasattr(type(r), "__await__"):  # looked up on the type, as ``await`` does
        r = yield r
    return r


def own_driver(awaits: bool, steps: Callable[..., Steps[T]], *args: Any) -> Steps[T]:
    """``yield from own_driver(awaits, steps, ...)``: ``steps`` with a driver of its own
    in an asynchronous call. For steps that catch what an await raises: ``yield from``
    delegation would close them instead of throwing a ``GeneratorExit`` in (they would
    see a new one, not the one raised). A synchronous call throws nothing in."""
    if awaits:
        return (yield adrive(steps, *args))  # type: ignore[no-any-return]
    return (yield from steps(*args))


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


# --------------------------------------------------------------------------------------
# The request stage
#
# The request-rewrite stage (``llm_request``/``tool_request``), one definition for sync
# and async calls (run by ``drive``/``adrive`` above).
#
# Rules (from the plugin-middleware contract, tightened):
#
# * Request callbacks run in registration order and see the effective payload so
#   far plus the untouched original, both as read-only views. ``{"request": ...}``
#   / ``{"args": ...}`` (+ optional ``source``/``reason``) replaces the payload and
#   adds a trace entry; ``None`` is no change; anything else is a failure.
# * Every failure is fail-open, counted and warned once (``FailureLog``).
# --------------------------------------------------------------------------------------

_TRACE_KEYS = frozenset({"source", "reason", "name"})
_NO_KEYS: list[str] = []  # changed keys of an unchanged rewrite (never mutated)


def _check_rewrite(kind: str, key: str, ret: Any) -> str | None:
    """None when ``ret`` is a valid complete replacement, else why it is not."""
    # ``dict``'s own methods, not the returned object's: a dict subclass's
    # overrides are middleware code that must not run (or raise) here.
    if not isinstance(ret, dict):
        return f"returned {type(ret).__name__}; expected None or {{{key!r}: {{...}}}}"
    if not dict.__contains__(ret, key):
        return f"returned a dict without {key!r} (partial patches are not accepted)"
    extra = [k for k in dict.keys(ret)
             if not (type(k) is str and (k == key or k in _TRACE_KEYS))]
    if extra:
        return f"returned unexpected keys {sorted(map(safe_str, extra))} (partial patch?)"
    value = dict.__getitem__(ret, key)
    if not isinstance(value, dict):
        return f"{key!r} must be a dict, got {type(value).__name__}"
    return None


def _trace_text(ret: dict[str, Any], key: str) -> str | None:
    value = dict.get(ret, key)
    return str.__str__(value) if isinstance(value, str) else None


class RewriteStep:
    """Bookkeeping of a request stage: what each callback's return or failure does
    to the payload, the trace and the observer (a stage whose callbacks all return
    ``None`` never builds one)."""

    __slots__ = ("call", "current", "failures", "key", "kind", "kw", "obs")

    def __init__(self, kind: str, key: str, call: CallInfo, current: Any,
                 kw: dict[str, Any], obs: PipelineObserver | None,
                 failures: FailureLog) -> None:
        self.kind, self.key, self.call, self.current, self.kw, self.obs, self.failures = (
            kind, key, call, current, kw, obs, failures)

    def finish(self, layer: Layer, token: Any, ret: Any, exc: BaseException | None) -> None:
        outcome, keys, source, reason = o.UNCHANGED, _NO_KEYS, None, None
        if exc is not None:
            outcome = o.FAILED
            record_middleware_failure(
                self.failures, layer, "raise", exc, "request middleware raised", self.kw)
        elif ret is not None:
            try:
                problem = _check_rewrite(self.kind, self.key, ret)
                if problem is None:
                    new = freeze(dict.__getitem__(ret, self.key))
                    source, reason = _trace_text(ret, "source"), _trace_text(ret, "reason")
            except Exception as e:  # a key whose __eq__/__hash__/__str__ raises
                problem = f"unusable return value: {describe(e)}"
            if problem is not None:
                outcome = o.FAILED
                record_middleware_failure(
                    self.failures, layer, "shape", None, f"bad return shape: {problem}")
            else:
                keys = changed_keys(self.current, new)
                self.current = self.kw[self.key] = new
                outcome = o.REWRITTEN
                self.call.middleware_trace.append(
                    make_trace_entry(self.kind, layer.name, layer.plugin, source, reason))
        if self.obs is not None:
            self.obs.rewrite_finished(self.call, token, outcome, keys, source, reason, exc,
                                      self.current)


def _interrupted(obs: PipelineObserver | None, call: CallInfo, token: Any,
                 exc: BaseException) -> None:
    """A request callback raised a BaseException (interrupt, exit, cancellation):
    not a middleware failure, it propagates; the layer's span still ends."""
    if obs is not None:
        obs.rewrite_finished(call, token, o.ERROR, _NO_KEYS, None, None, exc)


def rewrite_steps(kind: str, layers: tuple[Layer, ...], call: CallInfo, payload: Any,
                  original: Any, call_kw: dict[str, Any], obs: PipelineObserver | None,
                  failures: FailureLog, awaits: bool) -> Steps[Any]:
    """Apply request middleware; returns the effective (frozen) payload. ``call_kw``: the
    call's own kwargs (not changed here); the stage's kwargs are a dict of its own, with
    the payload keys (each callee gets a copy). In an asynchronous call (``awaits``) a
    callback may be ``async def``."""
    key = PAYLOAD_KEY[kind]
    kw = {**call_kw, ORIGINAL_KEY[key]: original, key: payload}
    step: RewriteStep | None = None
    for pos, layer in enumerate(layers):
        token = obs.rewrite_started(call, layer, pos, kw[key]) if obs is not None else None
        err: BaseException | None = None
        try:
            ret = layer.callback(**kw)
            if ret is not None and inspect.isawaitable(ret):
                if awaits:
                    ret = yield ret
                else:
                    discard_awaitable(ret)
                    raise AsyncMiddlewareInSyncCallError(
                        "async request middleware cannot run in a synchronous call")
        except Exception as exc:
            ret, err = None, exc
        except BaseException as exc:  # interrupt, exit, cancellation: propagate, end the span
            _interrupted(obs, call, token, exc)
            raise
        if ret is None and err is None:  # unchanged: only the observer needs to hear it
            if obs is not None:
                obs.rewrite_finished(call, token, o.UNCHANGED, _NO_KEYS, None, None, None)
            continue
        if step is None:
            step = RewriteStep(kind, key, call, payload, kw, obs, failures)
        step.finish(layer, token, ret, err)
    return payload if step is None else step.current


# --------------------------------------------------------------------------------------
# The hook points
#
# Observer hooks: read-only notifications with two sanctioned return values.
#
# Hooks are fail-open: a hook that raises, times out its own work or returns
# something unexpected never breaks the call. ``pre_tool_call`` may return a block
# directive and ``transform_tool_result`` a replacement string; the first valid
# one wins (as in Hermes); a directive whose action is a near miss of ``block``
# (``"Block"``, ``"blokc"``) and a non-string replacement are ignored, counted and
# warned once (the call goes on: fail-open). Sync calls close a coroutine returned by a hook (it
# cannot be awaited there) and count it as a failure.
# --------------------------------------------------------------------------------------

def _record(failures: FailureLog, layer: Layer, message: str, exc: BaseException | None,
            payload: dict[str, Any]) -> None:
    if exc is not None:
        hint = signature_mismatch_hint(exc, payload)
        message = f"{message}: {describe(exc)}" + (f" ({hint})" if hint else "")
    failures.record(HOOK, layer.kind, layer.name, message, exc)


_NO_RESULTS: list[Any] = []


def _emit(obs: PipelineObserver | None, layers: tuple[Layer, ...]) -> bool:
    """Whether the observer hears about this firing: ``hook_events`` is
    ``registered`` (default: hook points with callbacks), ``all`` or ``none``."""
    if obs is None:
        return False
    mode = obs.hook_events
    return mode == "all" or (mode == "registered" and bool(layers))


def all_hook_events(obs: PipelineObserver | None) -> bool:
    """Whether the observer wants every hook point, even those without callbacks.
    Payloads are built only when a hook point has callbacks or this is true."""
    return obs is not None and obs.hook_events == "all"


class _Firing:
    """One hook point's firing: the values kept and the callbacks that failed."""

    __slots__ = ("failed", "failures", "payload", "pick", "results")

    def __init__(self, failures: FailureLog, payload: dict[str, Any],
                 pick: Pick | None) -> None:
        self.failures, self.payload, self.pick = failures, payload, pick
        self.results: list[Any] = []
        self.failed = 0

    def failed_with(self, layer: Layer, message: str, exc: BaseException | None) -> None:
        self.failed += 1
        _record(self.failures, layer, message, exc, self.payload)

    def steps(self, layer: Layer, awaits: bool) -> Steps[None]:
        """Run one callback; in an asynchronous call (``awaits``) it may be ``async def``
        (in a synchronous one, ``take`` refuses an awaitable it returns)."""
        try:
            ret = layer.callback(**self.payload)
            if awaits and inspect.isawaitable(ret):
                ret = yield ret
        except Exception as exc:
            self.failed_with(layer, "hook raised", exc)
            return
        if ret is not None:
            self.take(layer, ret, not awaits)

    def take(self, layer: Layer, ret: Any, in_sync_call: bool) -> None:
        """What a callback returned (not None): kept if the hook point accepts it.
        Looked at inside a guard: an object whose attribute lookups, ``__class__``,
        ``close()`` or ``__eq__`` raise."""
        try:
            if in_sync_call and inspect.isawaitable(ret):
                discard_awaitable(ret)
                self.failed_with(layer, "hook returned an awaitable in a synchronous call; "
                                 "it was not run", None)
                return
            if self.pick is not None:
                ret = self.pick(ret)
        except Exception as exc:
            self.failed_with(layer, "hook returned an unusable value", exc)
            return
        if ret is not None:
            self.results.append(ret)

    def done(self, obs: PipelineObserver | None, call: CallInfo, hook_name: str,
             layers: tuple[Layer, ...]) -> list[Any]:
        if _emit(obs, layers):
            obs.hook_fired(call, hook_name, self.payload, self.failed)  # type: ignore[union-attr]
        return self.results


def _no_callbacks(obs: PipelineObserver | None, call: CallInfo, hook_name: str,
                  payload: dict[str, Any]) -> list[Any]:
    """A hook point without callbacks: heard of only with hook events ``all``."""
    if _emit(obs, ()):
        obs.hook_fired(call, hook_name, payload, 0)  # type: ignore[union-attr]
    return _NO_RESULTS


def hook_steps(layers: tuple[Layer, ...], call: CallInfo, hook_name: str,
               payload: dict[str, Any], obs: PipelineObserver | None, failures: FailureLog,
               pick: Pick | None, awaits: bool) -> Steps[list[Any]]:
    """Call every hook for ``hook_name``; return their non-None results in order
    (``pick(result)`` of each, when given: what the hook point accepts, or None). In an
    asynchronous call (``awaits``) a callback may be ``async def``."""
    if not layers:
        return _no_callbacks(obs, call, hook_name, payload)
    firing = _Firing(failures, payload, pick)
    for layer in layers:
        yield from firing.steps(layer, awaits)
    return firing.done(obs, call, hook_name, layers)


Pick = Callable[[Any], Any]
BLOCKED_BY_PLUGIN = "tool call blocked by a plugin"


def block_message(ret: Any) -> str | None:
    """``pick`` of ``pre_tool_call``: the message of a ``{"action": "block", ...}``
    directive (a plain ``str``), else None. Type checks and ``dict``'s own lookups
    only: a hostile ``__eq__`` or ``.get`` of the hook's value is never called."""
    if not isinstance(ret, dict):
        return None
    action = dict.get(ret, "action")
    if not isinstance(action, str):
        if action is None:
            return None
        raise TypeError(f"a directive's 'action' must be a str, got {type(action).__name__}")
    if not str.__eq__(action, "block"):
        if _looks_like_block(action):  # a guard with a typo: the tool runs, visibly
            raise ValueError(f"pre_tool_call returned {{'action': {str.__str__(action)[:40]!r}}}"
                             ", not a block directive (did you mean 'block'?); the tool ran")
        return None
    msg = dict.get(ret, "message")
    return str.__str__(msg) if isinstance(msg, str) and str.__len__(msg) else BLOCKED_BY_PLUGIN


def _looks_like_block(action: str) -> bool:
    word = str.__str__(action)[:40].strip().lower()
    return word == "block" or bool(difflib.get_close_matches(word, ["block"], n=1, cutoff=0.7))


def plain_string(ret: Any) -> str | None:
    """``pick`` of ``transform_tool_result``: a replacement string as a plain ``str``.
    Anything else is refused (counted, warned once): the result stays as it was."""
    if isinstance(ret, str):
        return str.__str__(ret)
    raise TypeError(f"transform_tool_result must return a str or None, got "
                    f"{type(ret).__name__}; the result was kept")


def first(results: list[Any]) -> Any:
    """The first valid result wins (as in Hermes)."""
    return results[0] if results else None


# --------------------------------------------------------------------------------------
# The execution chain
#
# The nested execution chain (``llm_execution``/``tool_execution``), one definition for
# sync and async calls (run by ``drive``/``adrive`` above).
#
# Rules (from the plugin-middleware contract, tightened):
#
# * Execution callbacks nest in registration order (first is outermost) and get a
#   single-use ``next_call``. Raising before ``next_call`` skips the layer;
#   raising after it returned keeps the downstream result; a downstream failure
#   propagates as the original exception object; not calling it short-circuits.
# * Every failure is fail-open, counted and warned once (``FailureLog``).
# --------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------
# The base calls
#
# The base calls at the end of the execution chains (the call state they set while
# the host's function runs).
# --------------------------------------------------------------------------------------

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

"""How a call runs: the LLM call, the tool call and the embeddings call, the contract's
stages they are made of — the request stage (``llm_request`` / ``tool_request``), the
hook points, the execution chain (``llm_execution`` / ``tool_execution``) and the base
call at its end — and the contract's rules each stage applies.

Written once, as asynchronous code: ``calls_sync.py`` is generated from this file by
``scripts/unasync.py``. What awaits (the stages and the calls: ``async def``) is
rewritten there as synchronous code (``async def`` becomes ``def``, each ``await``
goes, and a ``# sync:`` comment says what its next statement is in a synchronous call
instead: another one, or ``-`` for none); everything else — the rules: what a request
callback's return or failure does to the payload, the trace and the observer, what a
hook point keeps, the chain's bookkeeping, a tool call's arguments — is imported from
here. tests/test_core_unasync.py fails when the generated file is not what the script
makes; tests/test_core_steps.py makes the same scripted calls both ways and compares
what they export.

In code order: awaitables; the rules of the request stage, the hook points, the
execution chain, the base calls and a tool call's arguments; what a call needs of its
pipeline; then the stages as they run (the request stage, the hook points, the
execution chain, the base calls) and the LLM, tool and embeddings calls.
"""

from __future__ import annotations

import contextvars
import difflib
import inspect
import json
import sys
import time
from collections.abc import Callable, Collection
from functools import partial
from typing import Any, NamedTuple, NoReturn, Protocol

from .contract import (
    API_REQUEST_ERROR,
    LLM_EXECUTION,
    LLM_REQUEST,
    ORIGINAL_KEY,
    PAYLOAD_KEY,
    POST_API_REQUEST,
    POST_TOOL_CALL,
    PRE_API_REQUEST,
    PRE_TOOL_CALL,
    TOOL_EXECUTION,
    TOOL_REQUEST,
    TRANSFORM_TOOL_RESULT,
    CallInfo,
    current_llm_call,
    current_runtime_context,
    link_model_call,
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
from .registry import Layer, LayerRegistry
from .results import MemoryAdapter, NormalizedToolResult
from .seam import (
    ERROR,
    FAILED,
    FAILED_AFTER_NEXT,
    FAILED_BEFORE_NEXT,
    PASSED,
    REWRITTEN,
    SHORT_CIRCUIT,
    UNCHANGED,
    PipelineObserver,
)

# --------------------------------------------------------------------------------------
# Awaitables
# --------------------------------------------------------------------------------------

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


ASYNC_REQUEST_MIDDLEWARE = "async request middleware cannot run in a synchronous call"
ASYNC_EXECUTION_MIDDLEWARE = "async execution middleware cannot run in a synchronous call"


def refuse_awaitable(value: Any, message: str) -> NoReturn:
    """A middleware callback returned an awaitable into a synchronous call: it is
    closed unrun and the callback fails (``message``)."""
    discard_awaitable(value)
    raise AsyncMiddlewareInSyncCallError(message)


# --------------------------------------------------------------------------------------
# The request stage (``llm_request``/``tool_request``; run by ``request_stage``)
#
# Rules (from the plugin-middleware contract, tightened):
#
# * Request callbacks run in registration order and see the effective payload so
#   far plus the untouched original, both as read-only views. ``{"request": ...}``
#   / ``{"args": ...}`` (+ optional ``source``/``reason``) replaces the payload and
#   adds a trace entry; ``None`` is no change; anything else is a failure.
# * Every failure is fail-open, counted and warned once (``FailureLog``).
#
# The stages' kwargs: the request stage and then the execution chain extend one dict in
# turn with their own keys — the call's kwargs (``CallInfo.as_kwargs``) themselves when
# no hook payload is built from those, else a copy (a dict copy the less per call with
# layers: benchmark 2b). Each callee gets a copy at call time (``callback(**kw)``), so
# what a later stage adds changes nothing a callback got.
# --------------------------------------------------------------------------------------

_TRACE_KEYS = frozenset({"source", "reason", "name"})
NO_KEYS: list[str] = []  # changed keys of an unchanged rewrite (never mutated)


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
        outcome, keys, source, reason = UNCHANGED, NO_KEYS, None, None
        if exc is not None:
            outcome = FAILED
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
                outcome = FAILED
                record_middleware_failure(
                    self.failures, layer, "shape", None, f"bad return shape: {problem}")
            else:
                keys = changed_keys(self.current, new)
                self.current = self.kw[self.key] = new
                outcome = REWRITTEN
                self.call.middleware_trace.append(
                    make_trace_entry(self.kind, layer.name, layer.plugin, source, reason))
        if self.obs is not None:
            self.obs.rewrite_finished(self.call, token, outcome, keys, source, reason, exc,
                                      self.current)


def interrupted(obs: PipelineObserver | None, call: CallInfo, token: Any,
                 exc: BaseException) -> None:
    """A request callback raised a BaseException (interrupt, exit, cancellation):
    not a middleware failure, it propagates; the layer's span still ends."""
    if obs is not None:
        obs.rewrite_finished(call, token, ERROR, NO_KEYS, None, None, exc)


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


class Firing:
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


def no_callbacks(obs: PipelineObserver | None, call: CallInfo, hook_name: str,
                  payload: dict[str, Any]) -> list[Any]:
    """A hook point without callbacks: heard of only with hook events ``all``."""
    if _emit(obs, ()):
        obs.hook_fired(call, hook_name, payload, 0)  # type: ignore[union-attr]
    return _NO_RESULTS


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
# The nested execution chain (``llm_execution``/``tool_execution``; run by
# ``execution_chain``).
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
NOT_CALLED, RUNNING, RETURNED, RAISED = 0, 1, 2, 3


class Frame:
    """State of one layer's ``next_call`` (and of the base call). Made per layer
    per call without an ``__init__``: ``state`` is set by whoever makes one;
    ``result``/``error``/``pending`` only with the state that says they are."""

    __slots__ = ("error", "pending", "result", "state")
    state: int
    result: Any
    error: BaseException | None
    pending: Any  # async: the coroutine next_call handed out


def reused(layer: Layer) -> NextCallReusedError:
    return NextCallReusedError(
        f"middleware {layer.name!r} called next_call() more than once; "
        "execution middleware may call it at most once")


def on_raise(state: int, layer: Layer, exc: BaseException, failures: FailureLog,
              kw: dict[str, Any]) -> str:
    """Classify an exception raised by an execution callback. Returns the outcome."""
    if state in (RAISED, RUNNING):
        return ERROR
    if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit: never swallowed
        return ERROR
    if state == RETURNED:
        record_middleware_failure(
            failures, layer, "after", exc, "execution middleware raised after next_call")
        return FAILED_AFTER_NEXT
    if isinstance(exc, RecursionError):  # the stack ran out: unwind to run_execution
        return ERROR
    record_middleware_failure(
        failures, layer, "before", exc, "execution middleware raised before next_call", kw)
    return FAILED_BEFORE_NEXT


# Stack use. Each layer costs two Python frames (the callback and the level its
# ``next_call`` runs, the layers below it, skipped ones in a loop). Chains
# longer than this are checked against the room left on the stack first.
_FRAMES_PER_LAYER = 2
UNCHECKED_LAYERS = 32
# Frames kept free under the innermost layer: its span, the base call and
# whatever the host's tool or provider call needs.
_STACK_RESERVE = 150
CHAIN = "execution chain"  # the failure name of the chain as a whole


def _stack_depth() -> int:
    depth, frame = 0, sys._getframe(1)
    while frame is not None:
        depth, frame = depth + 1, frame.f_back  # type: ignore[assignment]
    return depth


def layers_that_fit(layers: tuple[Layer, ...], failures: FailureLog) -> int:
    """How many layers run: all, unless the chain is longer than the stack has
    room for here; then the innermost ones are skipped (counted, warned once)."""
    n = len(layers)
    if n <= UNCHECKED_LAYERS:
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


def out_of_stack(layers: tuple[Layer, ...], base: Frame, exc: RecursionError,
                  failures: FailureLog) -> bool:
    """A RecursionError unwound the whole chain: whether to fail open (run the base
    call once, or keep its result) rather than hand the error to the host — the
    base call's own RecursionError is the host's."""
    if base.state == RUNNING or base.state == RAISED:
        return False
    failures.record(
        MIDDLEWARE, layers[0].kind, CHAIN,
        "the stack ran out inside the execution chain; "
        + ("the base call's result was kept" if base.state == RETURNED
           else "the base call ran without the chain") + f": {describe(exc)}",
        exc, signature=("recursion", base.state))
    return True


class ExecutionChain:
    """One run of an execution chain: what its levels share (a level runs the layers
    below one layer: ``_level``)."""

    __slots__ = ("layers", "shared")

    def __init__(self, layers: tuple[Layer, ...], kw: dict[str, Any], key: str,
                 obs: PipelineObserver | None, call: CallInfo, failures: FailureLog,
                 limit: int, terminal: Callable[[Any], Any], base: Frame) -> None:
        self.layers = layers
        # Everything a level reads, unpacked by it in one step (a tuple's unpacking costs
        # less than nine attribute loads per layer: benchmark 2). ``_level`` unpacks it
        # into these names, in this order (tests/test_core_unasync.py checks both).
        self.shared = (layers, kw, key, obs, call, failures, limit, terminal, base)


def claim(chain: ExecutionChain, i: int, frame: Frame) -> None:
    """Layer ``i``'s ``next_call`` is single use."""
    if frame.state != NOT_CALLED:
        raise reused(chain.layers[i])
    frame.state = RUNNING


CLAIMED: Any = object()  # a level's ``next_payload`` when its next_call was claimed


def never_awaited(frame: Frame) -> bool:
    """An asynchronous ``next_call`` was called but its awaitable was dropped unstarted:
    closed, the layer below never ran (as if ``next_call`` was never called)."""
    if frame.state == RUNNING and inspect.getcoroutinestate(
            frame.pending) == inspect.CORO_CREATED:
        frame.pending.close()
        frame.state = NOT_CALLED
        return True
    return False


# --------------------------------------------------------------------------------------
# The base calls' payload, and the tool call in flight
#
# What the base call at the end of an execution chain gets, and the call state set
# while the host's function runs.
# --------------------------------------------------------------------------------------

def base_payload(p: Any, request: Any, original: Any) -> Any:
    """A rewritten payload as the base call gets it: plain mutable structures, where
    what the rewrite kept of the ``original`` (``freeze(request)``) is the host's own."""
    if isinstance(p, FrozenDict):
        return thaw_rewrite(p, original, request)
    if isinstance(p, dict) and p is not request:
        return thaw(p)
    return p


class ToolInFlight:
    """The pipeline tool call whose base call (the tool itself) runs in this context,
    and the observer that hears of it (made per tool call: slots, not a ``NamedTuple``,
    whose construction costs more)."""

    __slots__ = ("call", "observer")

    def __init__(self, call: CallInfo, observer: PipelineObserver | None) -> None:
        self.call, self.observer = call, observer


TOOL_IN_FLIGHT: contextvars.ContextVar[ToolInFlight | None] = contextvars.ContextVar(
    "otelmw_tool_in_flight", default=None)


def tool_in_flight() -> ToolInFlight | None:
    """The pipeline tool call whose tool runs in this context, if any: a nested tool
    protocol (an MCP client inside the tool) enriches it instead of opening its own."""
    return TOOL_IN_FLIGHT.get()


# --------------------------------------------------------------------------------------
# A tool call's arguments, and what its hook points need
# --------------------------------------------------------------------------------------

@exported_from("otelmw.tool_calls")
class ToolArgumentsError(ValueError):
    """Tool arguments that are not a JSON object (or malformed JSON)."""


def parse_arguments(args: Any) -> dict[str, Any]:
    """Coerce model-provided tool arguments to a dict (JSON strings included)."""
    # Identity and type checks only: a model's or host's value may compare
    # element-wise (a pandas object: ``args == ""`` is a Series, ``bool()`` raises).
    if isinstance(args, dict):
        return args
    if args is None:
        return {}
    if isinstance(args, bytes | bytearray):
        args = bytes(args).decode("utf-8", errors="replace")
    if isinstance(args, str):
        args = str.__str__(args)  # a plain str, whatever a subclass overrides
        if not args:
            return {}
        try:
            value = json.loads(args)
        except (ValueError, RecursionError) as exc:  # RecursionError: absurdly deep JSON
            raise ToolArgumentsError(f"tool arguments are not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ToolArgumentsError(
                f"tool arguments must be a JSON object, got {type(value).__name__}")
        return value
    try:
        return dict(args)
    except Exception:  # not a mapping, or one whose keys()/[] raise
        raise ToolArgumentsError(
            f"tool arguments must be a mapping or JSON object string, got {type(args).__name__}"
        ) from None


# Metadata mark on a result a ``pre_tool_call`` block directive produced, so memory
# adapters (which get only the NormalizedToolResult) can tell it apart.
BLOCKED_KEY = "otelmw.blocked"


def blocked_result(message: str) -> NormalizedToolResult:
    """A call stopped by a ``pre_tool_call`` block directive."""
    return NormalizedToolResult(content=message, success=False, error_message=message,
                                metadata={BLOCKED_KEY: True})


def hook_points_wanted(hk: dict[str, tuple[Layer, ...]], obs: PipelineObserver | None
                       ) -> tuple[bool, bool]:
    """Whether the ``pre_tool_call`` and the ``post_tool_call``/``transform_tool_result``
    payloads are built: the hook point has callbacks, or hook events are ``all``."""
    every = all_hook_events(obs)
    return (every or bool(hk[PRE_TOOL_CALL]),
            every or bool(hk[POST_TOOL_CALL] or hk[TRANSFORM_TOOL_RESULT]))


class RefusedArguments(NamedTuple):
    """A call whose arguments did not parse: the tool did not run."""

    model_result: Any
    normalized: NormalizedToolResult
    payload: dict[str, Any]  # of ``post_tool_call``


# --------------------------------------------------------------------------------------
# What a call needs of the pipeline that runs it (``pipeline.LLMCalls``/``ToolCalls``)
# --------------------------------------------------------------------------------------

class LLMCallPipeline(Protocol):
    registry: LayerRegistry
    failures: FailureLog
    observer: PipelineObserver | None

    def _api_payload(self, call: CallInfo, kw: dict[str, Any], effective: Any,
                     started: float) -> dict[str, Any]: ...

    def _error_payload(self, payload: dict[str, Any], exc: BaseException
                       ) -> dict[str, Any]: ...

    def _response_payload(self, payload: dict[str, Any], result: Any) -> dict[str, Any]: ...


class ToolCallPipeline(Protocol):
    registry: LayerRegistry
    failures: FailureLog
    observer: PipelineObserver | None
    memory_adapters: tuple[MemoryAdapter, ...]

    def _tool_prepare(self, call: CallInfo, args: Any) -> tuple[Any, Any, dict[str, Any]]: ...

    def _bad_arguments(self, call: CallInfo, args: Any, exc: ToolArgumentsError
                       ) -> RefusedArguments: ...

    def _pre_payload(self, call: CallInfo, kw: dict[str, Any], effective: Any
                     ) -> dict[str, Any]: ...

    def _outcome(self, call: CallInfo, raw: Any, error: BaseException | None,
                 seconds: float) -> tuple[NormalizedToolResult, str, BaseException | None]: ...

    def _finish_tool(self, call: CallInfo, normalized: NormalizedToolResult,
                     status: str) -> Any: ...

    def _post_payload(self, call: CallInfo, kw: dict[str, Any], effective: Any,
                      model_result: Any, normalized: NormalizedToolResult, status: str
                      ) -> dict[str, Any]: ...

    def _record_memory(self, call: CallInfo, normalized: NormalizedToolResult) -> None: ...


# --------------------------------------------------------------------------------------
# Running the request stage (its rules: ``RewriteStep``, above)
# --------------------------------------------------------------------------------------

async def request_stage(kind: str, layers: tuple[Layer, ...], call: CallInfo, payload: Any,
                        original: Any, kw: dict[str, Any], obs: PipelineObserver | None,
                        failures: FailureLog) -> Any:
    """Apply request middleware; returns the effective (frozen) payload. ``kw``: the
    stages' kwargs (see the rules above), which it extends with the payload keys. In an
    asynchronous call a callback may be ``async def``; in a synchronous one what it
    returns is refused."""
    key = PAYLOAD_KEY[kind]
    kw[ORIGINAL_KEY[key]] = original
    kw[key] = payload
    step: RewriteStep | None = None
    pos = -1  # (counted here: no enumerate object per call, benchmark 2b)
    for layer in layers:
        pos += 1
        token = obs.rewrite_started(call, layer, pos, kw[key]) if obs is not None else None
        err: BaseException | None = None
        try:
            ret = layer.callback(**kw)
            if ret is not None and inspect.isawaitable(ret):
                # sync: refuse_awaitable(ret, ASYNC_REQUEST_MIDDLEWARE)
                ret = await ret
        except Exception as exc:
            ret, err = None, exc
        except BaseException as exc:  # interrupt, exit, cancellation: propagate, end the span
            interrupted(obs, call, token, exc)
            raise
        if ret is None and err is None:  # unchanged: only the observer needs to hear it
            if obs is not None:
                obs.rewrite_finished(call, token, UNCHANGED, NO_KEYS, None, None, None)
            continue
        if step is None:
            step = RewriteStep(kind, key, call, payload, kw, obs, failures)
        step.finish(layer, token, ret, err)
    return payload if step is None else step.current


# --------------------------------------------------------------------------------------
# Firing a hook point (its rules: ``Firing``, above)
# --------------------------------------------------------------------------------------

async def hook_point(layers: tuple[Layer, ...], call: CallInfo, hook_name: str,
                     payload: dict[str, Any], obs: PipelineObserver | None,
                     failures: FailureLog, pick: Pick | None) -> list[Any]:
    """Call every hook for ``hook_name``; return their non-None results in order
    (``pick(result)`` of each, when given: what the hook point accepts, or None). In an
    asynchronous call a callback may be ``async def``; in a synchronous one ``take``
    refuses an awaitable it returns."""
    if not layers:
        return no_callbacks(obs, call, hook_name, payload)
    firing = Firing(failures, payload, pick)
    for layer in layers:
        try:
            ret = layer.callback(**payload)
            # sync: -
            if inspect.isawaitable(ret):
                ret = await ret
        except Exception as exc:
            firing.failed_with(layer, "hook raised", exc)
            continue
        if ret is not None:
            # sync: firing.take(layer, ret, True)
            firing.take(layer, ret, False)
    return firing.done(obs, call, hook_name, layers)


# --------------------------------------------------------------------------------------
# Running the execution chain (its rules and bookkeeping: ``ExecutionChain``, above)
#
# A level runs the layers below one layer (``_level``, skipped ones in a loop); layer
# ``j``'s ``next_call`` runs level ``j``: at once in a synchronous call (the level
# claims it), handed out as a coroutine in an asynchronous one (``_hand_out`` claims it
# when called, the level runs when awaited). Each layer costs two frames: its callback
# and the level below it.
# --------------------------------------------------------------------------------------

# sync: -
def _hand_out(chain: ExecutionChain, i: int, p: Any, frame: Frame,
              next_payload: Any = None) -> Any:
    """Layer ``i``'s ``next_call`` in an asynchronous call: the coroutine of level ``i``."""
    claim(chain, i, frame)
    frame.pending = _level(chain, i, p if next_payload is None else next_payload,
                           frame, CLAIMED)
    return frame.pending


async def _level(chain: ExecutionChain, i: int, q: Any, frame: Frame,
                 next_payload: Any = None) -> Any:
    """Run the layers below layer ``i`` on ``q``; ``frame`` records how it ended.
    ``next_payload``: what a synchronous ``next_call`` was called with (claimed here),
    or ``CLAIMED``."""
    if next_payload is not CLAIMED:  # ``claim``, inline: a frame less per layer
        if frame.state != NOT_CALLED:
            raise reused(chain.layers[i])
        frame.state = RUNNING
        if next_payload is not None:
            q = next_payload
    layers, kw, key, obs, call, failures, limit, terminal, base = chain.shared
    j = i + 1
    try:
        while True:
            if j >= limit:
                base.state = RUNNING
                r = await terminal(q)
                base.state, base.result = RETURNED, r
                break
            layer = layers[j]
            inner = Frame()
            inner.state = NOT_CALLED
            kw[key] = q
            # sync: kw["next_call"] = partial(_level, chain, j, q, inner)
            kw["next_call"] = partial(_hand_out, chain, j, q, inner)
            failed: BaseException | None = None
            token = obs.wrapper_started(call, layer, j, q) if obs is not None else None
            try:
                ret = layer.callback(**kw)
                # sync: if inner.state == NOT_CALLED and inspect.isawaitable(ret):
                if inspect.isawaitable(ret):
                    # sync: refuse_awaitable(ret, ASYNC_EXECUTION_MIDDLEWARE)
                    ret = await ret
                # sync: -
                if ret is not None and inner.state != NOT_CALLED and ret is inner.pending:
                    ret = await ret  # ``return next_call(...)`` from an async def
            except BaseException as exc:
                # sync: -
                never_awaited(inner)  # handed out, never awaited: the level never ran
                outcome = on_raise(inner.state, layer, exc, failures, kw)
                if obs is not None:
                    obs.wrapper_finished(call, token, outcome, exc)
                if outcome == ERROR:
                    if not (isinstance(exc, NextCallReusedError) and inner.state == RAISED):
                        raise
                    failed = inner.error  # downstream, not the reuse: re-raised below
            else:
                # sync: -
                never_awaited(inner)  # discarded without awaiting: a short-circuit
                if obs is not None:
                    obs.wrapper_finished(call, token, PASSED if inner.state != NOT_CALLED
                                         else SHORT_CIRCUIT, None, ret)
                r = ret
                break
            # Handled outside the except block so a re-raised or downstream
            # exception does not carry this one as its __context__.
            if failed is not None:
                raise failed
            if outcome == FAILED_AFTER_NEXT:
                r = inner.result
                break
            j += 1  # FAILED_BEFORE_NEXT: skip layer j, same payload
    except BaseException as e:
        frame.state, frame.error = RAISED, e
        raise
    frame.state, frame.result = RETURNED, r
    return r


async def execution_chain(layers: tuple[Layer, ...], call: CallInfo, key: str, payload: Any,
                          chain_kw: dict[str, Any], terminal: Callable[[Any], Any],
                          obs: PipelineObserver | None, failures: FailureLog) -> Any:
    """Run ``terminal(payload)`` (a base call of this module) inside the nested execution
    chain. ``chain_kw``: the stages' kwargs (the request stage's rules), with the original
    added by the caller; the chain sets ``key`` and ``next_call`` in them per layer
    (``callback(**kw)`` hands each callee its own copy at call time, so inner layers
    rebinding keys is harmless). In an
    asynchronous call callbacks may be ``async def`` and ``next_call`` returns an
    awaitable (a sync callback may simply return it)."""
    base, entry = Frame(), Frame()
    base.state = entry.state = NOT_CALLED
    n = len(layers)
    chain = ExecutionChain(layers, chain_kw, key, obs, call, failures,
                           n if n <= UNCHECKED_LAYERS else layers_that_fit(layers, failures),
                           terminal, base)
    try:
        return await _level(chain, -1, payload, entry, CLAIMED)
    except RecursionError as exc:
        if not out_of_stack(layers, base, exc, failures):
            raise
        # Unwound: room again for the one base call (or its result, kept).
        if base.state == RETURNED:
            return base.result
        return await terminal(payload)
    finally:
        # The last ``next_call`` set here is the only way back from ``kw`` to
        # the chain: dropping it leaves nothing cyclic. A ``next_call`` a
        # middleware kept still works (it holds what it needs).
        chain_kw.pop("next_call", None)


# --------------------------------------------------------------------------------------
# The base calls: the host's own function at the end of the execution chain, and the
# call state set while it runs
# --------------------------------------------------------------------------------------

async def host_call(execute: Callable[[Any], Any], payload: Any) -> Any:
    """``execute(payload)``, the host's own call; in an asynchronous call an awaitable
    it returns is awaited (in a synchronous one, whatever it returns is the result)."""
    r = execute(payload)
    # sync: -
    if isawaitable(r):
        r = await r
    return r


async def llm_base_call(execute: Callable[[Any], Any], request: Any, original: Any,
                        call: CallInfo, obs: PipelineObserver | None, p: Any) -> Any:
    """The base call at the end of an LLM call's execution chain, on payload ``p``. The
    host gets its own object back when nothing was rewritten (or a wrapper restored
    the original), plain mutable structures otherwise. Only in here is ``call`` the
    current LLM call (a model call a wrapper or hook makes is a call of its own, not
    this one), and the observer hears of the request actually sent when it is not the
    original."""
    if p is not original:
        call.request_sent(p)
        if obs is not None:
            obs.request_rewritten(call, p)
    token = set_current_llm_call(call)
    try:
        r = execute(request if p is original else base_payload(p, request, original))
        # sync: -
        if isawaitable(r):
            r = await r
        return r
    finally:
        reset_current_llm_call(token)


async def tool_base_call(execute: Callable[[Any], Any], request: Any, original: Any,
                         elapsed: list[float], in_flight: ToolInFlight, p: Any) -> Any:
    """A tool call's base call (as ``llm_base_call``) that adds its own duration to
    ``elapsed[0]`` (a tool's ``execution_time_ms`` excludes middleware around it); in
    an asynchronous call the wait for what ``execute`` returns is part of it. Only in
    here is the call the tool call in flight (``tool_in_flight``), and the observer hears
    of the arguments the tool actually gets when they are not the original ones."""
    if p is original:
        p = request
    else:
        p = base_payload(p, request, original)
        if in_flight.observer is not None:
            in_flight.observer.request_rewritten(in_flight.call, p)
    token = TOOL_IN_FLIGHT.set(in_flight)
    t0 = time.perf_counter()
    try:
        r = execute(p)
        # sync: -
        if isawaitable(r):
            r = await r
        return r
    finally:
        elapsed[0] += time.perf_counter() - t0
        try:
            TOOL_IN_FLIGHT.reset(token)
        except ValueError:  # reset from another context: leave it there
            pass


# --------------------------------------------------------------------------------------
# The LLM call: request → ``llm_request`` → ``pre_api_request`` → ``llm_execution``
# chain → base call → ``post_api_request`` | ``api_request_error``
# --------------------------------------------------------------------------------------

async def llm_call(pipe: LLMCallPipeline, call: CallInfo, request: Any,
                   execute: Callable[[Any], Any]) -> Any:
    """An opened LLM call, to the observer's ``call_finished``."""
    obs = pipe.observer
    staged = pipe.registry.llm_active or all_hook_events(obs)
    # Middleware and hooks run outside the request: a model call they make is its own
    # (``llm_base_call`` makes ``call`` current).
    token: contextvars.Token[CallInfo | None] | None = None
    if not staged:
        token = set_current_llm_call(call)
    elif current_llm_call() is not None:  # (outside any call already, the usual case,
        token = set_current_llm_call(None)  # a set and reset the less: benchmark 2b)
    try:
        if staged:
            result = await _llm_stages(pipe, call, request, execute)
            # The turn's tool calls belong to this call, not to one a layer made.
            link_model_call(current_runtime_context(), call.api_request_id)
        else:  # observer only: just the base call
            result = await host_call(execute, request)
    except BaseException as exc:
        if obs is not None:
            obs.call_finished(call, None, exc)
        raise
    finally:
        if token is not None:
            reset_current_llm_call(token)
    return obs.call_finished(call, result, None) if obs is not None else result


async def _llm_stages(pipe: LLMCallPipeline, call: CallInfo, request: Any,
                      execute: Callable[[Any], Any]) -> Any:
    """The request stage, ``pre_api_request``, the execution chain around the base
    call, ``post_api_request`` | ``api_request_error``."""
    obs, failures = pipe.observer, pipe.failures
    mw, hk = pipe.registry.tables()
    hooked = bool(hk[PRE_API_REQUEST] or hk[POST_API_REQUEST]
                  or hk[API_REQUEST_ERROR]) or all_hook_events(obs)
    # The frozen original only when middleware can see it (hook events alone do not);
    # the call's kwargs as the call opened (a rewrite's model is not theirs).
    original = freeze(request) if pipe.registry.llm_active else request
    kw = call.as_kwargs()
    stage_kw = {**kw} if hooked else kw  # hook payloads are built from ``kw``
    effective = original
    if mw[LLM_REQUEST]:
        effective = await request_stage(LLM_REQUEST, mw[LLM_REQUEST], call, original,
                                        original, stage_kw, obs, failures)
        if effective is not original:
            call.request_sent(effective)
            if obs is not None:
                obs.request_rewritten(call, effective)
    payload = pipe._api_payload(call, kw, effective, time.time()) if hooked else None
    if payload is not None:
        await hook_point(hk[PRE_API_REQUEST], call, PRE_API_REQUEST, payload, obs,
                         failures, None)
    layers = mw[LLM_EXECUTION]
    try:
        if layers:
            stage_kw["original_request"] = original  # (set already after a request stage)
            stage_kw["middleware_trace"] = call.trace_view()
            result = await execution_chain(
                layers, call, "request", effective, stage_kw,
                partial(llm_base_call, execute, request, original, call, obs), obs, failures)
        else:
            result = await llm_base_call(execute, request, original, call, obs, effective)
    except Exception as exc:
        if payload is not None:
            await hook_point(hk[API_REQUEST_ERROR], call, API_REQUEST_ERROR,
                             pipe._error_payload(payload, exc), obs, failures, None)
        raise
    if payload is not None:
        await hook_point(hk[POST_API_REQUEST], call, POST_API_REQUEST,
                         pipe._response_payload(payload, result), obs, failures, None)
    return result


# --------------------------------------------------------------------------------------
# The tool call: parse/coerce args → ``tool_request`` → ``pre_tool_call`` (block) →
# ``tool_execution`` chain → base call → normalize → ``post_tool_call`` → memory
# adapters → ``transform_tool_result``
# --------------------------------------------------------------------------------------

async def tool_call(pipe: ToolCallPipeline, call: CallInfo, args: Any,
                    execute: Callable[[Any], Any], raise_errors: bool,
                    skip_plugins: Collection[str] = ()) -> Any:
    """An opened tool call, to the observer's ``call_finished``; the layers of
    ``skip_plugins`` do not run on it."""
    obs = pipe.observer
    try:
        result = await _tool_stages(pipe, call, args, execute, raise_errors, skip_plugins)
    except BaseException as exc:
        if obs is not None:
            obs.call_finished(call, None, exc)
        raise
    return obs.call_finished(call, result, None) if obs is not None else result


async def _tool_stages(pipe: ToolCallPipeline, call: CallInfo, args: Any,
                       execute: Callable[[Any], Any], raise_errors: bool,
                       skip_plugins: Collection[str]) -> Any:
    """Parse, the request stage, ``pre_tool_call`` (block), the execution chain
    around the tool, normalize, ``post_tool_call``, memory, ``transform_tool_result``."""
    mw, hk = (pipe.registry.tables_without(skip_plugins) if skip_plugins
              else pipe.registry.tables())
    obs, failures = pipe.observer, pipe.failures
    try:
        parsed, original, kw = pipe._tool_prepare(call, args)
    except ToolArgumentsError as exc:
        refused = pipe._bad_arguments(call, args, exc)
        await hook_point(hk[POST_TOOL_CALL], call, POST_TOOL_CALL, refused.payload, obs,
                         failures, None)
        pipe._record_memory(call, refused.normalized)
        if raise_errors:
            raise
        return refused.model_result
    pre_hooked, post_hooked = hook_points_wanted(hk, obs)
    stage_kw = {**kw} if pre_hooked or post_hooked else kw  # (as in ``_llm_stages``)
    effective = original
    if mw[TOOL_REQUEST]:
        effective = await request_stage(TOOL_REQUEST, mw[TOOL_REQUEST], call, original,
                                        original, stage_kw, obs, failures)
    blocked = None
    if pre_hooked:
        blocked = first(await hook_point(
            hk[PRE_TOOL_CALL], call, PRE_TOOL_CALL, pipe._pre_payload(call, kw, effective),
            obs, failures, block_message))
    if blocked is not None:
        normalized, status, error = blocked_result(blocked), "blocked", None
    else:
        elapsed = [0.0]  # execution_time_ms: the base call only
        in_flight = ToolInFlight(call, obs)
        layers = mw[TOOL_EXECUTION]
        try:
            if layers:
                stage_kw["original_args"] = original  # (set already after a request stage)
                raw = await execution_chain(
                    layers, call, "args", effective, stage_kw,
                    partial(tool_base_call, execute, parsed, original, elapsed, in_flight),
                    obs, failures)
            else:
                raw = await tool_base_call(execute, parsed, original, elapsed, in_flight,
                                           effective)
        except Exception as exc:
            normalized, status, error = pipe._outcome(call, None, exc, elapsed[0])
        else:
            normalized, status, error = pipe._outcome(call, raw, None, elapsed[0])
    model_result = pipe._finish_tool(call, normalized, status)
    payload: dict[str, Any] | None = None
    if post_hooked:
        payload = pipe._post_payload(call, kw, effective, model_result, normalized, status)
        await hook_point(hk[POST_TOOL_CALL], call, POST_TOOL_CALL, payload, obs,
                         failures, None)
    if pipe.memory_adapters:  # (a call the less when there are none)
        pipe._record_memory(call, normalized)
    transformed = None if payload is None else first(await hook_point(
        hk[TRANSFORM_TOOL_RESULT], call, TRANSFORM_TOOL_RESULT, payload, obs, failures,
        plain_string))
    if error is not None and raise_errors:
        raise error
    return transformed if transformed is not None else model_result


# --------------------------------------------------------------------------------------
# The embeddings call: observed, never rewritten (the contract's LLM stages are for chat
# requests)
# --------------------------------------------------------------------------------------

async def observed_call(obs: PipelineObserver, call: CallInfo, request: Any,
                        execute: Callable[[Any], Any]) -> Any:
    """An opened call the observer alone sees (an embeddings call): the host's own call,
    to ``call_finished``."""
    try:
        result = await host_call(execute, request)
    except BaseException as exc:
        obs.call_finished(call, None, exc)
        raise
    return obs.call_finished(call, result, None)

# Generated from calls.py by scripts/unasync.py: do not edit; edit that file and run
# the script (tests/test_core_unasync.py fails when the two disagree).
"""How a call runs, in a synchronous call: generated from calls.py, the one definition
(its docstring says how).
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
from .calls import (
    ASYNC_EXECUTION_MIDDLEWARE,
    ASYNC_REQUEST_MIDDLEWARE,
    CLAIMED,
    NOT_CALLED,
    NO_KEYS,
    RAISED,
    RETURNED,
    RUNNING,
    TOOL_IN_FLIGHT,
    UNCHECKED_LAYERS,
    ExecutionChain,
    Firing,
    Frame,
    LLMCallPipeline,
    NextCallReusedError,
    Pick,
    RewriteStep,
    ToolArgumentsError,
    ToolCallPipeline,
    ToolInFlight,
    all_hook_events,
    base_payload,
    block_message,
    blocked_result,
    first,
    hook_points_wanted,
    interrupted,
    layers_that_fit,
    no_callbacks,
    on_raise,
    out_of_stack,
    plain_string,
    refuse_awaitable,
    reused,
)


def request_stage(kind: str, layers: tuple[Layer, ...], call: CallInfo, payload: Any,
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
                refuse_awaitable(ret, ASYNC_REQUEST_MIDDLEWARE)
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


def hook_point(layers: tuple[Layer, ...], call: CallInfo, hook_name: str,
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
        except Exception as exc:
            firing.failed_with(layer, "hook raised", exc)
            continue
        if ret is not None:
            firing.take(layer, ret, True)
    return firing.done(obs, call, hook_name, layers)


def _level(chain: ExecutionChain, i: int, q: Any, frame: Frame,
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
                r = terminal(q)
                base.state, base.result = RETURNED, r
                break
            layer = layers[j]
            inner = Frame()
            inner.state = NOT_CALLED
            kw[key] = q
            kw["next_call"] = partial(_level, chain, j, q, inner)
            failed: BaseException | None = None
            token = obs.wrapper_started(call, layer, j, q) if obs is not None else None
            try:
                ret = layer.callback(**kw)
                if inner.state == NOT_CALLED and inspect.isawaitable(ret):
                    refuse_awaitable(ret, ASYNC_EXECUTION_MIDDLEWARE)
            except BaseException as exc:
                outcome = on_raise(inner.state, layer, exc, failures, kw)
                if obs is not None:
                    obs.wrapper_finished(call, token, outcome, exc)
                if outcome == ERROR:
                    if not (isinstance(exc, NextCallReusedError) and inner.state == RAISED):
                        raise
                    failed = inner.error  # downstream, not the reuse: re-raised below
            else:
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


def execution_chain(layers: tuple[Layer, ...], call: CallInfo, key: str, payload: Any,
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
        return _level(chain, -1, payload, entry, CLAIMED)
    except RecursionError as exc:
        if not out_of_stack(layers, base, exc, failures):
            raise
        # Unwound: room again for the one base call (or its result, kept).
        if base.state == RETURNED:
            return base.result
        return terminal(payload)
    finally:
        # The last ``next_call`` set here is the only way back from ``kw`` to
        # the chain: dropping it leaves nothing cyclic. A ``next_call`` a
        # middleware kept still works (it holds what it needs).
        chain_kw.pop("next_call", None)


def host_call(execute: Callable[[Any], Any], payload: Any) -> Any:
    """``execute(payload)``, the host's own call; in an asynchronous call an awaitable
    it returns is awaited (in a synchronous one, whatever it returns is the result)."""
    r = execute(payload)
    return r


def llm_base_call(execute: Callable[[Any], Any], request: Any, original: Any,
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
        return r
    finally:
        reset_current_llm_call(token)


def tool_base_call(execute: Callable[[Any], Any], request: Any, original: Any,
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
        return r
    finally:
        elapsed[0] += time.perf_counter() - t0
        try:
            TOOL_IN_FLIGHT.reset(token)
        except ValueError:  # reset from another context: leave it there
            pass


def llm_call(pipe: LLMCallPipeline, call: CallInfo, request: Any,
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
            result = _llm_stages(pipe, call, request, execute)
            # The turn's tool calls belong to this call, not to one a layer made.
            link_model_call(current_runtime_context(), call.api_request_id)
        else:  # observer only: just the base call
            result = host_call(execute, request)
    except BaseException as exc:
        if obs is not None:
            obs.call_finished(call, None, exc)
        raise
    finally:
        if token is not None:
            reset_current_llm_call(token)
    return obs.call_finished(call, result, None) if obs is not None else result


def _llm_stages(pipe: LLMCallPipeline, call: CallInfo, request: Any,
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
        effective = request_stage(LLM_REQUEST, mw[LLM_REQUEST], call, original,
                                  original, stage_kw, obs, failures)
        if effective is not original:
            call.request_sent(effective)
            if obs is not None:
                obs.request_rewritten(call, effective)
    payload = pipe._api_payload(call, kw, effective, time.time()) if hooked else None
    if payload is not None:
        hook_point(hk[PRE_API_REQUEST], call, PRE_API_REQUEST, payload, obs,
                   failures, None)
    layers = mw[LLM_EXECUTION]
    try:
        if layers:
            stage_kw["original_request"] = original  # (set already after a request stage)
            stage_kw["middleware_trace"] = call.trace_view()
            result = execution_chain(
                layers, call, "request", effective, stage_kw,
                partial(llm_base_call, execute, request, original, call, obs), obs, failures)
        else:
            result = llm_base_call(execute, request, original, call, obs, effective)
    except Exception as exc:
        if payload is not None:
            hook_point(hk[API_REQUEST_ERROR], call, API_REQUEST_ERROR,
                       pipe._error_payload(payload, exc), obs, failures, None)
        raise
    if payload is not None:
        hook_point(hk[POST_API_REQUEST], call, POST_API_REQUEST,
                   pipe._response_payload(payload, result), obs, failures, None)
    return result


def tool_call(pipe: ToolCallPipeline, call: CallInfo, args: Any,
              execute: Callable[[Any], Any], raise_errors: bool,
              skip_plugins: Collection[str] = ()) -> Any:
    """An opened tool call, to the observer's ``call_finished``; the layers of
    ``skip_plugins`` do not run on it."""
    obs = pipe.observer
    try:
        result = _tool_stages(pipe, call, args, execute, raise_errors, skip_plugins)
    except BaseException as exc:
        if obs is not None:
            obs.call_finished(call, None, exc)
        raise
    return obs.call_finished(call, result, None) if obs is not None else result


def _tool_stages(pipe: ToolCallPipeline, call: CallInfo, args: Any,
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
        hook_point(hk[POST_TOOL_CALL], call, POST_TOOL_CALL, refused.payload, obs,
                   failures, None)
        pipe._record_memory(call, refused.normalized)
        if raise_errors:
            raise
        return refused.model_result
    pre_hooked, post_hooked = hook_points_wanted(hk, obs)
    stage_kw = {**kw} if pre_hooked or post_hooked else kw  # (as in ``_llm_stages``)
    effective = original
    if mw[TOOL_REQUEST]:
        effective = request_stage(TOOL_REQUEST, mw[TOOL_REQUEST], call, original,
                                  original, stage_kw, obs, failures)
    blocked = None
    if pre_hooked:
        blocked = first(hook_point(
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
                raw = execution_chain(
                    layers, call, "args", effective, stage_kw,
                    partial(tool_base_call, execute, parsed, original, elapsed, in_flight),
                    obs, failures)
            else:
                raw = tool_base_call(execute, parsed, original, elapsed, in_flight,
                                     effective)
        except Exception as exc:
            normalized, status, error = pipe._outcome(call, None, exc, elapsed[0])
        else:
            normalized, status, error = pipe._outcome(call, raw, None, elapsed[0])
    model_result = pipe._finish_tool(call, normalized, status)
    payload: dict[str, Any] | None = None
    if post_hooked:
        payload = pipe._post_payload(call, kw, effective, model_result, normalized, status)
        hook_point(hk[POST_TOOL_CALL], call, POST_TOOL_CALL, payload, obs,
                   failures, None)
    if pipe.memory_adapters:  # (a call the less when there are none)
        pipe._record_memory(call, normalized)
    transformed = None if payload is None else first(hook_point(
        hk[TRANSFORM_TOOL_RESULT], call, TRANSFORM_TOOL_RESULT, payload, obs, failures,
        plain_string))
    if error is not None and raise_errors:
        raise error
    return transformed if transformed is not None else model_result


def observed_call(obs: PipelineObserver, call: CallInfo, request: Any,
                  execute: Callable[[Any], Any]) -> Any:
    """An opened call the observer alone sees (an embeddings call): the host's own call,
    to ``call_finished``."""
    try:
        result = host_call(execute, request)
    except BaseException as exc:
        obs.call_finished(call, None, exc)
        raise
    return obs.call_finished(call, result, None)

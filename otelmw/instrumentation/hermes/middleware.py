"""Hermes' own plugin middleware: run by Hermes, by Hermes' rules, observed by otelmw.

Hermes runs the callbacks its plugins registered (``PluginContext.register_middleware``)
itself: ``PluginManager.invoke_middleware`` hands every request callback its copy of the
request or arguments and keeps the returns Hermes accepts; ``_run_execution_chain``
nests the execution callbacks with Hermes' single-use ``next_call``. otelmw changes
none of it. It wraps those two functions of Hermes' (never the callbacks Hermes holds)
and hands Hermes' own code the same callbacks behind transparent proxies, so each run
of a callback is a layer span of the call with its outcome, classified as Hermes
treated it:

* request callbacks: ``rewritten`` (a return Hermes accepts: ``{"request": {...}}`` /
  ``{"args": {...}}``; its trace entry's ``source``/``reason`` on the span),
  ``unchanged`` (anything else, which Hermes ignores), ``failed`` (it raised; Hermes
  logged it and went on);
* execution callbacks: ``passed``, ``short_circuit``, ``failed_before_next`` (Hermes
  skipped it), ``failed_after_next`` (Hermes kept the downstream result), ``error`` (a
  downstream failure or a raise after a failed ``next_call`` propagated; the span
  records the provider's or tool's own exception, not Hermes' wrapper of it).

``apply_{llm,tool}_request_middleware`` is where a call opens (its span starts before
Hermes' request stage, which then runs in it).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, NamedTuple

import wrapt

from ...core import (
    LLM_REQUEST,
    PAYLOAD_KEY,
    REQUEST_KINDS,
    HostCall,
    Layer,
    WrapperOutcome,
    changed_payload_keys,
    host_layer,
)
from ...telemetry.setup.context import safe_detach
from .._base import Wrapper
from . import calls

# The call whose Hermes request stage (``_stage_call``) or execution chain
# (``chain_call``) runs in this context: the one Hermes' callbacks are layers of.
_stage_call: ContextVar[HostCall | None] = ContextVar("otelmw_hermes_stage", default=None)
chain_call: ContextVar[HostCall | None] = ContextVar("otelmw_hermes_chain", default=None)


def layer_of(kind: str, callback: Callable[..., Any]) -> Layer:
    """A Hermes middleware or hook callback as a layer of its plugin."""
    parts = str(getattr(callback, "__module__", None) or "hermes").split(".")
    # a directory plugin is imported as hermes_plugins.<slug>
    return host_layer(kind, callback, parts[1] if parts[0] == "hermes_plugins" else parts[0])


class RequestStage(NamedTuple):
    """The arguments of ``apply_{llm,tool}_request_middleware``."""

    payload: Any  # the LLM request or the tool's arguments
    context: dict[str, Any]  # every other kwarg Hermes hands its callbacks (tool_name too)


class ExecutionStage(NamedTuple):
    """The arguments of ``run_{llm,tool}_execution_middleware``."""

    payload: Any
    base_call: Callable[[Any], Any]  # Hermes' own next_call: the provider attempt or tool
    context: dict[str, Any]  # the other kwargs (tool_name too, for a tool)


def llm_request_stage(request: Any, **context: Any) -> RequestStage:
    return RequestStage(request, context)


def tool_request_stage(tool_name: Any, args: Any, **context: Any) -> RequestStage:
    return RequestStage(args, {"tool_name": tool_name, **context})


def llm_execution_stage(request: Any, next_call: Callable[[Any], Any],
                        **context: Any) -> ExecutionStage:
    return ExecutionStage(request, next_call, context)


def tool_execution_stage(tool_name: Any, args: Any, next_call: Callable[[Any], Any],
                         **context: Any) -> ExecutionStage:
    return ExecutionStage(args, next_call, {"tool_name": tool_name, **context})


class ObservedTables(wrapt.ObjectProxy):  # type: ignore[misc,type-arg]
    """Hermes' plugin manager as one of its own ``invoke_*`` functions sees it while
    otelmw observes one run: the manager itself (every attribute and method), except
    that the callback table it reads holds the observed proxies of its callbacks."""

    def __init__(self, manager: Any, table: str, name: str, observed: list[Any]) -> None:
        super().__init__(manager)
        self._self_table, self._self_entry = table, {name: observed}

    @property
    def _middleware(self) -> Any:
        return self._self_entry if self._self_table == "_middleware" else (
            self.__wrapped__._middleware)

    @property
    def _hooks(self) -> Any:
        return self._self_entry if self._self_table == "_hooks" else self.__wrapped__._hooks


def run_hermes_function(wrapped: Any, instance: Any, table: str, name: str,
                        observed: list[Any], args: Any, kwargs: Any) -> Any:
    """Hermes' own ``PluginManager`` method ``wrapped`` on ``instance``, reading the
    observed callbacks from ``table``."""
    return wrapped.__func__(ObservedTables(instance, table, name, observed), *args, **kwargs)


def _trace_text(entry: dict[str, Any], key: str) -> str | None:
    value = entry.get(key)
    return value if isinstance(value, str) else None


def _observed_rewrite(callback: Any, running: HostCall, layer: Layer, position: int,
                      key: str) -> Any:
    """``callback`` as Hermes' request stage runs it, its run reported as a layer."""
    from hermes_cli import middleware as hermes

    def observe(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        handed = kwargs.get(key)
        # Hermes hands every callback one shared copy: what this one was handed, kept
        # (top level) to tell what its rewrite changed
        before = dict(handed) if isinstance(handed, dict) else handed
        run = running.rewrite_layer(layer, position, handed)
        try:
            ret = wrapped(*args, **kwargs)
        except Exception as exc:  # Hermes logs it and goes on without it
            run.end_rewrite("failed", error=exc)
            raise
        except BaseException as exc:
            run.end_rewrite("error", error=exc)
            raise
        try:
            new = ret.get(key) if isinstance(ret, dict) else None
            if not isinstance(new, dict):  # Hermes ignores it
                run.end_rewrite("unchanged")
                return ret
            entry = hermes._trace_entry(ret)
            run.end_rewrite("rewritten", changed=changed_payload_keys(
                before, new), source=_trace_text(entry, "source"),
                reason=_trace_text(entry, "reason"), payload=new)
        except Exception as exc:
            calls.instrumentation_failed("llm_request" if key == "request" else "tool_request",
                                         exc)
        return ret

    return wrapt.FunctionWrapper(callback, observe)


class _NextCall:
    """What a callback's ``next_call`` (Hermes' own, called through) did."""

    __slots__ = ("called", "succeeded")

    def __init__(self) -> None:
        self.called = self.succeeded = False

    def observe(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        self.called = True
        result = wrapped(*args, **kwargs)
        self.succeeded = True
        return result


def _downstream(exc: BaseException) -> BaseException:
    """The provider's or tool's own exception behind Hermes' private wrapper of it."""
    original = getattr(exc, "original", None) if type(
        exc).__name__ == "_DownstreamExecutionError" else None
    return original if isinstance(original, BaseException) else exc


def _observed_wrapper(callback: Any, running: HostCall, layer: Layer, position: int,
                      key: str) -> Any:
    """``callback`` as Hermes' execution chain runs it, its run reported as a layer."""

    def observe(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        step = _NextCall()
        if callable(kwargs.get("next_call")):
            kwargs = {**kwargs, "next_call": wrapt.FunctionWrapper(kwargs["next_call"],
                                                                   step.observe)}
        run = running.wrapper_layer(layer, position, kwargs.get(key))
        try:
            ret = wrapped(*args, **kwargs)
        except BaseException as exc:
            # as Hermes' chain treats it: skipped, result kept, or propagated
            outcome: WrapperOutcome = "error"
            if isinstance(exc, Exception) and type(exc).__name__ != (
                    "_DownstreamExecutionError"):
                outcome = ("failed_after_next" if step.succeeded else "error" if step.called
                           else "failed_before_next")
            run.end_wrapper(outcome, error=_downstream(exc))
            raise
        run.end_wrapper("passed" if step.called else "short_circuit", result=ret)
        return ret

    return wrapt.FunctionWrapper(callback, observe)


def invoke_middleware(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``PluginManager.invoke_middleware`` (Hermes' request stage): Hermes runs its
    callbacks; each run is a layer of the call whose request stage this is."""
    running = _stage_call.get()
    if running is None or not running.observed:
        return wrapped(*args, **kwargs)
    try:
        kind = args[0] if args else kwargs["kind"]
        if kind not in REQUEST_KINDS or not hasattr(wrapped, "__func__"):
            return wrapped(*args, **kwargs)
        key = PAYLOAD_KEY[kind]
        callbacks = list(instance._middleware.get(kind, []))
        if not callbacks:
            return wrapped(*args, **kwargs)
        observed = [_observed_rewrite(cb, running, layer_of(kind, cb), i, key)
                    for i, cb in enumerate(callbacks)]
    except Exception as exc:
        calls.instrumentation_failed("invoke_middleware", exc)
        return wrapped(*args, **kwargs)
    return run_hermes_function(wrapped, instance, "_middleware", kind, observed, args, kwargs)


def run_execution_chain(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``hermes_cli.middleware._run_execution_chain``: Hermes nests its callbacks; each
    run is a layer of the call whose execution this is."""
    running = chain_call.get()
    if running is None or not running.observed:
        return wrapped(*args, **kwargs)
    try:
        kind, callbacks, terminal, *rest = args
        key = "request" if "request" in kwargs else "args"  # as Hermes picks it
        observed = [_observed_wrapper(cb, running, layer_of(kind, cb), i, key)
                    for i, cb in enumerate(callbacks)]
    except Exception as exc:
        calls.instrumentation_failed("run_execution_chain", exc)
        return wrapped(*args, **kwargs)
    token = chain_call.set(None)  # a chain the callbacks run is not this call's
    try:
        return wrapped(kind, observed, terminal, *rest, **kwargs)
    finally:
        chain_call.reset(token)


class ChainRun:
    """Whether a pipeline call got as far as Hermes' own function (an error from then
    on is Hermes', not this adapter's, and is not run again), and what it returned."""

    __slots__ = ("result", "started")

    def __init__(self) -> None:
        self.started, self.result = False, None


def apply_request(kind: str) -> Wrapper:
    """``apply_{llm,tool}_request_middleware``: in a turn the call opens (parked) here,
    so its span starts before Hermes' request stage, which then runs in it."""
    llm = kind == LLM_REQUEST

    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        try:
            stage = llm_request_stage(*args, **kwargs) if llm else tool_request_stage(
                *args, **kwargs)
            if llm:
                opened = calls.open_ahead(calls.LLM_KEY, calls.llm_call(
                    stage.payload, stage.context), stage.payload)
            else:
                tool_call_id = calls.text(stage.context.get("tool_call_id"))
                call = calls.tool_call(stage.context["tool_name"], stage.context)
                opened = calls.open_ahead(calls.tool_key(tool_call_id), call, stage.payload) if (
                    tool_call_id) else calls.unobserved(call)
        except Exception as exc:
            calls.instrumentation_failed(f"apply_{kind}_middleware", exc)
            return wrapped(*args, **kwargs)
        token = calls.attach(opened.context)
        stage_token = _stage_call.set(opened.opened if opened.context is not None else None)
        try:
            result = wrapped(*args, **kwargs)
        finally:
            _stage_call.reset(stage_token)
            safe_detach(token)
        # the span (and the pre_api_request record Hermes fires next) describe the
        # rewritten request from here on
        if llm and opened.context is not None and getattr(result, "changed", False):
            try:
                opened.opened.request_sent(result.payload)
            except Exception as exc:
                calls.instrumentation_failed(f"apply_{kind}_middleware", exc)
        return result

    return wrapper

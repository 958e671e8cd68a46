"""Hermes' own plugin middleware, run by otelmw's rules.

A callback a Hermes plugin registered (``PluginContext.register_middleware``) becomes an
otelmw ``Layer`` (plugin: its plugin's name) and runs in otelmw's request stage
(``run_rewrites``) or execution chain (``run_execution``), which report its span and
outcome and count its failures. Hermes' side of the contract is kept at the edges: its
callbacks get Hermes' kwargs (``middleware_payload``, both schema versions), a return
Hermes accepts as a rewrite (``{"request": {...}}`` / ``{"args": {...}}``, other keys
ignored) is one, and Hermes gets back its own ``RequestMiddlewareResult`` and trace.

Where otelmw's rules differ from Hermes' ``_run_execution_chain``, otelmw's apply: an
outer callback sees a downstream failure as the provider's or tool's own exception (not
Hermes' private ``_DownstreamExecutionError``), each request callback sees the payload
as rewritten by the ones before it (read-only), and a failing callback is warned about
once (``FailureLog``) instead of on every call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ...core import contract as c
from ...core.callstate import llm_terminal_for, reset_current_llm_call, set_current_llm_call
from ...core.execution import run_execution
from ...core.payloads import freeze, thaw
from ...core.pipeline import get_pipeline
from ...core.registry import Layer, make_layer
from ...core.rewrites import run_rewrites
from ...telemetry.context import safe_detach
from .._base import Wrapper
from . import calls


def layer_of(kind: str, callback: Callable[..., Any]) -> Layer:
    """A Hermes middleware or hook callback as an otelmw layer of its plugin."""
    parts = str(getattr(callback, "__module__", None) or "hermes").split(".")
    # a directory plugin is imported as hermes_plugins.<slug>
    return make_layer(kind, callback, parts[1] if parts[0] == "hermes_plugins" else parts[0])


class RequestStage(NamedTuple):
    """The arguments of ``apply_{llm,tool}_request_middleware``."""

    payload: Any  # the LLM request or the tool's arguments
    context: dict[str, Any]  # every other kwarg Hermes hands its callbacks (tool_name too)


class ExecutionStage(NamedTuple):
    """The arguments of ``run_{llm,tool}_execution_middleware``."""

    payload: Any
    base_call: Callable[[Any], Any]  # Hermes' own next_call: the provider attempt or tool
    context: dict[str, Any]


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


class _HermesRewrite:
    """A Hermes request callback as an otelmw rewrite. A return Hermes accepts
    (``{key: {...}}``, any other keys) goes on as otelmw's complete replacement (with
    its ``source``/``reason``) and into Hermes' own trace; anything else goes on as it
    is: Hermes would ignore it, otelmw reports the rewrite failed and keeps the payload."""

    __slots__ = ("callback", "hermes_trace", "key", "trace_entry")

    def __init__(self, callback: Callable[..., Any], key: str, hermes_trace: list[Any],
                 trace_entry: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self.callback, self.key, self.hermes_trace, self.trace_entry = (
            callback, key, hermes_trace, trace_entry)

    def __call__(self, **kw: Any) -> Any:
        ret = self.callback(**kw)
        if not isinstance(ret, dict) or not isinstance(ret.get(self.key), dict):
            return ret
        self.hermes_trace.append(self.trace_entry(ret))
        replacement = {self.key: ret[self.key]}
        for field in ("source", "reason"):
            if calls.text(ret.get(field)):
                replacement[field] = ret[field]
        return replacement


def _rewrite_layer(kind: str, callback: Callable[..., Any], rewrite: _HermesRewrite) -> Layer:
    """The layer of ``callback`` (its plugin, its name) that runs it as ``rewrite``."""
    layer = layer_of(kind, callback)
    return Layer(kind, rewrite, layer.plugin, layer.name)


def run_request_stage(kind: str, callbacks: list[Any], call: c.CallInfo,
                      stage: RequestStage) -> Any:
    """Hermes' ``llm_request``/``tool_request`` callbacks through otelmw's request
    stage; returns Hermes' ``RequestMiddlewareResult`` (mutable copies, Hermes' trace)."""
    from hermes_cli import middleware as hermes

    key = c.PAYLOAD_KEY[kind]
    hermes_trace: list[dict[str, Any]] = []
    layers = tuple(_rewrite_layer(kind, cb, _HermesRewrite(cb, key, hermes_trace,
                                                           hermes._trace_entry))
                   for cb in callbacks)
    original = freeze(stage.payload)
    pipe = get_pipeline()
    otelmw_entries = len(call.middleware_trace)
    effective = run_rewrites(kind, layers, call, original, original,
                             hermes.middleware_payload(**stage.context), pipe.observer,
                             pipe.failures)
    # Hermes' rewrites travel in Hermes' own trace (its format, to its hooks and its
    # execution middleware); the call's trace lists otelmw's plugins' rewrites only.
    del call.middleware_trace[otelmw_entries:]
    return hermes.RequestMiddlewareResult(payload=thaw(effective),
                                          original_payload=thaw(original),
                                          changed=bool(hermes_trace), trace=hermes_trace)


class ChainRun:
    """Whether a pipeline call got as far as Hermes' own chain (an error from then on is
    Hermes', not this adapter's, and is not run again), and what the chain returned."""

    __slots__ = ("result", "started")

    def __init__(self) -> None:
        self.started, self.result = False, None


def run_execution_chain(kind: str, call: c.CallInfo, stage: ExecutionStage,
                        payload: Any) -> Any:
    """Hermes' ``llm_execution``/``tool_execution`` callbacks through otelmw's execution
    chain around Hermes' own ``next_call`` (``payload``: the request or arguments as
    otelmw's plugins passed them on). An LLM wrapper runs outside the request: a model
    call it makes is a call of its own; only in the base call is ``call`` current."""
    from hermes_cli import middleware as hermes

    callbacks = hermes._get_middleware_callbacks(kind)
    if not callbacks:
        return stage.base_call(payload)
    key = c.PAYLOAD_KEY[kind]
    context = dict(stage.context)
    original = context.pop(c.ORIGINAL_KEY[key], payload)  # Hermes' default too
    kw = hermes.middleware_payload(**context, **{key: payload, c.ORIGINAL_KEY[key]: original})
    layers = tuple(layer_of(kind, cb) for cb in callbacks)
    pipe = get_pipeline()
    if kind != c.LLM_EXECUTION:
        return run_execution(layers, call, key, payload, kw, stage.base_call, pipe.observer,
                             pipe.failures)
    terminal = llm_terminal_for(stage.base_call, payload, payload, call, pipe.observer)
    outside = set_current_llm_call(None)
    try:
        return run_execution(layers, call, key, payload, kw, terminal, pipe.observer,
                             pipe.failures)
    finally:
        reset_current_llm_call(outside)


def apply_request(kind: str) -> Wrapper:
    """``apply_{llm,tool}_request_middleware``: in a turn the call opens (parked) here,
    so its span starts before Hermes' request middleware, which then runs in it."""
    llm = kind == c.LLM_REQUEST

    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        from hermes_cli import middleware as hermes

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
                    tool_call_id) else calls.OpenedCall(call, None)
            callbacks = hermes._get_middleware_callbacks(kind)
        except Exception as exc:
            calls.instrumentation_failed(f"apply_{kind}_middleware", exc)
            return wrapped(*args, **kwargs)
        if not callbacks:  # Hermes hands the payload back as it is
            return wrapped(*args, **kwargs)
        token = calls.attach(opened.context)
        try:
            result = run_request_stage(kind, callbacks, opened.call, stage)
        finally:
            safe_detach(token)
        obs = get_pipeline().observer
        # the span (and the pre_api_request record Hermes fires next) describe the
        # rewritten request from here on
        if llm and result.changed and opened.context is not None and obs is not None:
            obs.request_rewritten(opened.call, result.payload)
        return result

    return wrapper

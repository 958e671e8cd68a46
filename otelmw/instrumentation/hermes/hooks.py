"""Hermes' observer hooks: every firing of a Hermes hook point (with or without
callbacks) becomes an ``otelmw.hook.<name>`` record on the span of the call it belongs
to. The callbacks Hermes' plugins registered run through otelmw's ``run_hook_callbacks``
(fail-open, each failure counted, warned once); the record carries their failure count."""

from __future__ import annotations

from typing import Any, NamedTuple

from ...core.hooks import run_hook_callbacks
from ...core.pipeline import get_pipeline
from ...telemetry.context import safe_detach
from .._base import host_hook_points_recorded
from . import calls
from .middleware import layer_of
from .results import normalized

HERMES_OBSERVER_SCHEMA, HERMES_MIDDLEWARE_SCHEMA = "hermes.observer.v1", "hermes.middleware.v1"
# Hook points Hermes fires only when a callback is registered (its has_hook gates)
_GATED = calls.LLM_HOOKS | {"post_tool_call", "transform_tool_result"}
_RECORDED_KEYS = ("middleware_trace", "request", "args", "status")


class HookFiring(NamedTuple):
    """The arguments of ``PluginManager.invoke_hook(hook_name, **kwargs)``."""

    hook_name: Any
    payload: dict[str, Any]


def _firing(hook_name: Any, **payload: Any) -> HookFiring:
    return HookFiring(hook_name, payload)


def record_firing(hook_name: str, payload: dict[str, Any], failures: int) -> None:
    obs = get_pipeline().observer
    if obs is None:
        return
    target = calls.call_of(hook_name, payload)
    record: dict[str, Any] = {
        "middleware_schema_version": HERMES_MIDDLEWARE_SCHEMA,
        "telemetry_schema_version": payload.get("telemetry_schema_version",
                                                HERMES_OBSERVER_SCHEMA)}
    record.update((k, payload[k]) for k in _RECORDED_KEYS if k in payload)
    err = payload.get("error")
    error_type = err.get("type") if isinstance(err, dict) else payload.get("error_type")
    if isinstance(error_type, str):
        record["error_type"] = error_type
    if hook_name in ("post_tool_call", "transform_tool_result") and "result" in payload:
        record["normalized"] = normalized(payload["result"])
    token = calls.attach(target.context)
    try:
        obs.hook_fired(target.call, hook_name, record, failures)
    finally:
        safe_detach(token)


def invoke_hook(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``PluginManager.invoke_hook``: Hermes' callbacks for the hook point (in order,
    their non-None results returned), then the record of the firing."""
    if not host_hook_points_recorded(get_pipeline().observer):
        return wrapped(*args, **kwargs)
    try:
        firing = _firing(*args, **kwargs)
        named = isinstance(firing.hook_name, str)
        layers = tuple(layer_of(firing.hook_name, cb)
                       for cb in list(instance._hooks.get(firing.hook_name, []))) if named else ()
    except Exception as exc:
        calls.instrumentation_failed("invoke_hook", exc)
        return wrapped(*args, **kwargs)
    if not named:
        return wrapped(*args, **kwargs)
    firing.payload.setdefault("telemetry_schema_version", HERMES_OBSERVER_SCHEMA)  # as Hermes
    ran = run_hook_callbacks(layers, firing.payload, get_pipeline().failures)
    try:
        record_firing(firing.hook_name, firing.payload, ran.failed)
    except Exception as exc:
        calls.instrumentation_failed("invoke_hook.emit", exc)
    return ran.results


def has_hook(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``PluginManager.has_hook``: true for Hermes' gated hook points too, so Hermes
    fires them (they become records)."""
    name = args[0] if args else kwargs.get("hook_name")
    if name in _GATED and host_hook_points_recorded(get_pipeline().observer):
        return True
    return wrapped(*args, **kwargs)

"""Hermes' observer hooks: Hermes fires them and runs its plugins' callbacks by its own
rules (``PluginManager.invoke_hook``, gated by its own ``has_hook``); otelmw observes
each firing where Hermes makes it and records it as an ``otelmw.hook.<name>`` record on
the span of the call it belongs to, with how many of Hermes' callbacks raised. A hook
point Hermes does not fire (its ``has_hook`` gate: no callback registered) is not
recorded."""

from __future__ import annotations

from typing import Any, NamedTuple

import wrapt

from ...core import (
    hook_firings_recorded,
)
from ...telemetry.setup.context import safe_detach
from . import calls
from .middleware import run_hermes_function
from .results import normalized

HERMES_OBSERVER_SCHEMA, HERMES_MIDDLEWARE_SCHEMA = "hermes.observer.v1", "hermes.middleware.v1"
_RECORDED_KEYS = ("middleware_trace", "request", "args", "status")


class HookFiring(NamedTuple):
    """The arguments of ``PluginManager.invoke_hook(hook_name, **kwargs)``."""

    hook_name: Any
    payload: dict[str, Any]


def _firing(hook_name: Any, **payload: Any) -> HookFiring:
    return HookFiring(hook_name, payload)


def record_firing(hook_name: str, payload: dict[str, Any], failures: int) -> None:
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
        target.opened.report_hook_firing(hook_name, record, failures)
    finally:
        safe_detach(token)


class _Raised:
    """How many of one firing's callbacks raised (Hermes logs and skips each)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def observe(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        try:
            return wrapped(*args, **kwargs)
        except Exception:
            self.count += 1
            raise


def invoke_hook(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``PluginManager.invoke_hook``: Hermes runs its callbacks for the hook point;
    then the firing is recorded."""
    if not hook_firings_recorded():
        return wrapped(*args, **kwargs)
    try:
        firing = _firing(*args, **kwargs)
        if not isinstance(firing.hook_name, str) or not hasattr(wrapped, "__func__"):
            return wrapped(*args, **kwargs)
        raised = _Raised()
        observed = [wrapt.FunctionWrapper(cb, raised.observe)
                    for cb in list(instance._hooks.get(firing.hook_name, []))]
    except Exception as exc:
        calls.instrumentation_failed("invoke_hook", exc)
        return wrapped(*args, **kwargs)
    results = run_hermes_function(wrapped, instance, "_hooks", firing.hook_name, observed,
                                  args, kwargs)
    try:
        record_firing(firing.hook_name, firing.payload, raised.count)
    except Exception as exc:
        calls.instrumentation_failed("invoke_hook.emit", exc)
    return results

"""pydantic-ai's capability hook points, observed where pydantic-ai fires them.

pydantic-ai fires each hook point of a run (``before_tool_execute``,
``after_model_request``, ...) on the run's root ``CombinedCapability``, which calls it on
every capability of the run in pydantic-ai's order. otelmw wraps those dispatch methods
(``CombinedCapability.<hook point>``): the firing runs exactly as without otelmw, and
afterwards it is recorded as an ``otelmw.hook.<hook point>`` log record (schema
``pydantic-ai.capabilities.v1``) on the span current where pydantic-ai fired it. otelmw
registers no hook and no capability pydantic-ai could see for this.

A firing is recorded when a callback of the user's answers it: a function registered
for that hook point on a ``Hooks`` capability (a tool hook's ``tools=`` filter applied),
or a capability class of the user's (defined outside pydantic-ai) that overrides the hook
method. pydantic-ai's own built-in capabilities (its tool search, its message queue) are
its machinery, not hooks a user registered: firings only they answer are not recorded.
Under pydantic-ai's own instrumentation nothing is recorded (its spans are the run's).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from opentelemetry.trace import NoOpTracer

from ...core import CallInfo, current_runtime_context, hook_firings_recorded, unopened_call
from .results import RUNTIME_ID, failed

SCHEMA = "pydantic-ai.capabilities.v1"

# The hook points pydantic-ai fires on its root capability (its ``wrap_*`` methods are
# middleware, not hook points: otelmw's own capability is one of their layers).
RUN_HOOKS = ("before_run", "after_run", "on_run_error", "before_node_run", "after_node_run",
             "before_output_validate", "after_output_validate")
MODEL_HOOKS = ("before_model_request", "after_model_request", "on_model_request_error")
TOOL_HOOKS = ("before_tool_validate", "after_tool_validate", "on_tool_validate_error",
              "before_tool_execute", "after_tool_execute", "on_tool_execute_error")
HOOK_POINTS = RUN_HOOKS + MODEL_HOOKS + TOOL_HOOKS

# The hook point being fired in this context: a combined capability inside the root
# one dispatches the same firing again, which is not a second firing.
_firing: ContextVar[str | None] = ContextVar("otelmw_pydantic_ai_hook", default=None)


def observed(hook: str) -> Any:
    """The wrapper of ``CombinedCapability.<hook>``."""

    async def fire(wrapped: Any, instance: Any, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Any:
        if _firing.get() == hook or not hook_firings_recorded():
            return await wrapped(*args, **kwargs)
        try:
            answered = _own_spans(args, kwargs) and _answered(instance, hook, kwargs.get("call"))
        except Exception as exc:
            failed("hook", exc)
            answered = False
        if not answered:
            return await wrapped(*args, **kwargs)
        token = _firing.set(hook)
        error: BaseException | None = None
        try:
            return await wrapped(*args, **kwargs)
        except BaseException as exc:
            error = exc
            raise
        finally:
            _firing.reset(token)
            try:
                _record(hook, args, kwargs, error)
            except Exception as exc:
                failed("hook", exc)

    return fire


def _own_spans(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether otelmw's telemetry is the run's (not under pydantic-ai's own
    instrumentation, whose spans are then the run's only ones: see ``capability``)."""
    run_ctx = args[0] if args else kwargs.get("ctx")
    return isinstance(getattr(run_ctx, "tracer", None), NoOpTracer)


# What a capability class is to ``_answered``, and the hook points it overrides: decided
# once per class (the tree is walked on every firing, about twenty a turn: benchmark 7).
# A class whose hook methods are replaced after its first firing keeps its first verdict.
_COMBINED, _HOOKS, _WRAPPER, _USERS, _BUILT_IN = range(5)
_ROLES: dict[type, tuple[int, frozenset[str]]] = {}


def _role(cls: type) -> tuple[int, frozenset[str]]:
    role = _ROLES.get(cls)
    if role is None:
        from pydantic_ai.capabilities import AbstractCapability, Hooks
        from pydantic_ai.capabilities.combined import CombinedCapability
        from pydantic_ai.capabilities.wrapper import WrapperCapability

        def overridden(base: type) -> frozenset[str]:
            return frozenset(h for h in HOOK_POINTS
                             if getattr(cls, h, None) is not getattr(base, h, None))

        if issubclass(cls, CombinedCapability):
            role = (_COMBINED, frozenset())
        elif issubclass(cls, Hooks):
            role = (_HOOKS, overridden(Hooks))
        elif issubclass(cls, WrapperCapability):
            role = (_WRAPPER, overridden(WrapperCapability))
        elif cls.__module__.startswith(("pydantic_ai.", "otelmw.")):
            role = (_BUILT_IN, frozenset())
        else:
            role = (_USERS, overridden(AbstractCapability))
        if len(_ROLES) < 4096:  # classes made per run: forget none, grow no further
            _ROLES[cls] = role
    return role


def _answered(capability: Any, hook: str, call: Any) -> bool:
    """Whether a callback of the user's answers ``hook`` in ``capability``'s tree."""
    todo = [capability]
    while todo:
        cap = todo.pop()
        kind, overrides = _role(type(cap))
        if kind == _COMBINED:
            todo.extend(cap.capabilities)
        elif kind == _HOOKS:
            if hook in overrides:
                return True
            for entry in cap._get(hook):
                tools = getattr(entry, "tools", None)  # a tool hook's filter
                if tools is None or getattr(call, "tool_name", None) in tools:
                    return True
        elif kind == _WRAPPER:
            if hook in overrides:
                return True
            todo.append(cap.wrapped)
        elif kind == _USERS and hook in overrides:
            return True
    return False


def _record(hook: str, args: tuple[Any, ...], kwargs: dict[str, Any],
            error: BaseException | None) -> None:
    from pydantic_ai.exceptions import (
        ApprovalRequired,
        CallDeferred,
        ModelRetry,
        SkipToolExecution,
        ToolRetryError,
    )

    rc = current_runtime_context()
    payload: dict[str, Any] = {"telemetry_schema_version": SCHEMA}
    tool_call = kwargs.get("call")
    model = None
    if hook in TOOL_HOOKS and tool_call is not None:
        operation = "execute_tool"
        if "args" in kwargs:
            payload["args"] = kwargs["args"]
    elif hook in MODEL_HOOKS:
        operation = "chat"
        run_ctx = args[0] if args else kwargs.get("ctx")
        model = getattr(getattr(run_ctx, "model", None), "model_name", None)
    else:
        operation = "invoke_agent"
    failures = 0
    if error is None:
        payload["status"] = "ok"
    elif isinstance(error, SkipToolExecution):  # a before hook's block
        payload["status"], payload["error_type"] = "blocked", type(error).__name__
    elif isinstance(error, ModelRetry | ToolRetryError | CallDeferred | ApprovalRequired):
        payload["status"], payload["error_type"] = "control_flow", type(error).__name__
    elif hook.startswith("on_") and error is kwargs.get("error"):
        payload["status"], payload["error"] = "error", error  # not recovered: raised on
    else:
        payload["status"], payload["error"], failures = "error", error, 1
    call = CallInfo(operation=operation, session_id=rc.session_id, task_id=rc.task_id,
                    turn_id=rc.turn_id, runtime_id=RUNTIME_ID, agent_name=rc.agent_name,
                    model=model if isinstance(model, str) else None,
                    tool_name=getattr(tool_call, "tool_name", None),
                    tool_call_id=getattr(tool_call, "tool_call_id", None))
    unopened_call(call).report_hook_firing(hook, payload, failures)

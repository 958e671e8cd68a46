"""A Hermes tool call (``run_tool_execution_middleware``) as one ``execute_tool`` call:
``Pipeline.run_tool`` around the outermost of Hermes' own ``tool_execution`` chains,
run by Hermes (on Hermes' concurrent path a second chain runs nested inside the first
for the same tool_call_id: its callbacks are layers of the same call, which has no
second span); and the end of a tool call Hermes blocked or cancelled before it ran."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from ...core import TOOL_ERROR_PREFIX, HostCall, get_pipeline, tool_call_current
from . import calls
from .middleware import ChainRun, chain_call, tool_execution_stage
from .results import tool_error

# The tool call whose outermost chain is running in this context.
_running_tool: ContextVar[HostCall | None] = ContextVar("otelmw_hermes_tool", default=None)


def run_tool_execution(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    try:
        stage = tool_execution_stage(*args, **kwargs)
        tool_call_id = calls.text(stage.context.get("tool_call_id"))
    except Exception as exc:
        calls.instrumentation_failed("run_tool_execution_middleware", exc)
        return wrapped(*args, **kwargs)
    outer = _running_tool.get()
    if tool_call_id and outer is not None and outer.call.tool_call_id == tool_call_id:
        # Hermes' second chain of a parallel tool call, inside the first one's base call
        token = chain_call.set(outer)
        try:
            return wrapped(*args, **kwargs)
        finally:
            chain_call.reset(token)
    try:
        key = calls.tool_key(tool_call_id)
        running = calls.start_execution(key, stage.payload, lambda: calls.tool_call(
            stage.context["tool_name"], stage.context))
    except Exception as exc:
        calls.instrumentation_failed("run_tool_execution_middleware", exc)
        return wrapped(*args, **kwargs)
    hermes = ChainRun()

    tool_name = stage.context["tool_name"]
    context = {k: v for k, v in stage.context.items() if k != "tool_name"}

    def execute(tool_args: Any) -> Any:
        running_token = _running_tool.set(running.opened)
        chain_token = chain_call.set(running.opened)
        hermes.started, hermes.result = True, None
        try:
            with tool_call_current(running.opened):  # a nested tool protocol enriches it
                hermes.result = wrapped(tool_name, tool_args, stage.base_call, **context)
            return hermes.result
        finally:
            chain_call.reset(chain_token)
            _running_tool.reset(running_token)

    with calls.executing(running, key):
        try:
            result = get_pipeline().run_tool(
                stage.context["tool_name"], stage.payload, execute, tool_call_id=tool_call_id,
                runtime_id=calls.RUNTIME_ID, raise_errors=True, call=running.call)
        except Exception as exc:
            if hermes.started:
                raise
            calls.instrumentation_failed("run_tool_execution", exc)
            return wrapped(*args, **kwargs)
    # run_tool hands the model "Tool Error: <message>" for a failed result: Hermes'
    # own answer (its JSON envelope) goes back instead
    error = tool_error(hermes.result) if hermes.started else None
    return hermes.result if error is not None and result == f"{TOOL_ERROR_PREFIX}{error}" else (
        result)


def post_tool_call_emitted(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``model_tools._emit_post_tool_call_hook``: a tool call still opened now never ran
    (blocked by a ``pre_tool_call`` directive, cancelled): it ends with Hermes' status."""
    try:
        return wrapped(*args, **kwargs)
    finally:
        turn = calls.turn_calls()
        if turn is not None:
            try:
                calls.finish_unrun(
                    turn.claim(calls.tool_key(calls.text(kwargs.get("tool_call_id")))),
                    kwargs.get("status") or "not_run", kwargs.get("result"),
                    kwargs.get("error_message"))
            except Exception as exc:
                calls.instrumentation_failed("post_tool_call", exc)

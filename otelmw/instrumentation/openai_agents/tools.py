"""Agents SDK tool calls: every function tool invocation of a run (the SDK's
``_invoke_function_tool_with_metadata`` as its tool executor calls it, after its tool
input guardrails and ``on_tool_start`` hooks, before its output guardrails and
``on_tool_end``), one ``execute_tool {name}`` call through the pipeline. MCP tools
are function tools there too: one call each, current as the tool call in flight
(``tool_call_current``) so an MCP layer under it enriches it instead of opening a
second one. Sync tools run on the SDK's worker threads in a copy of the call's
context: they stay in the run's trace.

* ``tool_request``: a rewrite of the arguments is what the tool receives (as JSON, as
  the model's arguments are); arguments that are not a JSON object reach the tool
  unchanged, and otelmw's stages see ``{}``.
* ``pre_tool_call`` block: the tool does not run; the block message is its output
  (handed to the model as the SDK hands an error output).
* a tool that raised and whose error the SDK turned into the model's message (its
  ``failure_error_function``) is a failed result with that exception; the SDK's
  message goes to the model unchanged. An exception the SDK re-raises propagates
  unchanged.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from typing import Any

from ...core import (
    CallInfo,
    current_runtime_context,
    get_pipeline,
    new_request_id,
    open_call,
    tool_call_current,
)
from .runs import RUNTIME_ID, instrumentation_failed


class _HostTool:
    """What the SDK's invocation did inside the pipeline."""

    __slots__ = ("error", "handled_error", "invocation", "started")

    def __init__(self) -> None:
        self.started = False
        self.invocation: Any = None  # the SDK's _FunctionToolInvocationResult
        self.error: BaseException | None = None  # the SDK's invocation raised it
        self.handled_error: BaseException | None = None  # the SDK made it the output


_invoking: ContextVar[_HostTool | None] = ContextVar("otelmw_openai_agents_tool", default=None)


def _tool_call(name: str, tool_call_id: str | None) -> CallInfo:
    rc = current_runtime_context()
    link = rc.model_call  # the latest model call of the turn asked for this tool
    api_request_id = link.api_request_id if link is not None else None
    return CallInfo.for_tool(rc, api_request_id=api_request_id or new_request_id(rc.turn_id),
                             tool_name=name, tool_call_id=tool_call_id, runtime_id=RUNTIME_ID)


def _invocation_result(output: Any, is_sdk_generated_error: bool) -> Any:
    from agents.tool import _FunctionToolInvocationResult

    return _FunctionToolInvocationResult(output, is_sdk_generated_error=is_sdk_generated_error)


async def invoke_tool(wrapped: Any, instance: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
    try:
        tool, context, arguments = (kwargs["function_tool"], kwargs["context"],
                                    kwargs["arguments"])
        name = tool.name if isinstance(tool.name, str) else str(tool.name)
        call_id = getattr(context, "tool_call_id", None)
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) and arguments else {}
        except ValueError:
            parsed = {}
        if not isinstance(parsed, dict):
            parsed = {}
        opened = open_call(_tool_call(name, call_id if isinstance(call_id, str) else None),
                           parsed)
    except Exception as exc:
        instrumentation_failed("invoke_tool", exc)
        return await wrapped(*args, **kwargs)
    host = _HostTool()

    async def execute(tool_args: Any) -> Any:
        host.started = True
        sent = dict(kwargs)
        if tool_args is not parsed:  # rewritten: the tool prepares these arguments
            sent["arguments"] = json.dumps(tool_args)
            if getattr(context, "_function_tool_arguments", None) is not None:
                context._function_tool_arguments = None  # prepared from the original
        token = _invoking.set(host)
        try:
            with tool_call_current(opened):
                host.invocation = await wrapped(*args, **sent)
        except BaseException as exc:
            host.error = exc
            raise
        finally:
            _invoking.reset(token)
        if host.handled_error is not None:  # a failure the SDK answered with a message
            raise host.handled_error
        return host.invocation.output

    try:
        result = await get_pipeline().arun_tool(
            name, parsed, execute, tool_call_id=opened.call.tool_call_id,
            runtime_id=RUNTIME_ID, raise_errors=True, call=opened.call)
    except BaseException as exc:
        if exc is host.handled_error:
            return host.invocation  # the SDK's own answer to the failure
        if host.started:
            if exc is host.error:
                raise
            instrumentation_failed("invoke_tool", exc)
            if host.invocation is not None:
                return host.invocation
            raise
        instrumentation_failed("invoke_tool", exc)
        return await wrapped(*args, **kwargs)
    invocation = host.invocation
    if invocation is not None and result is invocation.output:
        return invocation
    # a block, a wrapper's own answer or a transformed result; a block's message
    # skips the tool's output schema as the SDK's own error outputs do
    return _invocation_result(result, not host.started)


async def failure_noted(wrapped: Any, instance: Any, args: tuple[Any, ...],
                        kwargs: dict[str, Any]) -> Any:
    """``maybe_invoke_function_tool_failure_error_function``: the SDK answers a tool's
    exception with a message (not ``None``): the tool call in flight failed with it."""
    result = await wrapped(*args, **kwargs)
    host = _invoking.get()
    if host is not None and result is not None:
        error = kwargs.get("error")
        if isinstance(error, BaseException):
            host.handled_error = error
    return result

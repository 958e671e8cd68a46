"""``_run_tool(ctx, ...)`` → one ``execute_tool`` call through ``Pipeline.arun_tool``.

``_run_tool`` is what the terminal of Strands' ``ExecuteToolStage`` middleware runs:
after the ``BeforeToolCallEvent`` hooks and every middleware of the user's (their
rewrites are what the tool gets, their short-circuits never reach it), inside
Strands' own ``execute_tool {name}`` span. When that span records, otelmw records the
call on it (``open_call(..., on_host_span=True)``: ids, normalized result, digests; its
layers are children of it; Strands ends it), so a tool call has one ``execute_tool``
span; otherwise (a direct ``agent.tool.<name>()`` call, no tracer provider) the span is
otelmw's own.

``tool_request`` rewrites ``tool_use["input"]`` (a copy of the context carries it); a
``pre_tool_call`` block or a ``tool_execution`` layer answering without ``next_call``
is an error ``ToolResult`` with that answer as its text; a ``transform_tool_result``
answer replaces the result's content; otherwise Strands gets the tool's own result
event. The tool's intermediate events (a streaming tool's ``ToolStreamEvent``) reach
Strands as they come: the pipeline runs in a task of its own while they are handed on.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from opentelemetry.trace import get_current_span

from ...core import CallInfo, HostCall, current_runtime_context, get_pipeline, open_call
from .results import RUNTIME_ID, ToolOutcome, current_outcome, failed

_DONE = object()  # the pipeline's task has ended


def run_tool(wrapped: Any, instance: Any, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Any:
    """``_run_tool(ctx, extra_kwargs, tool_context)`` (an async generator) through the
    pipeline."""
    return _tool_events(wrapped, args, kwargs)


def _on_strands_span(name: str, tool_call_id: str | None, args: Any) -> HostCall | None:
    """The call recorded on Strands' own ``execute_tool`` span, when it is current and
    records; None: otelmw's own span."""
    span = get_current_span()
    span_name = getattr(span, "name", None)
    if not (span.is_recording() and isinstance(span_name, str)
            and span_name.startswith("execute_tool")):
        return None
    rc = current_runtime_context()
    return open_call(CallInfo(operation="execute_tool", tool_name=name,
                              tool_call_id=tool_call_id, runtime_id=RUNTIME_ID,
                              session_id=rc.session_id, task_id=rc.task_id,
                              turn_id=rc.turn_id, agent_name=rc.agent_name),
                     args, on_host_span=True)


async def _tool_events(wrapped: Any, args: tuple[Any, ...],
                       kwargs: dict[str, Any]) -> AsyncIterator[Any]:
    from strands.types._events import ToolInterruptEvent, ToolResultEvent  # with strands

    try:
        ctx = args[0] if args else kwargs["ctx"]
        rest, rest_kwargs = args[1:], {k: v for k, v in kwargs.items() if k != "ctx"}
        tool_use = ctx.tool_use
        name, tool_call_id = str(tool_use["name"]), tool_use.get("toolUseId")
        original = tool_use.get("input")
        usable = ctx.tool is not None  # an unknown tool: Strands answers it itself
    except Exception as exc:
        failed("execute_tool", exc)
        usable = False
    if not usable:
        async for event in wrapped(*args, **kwargs):
            yield event
        return

    queue: asyncio.Queue[Any] = asyncio.Queue()
    out = ToolOutcome()

    async def execute(effective: Any) -> Any:
        out.executed = True
        run_ctx = ctx if effective is original else ctx.replace(
            tool_use={**ctx.tool_use, "input": effective})
        try:
            async for event in wrapped(run_ctx, *rest, **rest_kwargs):
                if isinstance(event, ToolResultEvent):
                    out.event = event
                else:
                    await queue.put(event)
                    if isinstance(event, ToolInterruptEvent):
                        return None  # the tool halted the agent: no result
        except BaseException as exc:
            out.error = exc  # the host's own (an interrupt the tool raised)
            raise
        return None if out.event is None else out.event["tool_result"]

    async def pipeline_call() -> Any:
        token = current_outcome.set(out)
        try:
            host = _on_strands_span(name, tool_call_id, original)
            return await get_pipeline().arun_tool(
                name, original, execute, tool_call_id=tool_call_id, runtime_id=RUNTIME_ID,
                raise_errors=True, call=None if host is None else host.call)
        finally:
            current_outcome.reset(token)
            queue.put_nowait(_DONE)

    task = asyncio.ensure_future(pipeline_call())
    try:
        while True:
            event = await queue.get()
            if event is _DONE:
                break
            yield event
            if isinstance(event, ToolInterruptEvent):
                break
        answer = await task
    except BaseException as exc:
        if not task.done():  # the consumer stopped or cancelled this tool call
            task.cancel()
            raise
        if exc is out.error or not isinstance(exc, Exception):
            raise  # the host's own error
        failed("execute_tool", exc)  # otelmw's: the host's outcome stands
        if not out.executed:
            async for event in wrapped(*args, **kwargs):
                yield event
        elif out.event is not None:
            yield out.event
        return
    for event in _result_events(out, answer, ctx, ToolResultEvent):
        yield event


def _result_events(out: ToolOutcome, answer: Any, ctx: Any, result_event: Any) -> list[Any]:
    """What Strands gets after the pipeline: the tool's own result event, unless an
    otelmw plugin answered instead (see the module docstring)."""
    event = out.event
    if out.executed and event is None:
        return []  # interrupted: Strands already has the interrupt
    if event is not None and (answer is event["tool_result"] or _is_default(out, answer)):
        return [event]
    result: dict[str, Any] = {"toolUseId": str(ctx.tool_use.get("toolUseId")),
                              "status": "error" if event is None else
                              event["tool_result"].get("status", "success"),
                              "content": [{"text": str(answer)}]}
    if event is None:
        return [result_event(result)]
    return [result_event(result, exception=event.exception)]


def _is_default(out: ToolOutcome, answer: Any) -> bool:
    """The pipeline's answer is the normalized result's own text (no plugin changed it)."""
    norm = out.normalized
    if norm is None:
        return False
    try:
        return bool(answer == norm.model_text())
    except Exception:
        return False

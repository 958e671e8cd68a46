"""ADK tool calls: each call ADK's flow makes of a tool (``tools/_caller.py``'s
``_call_tool_async(tool, args, tool_context)``, which runs ``tool.run_async`` once ADK's
``before_tool_callback`` chain let the call through and its confirmation gate passed) is
one ``execute_tool`` call through the pipeline, ``gen_ai.tool.call.id`` the model's
function call id (``tool_context.function_call_id``).

ADK opens its own ``execute_tool {tool}`` span around the whole call (callbacks, tool,
error handling) and it is current here: otelmw records the call on that span
(``open_call(..., on_host_span=True)``: its ids, arguments under capture, normalized result,
the otelmw layers as its children, the hook records on it; ADK ends it), so a tool call
has one span. Where ADK's span does not record, the call gets an ``execute_tool`` span of
otelmw's own. ADK records the call's duration metric point itself: otelmw records none.
What ADK gets back is the tool's own result, or otelmw's answer (a block message, a
``tool_execution`` layer's answer); a tool that raises raises the same exception to ADK
(its ``on_tool_error_callback`` runs as without otelmw).
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace

from ...core import (
    CallInfo,
    HostCall,
    MiddlewareContext,
    NormalizedToolResult,
    current_runtime_context,
    get_pipeline,
    new_request_id,
    open_call,
)
from .fail_open import RUNTIME_ID, host_outcome, instrumentation_failed

_ADK_TOOL_SPAN = "execute_tool"


class ADKToolResultNormalizer:
    """Runtime ``google-adk``: what the tool returned is the result (ADK answers the model
    with it, a non-dict wrapped as ``{"result": ...}``); a failure is an exception."""

    runtime_id = RUNTIME_ID

    def normalize(self, result: Any, name: str, ctx: MiddlewareContext) -> NormalizedToolResult:
        return NormalizedToolResult(content=result, raw_result=result,
                                    execution_time_ms=ctx.execution_time_ms)


NORMALIZER = ADKToolResultNormalizer()


def _on_adk_span() -> bool:
    """Whether the current span is ADK's own recording ``execute_tool`` span."""
    span = trace.get_current_span()
    name = getattr(span, "name", None)
    return span.is_recording() and isinstance(name, str) and name.startswith(_ADK_TOOL_SPAN)


def _opened(name: str, call_id: str | None, arguments: Any) -> HostCall:
    """The call, opened on ADK's ``execute_tool`` span when it is current and records
    (else on a span of otelmw's own), in the turn's context: linked to the turn's latest
    model call, as the pipeline links its own. ADK records the call's
    ``gen_ai.execute_tool.duration`` point itself, whether its span records or not
    (``host_measured``: otelmw records none)."""
    context = current_runtime_context()
    link = context.model_call
    request_id = (link.api_request_id if link is not None else None) or new_request_id(
        context.turn_id)
    call = CallInfo.for_tool(context, api_request_id=request_id, tool_name=name,
                             tool_call_id=call_id, runtime_id=RUNTIME_ID)
    call.host_measured = True
    return open_call(call, arguments, on_host_span=_on_adk_span())


def _bound(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(tool, args, tool_context) of a ``_call_tool_async`` call."""
    names = ("tool", "args", "tool_context")
    values = dict(zip(names, args, strict=False))
    values.update((k, v) for k, v in kwargs.items() if k in names)
    return values["tool"], values["args"], values["tool_context"]


async def call_tool(wrapped: Any, instance: Any, args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> Any:
    """``_call_tool_async``: the pipeline around the tool (fail open)."""
    try:
        tool, tool_args, tool_context = _bound(args, kwargs)
        name = str(getattr(tool, "name", None) or "unknown")
        call_id = getattr(tool_context, "function_call_id", None)
        call_id = call_id if isinstance(call_id, str) and call_id else None
        opened = _opened(name, call_id, tool_args)
    except Exception as exc:
        instrumentation_failed("tool_call", exc)
        return await wrapped(*args, **kwargs)
    out = host_outcome()

    async def run(arguments: Any) -> Any:
        return await wrapped(tool, args=arguments, tool_context=tool_context)

    async def execute(arguments: Any) -> Any:
        return await out.acall(run, arguments)

    try:
        return await get_pipeline().arun_tool(name, tool_args, execute, tool_call_id=call_id,
                                              runtime_id=RUNTIME_ID, raise_errors=True,
                                              call=opened.call)
    except Exception as exc:
        if out.recover(exc, "tool_call"):
            return await wrapped(*args, **kwargs)
        return out.result

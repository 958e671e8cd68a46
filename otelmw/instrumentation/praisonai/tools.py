"""PraisonAI tool calls: ``execute_tool``/``execute_tool_async`` through
``run_tool``/``arun_tool`` (``raise_errors``: PraisonAI's error handling is unchanged),
runtime id ``agent._runtime_id`` (missing/``"praisonai"``: native bypass). otelmw's
normalizer for it applies on both paths; PraisonAI's own registry answers pass-through
for that id during the call, so nothing is normalized twice."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, NamedTuple

from ...core import get_pipeline
from .fail_open import afail_open, fail_open, host_outcome, instrumentation_failed
from .turns import NATIVE_RUNTIME_ID, runtime_id_of


class _AttemptError:
    """Async tool calls: the error text of the latest attempt, when the tool raised
    (PraisonAI hands back an error dict instead)."""

    __slots__ = ("text",)

    def __init__(self) -> None:
        self.text: Any = None


class _ToolInFlight(NamedTuple):
    normalized_id: str | None  # the runtime id otelmw normalizes for this call
    attempt: _AttemptError | None  # async only


_NO_TOOL = _ToolInFlight(None, None)
_tool: ContextVar[_ToolInFlight] = ContextVar("otelmw_praisonai_tool", default=_NO_TOOL)


_TOOL_PARAMS = ("function_name", "arguments", "tool_call_id", "tools_override")


class _ToolCall(NamedTuple):
    params: dict[str, Any]  # the host call's arguments by name
    runtime_id: str
    normalized_id: str | None  # ``runtime_id`` when otelmw normalizes it, else None


def _tool_call(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
               ) -> _ToolCall | None:
    """The tool call of ``execute_tool(...)``; None leaves the call to PraisonAI."""
    try:
        if instance is None or len(args) > len(_TOOL_PARAMS):
            return None
        params = {**kwargs, **dict(zip(_TOOL_PARAMS, args, strict=False))}
        if not isinstance(params.get("function_name"), str) or type(
                params.get("arguments")) is not dict:
            return None
        rid = runtime_id_of(instance)
        own = rid if rid != NATIVE_RUNTIME_ID and get_pipeline().normalizers.has_middleware(
            rid) else None
        return _ToolCall(params, rid, own)
    except Exception as exc:
        instrumentation_failed("execute_tool", exc)
        return None


def tool_sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    found = _tool_call(instance, args, kwargs)
    if found is None:
        return wrapped(*args, **kwargs)
    params = found.params

    def call(effective: Any) -> Any:
        token = _tool.set(_ToolInFlight(found.normalized_id, None))
        try:
            return wrapped(**{**params, "arguments": effective})
        finally:
            _tool.reset(token)

    return fail_open(host_outcome(), "execute_tool", call, lambda ex: get_pipeline().run_tool(
        params["function_name"], params["arguments"], ex, tool_call_id=params.get(
            "tool_call_id"), runtime_id=found.runtime_id, raise_errors=True),
        lambda: wrapped(*args, **kwargs))


async def tool_async(wrapped: Any, instance: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
    found = _tool_call(instance, args, kwargs)
    if found is None:
        return await wrapped(*args, **kwargs)
    params = found.params
    out = host_outcome()

    async def call(effective: Any) -> Any:
        attempt = _AttemptError()
        token = _tool.set(_ToolInFlight(found.normalized_id, attempt))
        try:
            result = await wrapped(**{**params, "arguments": effective})
        finally:
            _tool.reset(token)
        if attempt.text is not None:  # PraisonAI turned a raising tool into an error dict
            from praisonaiagents.errors import ToolExecutionError

            out.result, out.swallowed = result, True
            raise ToolExecutionError(str(attempt.text), tool_name=params["function_name"],
                                     agent_id=str(getattr(instance, "name", "unknown")))
        return result

    return await afail_open(out, "execute_tool", call, lambda ex: get_pipeline().arun_tool(
        params["function_name"], params["arguments"], ex, tool_call_id=params.get(
            "tool_call_id"), runtime_id=found.runtime_id, raise_errors=True),
        lambda: wrapped(*args, **kwargs))


async def async_attempt(wrapped: Any, instance: Any, args: tuple[Any, ...],
                         kwargs: dict[str, Any]) -> Any:
    """``_execute_tool_async_impl``: did the tool raise? (PraisonAI tags the error
    dict it makes of the exception with its private ``_praison_retryable``)."""
    result = await wrapped(*args, **kwargs)
    attempt = _tool.get().attempt
    if attempt is not None:
        raised = isinstance(result, dict) and "_praison_retryable" in result
        attempt.text = (result.get("error") or "tool raised") if raised else None
    return result


def praison_lookup(wrapped: Any, instance: Any, args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> Any:
    """PraisonAI's normalizer lookup: pass-through while otelmw normalizes that id."""
    own = _tool.get().normalized_id
    if own is not None and (args[0] if args else kwargs.get("runtime_id")) == own:
        from praisonaiagents.runtime.middleware import PassThroughMiddleware

        return PassThroughMiddleware()  # runtime_id "praisonai": PraisonAI skips it
    return wrapped(*args, **kwargs)

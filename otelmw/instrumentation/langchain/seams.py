"""Fallback seams for model and tool calls that no agent middleware sees (a plain
LangGraph ``StateGraph`` whose nodes call a chat model or a ``ToolNode``/``BaseTool``
directly, or a program calling them itself):

* ``BaseChatModel._generate_with_cache``/``_agenerate_with_cache`` (every
  ``invoke``/``ainvoke``/``batch``, streamed inside when a streaming callback listens,
  as ``stream_mode="messages"`` does) → one ``chat`` call each, unless a model call is
  already current (otelmw's middleware runs this request: no second span);
* ``BaseTool.run``/``arun`` (every ``invoke``/``ainvoke``, ``ToolNode`` included) → one
  ``execute_tool`` call each, unless otelmw's middleware runs this very tool.

Tool input that is not a dict (a plain string input) runs unobserved.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, NamedTuple

from ...core import current_llm_call, get_pipeline
from .fail_open import host_outcome, instrumentation_failed
from .requests import model_facts, request_view, rewritten
from .results import RUNTIME_ID, ToolRun, host_result, tool_run

# The tool otelmw's middleware runs in this context (its ``BaseTool.run`` is that call).
tool_in_flight: ContextVar[str | None] = ContextVar("otelmw_langchain_tool", default=None)

_GENERATE_PARAMS = ("messages", "stop", "run_manager")
_NOT_SETTINGS = frozenset({"messages", "run_manager", "tools", "tool_choice"})


class _Generate(NamedTuple):
    params: dict[str, Any]  # the call's arguments by name
    view: dict[str, Any]
    options: dict[str, Any]  # of run_llm


def _generate(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Generate | None:
    if len(args) > len(_GENERATE_PARAMS):
        return None
    params = {**kwargs, **dict(zip(_GENERATE_PARAMS, args, strict=False))}
    messages = params.get("messages")
    if not isinstance(messages, list):
        return None
    settings = {k: v for k, v in params.items() if k not in _NOT_SETTINGS and v is not None}
    facts = model_facts(model, settings)
    view = request_view(model, None, messages, params.get("tools") or [],
                        params.get("tool_choice"), settings, facts)
    return _Generate(params, view, {"provider": facts.provider, "model": facts.model,
                                    "api_mode": facts.api_mode})


def _effective_params(found: _Generate, payload: Any) -> dict[str, Any]:
    params = found.params
    if payload is found.view:
        return params
    settings = {k: v for k, v in params.items() if k not in _NOT_SETTINGS and v is not None}
    tools = params.get("tools") or []
    change = rewritten(found.view, payload, None, params["messages"], tools, settings)
    out = dict(params)
    if change.messages is not None:
        out["messages"] = change.messages
    if change.tools is not None:
        out["tools"] = change.tools
    if change.tool_choice_changed:
        out["tool_choice"] = change.tool_choice
    if change.settings is not None:
        for key in settings.keys() - change.settings.keys():
            out.pop(key, None)
        out.update(change.settings)
    return out


def generate_with_cache(wrapped: Any, instance: Any, args: tuple[Any, ...],
                        kwargs: dict[str, Any]) -> Any:
    if current_llm_call() is not None:  # otelmw's middleware (or a host) runs this request
        return wrapped(*args, **kwargs)
    try:
        found = _generate(instance, args, kwargs)
    except Exception as exc:
        instrumentation_failed("generate", exc)
        found = None
    if found is None:
        return wrapped(*args, **kwargs)
    out = host_outcome()

    def execute(payload: Any) -> Any:
        return out.call(lambda params: wrapped(**params), _effective_params(found, payload))

    try:
        return get_pipeline().run_llm(found.view, execute, **found.options)
    except BaseException as exc:
        if out.recover(exc, "generate"):
            return wrapped(*args, **kwargs)
        return out.result


async def agenerate_with_cache(wrapped: Any, instance: Any, args: tuple[Any, ...],
                               kwargs: dict[str, Any]) -> Any:
    if current_llm_call() is not None:
        return await wrapped(*args, **kwargs)
    try:
        found = _generate(instance, args, kwargs)
    except Exception as exc:
        instrumentation_failed("agenerate", exc)
        found = None
    if found is None:
        return await wrapped(*args, **kwargs)
    out = host_outcome()

    def execute(payload: Any) -> Any:
        return out.acall(lambda params: wrapped(**params), _effective_params(found, payload))

    try:
        return await get_pipeline().arun_llm(found.view, execute, **found.options)
    except BaseException as exc:
        if out.recover(exc, "agenerate"):
            return await wrapped(*args, **kwargs)
        return out.result


class _ToolInput(NamedTuple):
    name: str
    tool_input: dict[str, Any]
    tool_call_id: str | None


def _tool_input(tool: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _ToolInput | None:
    name = getattr(tool, "name", None)
    if not isinstance(name, str) or tool_in_flight.get() == name:
        return None  # otelmw's middleware runs this tool call
    tool_input = args[0] if args else kwargs.get("tool_input")
    if type(tool_input) is not dict:
        return None
    call_id = kwargs.get("tool_call_id")
    return _ToolInput(name, tool_input, call_id if isinstance(call_id, str) else None)


def _call(wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any], tool_input: Any) -> Any:
    if args:
        return wrapped(tool_input, *args[1:], **kwargs)
    return wrapped(**{**kwargs, "tool_input": tool_input})


def tool_run_seam(wrapped: Any, instance: Any, args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> Any:
    try:
        found = _tool_input(instance, args, kwargs)
    except Exception as exc:
        instrumentation_failed("tool_run", exc)
        found = None
    if found is None:
        return wrapped(*args, **kwargs)
    out, run = host_outcome(), ToolRun()

    def host(tool_input: Any) -> Any:
        token = tool_in_flight.set(found.name)
        try:
            run.raw = _call(wrapped, args, kwargs, tool_input)
            return run.raw
        finally:
            tool_in_flight.reset(token)

    def execute(effective: Any) -> Any:
        run.executed = True
        return out.call(host, effective)

    token = tool_run.set(run)
    try:
        answer = get_pipeline().run_tool(found.name, found.tool_input, execute,
                                         tool_call_id=found.tool_call_id,
                                         runtime_id=RUNTIME_ID, raise_errors=True)
        return host_result(answer, run, {"id": found.tool_call_id, "name": found.name}
                           if found.tool_call_id else None)
    except BaseException as exc:
        if out.recover(exc, "tool_run"):
            return wrapped(*args, **kwargs)
        return out.result
    finally:
        tool_run.reset(token)


async def tool_arun_seam(wrapped: Any, instance: Any, args: tuple[Any, ...],
                         kwargs: dict[str, Any]) -> Any:
    try:
        found = _tool_input(instance, args, kwargs)
    except Exception as exc:
        instrumentation_failed("tool_arun", exc)
        found = None
    if found is None:
        return await wrapped(*args, **kwargs)
    out, run = host_outcome(), ToolRun()

    async def host(tool_input: Any) -> Any:
        token = tool_in_flight.set(found.name)
        try:
            run.raw = await _call(wrapped, args, kwargs, tool_input)
            return run.raw
        finally:
            tool_in_flight.reset(token)

    def execute(effective: Any) -> Any:
        run.executed = True
        return out.acall(host, effective)

    token = tool_run.set(run)
    try:
        answer = await get_pipeline().arun_tool(found.name, found.tool_input, execute,
                                                tool_call_id=found.tool_call_id,
                                                runtime_id=RUNTIME_ID, raise_errors=True)
        return host_result(answer, run, {"id": found.tool_call_id, "name": found.name}
                           if found.tool_call_id else None)
    except BaseException as exc:
        if out.recover(exc, "tool_arun"):
            return await wrapped(*args, **kwargs)
        return out.result
    finally:
        tool_run.reset(token)

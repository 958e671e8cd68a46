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

from typing import Any, NamedTuple

from ...core import current_llm_call, get_pipeline
from .fail_open import host_outcome, instrumentation_failed
from .requests import model_facts, request_view, rewritten
from .results import ToolCallRun, tool_in_flight

_GENERATE_PARAMS = ("messages", "stop", "run_manager")
_NOT_SETTINGS = frozenset({"messages", "run_manager", "tools", "tool_choice"})


class _Generate(NamedTuple):
    params: dict[str, Any]  # the call's arguments by name
    view: dict[str, Any]
    options: dict[str, Any]  # of run_llm


def _generate(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
              where: str) -> _Generate | None:
    """The request of this ``_generate_with_cache`` call, or None: it runs unobserved."""
    try:
        return _request(model, args, kwargs)
    except Exception as exc:
        instrumentation_failed(where, exc)
        return None


def _request(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Generate | None:
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
    found = _generate(instance, args, kwargs, "generate")
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
    found = _generate(instance, args, kwargs, "agenerate")
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


def _tool_call_run(wrapped: Any, tool: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                   where: str) -> ToolCallRun | None:
    """The run of this ``BaseTool.run``/``arun`` call, or None: it runs unobserved."""
    try:
        name = getattr(tool, "name", None)
        if not isinstance(name, str) or tool_in_flight.get() == name:
            return None  # otelmw's middleware runs this tool call
        tool_input = args[0] if args else kwargs.get("tool_input")
        if type(tool_input) is not dict:
            return None
        call_id = kwargs.get("tool_call_id")
        call_id = call_id if isinstance(call_id, str) else None
    except Exception as exc:
        instrumentation_failed(where, exc)
        return None

    def invoke(effective: Any) -> Any:
        if args:
            return wrapped(effective, *args[1:], **kwargs)
        return wrapped(**{**kwargs, "tool_input": effective})

    return ToolCallRun(name, tool_input, call_id, {"id": call_id, "name": name}
                       if call_id else None, invoke, _unchanged, where)


def _unchanged(effective: Any) -> Any:
    return effective


def tool_run_seam(wrapped: Any, instance: Any, args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> Any:
    tool = _tool_call_run(wrapped, instance, args, kwargs, "tool_run")
    if tool is None:
        return wrapped(*args, **kwargs)
    return tool.result(lambda: wrapped(*args, **kwargs))


async def tool_arun_seam(wrapped: Any, instance: Any, args: tuple[Any, ...],
                         kwargs: dict[str, Any]) -> Any:
    tool = _tool_call_run(wrapped, instance, args, kwargs, "tool_arun")
    if tool is None:
        return await wrapped(*args, **kwargs)
    return await tool.aresult(lambda: wrapped(*args, **kwargs))

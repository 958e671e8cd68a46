"""otelmw's own ``AgentMiddleware``, added last (innermost) to every
``langchain.agents.create_agent``, and its tool wrapper, innermost in the agent's
``ToolNode``: each sees the request the user's middleware produced, and each call of its
handler (a user middleware may retry) is one call through the pipeline.

* ``wrap_model_call``/``awrap_model_call`` (the middleware) → one ``chat`` call: otelmw's
  request stage (a rewrite goes back through ``ModelRequest.override``), hook points and
  execution chain around LangChain's handler, called exactly once per base call.
* the tool node's ``wrap_tool_call``/``awrap_tool_call`` → one ``execute_tool`` call: a
  ``tool_request`` rewrite becomes the arguments the tool gets
  (``ToolCallRequest.override``), a ``pre_tool_call`` block answers
  ``ToolMessage(status="error")`` without calling the handler, the ``langchain``
  normalizer reads the ``ToolMessage``.

``AgentMiddleware`` itself is never patched: ``create_agent`` tells which hooks a
middleware has by comparing its class's methods with the base class's, so patching the
base class would change every user middleware. otelmw's middleware has no tool hooks:
with one, ``create_agent`` would decide that a middleware handles tools of its own and
skip its check of the tools a request names (an unknown tool would no longer raise),
and would make a tool node for an agent without tools. Instead the tool node
``create_agent`` makes (only where it makes one) gets otelmw's wrapper composed inside
the user's middleware chain, through ``ToolNode``'s own ``wrap_tool_call`` parameters.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from ...core import get_pipeline
from .fail_open import host_outcome, instrumentation_failed
from .requests import model_facts, request_view, rewritten
from .results import ToolCallRun

MIDDLEWARE_NAME = "otelmw"


def _effective(request: Any, view: dict[str, Any], payload: Any) -> Any:
    """LangChain's request for the payload otelmw's chain hands to the base call."""
    if payload is view:
        return request
    change = rewritten(view, payload, request.system_message, request.messages,
                       request.tools, request.model_settings)
    overrides: dict[str, Any] = {}
    if change.messages is not None:
        overrides["messages"], overrides["system_message"] = change.messages, change.system
    if change.tools is not None:
        overrides["tools"] = change.tools
    if change.tool_choice_changed:
        overrides["tool_choice"] = change.tool_choice
    if change.settings is not None:
        overrides["model_settings"] = change.settings
    return request.override(**overrides) if overrides else request


def _model_call(request: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the request view, ``run_llm``'s options) of one model call."""
    facts = model_facts(request.model, request.model_settings)
    view = request_view(request.model, request.system_message, request.messages,
                        request.tools, request.tool_choice, request.model_settings, facts)
    return view, {"provider": facts.provider, "model": facts.model,
                  "api_mode": facts.api_mode}


def _tool_call_run(request: Any, handler: Any, where: str) -> ToolCallRun:
    """The run of ``request``'s tool call: a ``tool_request`` rewrite of its arguments
    goes to ``handler`` as ``request.override(tool_call=...)``."""
    call = request.tool_call
    args = call.get("args")

    def host_request(effective: Any) -> Any:
        return request if effective is args else request.override(
            tool_call={**call, "args": effective})

    return ToolCallRun(str(call["name"]), args, call.get("id"), call, handler, host_request,
                       where)


class _ModelHooks:
    """The hooks of otelmw's middleware (a mixin of the ``AgentMiddleware`` subclass
    made in ``middleware_class``)."""

    @property
    def name(self) -> str:
        return MIDDLEWARE_NAME

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        try:
            view, opts = _model_call(request)
        except Exception as exc:
            instrumentation_failed("wrap_model_call", exc)
            return handler(request)
        out = host_outcome()

        def execute(payload: Any) -> Any:
            return out.call(handler, _effective(request, view, payload))

        try:
            return get_pipeline().run_llm(view, execute, **opts)
        except BaseException as exc:
            if out.recover(exc, "wrap_model_call"):
                return handler(request)
            return out.result

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        try:
            view, opts = _model_call(request)
        except Exception as exc:
            instrumentation_failed("awrap_model_call", exc)
            return await handler(request)
        out = host_outcome()

        def execute(payload: Any) -> Any:
            return out.acall(handler, _effective(request, view, payload))

        try:
            return await get_pipeline().arun_llm(view, execute, **opts)
        except BaseException as exc:
            if out.recover(exc, "awrap_model_call"):
                return await handler(request)
            return out.result


def _wrap_tool(request: Any, handler: Any) -> Any:
    try:
        tool = _tool_call_run(request, handler, "wrap_tool_call")
    except Exception as exc:
        instrumentation_failed("wrap_tool_call", exc)
        return handler(request)
    return tool.result(lambda: handler(request))


async def _awrap_tool(request: Any, handler: Any) -> Any:
    try:
        tool = _tool_call_run(request, handler, "awrap_tool_call")
    except Exception as exc:
        instrumentation_failed("awrap_tool_call", exc)
        return await handler(request)
    return await tool.aresult(lambda: handler(request))


def _inside(outer: Any) -> Any:
    """A sync tool wrapper: ``outer`` (the user's middleware chain), otelmw innermost."""
    def composed(request: Any, execute: Any) -> Any:
        def inner(req: Any) -> Any:
            return _wrap_tool(req, execute)
        return outer(request, inner)
    return _wrap_tool if outer is None else composed


def _ainside(outer: Any) -> Any:
    """``_inside`` for the async chain."""
    async def composed(request: Any, execute: Any) -> Any:
        async def inner(req: Any) -> Any:
            return await _awrap_tool(req, execute)
        return await outer(request, inner)
    return _awrap_tool if outer is None else composed


# Set while otelmw's ``create_agent`` runs LangChain's: the ``ToolNode`` made then is
# the agent's, which gets otelmw's tool wrapper.
_making_agent: ContextVar[bool] = ContextVar("otelmw_langchain_making_agent", default=False)

_SYNC, _ASYNC = "wrap_tool_call", "awrap_tool_call"


def tool_node_init(wrapped: Any, instance: Any, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Any:
    """``ToolNode(tools, ..., wrap_tool_call=, awrap_tool_call=)`` made by
    ``create_agent``: otelmw's tool wrapper innermost in the chain it is given (a sync-only
    chain stays sync-only: ToolNode runs it in async calls too, otelmw's inside it)."""
    if not _making_agent.get():
        return wrapped(*args, **kwargs)
    try:
        outer_sync, outer_async = kwargs.get(_SYNC), kwargs.get(_ASYNC)
        composed = {**kwargs, _SYNC: _inside(outer_sync)}
        if outer_async is not None or outer_sync is None:
            composed[_ASYNC] = _ainside(outer_async)
    except Exception as exc:
        instrumentation_failed("tool_node", exc)
        return wrapped(*args, **kwargs)
    return wrapped(*args, **composed)


_middleware_class: type | None = None


def middleware_class() -> type:
    """otelmw's ``AgentMiddleware`` subclass, made once LangChain's agents module is
    imported."""
    global _middleware_class
    if _middleware_class is None:
        from langchain.agents.middleware import AgentMiddleware

        class OtelmwModelMiddleware(_ModelHooks, AgentMiddleware):  # type: ignore[misc]
            """otelmw's middleware: every model call through the pipeline."""

        _middleware_class = OtelmwModelMiddleware
    return _middleware_class


def create_agent(wrapped: Any, instance: Any, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Any:
    """``create_agent(...)`` with otelmw's middleware appended to ``middleware=``, and
    otelmw's tool wrapper in the tool node it makes."""
    try:
        middleware = list(kwargs.get("middleware") or ())
        ours = middleware_class()
        if not any(isinstance(m, ours) for m in middleware):
            middleware.append(ours())
            kwargs = {**kwargs, "middleware": middleware}
    except Exception as exc:
        instrumentation_failed("create_agent", exc)
        return wrapped(*args, **kwargs)
    token = _making_agent.set(True)
    try:
        return wrapped(*args, **kwargs)
    finally:
        _making_agent.reset(token)

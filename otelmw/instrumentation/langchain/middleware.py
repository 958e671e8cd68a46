"""otelmw's own ``AgentMiddleware``, added last (innermost) to every
``langchain.agents.create_agent``: it sees the request the user's middleware produced,
and each call of its handler (a user middleware may retry) is one call through the
pipeline.

* ``wrap_model_call``/``awrap_model_call`` → one ``chat`` call: otelmw's request stage
  (a rewrite goes back through ``ModelRequest.override``), hook points and execution
  chain around LangChain's handler, called exactly once per base call.
* ``wrap_tool_call``/``awrap_tool_call`` → one ``execute_tool`` call: a ``tool_request``
  rewrite becomes the arguments the tool gets (``ToolCallRequest.override``), a
  ``pre_tool_call`` block answers ``ToolMessage(status="error")`` without calling the
  handler, the ``langchain`` normalizer reads the ``ToolMessage``.

``AgentMiddleware`` itself is never patched: ``create_agent`` tells which hooks a
middleware has by comparing its class's methods with the base class's, so patching the
base class would change every user middleware. otelmw's class has the tool hooks only
when the agent can run tools (with them an agent without tools would get a tool node).
"""

from __future__ import annotations

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
    """The model hooks of otelmw's middleware (a mixin of the ``AgentMiddleware``
    subclasses made in ``middleware_classes``)."""

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


class _ToolHooks:
    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        try:
            tool = _tool_call_run(request, handler, "wrap_tool_call")
        except Exception as exc:
            instrumentation_failed("wrap_tool_call", exc)
            return handler(request)
        return tool.result(lambda: handler(request))

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        try:
            tool = _tool_call_run(request, handler, "awrap_tool_call")
        except Exception as exc:
            instrumentation_failed("awrap_tool_call", exc)
            return await handler(request)
        return await tool.aresult(lambda: handler(request))


_classes: tuple[type, type] | None = None


def middleware_classes() -> tuple[type, type]:
    """(model hooks only, model and tool hooks): ``AgentMiddleware`` subclasses, made
    once LangChain's agents module is imported."""
    global _classes
    if _classes is None:
        from langchain.agents.middleware import AgentMiddleware

        class OtelmwModelMiddleware(_ModelHooks, AgentMiddleware):  # type: ignore[misc]
            """otelmw's middleware of an agent without tools."""

        class OtelmwAgentMiddleware(_ToolHooks, _ModelHooks, AgentMiddleware):  # type: ignore[misc]
            """otelmw's middleware: every model and tool call through the pipeline."""

        _classes = (OtelmwModelMiddleware, OtelmwAgentMiddleware)
    return _classes


def _runs_tools(tools: Any, middleware: list[Any]) -> bool:
    """Whether ``create_agent`` makes a tool node without otelmw's middleware."""
    from langchain.agents.middleware import AgentMiddleware

    if any(not isinstance(t, dict) for t in tools or ()):
        return True
    return any(getattr(m, "tools", None) or type(m).wrap_tool_call is not
               AgentMiddleware.wrap_tool_call or type(m).awrap_tool_call is not
               AgentMiddleware.awrap_tool_call for m in middleware)


def create_agent(wrapped: Any, instance: Any, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Any:
    """``create_agent(...)`` with otelmw's middleware appended to ``middleware=``."""
    try:
        middleware = list(kwargs.get("middleware") or ())
        model_only, with_tools = middleware_classes()
        if not any(isinstance(m, model_only | with_tools) for m in middleware):
            tools = args[1] if len(args) > 1 else kwargs.get("tools")
            middleware.append((with_tools if _runs_tools(tools, middleware) else model_only)())
            kwargs = {**kwargs, "middleware": middleware}
    except Exception as exc:
        instrumentation_failed("create_agent", exc)
    return wrapped(*args, **kwargs)

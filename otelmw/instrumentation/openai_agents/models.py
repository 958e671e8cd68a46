"""Agents SDK model calls: ``get_response``/``stream_response`` of
``OpenAIResponsesModel`` and ``OpenAIChatCompletionsModel``, one ``chat {model}`` call
each through the pipeline (the SDK's retries call them again: a call each).

The request otelmw's plugins see and may rewrite is the SDK's own model request, by
the Responses API's names where there is one: ``model``, ``instructions`` (the
system instructions), ``input`` (the SDK's input items), ``tools``, ``handoffs``,
``output_schema``, ``model_settings``, ``previous_response_id``, ``conversation_id``,
``prompt``; and, from ``model_settings``, ``temperature``, ``top_p``, ``max_tokens``,
``frequency_penalty``, ``presence_penalty`` when set (a rewritten value goes back into
a copy of ``model_settings``). A rewritten ``model`` is asked of a copy of the model
object; a key a rewrite drops keeps the SDK's value. The openai SDK call under it is
the call's request (``otelmw_openai`` only enriches its span); a streamed response's
span ends with the stream.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from ...core import current_llm_call, get_pipeline
from .._base import AsyncCallStream, Wrapper, server_of
from .runs import instrumentation_failed

_PARAMS = ("system_instructions", "input", "model_settings", "tools", "output_schema",
           "handoffs", "tracing")
_KEYWORDS = ("previous_response_id", "conversation_id", "prompt")
# request key → get_response parameter (``tracing`` is the SDK's own, not a request's)
_REQUEST_KEYS = {"instructions": "system_instructions", "input": "input", "tools": "tools",
                 "handoffs": "handoffs", "output_schema": "output_schema",
                 "previous_response_id": "previous_response_id",
                 "conversation_id": "conversation_id", "prompt": "prompt"}
_SETTINGS = ("temperature", "top_p", "max_tokens", "frequency_penalty", "presence_penalty")


class ModelCall:
    """One ``get_response``/``stream_response`` call: its parameters by name and the
    request otelmw's pipeline sees."""

    __slots__ = ("instance", "params", "request")

    def __init__(self, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if len(args) > len(_PARAMS):
            raise TypeError("more positional arguments than Model.get_response takes")
        self.instance = instance
        self.params: dict[str, Any] = {**dict(zip(_PARAMS, args, strict=False)), **kwargs}
        request: dict[str, Any] = {}
        model = getattr(instance, "model", None)
        if isinstance(model, str):
            request["model"] = model
        for key, param in _REQUEST_KEYS.items():
            if param in self.params:
                request[key] = self.params[param]
        settings = self.params.get("model_settings")
        if settings is not None:
            request["model_settings"] = settings
            for name in _SETTINGS:
                value = getattr(settings, name, None)
                if value is not None:
                    request[name] = value
        self.request = request

    def host_call(self, wrapped: Any, request: Any) -> Any:
        """Call the host's method (``wrapped``, bound to the model object) with what
        ``request`` says: the SDK's own arguments when it is the original."""
        if request is self.request or not isinstance(request, dict):
            return wrapped(**self.params)
        params = dict(self.params)
        for key, param in _REQUEST_KEYS.items():
            if key in request:
                params[param] = request[key]
        settings = request.get("model_settings", params.get("model_settings"))
        changed = {name: request[name] for name in _SETTINGS
                   if name in request and request[name] != getattr(settings, name, None)}
        if changed and dataclasses.is_dataclass(settings) and not isinstance(settings, type):
            settings = dataclasses.replace(settings, **changed)
        if settings is not None:
            params["model_settings"] = settings
        model = request.get("model")
        if isinstance(model, str) and model and model != getattr(self.instance, "model", None):
            instance = copy.copy(self.instance)
            instance.model = model
            return wrapped.__func__(instance, **params)
        return wrapped(**params)


def _model_call(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any], api_mode: str,
                where: str) -> tuple[ModelCall, dict[str, Any]] | None:
    """The call and its ``run_llm`` options, or None (an error of otelmw's, counted at
    ``where``): the call runs unobserved."""
    try:
        call = ModelCall(instance, args, kwargs)
        address, port = server_of(getattr(getattr(instance, "_client", None), "base_url", None))
    except Exception as exc:
        instrumentation_failed(where, exc)
        return None
    return call, {"provider": "openai", "api_mode": api_mode, "server_address": address,
                  "server_port": port}


def get_response(api_mode: str) -> Wrapper:
    """``get_response``: the pipeline around the host's call (fail open)."""

    async def traced(wrapped: Any, instance: Any, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> Any:
        if current_llm_call() is not None:  # an outer layer already has this request
            return await wrapped(*args, **kwargs)
        found = _model_call(instance, args, kwargs, api_mode, "get_response")
        if found is None:
            return await wrapped(*args, **kwargs)
        call, options = found
        started = [False]

        def execute(request: Any) -> Any:
            started[0] = True
            return (wrapped(*args, **kwargs) if request is call.request
                    else call.host_call(wrapped, request))

        try:
            return await get_pipeline().arun_llm(call.request, execute, **options)
        except Exception as exc:
            if started[0]:
                raise
            instrumentation_failed("get_response", exc)
            return await wrapped(*args, **kwargs)

    return traced




def stream_response(api_mode: str) -> Wrapper:
    """``stream_response`` (an async generator): the pipeline runs on the first
    iteration; the call's span ends when the stream does."""

    def traced(wrapped: Any, instance: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
        return _stream(wrapped, instance, args, kwargs, api_mode)

    return traced


async def _stream(wrapped: Any, instance: Any, args: tuple[Any, ...],
                  kwargs: dict[str, Any], api_mode: str) -> Any:
    found = None if current_llm_call() is not None else _model_call(
        instance, args, kwargs, api_mode, "stream_response")
    if found is None:
        async for event in wrapped(*args, **kwargs):
            yield event
        return
    model_call, options = found
    started = [False]

    def execute(request: Any) -> Any:
        started[0] = True
        inner = (wrapped(*args, **kwargs) if request is model_call.request
                 else model_call.host_call(wrapped, request))
        return AsyncCallStream(inner, current_llm_call())

    try:
        stream = await get_pipeline().arun_llm(model_call.request, execute, **options)
    except Exception as exc:
        if started[0]:
            raise
        instrumentation_failed("stream_response", exc)
        stream = wrapped(*args, **kwargs)
    try:
        async for event in stream:
            yield event
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()

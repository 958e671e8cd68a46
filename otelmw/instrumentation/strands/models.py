"""``OpenAIModel.stream`` → one ``chat {model}`` call per provider request through
``Pipeline.arun_llm``.

The request otelmw's plugins see is the one the model sends: ``OpenAIModel.format_request``
of the call's messages, tool specs, system prompt and tool choice (OpenAI chat
completions: ``model``, ``messages``, ``tools``, ``stream``, ``stream_options``, the
model's ``params`` such as ``max_tokens``). A rewritten request is sent as it is (a copy
of the model object formats that request instead of its own), so the provider gets
exactly what the plugins made. The openai SDK call the model makes on the stream's
first iteration is the call's request: ``otelmw_openai`` only enriches its span; the
span ends with the stream. Other ``Model`` implementations are not wrapped.

Inside an agent's event loop Strands' own tracer has opened its ``chat`` span for the
model invocation and made it current: when it records, otelmw records the call on it
(``arun_llm(..., on_host_span=True)``: otelmw's ``chat`` attributes, its hook records and
events, its layers as children; Strands ends it), so a provider request has one ``chat``
span. otelmw's record is complete when the model's stream ends, before Strands ends its
span (after the stream, in its event loop).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from opentelemetry.trace import get_current_span

from ...core import CallInfo, current_llm_call, get_pipeline
from .._base import AsyncCallStream, Wrapper, server_of
from .results import failed

_PARAMS = ("messages", "tool_specs", "system_prompt")
_STRANDS = "strands-agents"  # the system (provider, latest conventions) Strands' spans name


class ModelCall:
    """One ``stream`` call: its arguments by name and the request it sends."""

    __slots__ = ("params", "request")

    def __init__(self, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if len(args) > len(_PARAMS):
            raise TypeError("more positional arguments than OpenAIModel.stream takes")
        params = {**dict(zip(_PARAMS, args, strict=False)), **kwargs}
        self.params = params
        self.request: dict[str, Any] = instance.format_request(
            params.get("messages"), params.get("tool_specs"), params.get("system_prompt"),
            params.get("tool_choice"), agent_metadata=params.get("agent_metadata"))


def _on_strands_span() -> bool:
    """Strands' own model-invocation span is current and records (its tracer's
    ``chat`` span, ``gen_ai.operation.name`` ``chat`` of ``strands-agents``): the call is
    recorded on it. Else (no tracer provider, the model called outside an agent's event
    loop) the call's span is otelmw's own."""
    span = get_current_span()
    if not span.is_recording() or getattr(span, "name", None) != "chat":
        return False
    recorded = getattr(span, "attributes", None)
    if not isinstance(recorded, Mapping) or recorded.get("gen_ai.operation.name") != "chat":
        return False
    return _STRANDS in (recorded.get("gen_ai.system"), recorded.get("gen_ai.provider.name"))


def _server(instance: Any) -> tuple[str | None, int | None]:
    client = getattr(instance, "_custom_client", None)
    if client is not None:
        return server_of(getattr(client, "base_url", None))
    client_args = getattr(instance, "client_args", None)
    base_url = client_args.get("base_url") if isinstance(client_args, dict) else None
    return server_of(base_url or "https://api.openai.com/v1")


def _sending(instance: Any, request: dict[str, Any]) -> Any:
    """A copy of the model object whose ``format_request`` answers ``request``."""
    clone = copy.copy(instance)

    def format_request(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return request

    clone.format_request = format_request
    return clone




def stream_wrapper() -> Wrapper:
    def traced(wrapped: Any, instance: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
        return _stream(wrapped, instance, args, kwargs)

    return traced


async def _stream(wrapped: Any, instance: Any, args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> Any:
    found: tuple[ModelCall, dict[str, Any]] | None = None
    if current_llm_call() is None:  # else an outer layer already has this request
        try:
            call = ModelCall(instance, args, kwargs)
            address, port = _server(instance)
            model = call.request.get("model")
            found = call, {"provider": "openai", "api_mode": "chat_completions",
                           "model": model if isinstance(model, str) else None,
                           "server_address": address, "server_port": port}
        except Exception as exc:
            failed("chat", exc)  # the model formats (and reports) its own request
    if found is None:
        async for event in wrapped(*args, **kwargs):
            yield event
        return
    model_call, options = found
    started = [False]

    def execute(request: Any) -> Any:
        started[0] = True
        if request is model_call.request or not isinstance(request, dict):
            inner = wrapped(*args, **kwargs)
        else:
            inner = wrapped.__func__(_sending(instance, request), *args, **kwargs)
        return AsyncCallStream(inner, current_llm_call())

    try:
        events = await get_pipeline().arun_llm(model_call.request, execute,
                                               on_host_span=_on_strands_span(), **options)
    except Exception as exc:
        if started[0]:
            raise
        failed("chat", exc)
        events = wrapped(*args, **kwargs)
    if not hasattr(events, "__aiter__"):
        # An llm_execution layer answered without a stream: Strands needs the model's
        # events. The model's stream starts on iteration, so nothing was sent yet.
        failed("chat", TypeError(f"an llm_execution layer answered {type(events).__name__}, "
                                 "not the model's event stream: the request is sent"))
        # the contract ran on this request: the provider SDK layer below must not run
        # it again (a model call of otelmw's is current, unobserved)
        events = AsyncCallStream(wrapped(*args, **kwargs),
                             CallInfo(operation="chat", provider="openai",
                                      model=options["model"]))
    try:
        async for event in events:
            yield event
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()


stream = stream_wrapper()

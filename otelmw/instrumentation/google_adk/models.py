"""ADK model requests: each request an ADK flow sends to its model (any ``BaseLlm``:
``Gemini``, ``LiteLlm``, ``Claude``, a user's own) is one ``chat {model}`` call through
the pipeline.

The seam is ``BaseLlmFlow._run_and_handle_error``, which ADK's ``call_llm_async`` hands
the model's response stream (``llm.generate_content_async(llm_request, stream=...)``,
created but not started) after its ``before_model_callback`` chain and before its own
``generate_content {model}`` span and ``on_model_error`` callbacks. otelmw puts its stream
in the model's place, so its call is the innermost layer, the request the model actually
gets: it starts on the stream's first pull, inside ADK's ``generate_content`` span (its
parent), runs otelmw's request stage, hook points and execution chain, and its base call
hands back the model's own stream, consumed with the call current (the provider SDK layer
under it, ``otelmw_google_genai`` or ``otelmw_litellm``, only enriches the span). ADK's
callbacks, error handling and tracing see what they see without otelmw: the same responses,
the same errors, in the same order.

The request otelmw's plugins see is ADK's own ``LlmRequest`` in the Gemini shape ADK
keeps it in, the keywords of ``generate_content``: ``model``, ``contents`` (a list of
``types.Content``) and ``config`` (a ``types.GenerateContentConfig``: system instruction,
tools, ``max_output_tokens``, ``temperature``, ...). A rewrite of any of the three is put
on that ``LlmRequest`` before the model reads it (a dict is validated into the type).

Not covered: live (bidi-streaming) sessions and ``RunConfig.support_cfc``, which run the
model through ``run_live``: they run as without otelmw.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ...core import current_llm_call, get_pipeline
from .._base import AsyncCallStream, Wrapper, server_of
from .fail_open import instrumentation_failed

API_MODE = "generate_content"  # the request and response shapes: Gemini's
GEMINI, VERTEX_AI = "gcp.gemini", "gcp.vertex_ai"
# LiteLLM's provider prefix (``openai/gpt-5``) → the conventions' gen_ai.provider.name
_LITELLM_PROVIDERS = {"openai": "openai", "azure": "azure.ai.openai",
                      "anthropic": "anthropic", "gemini": GEMINI, "vertex_ai": VERTEX_AI,
                      "bedrock": "aws.bedrock", "groq": "groq", "mistral": "mistral_ai",
                      "xai": "x_ai", "deepseek": "deepseek", "cohere": "cohere",
                      "ollama": "ollama", "ollama_chat": "ollama"}
_KEYS = ("model", "contents", "config")


def _model_of(stream: Any) -> Any:
    """The ``BaseLlm`` whose ``generate_content_async`` made ``stream`` (an async
    generator not started yet: its frame holds its arguments), or None."""
    frame = getattr(stream, "ag_frame", None)
    local = getattr(frame, "f_locals", None)
    return local.get("self") if isinstance(local, dict) else None


def _endpoint(model: Any) -> tuple[str | None, str | None, int | None]:
    """(gen_ai.provider.name, server host, port) of an ADK model object."""
    kind = type(model).__name__
    if kind == "LiteLlm":
        name = getattr(model, "model", None)
        prefix = name.split("/", 1)[0] if isinstance(name, str) and "/" in name else None
        args = getattr(model, "_additional_args", None)
        base = args.get("api_base") if isinstance(args, dict) else None
        provider = _LITELLM_PROVIDERS.get(prefix, prefix) if prefix else None
        return (provider, *server_of(base))
    if kind in ("Claude", "AnthropicLlm"):
        return "anthropic", None, None
    if hasattr(model, "api_client"):  # Gemini and its subclasses
        vertex = getattr(model, "vertexai", None) is True
        return (VERTEX_AI if vertex else GEMINI, *server_of(getattr(model, "base_url", None)))
    return None, None, None


class ModelRequest:
    """One request of an ADK flow to its model: the request otelmw's plugins see, and how
    a rewrite of it goes back on ADK's ``LlmRequest``."""

    __slots__ = ("llm_request", "request")

    def __init__(self, llm_request: Any) -> None:
        self.llm_request = llm_request
        self.request: dict[str, Any] = {key: getattr(llm_request, key, None) for key in _KEYS}

    def apply(self, request: Any) -> None:
        """Put what a rewrite changed on the ``LlmRequest`` the model is about to read."""
        if request is self.request or not isinstance(request, dict):
            return
        from google.genai import types

        target = self.llm_request
        model = request.get("model")
        if isinstance(model, str) and model and model != target.model:
            target.model = model
        contents = request.get("contents")
        if contents is not self.request["contents"] and isinstance(contents, list):
            target.contents = [c if isinstance(c, types.Content)
                               else types.Content.model_validate(c) for c in contents]
        config = request.get("config")
        if config is not self.request["config"] and config is not None:
            target.config = (config if isinstance(config, types.GenerateContentConfig)
                             else types.GenerateContentConfig.model_validate(config))




def run_and_handle_error() -> Wrapper:
    """``BaseLlmFlow._run_and_handle_error(response_generator, invocation_context,
    llm_request, ...)``: the model's stream replaced by otelmw's around it."""

    def traced(wrapped: Any, instance: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
        try:
            stream, context, llm_request = args[0], args[1], args[2]
            if getattr(context, "live_request_queue", None) is not None:
                return wrapped(*args, **kwargs)  # live / CFC: the stream is run_live's
            if current_llm_call() is not None:  # an outer layer has this request
                return wrapped(*args, **kwargs)
            observed = _observed(stream, llm_request)
        except Exception as exc:
            instrumentation_failed("model_request", exc)
            return wrapped(*args, **kwargs)
        return wrapped(observed, *args[1:], **kwargs)

    return traced


async def _observed(stream: Any, llm_request: Any) -> AsyncIterator[Any]:
    """The model's stream through the pipeline, started on the first pull (in ADK's
    ``generate_content`` span); what ADK gets is what the model's stream yields."""
    started = False
    try:
        call = ModelRequest(llm_request)
        provider, address, port = _endpoint(_model_of(stream))
    except Exception as exc:
        instrumentation_failed("model_request", exc)
        result: Any = stream
    else:
        def execute(request: Any) -> Any:
            nonlocal started
            started = True
            call.apply(request)
            return AsyncCallStream(stream, current_llm_call())

        try:
            result = await get_pipeline().arun_llm(
                call.request, execute, provider=provider, model=llm_request.model,
                api_mode=API_MODE, server_address=address, server_port=port,
                host_measured=True)  # ADK records the request's duration and usage points
        except Exception as exc:
            if started:
                raise
            instrumentation_failed("model_request", exc)
            result = stream
    answers = _answers(result, stream)
    try:
        async for response in answers:
            yield response
    finally:
        for source in (answers, stream) if answers is not stream else (stream,):
            close = getattr(source, "aclose", None)
            if close is not None:  # closing an exhausted or closed stream does nothing
                await close()


def _answers(result: Any, stream: Any) -> Any:
    """What ADK gets: the (observed) model stream, or an ``llm_execution`` layer's own
    answer (one ``LlmResponse``); anything else is counted and the model's own stream is
    what ADK gets (the request is sent once)."""
    if hasattr(result, "__anext__"):
        return result
    from google.adk.models.llm_response import LlmResponse

    if isinstance(result, LlmResponse):
        return _one(result)
    instrumentation_failed("llm_execution_answer", TypeError(
        f"an llm_execution answer for ADK must be an LlmResponse, not {type(result).__name__}"))
    return stream


async def _one(response: Any) -> AsyncIterator[Any]:
    yield response

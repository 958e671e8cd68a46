"""Each provider request of CrewAI's native OpenAI provider → one ``chat`` call through
the pipeline, at the method that sends it: ``OpenAICompletion._handle_completion``,
``_handle_streaming_completion``, ``_handle_responses``, ``_handle_streaming_responses``
and their async twins (``OpenAICompatibleCompletion`` — DeepSeek, OpenRouter, Ollama,
… — inherits them).

There the request is the OpenAI request CrewAI built (``params``: the Chat Completions
or Responses body), after CrewAI's own ``before_llm_call`` hooks and per attempt (its
rate-limit retries, its Responses fallback and reasoning-effort retries are each a
request of their own). ``llm_request`` rewrites that body, ``llm_execution`` wraps the
method (which streams, parses, fires CrewAI's events and ``after_llm_call`` hooks); the
openai SDK layer under it only enriches the span (response id, model, tokens, finish
reasons, server). A layer that answers without calling ``next_call`` answers CrewAI
(a text, or the tool calls CrewAI runs).
"""

from __future__ import annotations

from typing import Any

from ...core import get_pipeline
from .._base import Wrapper, server_of
from .results import failed, host_outcome

# CrewAI's provider names → the conventions' ``gen_ai.provider.name``.
_PROVIDERS = {"azure": "azure.ai.openai", "mistral": "mistral_ai", "xai": "x_ai",
              "grok": "x_ai", "gemini": "gcp.gemini"}


def _request(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
             api_mode: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(the request's body, ``run_llm``'s options), or None: sent unobserved."""
    params = kwargs.get("params") if "params" in kwargs else (args[0] if args else None)
    if not isinstance(params, dict):
        return None
    provider = getattr(instance, "provider", None)
    provider = _PROVIDERS.get(provider, provider) if isinstance(provider, str) else None
    model = params.get("model")
    address, port = server_of(getattr(instance, "base_url", None)
                              or getattr(instance, "api_base", None))
    return params, {"provider": provider or "openai",
                    "model": model if isinstance(model, str) else None,
                    "api_mode": api_mode, "server_address": address, "server_port": port}


def _with_params(args: tuple[Any, ...], kwargs: dict[str, Any],
                 params: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if "params" in kwargs or not args:
        return args, {**kwargs, "params": params}
    return (params, *args[1:]), kwargs


def model_request(api_mode: str, *, is_async: bool) -> Wrapper:
    """The wrapper of one of the provider's request methods (see the module docstring)."""

    def prepared(instance: Any, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
        try:
            return _request(instance, args, kwargs, api_mode)
        except Exception as exc:
            failed("chat", exc)
            return None

    def traced(wrapped: Any, instance: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
        found = prepared(instance, args, kwargs)
        if found is None:
            return wrapped(*args, **kwargs)
        params, options = found
        out = host_outcome()

        def send(effective: Any) -> Any:
            a, k = _with_params(args, kwargs, effective)
            return wrapped(*a, **k)

        try:
            return get_pipeline().run_llm(params, lambda p: out.call(send, p), **options)
        except BaseException as exc:
            if out.recover(exc, "chat"):
                return wrapped(*args, **kwargs)
            return out.result

    async def atraced(wrapped: Any, instance: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
        found = prepared(instance, args, kwargs)
        if found is None:
            return await wrapped(*args, **kwargs)
        params, options = found
        out = host_outcome()

        async def send(effective: Any) -> Any:
            a, k = _with_params(args, kwargs, effective)
            return await wrapped(*a, **k)

        try:
            return await get_pipeline().arun_llm(params, lambda p: out.acall(send, p),
                                                 **options)
        except BaseException as exc:
            if out.recover(exc, "chat"):
                return await wrapped(*args, **kwargs)
            return out.result

    return atraced if is_async else traced


REQUEST_METHODS = (
    ("_handle_completion", "chat_completions", False),
    ("_handle_streaming_completion", "chat_completions", False),
    ("_ahandle_completion", "chat_completions", True),
    ("_ahandle_streaming_completion", "chat_completions", True),
    ("_handle_responses", "responses", False),
    ("_handle_streaming_responses", "responses", False),
    ("_ahandle_responses", "responses", True),
    ("_ahandle_streaming_responses", "responses", True),
)

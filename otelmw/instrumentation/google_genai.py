"""Google Gen AI SDK (``google-genai``, ``from google import genai``), 1.32 and later:
``models.generate_content`` and ``generate_content_stream`` (sync and ``client.aio``),
``models.embed_content``, and automatic function calling (AFC).

What is wrapped, and why there:

* Each provider request is one ``chat`` span through the otelmw pipeline: the SDK's
  ``Models._generate_content`` / ``_generate_content_stream`` (and ``AsyncModels``'),
  which every public path (``generate_content``, its AFC loop, automatic continuation,
  ``chats``) calls once per request with the keywords ``model``, ``contents``,
  ``config``. An ``llm_request`` rewrite changes those keywords (what the SDK then
  sends); an ``llm_execution`` wrapper wraps the request.
* AFC (``config.tools`` holding Python functions, the SDK calling them and asking the
  model again): the public ``generate_content`` / ``generate_content_stream``, and a
  chat's ``send_message`` / ``send_message_stream`` (3.x chats run the AFC loop
  themselves; 1.x chats call ``generate_content``), is one turn,
  ``invoke_agent automatic_function_calling`` (unless a turn is already open), and each
  function call one ``execute_tool`` through the pipeline: the SDK's
  ``_extra_utils.invoke_function_from_dict_args`` (``_async``), which it calls with
  the model's arguments and the function (a ``tool_request`` rewrite changes the
  arguments the function gets). ``get_function_response_parts`` (``_async``) is wrapped
  only to know the model's call ids (``gen_ai.tool.call.id``), in the order the SDK
  calls the functions. The SDK's own handling stays: an exception of the function
  becomes its ``{"error": ...}`` response as without otelmw.
* ``embed_content`` (sync and async): an ``embeddings`` span.

``gen_ai.provider.name`` is ``gcp.gemini`` on the Gemini API
(``generativelanguage.googleapis.com``, the AI Studio API) and ``gcp.vertex_ai`` on a
Vertex AI client, the conventions' values. The responses are read by
``otelmw/telemetry/shapes/gemini.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextvars import ContextVar, copy_context
from typing import Any

from ..core import (
    MiddlewareContext,
    NormalizedToolResult,
    Turn,
    current_llm_call,
    current_runtime_context,
    enrich_llm_call,
    get_pipeline,
    instrumentation_failed,
)
from ._base import OtelmwInstrumentor, Wrapper, server_of
from ._turns import TurnGenerator

_MODELS = "google.genai.models"
_CHATS = "google.genai.chats"
_EXTRA = "google.genai._extra_utils"
RUNTIME_ID = "google-genai"
AGENT_NAME = "automatic_function_calling"
_API_MODE = "generate_content"
GEMINI, VERTEX_AI = "gcp.gemini", "gcp.vertex_ai"

# The function calls of the response whose functions the SDK is calling in this
# context, (name, call id) in the order of its parts: each function run takes the
# first one of its name.
_pending_calls: ContextVar[list[tuple[str, str | None]] | None] = ContextVar(
    "otelmw_google_genai_calls", default=None)


class GoogleGenAIInstrumentor(OtelmwInstrumentor):
    """``otelmw_google_genai``: ``chat {model}`` spans and the otelmw pipeline around
    every Gemini request, ``embeddings {model}`` spans around ``embed_content``, and
    AFC's turn and function calls (``invoke_agent``, ``execute_tool``)."""

    root_module = "google.genai"
    dependencies = ("google-genai >= 1.32.0, < 4",)

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        return [
            (_MODELS, "Models._generate_content", llm_wrapper(is_async=False)),
            (_MODELS, "Models._generate_content_stream", llm_wrapper(is_async=False)),
            (_MODELS, "AsyncModels._generate_content", llm_wrapper(is_async=True)),
            (_MODELS, "AsyncModels._generate_content_stream", llm_wrapper(is_async=True)),
            (_MODELS, "Models.embed_content", embeddings_wrapper(is_async=False)),
            (_MODELS, "AsyncModels.embed_content", embeddings_wrapper(is_async=True)),
            (_MODELS, "Models.generate_content", afc_turn_wrapper(stream=False)),
            (_MODELS, "Models.generate_content_stream", afc_turn_wrapper(stream=True)),
            (_MODELS, "AsyncModels.generate_content", afc_aturn_wrapper(stream=False)),
            (_MODELS, "AsyncModels.generate_content_stream", afc_aturn_wrapper(stream=True)),
            (_CHATS, "Chat.send_message", afc_turn_wrapper(stream=False, chat=True)),
            (_CHATS, "Chat.send_message_stream", afc_turn_wrapper(stream=True, chat=True)),
            (_CHATS, "AsyncChat.send_message", afc_aturn_wrapper(stream=False, chat=True)),
            (_CHATS, "AsyncChat.send_message_stream",
             afc_aturn_wrapper(stream=True, chat=True)),
            (_EXTRA, "get_function_response_parts", function_calls_wrapper(is_async=False)),
            (_EXTRA, "get_function_response_parts_async",
             function_calls_wrapper(is_async=True)),
            (_EXTRA, "invoke_function_from_dict_args", function_wrapper(is_async=False)),
            (_EXTRA, "invoke_function_from_dict_args_async",
             function_wrapper(is_async=True)),
        ]

    def result_normalizer(self) -> Any:
        return NORMALIZER


class GoogleGenAIToolResultNormalizer:
    """Runtime ``google-genai``: what the Python function returned is the result (the
    SDK answers the model with ``{"result": ...}``; a failure is an exception)."""

    runtime_id = RUNTIME_ID

    def normalize(self, result: Any, name: str, ctx: MiddlewareContext) -> NormalizedToolResult:
        return NormalizedToolResult(content=result, raw_result=result,
                                    execution_time_ms=ctx.execution_time_ms)


NORMALIZER = GoogleGenAIToolResultNormalizer()


# ---------------------------------------------------------------- endpoint
def _endpoint() -> Any:
    """(provider, host, port) of a ``Models`` resource's API client, with a one-entry
    cache keyed by the client's identity (one per wrapper: programs use few clients)."""
    last: list[Any] = [(None, (None, None, None))]

    def endpoint(instance: Any) -> tuple[str, str | None, int | None]:
        client = getattr(instance, "_api_client", None)
        cached_client, found = last[0]  # read the pair once: safe across threads
        if client is None or client is not cached_client:
            provider = VERTEX_AI if getattr(client, "vertexai", False) is True else GEMINI
            options = getattr(client, "_http_options", None)
            found = (provider, *server_of(getattr(options, "base_url", None)))
            last[0] = (client, found)
        return found  # type: ignore[no-any-return]

    return endpoint


# ---------------------------------------------------------------- model requests
def llm_wrapper(*, is_async: bool) -> Wrapper:
    """Wrapper for one provider request (``_generate_content``, ``_generate_content_stream``):
    pipeline + ``chat`` span, or the enrichment of a host-level ``chat`` call in flight
    (a framework's Gemini model over this SDK)."""
    endpoint = _endpoint()

    def traced(wrapped: Any, instance: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
        provider, address, port = endpoint(instance)
        outer = current_llm_call()
        if outer is not None:
            return enrich_llm_call(outer, wrapped(*args, **kwargs), address, port)
        return get_pipeline().run_llm(kwargs, lambda request: wrapped(*args, **request),
                                      provider=provider, api_mode=_API_MODE,
                                      server_address=address, server_port=port)

    async def atraced(wrapped: Any, instance: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
        provider, address, port = endpoint(instance)
        outer = current_llm_call()
        if outer is not None:
            return enrich_llm_call(outer, await wrapped(*args, **kwargs), address, port)
        return await get_pipeline().arun_llm(kwargs, lambda request: wrapped(*args, **request),
                                             provider=provider, api_mode=_API_MODE,
                                             server_address=address, server_port=port)

    return atraced if is_async else traced


def embeddings_wrapper(*, is_async: bool) -> Wrapper:
    """Wrapper for ``embed_content``: an ``embeddings`` span of its own."""
    endpoint = _endpoint()

    def traced(wrapped: Any, instance: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
        provider, address, port = endpoint(instance)
        return get_pipeline().run_embeddings(kwargs, lambda request: wrapped(*args, **request),
                                             provider=provider, server_address=address,
                                             server_port=port)

    async def atraced(wrapped: Any, instance: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
        provider, address, port = endpoint(instance)
        return await get_pipeline().arun_embeddings(
            kwargs, lambda request: wrapped(*args, **request), provider=provider,
            server_address=address, server_port=port)

    return atraced if is_async else traced


# ---------------------------------------------------------------- AFC turn
def _value(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def _calls_functions(config: Any) -> bool:
    """Whether the SDK will run AFC for ``config``: Python functions among its tools,
    and AFC not turned off (``disable``, or at most 0 remote calls)."""
    tools = _value(config, "tools")
    if not isinstance(tools, list | tuple) or not any(
            callable(t) and not isinstance(t, dict) and hasattr(t, "__name__") for t in tools):
        return False
    afc = _value(config, "automatic_function_calling")
    if afc is None:
        return True
    most = _value(afc, "maximum_remote_calls")
    if isinstance(most, int | float) and most <= 0:
        return False
    return _value(afc, "disable") is not True


def _request_config(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                    chat: bool) -> Any:
    """The config of a ``generate_content`` call (a keyword), or of a chat's
    ``send_message(message, config)``, whose default is the chat's own."""
    config = kwargs.get("config")
    if chat and config is None:
        config = args[1] if len(args) > 1 else None
        if not config:
            config = getattr(instance, "_config", None)
    return config


def _afc_turn(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
              chat: bool) -> Turn | None:
    """The turn of an AFC call (``None``: no AFC, or a turn is already open)."""
    try:
        config = _request_config(instance, args, kwargs, chat)
        if not _calls_functions(config) or current_runtime_context().turn:
            return None
        return get_pipeline().turn(AGENT_NAME, runtime_id=RUNTIME_ID)
    except Exception as exc:
        instrumentation_failed(RUNTIME_ID, "afc_turn", exc)
        return None


def afc_turn_wrapper(*, stream: bool, chat: bool = False) -> Wrapper:
    """``generate_content`` (``generate_content_stream``: a generator, whose turn lives
    in a context copy its steps re-enter, opened on its first step)."""

    def traced(wrapped: Any, instance: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
        turn = _afc_turn(instance, args, kwargs, chat)
        if turn is None:
            return wrapped(*args, **kwargs)
        if stream:
            return TurnGenerator(wrapped(*args, **kwargs), copy_context(), _end_turn,
                                 open_turn=_opener(turn))
        with turn:
            return wrapped(*args, **kwargs)

    return traced


def _opener(turn: Turn) -> Any:
    def open_turn() -> Turn | None:  # (None: not opened; the stream runs unobserved)
        try:
            turn.start()
        except Exception as exc:
            instrumentation_failed(RUNTIME_ID, "afc_turn_start", exc)
            return None
        return turn

    return open_turn


def _end_turn(turn: Turn, error: BaseException | None) -> None:
    try:
        turn.finish(error)
    except Exception as exc:  # TurnGenerator's close_turn must not raise
        instrumentation_failed(RUNTIME_ID, "afc_turn_finish", exc)


def afc_aturn_wrapper(*, stream: bool, chat: bool = False) -> Wrapper:
    """``client.aio.models.generate_content`` (``generate_content_stream``: awaited for
    an async iterator, whose turn runs while it is consumed)."""

    async def atraced(wrapped: Any, instance: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
        turn = _afc_turn(instance, args, kwargs, chat)
        if turn is None:
            return await wrapped(*args, **kwargs)
        if stream:  # (the SDK's stream sends its first request when first read)
            return _turn_stream(turn, await wrapped(*args, **kwargs))
        async with turn:
            return await wrapped(*args, **kwargs)

    return atraced


async def _turn_stream(turn: Turn, inner: Any) -> AsyncIterator[Any]:
    """The async AFC stream, its turn open while the consuming task reads it (from the
    first read on, when the SDK sends its first request)."""
    opened: Turn | None = turn
    try:
        turn.start()
    except Exception as exc:
        instrumentation_failed(RUNTIME_ID, "afc_turn_start", exc)
        opened = None
    error: BaseException | None = None
    try:
        try:
            async for chunk in inner:
                yield chunk
        finally:
            close = getattr(inner, "aclose", None)
            if close is not None:
                await close()
    except BaseException as exc:
        error = None if isinstance(exc, GeneratorExit) else exc
        raise
    finally:
        if opened is not None:
            _end_turn(opened, error)


# ---------------------------------------------------------------- function calls
def _response_calls(response: Any) -> list[tuple[str, str | None]]:
    """(name, id) of the function calls in the first candidate's parts, the ones the
    SDK answers."""
    candidates = getattr(response, "candidates", None)
    content = getattr(candidates[0], "content", None) if candidates else None
    calls = []
    for part in getattr(content, "parts", None) or ():
        call = getattr(part, "function_call", None)
        name = getattr(call, "name", None)
        if isinstance(name, str):
            call_id = getattr(call, "id", None)
            calls.append((name, call_id if isinstance(call_id, str) and call_id else None))
    return calls


def function_calls_wrapper(*, is_async: bool) -> Wrapper:
    """``get_function_response_parts(response, function_map)``: the model's call ids for
    the function runs it makes (``function_wrapper``)."""

    def traced(wrapped: Any, instance: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
        token = _set_pending(args, kwargs)
        try:
            return wrapped(*args, **kwargs)
        finally:
            if token is not None:
                _pending_calls.reset(token)

    async def atraced(wrapped: Any, instance: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
        token = _set_pending(args, kwargs)
        try:
            return await wrapped(*args, **kwargs)
        finally:
            if token is not None:
                _pending_calls.reset(token)

    return atraced if is_async else traced


def _set_pending(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        response = args[0] if args else kwargs.get("response")
        return _pending_calls.set(_response_calls(response))
    except Exception as exc:
        instrumentation_failed(RUNTIME_ID, "function_calls", exc)
        return None


def _call_id(name: str) -> str | None:
    """The model's id of the next call of ``name`` the SDK runs (taken: a second call of
    the same function gets the next one)."""
    pending = _pending_calls.get()
    if pending:
        for i, (called, call_id) in enumerate(pending):
            if called == name:
                del pending[i]
                return call_id
    return None


def _function_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any] | None:
    """(arguments, function) of ``invoke_function_from_dict_args(args, function)``."""
    if len(args) == 2 and not kwargs:
        arguments, function = args
    else:
        arguments = args[0] if args else kwargs.get("args")
        function = args[1] if len(args) > 1 else kwargs.get("function_to_invoke")
    if not isinstance(arguments, dict) or not isinstance(
            getattr(function, "__name__", None), str):
        return None
    return arguments, function


def function_wrapper(*, is_async: bool) -> Wrapper:
    """``invoke_function_from_dict_args(args, function)`` (``_async``): one
    ``execute_tool`` call through the pipeline around the SDK's own invocation."""

    def traced(wrapped: Any, instance: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
        found = _function_call(args, kwargs)
        if found is None:
            return wrapped(*args, **kwargs)
        arguments, function = found
        name = function.__name__
        return get_pipeline().run_tool(
            name, arguments, lambda tool_args: wrapped(tool_args, function),
            tool_call_id=_call_id(name), runtime_id=RUNTIME_ID, raise_errors=True)

    async def atraced(wrapped: Any, instance: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
        found = _function_call(args, kwargs)
        if found is None:
            return await wrapped(*args, **kwargs)
        arguments, function = found
        name = function.__name__
        return await get_pipeline().arun_tool(
            name, arguments, lambda tool_args: wrapped(tool_args, function),
            tool_call_id=_call_id(name), runtime_id=RUNTIME_ID, raise_errors=True)

    return atraced if is_async else traced

"""LiteLLM's public entries as otelmw calls: ``completion``/``acompletion`` (and
``completion(acompletion=True)``), ``responses``/``aresponses`` and the Anthropic-format
``anthropic_interface.messages.create``/``acreate`` each one ``chat`` call through
``Pipeline.run_llm`` (the request is LiteLLM's keyword arguments: an ``llm_request``
rewrite changes what LiteLLM gets); ``embedding``/``aembedding`` one ``embeddings``
call. The provider and server are LiteLLM's own resolution (``providers``); the cost
LiteLLM computed goes on the span as ``litellm.response_cost``.

A LiteLLM entry called while a ``chat`` call is in flight (LiteLLM's own Anthropic
``/messages`` bridge calling ``aresponses``, a framework's model call above LiteLLM)
is that call's request: it enriches the outer span, it opens no second one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import wrapt

from ...core import (
    CallInfo,
    current_llm_call,
    describe_call,
    enrich_llm_call,
    get_pipeline,
    instrumentation_failed,
)
from .._base import Wrapper, prepared_wrapper
from .providers import endpoint_of
from .steps import attempt_made

HOST = "litellm"
RESPONSE_COST = "litellm.response_cost"
_COST_KEY = "response_cost"


def failed(where: str, exc: BaseException) -> None:
    """Count (and warn once about) an error of this adapter; the call runs unobserved."""
    instrumentation_failed(HOST, where, exc)


def request_of(params: tuple[str, ...], args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The call's arguments by name (positional ones named after the entry's leading
    parameters); ``None`` when they cannot be named (the call runs unobserved)."""
    if not args:
        return kwargs
    if len(args) > len(params) or any(p in kwargs for p in params[:len(args)]):
        return None
    return {**dict(zip(params, args, strict=False)), **kwargs}


def _cost_of(hidden: Any) -> Any:
    return hidden.get(_COST_KEY) if isinstance(hidden, dict) else None


class CostStream(wrapt.ObjectProxy):  # type: ignore[misc,type-arg]
    """A LiteLLM chat stream (``CustomStreamWrapper``: a sync and an async iterator):
    the cost LiteLLM puts on its last chunk goes on the call's span when the stream
    is exhausted, before the span ends. Everything else is the stream's own."""

    def __init__(self, wrapped: Any, call: CallInfo) -> None:
        super().__init__(wrapped)
        self._self_call = call
        self._self_cost: Any = None

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        try:
            chunk = next(self.__wrapped__)
        except StopIteration:
            self._self_exhausted()
            raise
        self._self_chunk(chunk)
        return chunk

    def __aiter__(self) -> Any:
        return self

    async def __anext__(self) -> Any:
        try:
            chunk = await self.__wrapped__.__anext__()
        except StopAsyncIteration:
            self._self_exhausted()
            raise
        self._self_chunk(chunk)
        return chunk

    def _self_chunk(self, chunk: Any) -> None:
        try:
            cost = _cost_of(getattr(chunk, "_hidden_params", None))
        except Exception:  # a chunk of another shape: no cost
            return
        if cost is not None:
            self._self_cost = cost

    def _self_exhausted(self) -> None:
        if self._self_cost is not None:
            try:
                describe_call(self._self_call, {RESPONSE_COST: self._self_cost})
            except Exception as exc:
                failed("response_cost", exc)


_stream_types: list[type] = []


def _is_litellm_stream(result: Any) -> bool:
    if not _stream_types:
        from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper

        _stream_types.append(CustomStreamWrapper)
    return isinstance(result, _stream_types[0])


def observed(result: Any) -> Any:
    """Inside the call's base call: LiteLLM's cost of ``result`` on the call's span (a
    stream's when it is exhausted)."""
    call = current_llm_call()
    if call is None:
        return result
    try:
        if _is_litellm_stream(result):
            return CostStream(result, call)
        cost = _cost_of(getattr(result, "_hidden_params", None))
        if cost is not None:
            describe_call(call, {RESPONSE_COST: cost})
    except Exception as exc:
        failed("response_cost", exc)
    return result


def chat_wrapper(api_mode: str, params: tuple[str, ...], *, is_async: bool,
                 async_flag: bool = False) -> Wrapper:
    """Wrapper of a chat entry (``api_mode``: ``otelmw.api_mode`` of its span);
    ``async_flag``: the sync entry also serves ``acompletion=True`` (a coroutine)."""

    def prepared(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """(request, endpoint, the call in flight), or None: the call runs unobserved."""
        try:
            request = request_of(params, args, kwargs)
            if request is None:
                return None
            return request, endpoint_of(request), current_llm_call()
        except Exception as exc:
            failed(api_mode, exc)
            return None

    def run(wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any], found: Any) -> Any:
        request, endpoint, outer = found
        if outer is not None:  # this LiteLLM call is the request of a call in flight
            return enrich_llm_call(outer, wrapped(*args, **kwargs), endpoint.address,
                                   endpoint.port)
        attempt_made()
        return get_pipeline().run_llm(
            request, lambda effective: observed(wrapped(**effective)),
            provider=endpoint.provider, api_mode=api_mode,
            server_address=endpoint.address, server_port=endpoint.port)

    async def arun(wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                   found: Any) -> Any:
        request, endpoint, outer = found
        if outer is not None:
            return enrich_llm_call(outer, await wrapped(*args, **kwargs), endpoint.address,
                                   endpoint.port)

        async def execute(effective: dict[str, Any]) -> Any:
            return observed(await wrapped(**effective))

        attempt_made()
        return await get_pipeline().arun_llm(
            request, execute, provider=endpoint.provider, api_mode=api_mode,
            server_address=endpoint.address, server_port=endpoint.port)

    return prepared_wrapper(prepared, run, arun, is_async=is_async,
                            async_flag="acompletion" if async_flag else None)


def embeddings_wrapper(params: tuple[str, ...], *, is_async: bool) -> Wrapper:
    """Wrapper of ``embedding``/``aembedding``: one ``embeddings`` call."""

    def prepared(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """(request, endpoint), or None: the call runs unobserved."""
        try:
            request = request_of(params, args, kwargs)
            return None if request is None else (request, endpoint_of(request))
        except Exception as exc:
            failed("embedding", exc)
            return None

    def run(wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any], found: Any) -> Any:
        request, endpoint = found
        attempt_made()
        return get_pipeline().run_embeddings(
            request, _host(wrapped), provider=endpoint.provider,
            server_address=endpoint.address, server_port=endpoint.port)

    async def arun(wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                   found: Any) -> Any:
        request, endpoint = found
        attempt_made()
        return await get_pipeline().arun_embeddings(
            request, _host(wrapped), provider=endpoint.provider,
            server_address=endpoint.address, server_port=endpoint.port)

    # The sync entry also serves ``aembedding`` (``embedding(aembedding=True)``).
    return prepared_wrapper(prepared, run, arun, is_async=is_async, async_flag="aembedding")


def _host(wrapped: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda request: wrapped(**request)

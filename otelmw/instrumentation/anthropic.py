"""Anthropic SDK, anthropic 0.51 and later: ``messages.create`` (sync, async,
``stream=True``), ``messages.parse`` (structured output, where the release has it), the
``messages.stream()`` helper (sync and async ``MessageStreamManager``), and the same
three in the beta namespace, through which the beta tool runner sends each of its
model requests (one ``chat`` span each): through ``beta.messages.create`` on anthropic
2.x, through ``beta.messages.parse`` on the 0.x and 1.x releases that have the runner
(``parse`` posts the request itself, it never calls ``create``), and through
``beta.messages.stream()`` when it streams.

``messages.stream()`` does not go through ``create`` (it posts the request itself
when its manager is entered), so the two are wrapped apart and never count one
request twice. Its ``chat`` span starts when the manager is entered (that is when
the request is sent) and follows the raw event stream under the ``MessageStream``:
every way of reading it (iteration, ``text_stream``, ``get_final_message()``,
``until_done()``) feeds the span, which ends by the stream rules of
docs/telemetry.md (``exhausted``; ``closed`` when the ``with`` block is left
early; ``error`` when it is left by an exception). The ``MessageStream`` keeps its
raw event stream as ``_raw_stream`` on every release from 0.51 to 2.x.
"""

from __future__ import annotations

from typing import Any

import wrapt

from ..core import current_llm_call, enrich_llm_call, get_pipeline
from ._base import OtelmwInstrumentor, Wrapper, _client_server, sdk_llm_wrapper

_MESSAGES = "anthropic.resources.messages.messages"
_BETA_MESSAGES = "anthropic.resources.beta.messages.messages"
_PROVIDER, _API_MODE = "anthropic", "anthropic_messages"


class AnthropicInstrumentor(OtelmwInstrumentor):
    """``otelmw_anthropic``: ``chat {model}`` spans around ``messages.create``,
    ``messages.parse`` and ``messages.stream()``, plain and beta."""

    root_module = "anthropic"
    dependencies = ("anthropic >= 0.51, < 3",)

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        targets: list[tuple[str, str, Wrapper]] = []
        for module in (_MESSAGES, _BETA_MESSAGES):
            targets += [
                (module, "Messages.create",
                 sdk_llm_wrapper(_PROVIDER, _API_MODE, is_async=False)),
                (module, "AsyncMessages.create",
                 sdk_llm_wrapper(_PROVIDER, _API_MODE, is_async=True)),
                (module, "Messages.parse",
                 sdk_llm_wrapper(_PROVIDER, _API_MODE, is_async=False)),
                (module, "AsyncMessages.parse",
                 sdk_llm_wrapper(_PROVIDER, _API_MODE, is_async=True)),
                (module, "Messages.stream", stream_manager_wrapper(is_async=False)),
                (module, "AsyncMessages.stream", stream_manager_wrapper(is_async=True)),
            ]
        return targets


def stream_manager_wrapper(*, is_async: bool) -> Wrapper:
    """Wrapper for ``messages.stream()``: the SDK's manager, made at once (so a bad
    argument raises where it did), handed back in a proxy that sends the request
    through the otelmw pipeline when it is entered."""
    server = _client_server()
    manager_type = TracedAsyncStreamManager if is_async else TracedStreamManager

    def traced_stream(wrapped: Any, instance: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
        return manager_type(wrapped(*args, **kwargs), wrapped, args, kwargs,
                            server(instance))

    return traced_stream


class _StreamManagerProxy(wrapt.ObjectProxy):  # type: ignore[misc,type-arg]
    """What the sync and async manager proxies share: the request, and the
    ``MessageStream`` the entered manager made, whose raw event stream is swapped
    for the one the pipeline hands back (the traced one)."""

    def __init__(self, manager: Any, stream_method: Any, args: tuple[Any, ...],
                 kwargs: dict[str, Any], server: tuple[str | None, int | None]) -> None:
        super().__init__(manager)
        self._self_stream_method, self._self_args = stream_method, args
        self._self_kwargs, self._self_server = kwargs, server
        self._self_entered: Any = None  # the manager that sent the request
        self._self_message_stream: Any = None
        self._self_raw: Any = None  # the raw event stream the SDK made

    def _self_manager_for(self, request: Any) -> Any:
        """The manager that sends ``request``: the one made by ``stream()`` unless a
        rewrite changed the request."""
        if request is self._self_kwargs:
            return self.__wrapped__
        return self._self_stream_method(*self._self_args, **request)

    def _self_sent(self, manager: Any, message_stream: Any) -> Any:
        """The raw event stream under ``message_stream`` (the pipeline's result),
        or the ``MessageStream`` itself on an SDK that keeps it elsewhere."""
        self._self_entered, self._self_message_stream = manager, message_stream
        raw = getattr(message_stream, "_raw_stream", None)
        self._self_raw = message_stream if raw is None else raw
        return self._self_raw

    def _self_adopt(self, result: Any, stream_attr: str) -> Any:
        """What ``with`` binds: the ``MessageStream`` reading the traced raw stream."""
        message_stream = self._self_message_stream
        if message_stream is None or self._self_raw is message_stream:
            return result  # answered without a request, or the stream itself is traced
        if result is not self._self_raw and not hasattr(type(result), stream_attr):
            return result  # a wrapper answered with something that is not a stream
        message_stream._raw_stream = result
        return message_stream


class TracedStreamManager(_StreamManagerProxy):
    """Proxy of a sync ``MessageStreamManager`` (plain or beta)."""

    def __enter__(self) -> Any:
        def send(request: Any) -> Any:
            manager = self._self_manager_for(request)
            return self._self_sent(manager, manager.__enter__())

        address, port = self._self_server
        outer = current_llm_call()
        if outer is not None:  # a host-level call is in flight: enrich its span
            result = enrich_llm_call(outer, send(self._self_kwargs), address, port)
        else:
            result = get_pipeline().run_llm(self._self_kwargs, send, provider=_PROVIDER,
                                  api_mode=_API_MODE, server_address=address,
                                  server_port=port)
        return self._self_adopt(result, "__next__")

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        message_stream = self._self_message_stream
        raw = getattr(message_stream, "_raw_stream", None)
        if exc is not None and raw is not None and hasattr(raw, "__exit__"):
            raw.__exit__(exc_type, exc, tb)  # the span ends as ``error``, with it
        manager = self._self_entered
        return manager.__exit__(exc_type, exc, tb) if manager is not None else None


class TracedAsyncStreamManager(_StreamManagerProxy):
    """Proxy of an ``AsyncMessageStreamManager`` (plain or beta)."""

    async def __aenter__(self) -> Any:
        async def send(request: Any) -> Any:
            manager = self._self_manager_for(request)
            return self._self_sent(manager, await manager.__aenter__())

        address, port = self._self_server
        outer = current_llm_call()
        if outer is not None:
            result = enrich_llm_call(outer, await send(self._self_kwargs), address, port)
        else:
            result = await get_pipeline().arun_llm(self._self_kwargs, send, provider=_PROVIDER,
                                         api_mode=_API_MODE, server_address=address,
                                         server_port=port)
        return self._self_adopt(result, "__anext__")

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        message_stream = self._self_message_stream
        raw = getattr(message_stream, "_raw_stream", None)
        if exc is not None and raw is not None and hasattr(raw, "__aexit__"):
            await raw.__aexit__(exc_type, exc, tb)
        manager = self._self_entered
        return await manager.__aexit__(exc_type, exc, tb) if manager is not None else None

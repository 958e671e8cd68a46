"""Streamed chat responses: the ``chat`` span ends exactly once, on every exit path.

Sources: a generator, an ``openai.Stream``-like object (``__next__`` + context
manager + ``close`` + ``.response``), an async generator and an
``AsyncStream``-like async iterator. Exit paths: exhausted, ``close()``, a
``with`` block left early by ``break``, an exception raised by the stream, and
garbage collection of an unconsumed stream. "Exactly once" is checked on the
exported spans and on the duration metric (a second end would record twice).
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import AsyncIterator, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from _support.calls import MODEL, AsyncItems
from _support.telemetry import TelemetryHarness, is_child, is_error, is_unset
from opentelemetry.trace import SpanKind

pytestmark = pytest.mark.timeout(60)

CHAT = f"chat {MODEL}"


class StreamBrokeError(Exception):
    pass


BROKE = f"{StreamBrokeError.__module__}.StreamBrokeError"


def openai_chunks() -> list[dict[str, Any]]:
    base = {"id": "chatcmpl-s1", "object": "chat.completion.chunk", "model": "gpt-test-0613"}
    return [
        {**base, "choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {**base, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4,
                                          "total_tokens": 13}},
    ]


def anthropic_events() -> list[dict[str, Any]]:
    return [
        {"type": "message_start", "message": {
            "id": "msg_s1", "type": "message", "model": "claude-test-1",
            "usage": {"input_tokens": 25, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": 15}},
        {"type": "message_stop"},
    ]


class Source:
    """Builds the stream the base call returns and records what happened to it."""

    def __init__(self, chunks: list[Any] | None = None, *, fail_after: int | None = None,
                 delay: float = 0.0) -> None:
        self.chunks = chunks if chunks is not None else openai_chunks()
        self.fail_after = fail_after
        self.delay = delay
        self.closed = False
        self.exited = False
        self.last_chunk_ns = 0

    def _items(self) -> Iterator[Any]:
        for i, chunk in enumerate(self.chunks):
            if self.fail_after is not None and i == self.fail_after:
                raise StreamBrokeError("connection reset")
            if self.delay:
                time.sleep(self.delay)
            self.last_chunk_ns = time.time_ns()
            yield chunk

    def generator(self) -> Iterator[Any]:
        try:
            yield from self._items()
        finally:
            self.closed = True

    def sdk_stream(self) -> FakeStream:
        return FakeStream(self)

    async def async_generator(self) -> AsyncIterator[Any]:
        try:
            for chunk in self._items():
                await asyncio.sleep(0)
                yield chunk
        finally:
            self.closed = True

    def async_stream(self) -> FakeAsyncStream:
        return FakeAsyncStream(self)


class FakeStream:
    """Shaped like ``openai.Stream``: iterator, context manager, ``close``, ``.response``."""

    def __init__(self, source: Source) -> None:
        self._source = source
        self._it = source._items()
        self.response = SimpleNamespace(headers={"x-request-id": "req-from-headers"},
                                        status_code=200)

    def __next__(self) -> Any:
        return next(self._it)

    def __iter__(self) -> Iterator[Any]:
        yield from self._it

    def __enter__(self) -> FakeStream:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._source.exited = True
        self.close()

    def close(self) -> None:
        self._source.closed = True

    def until_done(self) -> str:
        return "custom method result"


class FakeAsyncStream(AsyncItems):
    """Shaped like ``openai.AsyncStream``."""

    def __init__(self, source: Source) -> None:
        super().__init__(source._items())
        self._source = source
        self.response = SimpleNamespace(headers={"x-request-id": "req-from-headers"})

    async def __aenter__(self) -> FakeAsyncStream:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._source.exited = True
        await self.close()

    async def close(self) -> None:
        self._source.closed = True


SYNC_KINDS = ["generator", "sdk_stream"]
ASYNC_KINDS = ["async_generator", "async_stream"]


def open_sync(h: TelemetryHarness, source: Source, kind: str) -> Any:
    return h.pipeline.run_llm({"model": MODEL, "stream": True},
                              lambda req: getattr(source, kind)(), provider="openai")


def open_async(h: TelemetryHarness, source: Source, kind: str, via: str = "sync") -> Any:
    """Start a streamed call on the async path; the stream is returned unconsumed."""
    if via == "sync":
        def execute(req: Any) -> Any:
            return getattr(source, kind)()
    else:
        async def execute(req: Any) -> Any:  # like ``await client.create(stream=True)``
            await asyncio.sleep(0)
            return getattr(source, kind)()
    return h.pipeline.arun_llm({"model": MODEL, "stream": True}, execute, provider="openai")


def assert_ended_once(h: TelemetryHarness, ended_by: str) -> Any:
    gc.collect()  # a finalizer that ended the span again would show up now
    spans = h.named(CHAT)
    assert len(spans) == 1, [s.name for s in h.spans()]
    span = spans[0]
    assert span.kind is SpanKind.CLIENT
    assert span.attributes["otelmw.stream.ended_by"] == ended_by
    [duration] = h.points("gen_ai.client.operation.duration")
    assert duration.count == 1
    return span


# ---------------------------------------------------------------- sync streams
@pytest.mark.parametrize("kind", SYNC_KINDS)
def test_sync_stream_exhausted(h: TelemetryHarness, kind: str) -> None:
    source = Source()
    stream = open_sync(h, source, kind)
    assert h.named(CHAT) == []  # still open while the stream is unconsumed
    assert list(stream) == openai_chunks()
    span = assert_ended_once(h, "exhausted")
    assert is_unset(span)
    attrs = span.attributes
    assert attrs["gen_ai.response.id"] == "chatcmpl-s1"
    assert attrs["gen_ai.response.model"] == "gpt-test-0613"
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)
    assert attrs["gen_ai.usage.input_tokens"] == 9
    assert attrs["gen_ai.usage.output_tokens"] == 4
    assert attrs["gen_ai.request.stream"] is True
    stream.close()  # closing after exhaustion does not end the span again
    assert_ended_once(h, "exhausted")
    usage = {p.attributes["gen_ai.token.type"]: p.sum
             for p in h.points("gen_ai.client.token.usage")}
    assert usage == {"input": 9, "output": 4}


@pytest.mark.parametrize("kind", SYNC_KINDS)
def test_sync_stream_close(h: TelemetryHarness, kind: str) -> None:
    source = Source()
    stream = open_sync(h, source, kind)
    assert next(stream) == openai_chunks()[0]
    stream.close()
    assert source.closed
    span = assert_ended_once(h, "closed")
    assert is_unset(span)
    assert span.attributes["gen_ai.response.id"] == "chatcmpl-s1"
    assert "gen_ai.usage.input_tokens" not in span.attributes
    stream.close()
    del stream
    assert_ended_once(h, "closed")


@pytest.mark.parametrize("kind", SYNC_KINDS)
def test_sync_stream_with_block_break(h: TelemetryHarness, kind: str) -> None:
    source = Source()
    with open_sync(h, source, kind) as stream:
        for _chunk in stream:
            break
        assert h.named(CHAT) == []
    if kind == "sdk_stream":
        assert source.exited
    assert source.closed  # the underlying stream is released at the end of the block
    span = assert_ended_once(h, "closed")
    assert is_unset(span)
    del stream
    assert_ended_once(h, "closed")


@pytest.mark.parametrize("kind", SYNC_KINDS)
def test_sync_stream_raises(h: TelemetryHarness, kind: str) -> None:
    source = Source(fail_after=2)
    stream = open_sync(h, source, kind)
    got = []
    with pytest.raises(StreamBrokeError):
        for chunk in stream:
            got.append(chunk)
    assert got == openai_chunks()[:2]
    span = assert_ended_once(h, "error")
    assert is_error(span)
    assert span.attributes["error.type"] == BROKE
    assert span.attributes["gen_ai.response.id"] == "chatcmpl-s1"
    [duration] = h.points("gen_ai.client.operation.duration")
    assert duration.attributes["error.type"] == BROKE
    stream.close()
    assert_ended_once(h, "error")


@pytest.mark.parametrize("kind", SYNC_KINDS)
def test_sync_stream_error_inside_with_block(h: TelemetryHarness, kind: str) -> None:
    source = Source()
    with pytest.raises(KeyError), open_sync(h, source, kind) as stream:
        next(stream)
        raise KeyError("consumer failed")
    span = assert_ended_once(h, "error")
    assert span.attributes["error.type"] == "builtins.KeyError"


@pytest.mark.parametrize("kind", SYNC_KINDS)
def test_sync_stream_garbage_collected_unconsumed(h: TelemetryHarness, kind: str) -> None:
    source = Source()
    stream = open_sync(h, source, kind)
    assert h.named(CHAT) == []
    del stream
    gc.collect()
    span = assert_ended_once(h, "abandoned")
    assert is_unset(span)


@pytest.mark.parametrize("kind", SYNC_KINDS)
def test_sync_stream_garbage_collected_partly_consumed(h: TelemetryHarness,
                                                       kind: str) -> None:
    stream = open_sync(h, Source(), kind)
    next(stream)
    del stream
    gc.collect()
    span = assert_ended_once(h, "abandoned")
    assert span.attributes["gen_ai.response.id"] == "chatcmpl-s1"


@pytest.mark.parametrize("kind", SYNC_KINDS)
def test_sync_stream_anthropic_events(h: TelemetryHarness, kind: str) -> None:
    stream = open_sync(h, Source(anthropic_events()), kind)
    assert len(list(stream)) == len(anthropic_events())
    attrs = assert_ended_once(h, "exhausted").attributes
    assert attrs["gen_ai.response.id"] == "msg_s1"
    assert attrs["gen_ai.response.model"] == "claude-test-1"
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)  # end_turn, mapped
    assert attrs["gen_ai.usage.input_tokens"] == 25
    assert attrs["gen_ai.usage.output_tokens"] == 15


@pytest.mark.parametrize("kind", SYNC_KINDS)
def test_sync_stream_span_duration_covers_consumption(h: TelemetryHarness, kind: str) -> None:
    source = Source(delay=0.02)
    stream = open_sync(h, source, kind)
    time.sleep(0.02)
    for _chunk in stream:
        pass
    span = assert_ended_once(h, "exhausted")
    assert span.end_time >= source.last_chunk_ns
    assert span.end_time - span.start_time >= 0.1 * 1e9  # 4 chunks x 20 ms + 20 ms
    [duration] = h.points("gen_ai.client.operation.duration")
    assert duration.sum >= 0.1


def test_sdk_stream_attributes_reachable_through_proxy(h: TelemetryHarness) -> None:
    stream = open_sync(h, Source(), "sdk_stream")
    assert isinstance(stream, FakeStream)
    assert stream.response.headers["x-request-id"] == "req-from-headers"
    assert stream.response.status_code == 200
    assert stream.until_done() == "custom method result"
    assert h.named(CHAT) == []  # attribute access does not end the span
    stream.close()
    assert_ended_once(h, "closed")


def test_stream_base_call_errors_before_returning_a_stream(h: TelemetryHarness) -> None:
    def execute(req: Any) -> Any:
        raise StreamBrokeError("refused")

    with pytest.raises(StreamBrokeError):
        h.pipeline.run_llm({"model": MODEL, "stream": True}, execute)
    span = h.one(CHAT)
    assert is_error(span)
    assert "otelmw.stream.ended_by" not in span.attributes


def test_stream_consumed_inside_turn_and_wrapper(h: TelemetryHarness) -> None:
    def passthrough(**kw: Any) -> Any:
        return kw["next_call"]()

    h.pipeline.registry.add_middleware("llm_execution", passthrough, plugin="x")
    with h.pipeline.turn("agent"):
        stream = open_sync(h, Source(), "generator")
        chunks = list(stream)
    assert len(chunks) == 4
    agent, chat = h.one("invoke_agent agent"), assert_ended_once(h, "exhausted")
    assert is_child(chat, agent)
    assert is_child(h.one("llm_execution x.passthrough"), chat)


# ---------------------------------------------------------------- async streams
async def _consume(stream: Any) -> list[Any]:
    return [chunk async for chunk in stream]


@pytest.mark.parametrize("via", ["sync", "async"])
@pytest.mark.parametrize("kind", ASYNC_KINDS)
def test_async_stream_exhausted(h: TelemetryHarness, kind: str, via: str) -> None:
    source = Source()

    async def main() -> list[Any]:
        stream = await open_async(h, source, kind, via)
        assert h.named(CHAT) == []
        return await _consume(stream)

    assert asyncio.run(main()) == openai_chunks()
    attrs = assert_ended_once(h, "exhausted").attributes
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)
    assert attrs["gen_ai.usage.input_tokens"] == 9
    assert attrs["gen_ai.usage.output_tokens"] == 4


@pytest.mark.parametrize("kind", ASYNC_KINDS)
def test_async_stream_close(h: TelemetryHarness, kind: str) -> None:
    source = Source()

    async def main() -> None:
        stream = await open_async(h, source, kind)
        await stream.__anext__()
        await stream.close()
        await stream.aclose()  # a second close is harmless

    asyncio.run(main())
    assert source.closed
    assert is_unset(assert_ended_once(h, "closed"))


@pytest.mark.parametrize("kind", ASYNC_KINDS)
def test_async_stream_async_with_break(h: TelemetryHarness, kind: str) -> None:
    source = Source()

    async def main() -> None:
        async with await open_async(h, source, kind) as stream:
            async for _chunk in stream:
                break
            assert h.named(CHAT) == []
        assert source.closed  # released at the end of the block, not at loop shutdown

    asyncio.run(main())
    if kind == "async_stream":
        assert source.exited
    assert is_unset(assert_ended_once(h, "closed"))


@pytest.mark.parametrize("kind", ASYNC_KINDS)
def test_async_stream_raises(h: TelemetryHarness, kind: str) -> None:
    source = Source(fail_after=1)

    async def main() -> None:
        stream = await open_async(h, source, kind)
        with pytest.raises(StreamBrokeError):
            await _consume(stream)

    asyncio.run(main())
    span = assert_ended_once(h, "error")
    assert is_error(span)
    assert span.attributes["error.type"] == BROKE


@pytest.mark.parametrize("kind", ASYNC_KINDS)
def test_async_stream_garbage_collected_unconsumed(h: TelemetryHarness, kind: str) -> None:
    source = Source()

    async def main() -> None:
        stream = await open_async(h, source, kind)
        assert h.named(CHAT) == []
        del stream
        gc.collect()

    asyncio.run(main())
    assert is_unset(assert_ended_once(h, "abandoned"))


@pytest.mark.parametrize("kind", ASYNC_KINDS)
def test_async_stream_anthropic_events(h: TelemetryHarness, kind: str) -> None:
    async def main() -> list[Any]:
        return await _consume(await open_async(h, Source(anthropic_events()), kind))

    assert len(asyncio.run(main())) == len(anthropic_events())
    attrs = assert_ended_once(h, "exhausted").attributes
    assert attrs["gen_ai.response.id"] == "msg_s1"
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)  # end_turn, mapped
    assert attrs["gen_ai.usage.input_tokens"] == 25
    assert attrs["gen_ai.usage.output_tokens"] == 15


@pytest.mark.parametrize("kind", ASYNC_KINDS)
def test_async_stream_span_duration_covers_consumption(h: TelemetryHarness,
                                                       kind: str) -> None:
    source = Source(delay=0.02)

    async def main() -> None:
        stream = await open_async(h, source, kind)
        await asyncio.sleep(0.02)
        await _consume(stream)

    asyncio.run(main())
    span = assert_ended_once(h, "exhausted")
    assert span.end_time >= source.last_chunk_ns
    assert span.end_time - span.start_time >= 0.1 * 1e9


def test_async_stream_attributes_reachable_through_proxy(h: TelemetryHarness) -> None:
    async def main() -> None:
        stream = await open_async(h, Source(), "async_stream")
        assert isinstance(stream, FakeAsyncStream)
        assert stream.response.headers["x-request-id"] == "req-from-headers"
        assert h.named(CHAT) == []
        await stream.close()

    asyncio.run(main())
    assert_ended_once(h, "closed")

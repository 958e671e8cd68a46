"""Stream proxies that end the ``chat`` span exactly once.

The span ends when the stream is exhausted, closed, left through ``with``
(including an early ``break``), raises, or is garbage-collected unconsumed; a
stream still open when telemetry shuts down (one still referenced at interpreter
exit) is ended then, as ``abandoned`` (``abandon_open_streams``).
Everything else (attributes such as ``.response``) is delegated by wrapt's
``ObjectProxy``.
"""

from __future__ import annotations

import inspect
import os
from typing import Any, Protocol

import wrapt


class StreamFinisher(Protocol):
    def chunk(self, chunk: Any) -> None: ...

    def end(self, ended_by: str, error: BaseException | None = None) -> None: ...


# Finishers of the streams not ended yet, by id of their proxy. Whoever pops an
# entry ends it (dict.pop is atomic): the stream itself, or the shutdown.
_open: dict[int, StreamFinisher] = {}
if hasattr(os, "register_at_fork"):  # a forked child's exit must not end its parent's streams
    os.register_at_fork(after_in_child=_open.clear)


def abandon_open_streams() -> int:
    """End every stream span still open, as ``abandoned``; returns how many."""
    n = 0
    for key in list(_open):
        f = _open.pop(key, None)
        if f is not None:
            f.end("abandoned")
            n += 1
    return n


class _Ended:
    """The finisher of a stream already ended: what comes after the end is ignored
    (a sentinel rather than None: a chunk costs no check)."""

    __slots__ = ()

    def chunk(self, chunk: Any) -> None:
        pass

    def end(self, ended_by: str, error: BaseException | None = None) -> None:
        pass


_ENDED: StreamFinisher = _Ended()


class _Finishing(wrapt.ObjectProxy):  # type: ignore[misc,type-arg]
    """Holds the finisher; ``_self_end`` calls it at most once."""

    def __init__(self, wrapped: Any, finisher: StreamFinisher) -> None:
        super().__init__(wrapped)
        self._self_finisher = finisher
        _open[id(self)] = finisher

    def _self_stopped(self, exc: BaseException, stop: type[BaseException]) -> None:
        """The stream raised ``exc`` instead of a chunk: exhausted (``stop``), or failed."""
        if isinstance(exc, stop):
            self._self_end("exhausted")
        else:
            self._self_end("error", exc)

    def _self_end(self, ended_by: str, error: BaseException | None = None) -> None:
        self._self_finisher = _ENDED
        f = _open.pop(id(self), None)
        if f is not None:
            f.end(ended_by, error)

    def __del__(self) -> None:
        if self._self_finisher is not _ENDED:
            self._self_end("abandoned")


class SpanStream(_Finishing):
    """Sync iterator proxy."""

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        try:
            chunk = next(self.__wrapped__)
        except BaseException as exc:
            self._self_stopped(exc, StopIteration)
            raise
        self._self_finisher.chunk(chunk)
        return chunk

    def __enter__(self) -> Any:
        enter = getattr(self.__wrapped__, "__enter__", None)
        if enter is not None:
            enter()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        try:
            exit_ = getattr(self.__wrapped__, "__exit__", None)
            if exit_ is not None:
                return exit_(exc_type, exc, tb)
            close = getattr(self.__wrapped__, "close", None)  # a generator: release it now
            return close() if close is not None else None
        finally:
            self._self_end("error" if exc is not None else "closed", exc)

    def close(self) -> Any:
        try:
            close = getattr(self.__wrapped__, "close", None)
            return close() if close is not None else None
        finally:
            self._self_end("closed")



class AsyncSpanStream(_Finishing):
    """Async iterator proxy (OpenAI ``AsyncStream``, Anthropic async streams,
    async generators)."""

    def __aiter__(self) -> Any:
        return self

    async def __anext__(self) -> Any:
        try:
            chunk = await self.__wrapped__.__anext__()
        except BaseException as exc:
            self._self_stopped(exc, StopAsyncIteration)
            raise
        self._self_finisher.chunk(chunk)
        return chunk

    async def __aenter__(self) -> Any:
        enter = getattr(self.__wrapped__, "__aenter__", None)
        if enter is not None:
            await enter()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        try:
            exit_ = getattr(self.__wrapped__, "__aexit__", None)
            if exit_ is not None:
                return await exit_(exc_type, exc, tb)
            # An async generator: release it now (``aclose``) rather than at GC.
            close = getattr(self.__wrapped__, "aclose", None) or getattr(
                self.__wrapped__, "close", None)
            r = close() if close is not None else None
            if inspect.isawaitable(r):
                await r
            return None
        finally:
            self._self_end("error" if exc is not None else "closed", exc)

    async def aclose(self) -> Any:
        try:
            close = getattr(self.__wrapped__, "aclose", None) or getattr(
                self.__wrapped__, "close", None)
            if close is None:
                return None
            r = close()
            return (await r) if inspect.isawaitable(r) else r
        finally:
            self._self_end("closed")

    async def close(self) -> Any:  # OpenAI/Anthropic AsyncStream spell it close()
        return await self.aclose()



class DualSpanStream(SpanStream, AsyncSpanStream):
    """A stream that is both a sync and an async iterator (LiteLLM's
    ``CustomStreamWrapper``): whichever way it is consumed ends the span; ``close`` is
    the sync one, ``aclose`` the async one."""


def wrap_stream(result: Any, finisher: StreamFinisher) -> Any:
    t = type(result)
    if hasattr(t, "__anext__"):
        if hasattr(t, "__next__"):
            return DualSpanStream(result, finisher)
        return AsyncSpanStream(result, finisher)
    return SpanStream(result, finisher)

"""What host adapters share for a turn that a host's generator carries: the turn lives
in a context copy the generator's steps re-enter, and ends exactly once."""

from __future__ import annotations

import collections.abc
from collections.abc import Callable, Generator
from contextvars import Context
from typing import Any, Generic, TypeVar

OpenedT = TypeVar("OpenedT")


class TurnGenerator(collections.abc.Generator, Generic[OpenedT]):  # type: ignore[type-arg]
    """A host's generator whose steps run inside ``ctx`` (the turn's context). The turn
    is ``opened`` already, or opens on the first step (``open_turn``, run in ``ctx``);
    ``close_turn`` ends it exactly once (it must not raise): when the generator is
    exhausted, raises, is closed or is garbage-collected."""

    def __init__(self, inner: Generator[Any, Any, Any], ctx: Context,
                 close_turn: Callable[[OpenedT, BaseException | None], None], *,
                 opened: OpenedT | None = None,
                 open_turn: Callable[[], OpenedT] | None = None) -> None:
        self._inner, self._ctx, self._close_turn = inner, ctx, close_turn
        self._opened, self._open_turn, self._done = opened, open_turn, False

    def _end(self, error: BaseException | None) -> None:
        self._done = True
        opened, self._opened = self._opened, None
        if opened is not None:
            self._ctx.run(self._close_turn, opened, error)

    def _step(self, method: Any, *args: Any) -> Any:
        open_turn, self._open_turn = self._open_turn, None
        if open_turn is not None and not self._done:
            self._opened = self._ctx.run(open_turn)
        try:
            return self._ctx.run(method, *args)
        except (StopIteration, GeneratorExit):
            self._end(None)
            raise
        except BaseException as exc:
            self._end(exc)
            raise

    def send(self, value: Any) -> Any:
        return self._step(self._inner.send, value)

    def throw(self, *args: Any) -> Any:
        return self._step(self._inner.throw, *args)

    def close(self) -> None:
        if self._done:
            return
        try:
            self._ctx.run(self._inner.close)
        finally:
            self._end(None)

    def __del__(self) -> None:  # abandoned: end the turn (and the inner generator)
        if not self._done and self._opened is not None:
            self.close()

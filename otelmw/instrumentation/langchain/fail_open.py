"""Fail-open plumbing of the LangChain wrappers: the pipeline runs around the host's
call; an error of otelmw's own is counted and the host's outcome stands; the host's
call never runs twice."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ...core import instrumentation_failed as host_instrumentation_failed

HOST = "langchain"


def instrumentation_failed(where: str, exc: BaseException) -> None:
    """Count (and warn once about) an error of this adapter (never raises)."""
    host_instrumentation_failed(HOST, where, exc)


class HostOutcome:
    """What the host's call did inside the pipeline."""

    __slots__ = ("error", "executed", "result")

    def __init__(self) -> None:
        self.executed = False
        self.error: BaseException | None = None
        self.result: Any = None

    def call(self, host: Callable[[Any], Any], x: Any) -> Any:
        self.executed = True
        try:
            self.result = host(x)
        except BaseException as exc:
            self.error = exc
            raise
        return self.result

    async def acall(self, host: Callable[[Any], Awaitable[Any]], x: Any) -> Any:
        self.executed = True
        try:
            self.result = await host(x)
        except BaseException as exc:
            self.error = exc
            raise
        return self.result

    def recover(self, exc: BaseException, where: str) -> bool:
        """After the pipeline raised ``exc``: re-raise the host's own error; count
        otelmw's. True when the host's call still has to run."""
        if exc is self.error:
            raise exc
        instrumentation_failed(where, exc)
        if not self.executed:
            return True
        if self.error is not None:
            raise self.error
        return False

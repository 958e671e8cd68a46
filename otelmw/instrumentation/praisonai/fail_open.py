"""Fail-open plumbing shared by PraisonAI's wrappers: the pipeline runs around the host
call, an error of otelmw's is counted and the host's own outcome stands, and the host
call never runs twice."""

from __future__ import annotations

from typing import Any

from ...core import instrumentation_failed as host_instrumentation_failed

NOT_RUN = object()  # ``HostOutcome.recover``: the host call did not run yet


def instrumentation_failed(where: str, exc: BaseException) -> None:
    """Count (and warn once about) an error of this adapter (never raises)."""
    host_instrumentation_failed("praisonai", where, exc)


class HostOutcome:
    """What the host call did inside the pipeline: fail open without re-running it."""

    __slots__ = ("error", "executed", "result", "swallowed")

    def __init__(self) -> None:
        self.executed = self.swallowed = False  # swallowed: ``error`` stands for ``result``
        self.error: BaseException | None = None
        self.result: Any = None

    def recover(self, exc: BaseException, where: str) -> Any:
        """The host's own exception is re-raised (a swallowed one: its result returned);
        otelmw's is counted, the host's outcome stands (``NOT_RUN``: not run yet)."""
        if exc is not self.error:
            instrumentation_failed(where, exc)
        elif not self.swallowed:
            raise exc
        if not self.executed:
            return NOT_RUN
        if self.error is not None and not self.swallowed:
            raise self.error
        return self.result


def fail_open(out: HostOutcome, where: str, host: Any, run: Any, again: Any,
               done: Any = None) -> Any:
    """``run(execute)``: the pipeline around ``execute(x) = host(x)``."""
    def execute(x: Any) -> Any:
        out.executed = True
        try:
            out.result = host(x)
        except BaseException as exc:
            out.error = exc
            raise
        return out.result

    try:
        return run(execute)
    except BaseException as exc:
        result = out.recover(exc, where)
        return again() if result is NOT_RUN else result
    finally:
        if done is not None:
            done(out)


async def afail_open(out: HostOutcome, where: str, host: Any, run: Any, again: Any,
                      done: Any = None) -> Any:
    """Async twin of ``fail_open`` (``host``, ``run``, ``again`` return awaitables)."""
    async def execute(x: Any) -> Any:
        out.executed = True
        try:
            out.result = await host(x)
        except BaseException as exc:
            out.error = exc
            raise
        return out.result

    try:
        return await run(execute)
    except BaseException as exc:
        result = out.recover(exc, where)
        return (await again()) if result is NOT_RUN else result
    finally:
        if done is not None:
            done(out)

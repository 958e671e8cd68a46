"""Fail-open plumbing shared by PraisonAI's wrappers: the pipeline runs around the host
call (``HostOutcome`` of the core's host API), an error of otelmw's is counted and the
host's own outcome stands, and the host call never runs twice."""

from __future__ import annotations

from typing import Any

from ...core import HostOutcome
from ...core import instrumentation_failed as host_instrumentation_failed

HOST = "praisonai"


def instrumentation_failed(where: str, exc: BaseException) -> None:
    """Count (and warn once about) an error of this adapter (never raises)."""
    host_instrumentation_failed(HOST, where, exc)


def host_outcome() -> HostOutcome:
    """A new ``HostOutcome`` of this adapter (the core's host API)."""
    return HostOutcome(HOST)


def fail_open(out: HostOutcome, where: str, host: Any, run: Any, again: Any,
               done: Any = None) -> Any:
    """``run(execute)``: the pipeline around ``execute(x) = host(x)``."""
    def execute(x: Any) -> Any:
        return out.call(host, x)

    try:
        return run(execute)
    except BaseException as exc:
        return again() if out.recover(exc, where) else out.result
    finally:
        if done is not None:
            done(out)


async def afail_open(out: HostOutcome, where: str, host: Any, run: Any, again: Any,
                      done: Any = None) -> Any:
    """Async twin of ``fail_open`` (``host``, ``run``, ``again`` return awaitables)."""
    async def execute(x: Any) -> Any:
        return await out.acall(host, x)

    try:
        return await run(execute)
    except BaseException as exc:
        return (await again()) if out.recover(exc, where) else out.result
    finally:
        if done is not None:
            done(out)

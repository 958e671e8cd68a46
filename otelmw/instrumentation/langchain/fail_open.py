"""Fail-open plumbing of the LangChain wrappers: the pipeline runs around the host's
call (``HostOutcome`` of the core's host API); an error of otelmw's own is counted and
the host's outcome stands; the host's call never runs twice."""

from __future__ import annotations

from ...core import HostOutcome
from ...core import instrumentation_failed as host_instrumentation_failed

HOST = "langchain"


def instrumentation_failed(where: str, exc: BaseException) -> None:
    """Count (and warn once about) an error of this adapter (never raises)."""
    host_instrumentation_failed(HOST, where, exc)


def host_outcome() -> HostOutcome:
    """A new ``HostOutcome`` of this adapter."""
    return HostOutcome(HOST)

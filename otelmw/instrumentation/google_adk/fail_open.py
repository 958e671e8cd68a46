"""Fail-open plumbing of the ADK wrappers: an error of otelmw's own is counted and the
host's call runs (or its outcome stands: ``HostOutcome`` of the core's host API); the
host's call never runs twice."""

from __future__ import annotations

from ...core import HostOutcome
from ...core import instrumentation_failed as host_instrumentation_failed

HOST = "google-adk"
RUNTIME_ID = "google-adk"


def instrumentation_failed(where: str, exc: BaseException) -> None:
    """Count (and warn once about) an error of this adapter (never raises)."""
    host_instrumentation_failed(HOST, where, exc)


def host_outcome() -> HostOutcome:
    """A new ``HostOutcome`` of this adapter."""
    return HostOutcome(HOST)

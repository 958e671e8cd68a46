"""Fixtures shared by the telemetry test modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _telemetry_fixtures import TelemetryHarness

from otelmw.telemetry import uninstrument_threads


@pytest.fixture
def h() -> Iterator[TelemetryHarness]:
    """A fresh in-memory telemetry harness; fails the test if the SDK complained
    (double end, detach errors). A module may define its own ``h``."""
    harness = TelemetryHarness()
    yield harness
    uninstrument_threads()  # a test that patched threads leaves none behind
    harness.close()
    harness.assert_clean()

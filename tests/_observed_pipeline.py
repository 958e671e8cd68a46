"""A pipeline observed end to end, for the reliability tests: the telemetry
harness (in-memory export, OpenTelemetry's own warnings collected as
``complaints``) plus every span's start/end tracked, and hook events emitted for
every hook point."""

from __future__ import annotations

import threading
from typing import Any

from _telemetry_fixtures import TelemetryHarness
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from otelmw.telemetry.content import ContentPolicy


class Lifecycle(SpanProcessor):
    """Counts starts and ends per span id (double ends show up as SDK complaints)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open: set[int] = set()
        self.started = 0
        self.ended = 0

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        with self.lock:
            self.open.add(span.context.span_id)
            self.started += 1

    def on_end(self, span: ReadableSpan) -> None:
        with self.lock:
            self.open.discard(span.context.span_id)
            self.ended += 1


class ObservedPipeline(TelemetryHarness):
    def __init__(self, content: ContentPolicy) -> None:
        self.lifecycle = Lifecycle()
        super().__init__(content.mode, content.max_length, span_processors=(self.lifecycle,),
                         hook_events="all")

"""A pipeline observed end to end, for the reliability tests: every span is
exported in memory and its start/end tracked, OpenTelemetry's own warnings
(``Calling end() on an ended span``, detach errors) are collected, and hook
events are emitted for every hook point."""

from __future__ import annotations

import logging
import threading
from typing import Any

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otelmw import Pipeline, RuntimeMiddlewareRegistry
from otelmw.telemetry.content import ContentPolicy
from otelmw.telemetry.observer import TelemetryObserver


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


class SdkComplaints(logging.Handler):
    """OpenTelemetry's own warnings, collected (attach to the ``opentelemetry`` logger)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())


class ObservedPipeline:
    def __init__(self, content: ContentPolicy) -> None:
        self.exporter = InMemorySpanExporter()
        self.lifecycle = Lifecycle()
        tp = TracerProvider()
        tp.add_span_processor(self.lifecycle)
        tp.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.pipeline = Pipeline(normalizers=RuntimeMiddlewareRegistry())
        self.observer = TelemetryObserver(
            tp, MeterProvider(metric_readers=[InMemoryMetricReader()]), LoggerProvider(),
            content=content, failures=self.pipeline.failures, hook_events="all")
        self.pipeline.observer = self.observer
        self.complaints = SdkComplaints()

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

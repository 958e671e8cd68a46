"""OpenTelemetry pieces shared by the benchmarks."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    LogRecordExporter,
    LogRecordExportResult,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult


class DroppingExporter(SpanExporter):
    """Accepts every batch and throws it away (counts spans for sanity checks)."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Any) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def dropping_provider() -> tuple[TracerProvider, DroppingExporter]:
    """An SDK TracerProvider with a BatchSpanProcessor (defaults) onto a dropping exporter."""
    exporter = DroppingExporter()
    tp = TracerProvider()
    tp.add_span_processor(BatchSpanProcessor(exporter))
    return tp, exporter


class DroppingLogExporter(LogRecordExporter):
    """Accepts every batch of log records and throws it away (counts them)."""

    def __init__(self) -> None:
        self.records = 0

    def export(self, batch: Any) -> LogRecordExportResult:
        self.records += len(batch)
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def dropping_logger_provider() -> tuple[LoggerProvider, DroppingLogExporter]:
    """An SDK LoggerProvider with a BatchLogRecordProcessor (defaults) onto a dropping
    exporter: where the events of content capture go."""
    exporter = DroppingLogExporter()
    lp = LoggerProvider()
    lp.add_log_record_processor(BatchLogRecordProcessor(exporter))
    return lp, exporter

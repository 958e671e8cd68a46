"""OpenTelemetry pieces shared by the benchmarks."""

from __future__ import annotations

from typing import Any

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

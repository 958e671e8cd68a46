"""The SDK exporters that write the store (``OTEL_*_EXPORTER=file``, the default
without an endpoint): one OTLP/JSON export request per line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ...config import settings as cfg
from .files import RotatingLines
from .otlp_json import to_otlp_json


class FileSpanExporter(SpanExporter):
    def __init__(self, directory: Path | None = None,
                 settings: cfg.Settings | None = None) -> None:
        self.out = RotatingLines("traces", directory, settings)

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        try:
            self.out.write(to_otlp_json(encode_spans(spans)))
        except Exception:
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.out.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class FileLogExporter(LogRecordExporter):
    def __init__(self, directory: Path | None = None,
                 settings: cfg.Settings | None = None) -> None:
        self.out = RotatingLines("logs", directory, settings)

    def export(self, batch: Sequence[Any]) -> LogRecordExportResult:
        try:
            self.out.write(to_otlp_json(encode_logs(batch)))
        except Exception:
            return LogRecordExportResult.FAILURE
        return LogRecordExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def shutdown(self) -> None:
        self.out.close()


class FileMetricExporter(MetricExporter):
    def __init__(self, directory: Path | None = None,
                 settings: cfg.Settings | None = None) -> None:
        super().__init__()
        self.out = RotatingLines("metrics", directory, settings)

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000,
               **kwargs: Any) -> MetricExportResult:
        try:
            self.out.write(to_otlp_json(encode_metrics(metrics_data)))
        except Exception:
            return MetricExportResult.FAILURE
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.out.close()



"""The SDK exporters that write the store (``OTEL_*_EXPORTER=file``, the default
without an endpoint): one OTLP/JSON export request per line."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ...config import settings as cfg
from .files import RotatingLines


class _StoreExporter:
    """What the three share: their signal's lines in the store, written through on each
    export (nothing to flush), closed on shutdown."""

    signal = ""

    def __init__(self, directory: Path | None = None,
                 settings: cfg.Settings | None = None) -> None:
        super().__init__()  # the SDK base's own setup (MetricExporter has some)
        self.out = RotatingLines(self.signal, directory, settings)

    def _written(self, encode: Callable[[Any], Any], batch: Any) -> bool:
        """One OTLP/JSON export request written as a line (False: it could not be)."""
        from .otlp_json import to_otlp_json  # protobuf: on the first export, not at start

        try:
            self.out.write(to_otlp_json(encode(batch)))
        except Exception:
            return False
        return True

    def force_flush(self, timeout_millis: float = 30_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.out.close()


class FileSpanExporter(_StoreExporter, SpanExporter):
    signal = "traces"

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        return (SpanExportResult.SUCCESS if self._written(encode_spans, spans)
                else SpanExportResult.FAILURE)


class FileLogExporter(_StoreExporter, LogRecordExporter):
    signal = "logs"

    def export(self, batch: Sequence[Any]) -> LogRecordExportResult:
        from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs

        return (LogRecordExportResult.SUCCESS if self._written(encode_logs, batch)
                else LogRecordExportResult.FAILURE)


class FileMetricExporter(_StoreExporter, MetricExporter):
    signal = "metrics"

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000,
               **kwargs: Any) -> MetricExportResult:
        from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics

        return (MetricExportResult.SUCCESS if self._written(encode_metrics, metrics_data)
                else MetricExportResult.FAILURE)

"""The embedded default: OTLP-JSON lines on local disk, rotated by size.

Each line is one OTLP/JSON export request (``ExportTraceServiceRequest`` etc.),
the encoding the Collector's ``file`` exporter writes and its ``otlpjsonfile``
receiver reads: lowerCamelCase fields, trace/span ids as hex, enums as numbers.
Files are ``<signal>-<UTC time>-<pid>-<n>.jsonl`` under ``OTELMW_DATA_DIR``
(default ``./.otelmw``); a file rolls over at ``OTELMW_DATA_MAX_BYTES`` (16 MiB)
and only the newest ``OTELMW_DATA_MAX_FILES`` (20) per signal are kept.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from .. import settings as cfg

_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId"})
REQUEST_TYPES: dict[str, type[Message]] = {
    "traces": ExportTraceServiceRequest,
    "logs": ExportLogsServiceRequest,
    "metrics": ExportMetricsServiceRequest,
}


def data_dir(*, strict: bool = True) -> Path:
    """``OTELMW_DATA_DIR`` (default ``./.otelmw``)."""
    return cfg.DATA_DIR.read(strict=strict)


def _ids_to_hex(node: Any, b64: bool) -> Any:
    """Convert id fields between protobuf-JSON base64 and OTLP-JSON hex."""
    import base64

    if isinstance(node, dict):
        for k, v in node.items():
            if k in _ID_KEYS and isinstance(v, str) and v:
                node[k] = base64.b64decode(v).hex() if b64 else base64.b64encode(
                    bytes.fromhex(v)).decode()
            else:
                _ids_to_hex(v, b64)
    elif isinstance(node, list):
        for x in node:
            _ids_to_hex(x, b64)
    return node


def to_otlp_json(message: Message) -> str:
    d = json_format.MessageToDict(message, use_integers_for_enums=True)  # OTLP/JSON: enums as ints
    return json.dumps(_ids_to_hex(d, True), separators=(",", ":"))


def from_otlp_json(signal: str, line: str) -> Message:
    d = _ids_to_hex(json.loads(line), False)
    msg = REQUEST_TYPES[signal]()
    json_format.ParseDict(d, msg, ignore_unknown_fields=True)
    return msg


def _file_order(path: Path) -> tuple[float, str]:
    """Oldest first: modification time, then name (the counter is zero-padded)."""
    try:
        return (path.stat().st_mtime, path.name)
    except OSError:  # removed meanwhile by another writer's pruning
        return (0.0, path.name)


class RotatingLines:
    """Append-only JSON lines per signal, rotated by size, bounded file count."""

    def __init__(self, signal: str, directory: Path | None = None,
                 settings: cfg.Settings | None = None) -> None:
        """``settings``: already validated ones (``configure()``); else the
        environment's, and an invalid limit raises ``ValueError``."""
        self.signal = signal
        if settings is not None:
            self.dir = directory if directory is not None else settings[cfg.DATA_DIR]
            self.max_bytes = settings[cfg.DATA_MAX_BYTES]
            self.max_files = settings[cfg.DATA_MAX_FILES]
        else:
            self.dir = directory if directory is not None else data_dir()
            self.max_bytes = cfg.DATA_MAX_BYTES.read()
            self.max_files = cfg.DATA_MAX_FILES.read()
        self._lock = threading.Lock()
        self._fh: Any = None
        self._size = 0
        self._n = 0

    def _open(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        while True:
            self._n += 1
            # zero-padded counter: names sort in write order when mtimes tie (coarse clock)
            path = self.dir / f"{self.signal}-{stamp}-{os.getpid()}-{self._n:06d}.jsonl"
            try:  # exclusive: never append to another writer's (possibly torn) file
                self._fh = open(path, "x", encoding="utf-8")  # noqa: SIM115 - long-lived
                break
            except FileExistsError:
                continue
        self._size = 0
        self._prune(path)

    def _prune(self, current: Path) -> None:
        # The file just opened counts as the newest and is never pruned (mtime ties).
        files = sorted((p for p in self.dir.glob(f"{self.signal}-*.jsonl") if p != current),
                       key=_file_order)
        for old in files[: max(0, len(files) + 1 - self.max_files)]:
            with contextlib.suppress(OSError):
                old.unlink()

    def write(self, line: str) -> None:
        with self._lock:
            if self._fh is None or self._size >= self.max_bytes:
                if self._fh is not None:
                    self._fh.close()
                self._open()
            self._fh.write(line + "\n")
            self._fh.flush()
            self._size += len(line.encode("utf-8")) + 1

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None


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


def read_requests(signal: str, directory: Path | None = None) -> Iterator[dict[str, Any]]:
    """Yield every stored export request (as OTLP-JSON dicts), oldest file first."""
    d = directory if directory is not None else data_dir()
    for path in sorted(d.glob(f"{signal}-*.jsonl"), key=_file_order):
        try:
            fh = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115
        except OSError:  # pruned meanwhile by a running writer
            continue
        with fh:
            for line in fh:
                line = line.strip()
                if line:
                    try:
                        request = json.loads(line)
                    except ValueError:
                        continue  # a torn last line from a crashed writer
                    if isinstance(request, dict):
                        yield request

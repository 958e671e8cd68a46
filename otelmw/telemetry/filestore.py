"""The embedded default: OTLP-JSON lines on local disk, rotated by size.

Each line is one OTLP/JSON export request (``ExportTraceServiceRequest`` etc.),
the encoding the Collector's ``file`` exporter writes and its ``otlpjsonfile``
receiver reads: lowerCamelCase fields, trace/span ids as hex, enums as numbers.
Files are ``<signal>-<UTC time>-<pid>-<n>.jsonl`` under ``OTELMW_DATA_DIR``
(default ``./.otelmw``); a file rolls over at ``OTELMW_DATA_MAX_BYTES`` (16 MiB)
and only the newest ``OTELMW_DATA_MAX_FILES`` (20) per signal are kept — except files
another live process is still writing, which are never deleted (see ``RotatingLines``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

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

from ..core import settings as cfg

try:  # POSIX: the lock that keeps a live writer's file from being pruned
    import fcntl
except ImportError:  # pragma: no cover - Windows: pruning by age alone
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger("otelmw")

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


_write_errors: dict[str, str] = {}  # "<path>: <OS error>" → signal, first failure each
_write_errors_lock = threading.Lock()


def _write_failed(signal: str, exc: OSError, where: Any) -> None:
    """One WARNING per distinct store write error, naming the path and the OS error
    (the failed batch is counted as dropped by the exporter's caller)."""
    problem = f"{exc.filename or where}: {exc.strerror or exc}"
    with _write_errors_lock:
        first = problem not in _write_errors
        _write_errors.setdefault(problem, signal)
    if first:
        logger.warning("otelmw: cannot write the embedded store: %s (%s and anything else "
                       "written there is not stored)", problem, signal)


def store_write_errors() -> list[str]:
    """Every distinct store write error of this process, ``"<path>: <OS error>"``."""
    with _write_errors_lock:
        return list(_write_errors)


def _file_order(path: Path) -> tuple[float, str]:
    """Oldest first: modification time, then name (the counter is zero-padded)."""
    try:
        return (path.stat().st_mtime, path.name)
    except OSError:  # removed meanwhile by another writer's pruning
        return (0.0, path.name)


class RotatingLines:
    """Append-only JSON lines per signal, rotated by size, bounded file count.

    Each line goes out with unbuffered ``os.write`` calls on an ``O_APPEND`` file, and
    the size of the file up to its last whole line is known: a write that fails
    halfway (disk full, file-size limit) is cut back to that line boundary, so no torn
    line stays behind to be merged with the next one, and writing goes on once there is
    room again. The file being written is held under an advisory lock (``flock``), and
    pruning never deletes a locked file: another process's live file survives however
    old its modification time. A forked child writes its own file."""

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
        self._fd: int | None = None
        self._path: Path | None = None
        self._size = 0  # bytes up to the end of the last whole line
        self._torn = False  # a failed write could not be cut back yet
        self._n = 0
        _writers.add(self)

    def _open(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        while True:
            self._n += 1
            # zero-padded counter: names sort in write order when mtimes tie (coarse clock)
            path = self.dir / f"{self.signal}-{stamp}-{os.getpid()}-{self._n:06d}.jsonl"
            try:  # exclusive: never append to another writer's (possibly torn) file
                fd = os.open(path, _OPEN_FLAGS, 0o644)
            except FileExistsError:
                continue
            if _hold(fd, path):
                break
            os.close(fd)  # pruned by another writer between create and lock: next name
        self._fd, self._path, self._size, self._torn = fd, path, 0, False
        self._prune(path)

    def _prune(self, current: Path) -> None:
        """Delete the oldest files beyond ``max_files``, skipping every file a live
        writer holds (so with more live writers than that, all their files stay)."""
        files = sorted((p for p in self.dir.glob(f"{self.signal}-*.jsonl") if p != current),
                       key=_file_order)
        excess = len(files) + 1 - self.max_files
        for old in files:
            if excess <= 0:
                break
            if _delete_unless_held(old):
                excess -= 1

    def _cut_back(self) -> bool:
        """Cut the file back to its last whole line; True when it ends on one."""
        if self._fd is None:
            return True
        try:
            os.ftruncate(self._fd, self._size)
        except OSError:
            self._torn = True
            return False
        self._torn = False
        return True

    def _close_file(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.close(fd)  # releases the lock

    def write(self, line: str) -> None:
        data = (line + "\n").encode("utf-8", "surrogatepass")
        with self._lock:
            try:
                if (self._fd is None or self._size >= self.max_bytes
                        or (self._torn and not self._cut_back())):
                    self._close_file()  # a torn tail that cannot be cut: start afresh
                    self._open()
                assert self._fd is not None
                view, done = memoryview(data), 0
                while done < len(data):
                    done += os.write(self._fd, view[done:])
            except OSError as exc:
                self._cut_back()
                _write_failed(self.signal, exc, self._path or self.dir)
                raise
            self._size += len(data)

    def close(self) -> None:
        with self._lock:
            self._close_file()

    def _after_fork_in_child(self) -> None:
        # The parent's file (and its lock) are the parent's: the child starts its own.
        self._lock = threading.Lock()
        self._close_file()
        self._path, self._size, self._torn, self._n = None, 0, False, 0


_OPEN_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND
               | getattr(os, "O_CLOEXEC", 0))
_writers: weakref.WeakSet[RotatingLines] = weakref.WeakSet()


def _children_write_their_own_files() -> None:
    for writer in list(_writers):
        writer._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_children_write_their_own_files)


def _hold(fd: int, path: Path) -> bool:
    """Lock the file just created for as long as it is written; False when ``path`` is
    no longer that file (another writer pruned it before the lock was taken)."""
    if fcntl is not None:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except OSError:
        return False


def _delete_unless_held(path: Path) -> bool:
    """Delete ``path`` unless a live writer holds its lock; True when it is gone."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # being written by a live process
            except OSError:
                pass  # no locks on this file system: prune by age alone
        try:
            os.unlink(path)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return True
    finally:
        os.close(fd)


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


class SkippedLine(NamedTuple):
    """A stored line a reader could not use: where it is and why."""

    path: Path
    line: int  # 1-based
    reason: str


# signal → (resource list key, scope list key, item list key) of its export request
_LAYOUT = {"traces": ("resourceSpans", "scopeSpans", "spans"),
           "logs": ("resourceLogs", "scopeLogs", "logRecords"),
           "metrics": ("resourceMetrics", "scopeMetrics", "metrics")}
_VALUE_KEYS = frozenset({"stringValue", "boolValue", "intValue", "doubleValue", "arrayValue",
                         "kvlistValue", "bytesValue"})


def _int_like(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, str) and value.isdigit())


def _any_value_problem(value: Any, depth: int = 0) -> str | None:
    if not isinstance(value, dict) or depth > 64:
        return "an attribute value is not an OTLP AnyValue"
    for key in _VALUE_KEYS & value.keys():
        inner = value[key]
        if key in ("arrayValue", "kvlistValue"):
            items = inner.get("values", []) if isinstance(inner, dict) else None
            if not isinstance(items, list):
                return f"{key} is not a list of values"
            for item in items:
                problem = (_attributes_problem([item], depth + 1) if key == "kvlistValue"
                           else _any_value_problem(item, depth + 1))
                if problem:
                    return problem
        elif key == "intValue" and not (_int_like(inner) or (
                isinstance(inner, str) and inner.lstrip("-").isdigit())):
            return "intValue is not an integer"
        elif key == "doubleValue" and not isinstance(inner, int | float | str):
            return "doubleValue is not a number"
    return None


def _attributes_problem(attrs: Any, depth: int = 0) -> str | None:
    if not isinstance(attrs, list):
        return "attributes is not a list"
    for kv in attrs:
        if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
            return "an attribute has no string key"
        problem = _any_value_problem(kv.get("value", {}), depth)
        if problem:
            return problem
    return None


def _span_problem(span: dict[str, Any]) -> str | None:
    for key in ("traceId", "spanId", "parentSpanId", "name"):
        if not isinstance(span.get(key, ""), str):
            return f"a span's {key} is not a string"
    for key in ("startTimeUnixNano", "endTimeUnixNano"):
        if key in span and not _int_like(span[key]):
            return f"a span's {key} is not an integer"
    status = span.get("status", {})
    if not isinstance(status, dict) or not isinstance(status.get("code", 0), int | str):
        return "a span's status is malformed"
    return None


def request_problem(signal: str, request: Any) -> str | None:
    """Why ``request`` is not a usable OTLP/JSON export request of ``signal``
    (containers, ids, times and attributes as readers use them), or None."""
    if not isinstance(request, dict):
        return f"a JSON {type(request).__name__}, not an export request"
    top, scope_key, item_key = _LAYOUT[signal]
    resources = request.get(top, [])
    if not isinstance(resources, list):
        return f"{top} is not a list"
    for res in resources:
        if not isinstance(res, dict):
            return f"an entry of {top} is not an object"
        resource = res.get("resource", {})
        problem = (_attributes_problem(resource.get("attributes", []))
                   if isinstance(resource, dict) else "resource is not an object")
        if problem:
            return problem
        scopes = res.get(scope_key, [])
        if not isinstance(scopes, list) or not all(isinstance(x, dict) for x in scopes):
            return f"{scope_key} is not a list of objects"
        for scope in scopes:
            items = scope.get(item_key, [])
            if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
                return f"{item_key} is not a list of objects"
            for item in items:
                problem = _attributes_problem(item.get("attributes", [])) or (
                    _span_problem(item) if signal == "traces" else None)
                if problem:
                    return problem
    return None


_DECODER = json.JSONDecoder()


def _salvage(signal: str, line: str) -> dict[str, Any] | None:
    """A complete request at the end of a line that starts with a torn one (a write
    cut short, then the next appended to it)."""
    marker = '{"' + _LAYOUT[signal][0] + '"'
    start = line.find(marker, 1)
    while start != -1:
        try:
            request, end = _DECODER.raw_decode(line, start)
        except (ValueError, RecursionError):
            request, end = None, -1
        if end == len(line) and request_problem(signal, request) is None:
            return request  # type: ignore[no-any-return]
        start = line.find(marker, start + 1)
    return None


class StoredRequest(NamedTuple):
    path: Path
    line: int  # 1-based
    request: dict[str, Any]


def read_requests(signal: str, directory: Path | None = None,
                  skipped: list[SkippedLine] | None = None) -> Iterator[dict[str, Any]]:
    """Yield every stored export request (as OTLP-JSON dicts), oldest file first.

    A line that is not JSON (torn by a crash, corrupted) or not an export request
    of this signal is skipped and, when ``skipped`` is given, appended to it; every
    other line is still read (``describe_skipped`` words the list for a user)."""
    for stored in read_stored(signal, directory, skipped):
        yield stored.request


def read_stored(signal: str, directory: Path | None = None,
                skipped: list[SkippedLine] | None = None) -> Iterator[StoredRequest]:
    """``read_requests`` with where each request was read from."""
    d = directory if directory is not None else data_dir()
    for path in sorted(d.glob(f"{signal}-*.jsonl"), key=_file_order):
        try:
            fh = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115
        except OSError:  # pruned meanwhile by a running writer
            continue
        with fh:
            for number, raw in enumerate(fh, 1):
                line = raw.strip()
                if not line:
                    continue
                try:
                    request = json.loads(line)
                except (ValueError, RecursionError):
                    request = _salvage(signal, line)
                    if skipped is not None:
                        skipped.append(SkippedLine(path, number, (
                            "not JSON (torn or corrupt)" if request is None else
                            "a torn request; the complete one after it was kept")))
                    if request is not None:
                        yield StoredRequest(path, number, request)
                    continue
                problem = request_problem(signal, request)
                if problem is None:
                    yield StoredRequest(path, number, request)
                elif skipped is not None:
                    skipped.append(SkippedLine(path, number, problem))


def describe_skipped(skipped: Sequence[SkippedLine]) -> str:
    """One line for a user: how many lines were skipped, in which files, which and why."""
    by_file: dict[Path, list[SkippedLine]] = {}
    for item in skipped:
        by_file.setdefault(item.path, []).append(item)
    parts = []
    for path, items in by_file.items():
        shown = ", ".join(f"line {x.line} ({x.reason})" for x in items[:5])
        more = f", and {len(items) - 5} more" if len(items) > 5 else ""
        parts.append(f"{path}: {shown}{more}")
    return (f"otelmw: skipped {len(skipped)} unreadable line(s) of the store, every other "
            f"line was read: " + "; ".join(parts))

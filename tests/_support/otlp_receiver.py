"""A real OTLP receiver (gRPC + HTTP protobuf/JSON) on 127.0.0.1 ephemeral ports.

``with OtlpReceiver() as rx: ...; spans = rx.wait_for_spans(3)``. Fault modes, settable at
runtime via ``rx.mode``: "ok"; "error" (gRPC ``grpc_error_code`` / HTTP ``http_error_status``,
default UNAVAILABLE / 503); "blackhole" (accept, never answer; released when the mode changes,
the gRPC client gives up, or the receiver stops); "slow" (sleep ``slow_seconds``, then accept).
"""

from __future__ import annotations

import atexit
import gzip
import json
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeVar

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from _support import (
    LocalHandler,
    LocalHTTPServer,
    RawRequest,
    ReceivedLog,
    ReceivedMetric,
    ReceivedSpan,
    Service,
    decode_otlp,
    free_port,
    hex_ids_to_base64,
)

_T = TypeVar("_T")

# The decoded data model lives in ``_support``; callers import it from there. These are
# the names callers take from this module.
__all__ = ["OtlpReceiver", "ReceivedLog", "ReceivedRun", "ReceivedSpan", "free_port"]

Signal = Literal["traces", "logs", "metrics"]
Protocol = Literal["grpc", "http"]
MODES = ("ok", "error", "blackhole", "slow")

_tr, _lg, _mt = trace_service_pb2, logs_service_pb2, metrics_service_pb2
_MESSAGES: dict[str, tuple[type[Message], type[Message]]] = {
    "traces": (_tr.ExportTraceServiceRequest, _tr.ExportTraceServiceResponse),
    "logs": (_lg.ExportLogsServiceRequest, _lg.ExportLogsServiceResponse),
    "metrics": (_mt.ExportMetricsServiceRequest, _mt.ExportMetricsServiceResponse),
}
_HTTP_PATHS = {"/v1/traces": "traces", "/v1/logs": "logs", "/v1/metrics": "metrics"}


class ReceivedRun:
    """What a receiver got from one program's run (``spans``, ``logs``), with the queries
    the host tests make of it; a host test's record of a run subclasses it."""

    __slots__ = ()
    spans: list[ReceivedSpan]
    logs: list[ReceivedLog]

    def named(self, prefix: str) -> list[ReceivedSpan]:
        """The spans whose name starts with ``prefix``, by start time."""
        return sorted((s for s in self.spans if s.name.startswith(prefix)),
                      key=lambda s: s.start_ns)

    def children(self, span: ReceivedSpan) -> list[ReceivedSpan]:
        """``span``'s children, by start time."""
        return sorted((s for s in self.spans if s.parent_span_id == span.span_id),
                      key=lambda s: s.start_ns)

    def hook_logs(self, hook: str) -> list[ReceivedLog]:
        """The log records of otelmw's events for ``hook``."""
        return [x for x in self.logs if x.event_name == f"otelmw.hook.{hook}"]


class _Servicer:
    """Implements ``Export`` for any of the three OTLP gRPC collector services."""

    def __init__(self, rx: OtlpReceiver, signal: str) -> None:
        self._rx, self._signal = rx, signal

    def Export(self, request: Any, context: Any) -> Any:  # grpc's naming
        return self._rx._grpc_export(self._signal, request, context)


class _OtlpHttpHandler(LocalHandler):
    def do_POST(self) -> None:
        rx: OtlpReceiver = self.server.owner
        signal = _HTTP_PATHS.get(self.path.split("?", 1)[0].rstrip("/"))
        body = self.read_body()
        if signal is None:
            self.send_body(404, b"not found", "text/plain")
            return
        outcome = rx._admit(signal, "http", lambda: True)
        if outcome == "dropped":
            self.close_connection = True  # never answer
            return
        if outcome == "error":
            extra = {} if rx.retry_after is None else {"Retry-After": str(rx.retry_after)}
            self.send_body(
                rx.http_error_status, b"otlp receiver in error mode", "text/plain", extra
            )
            return
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        req_cls, resp_cls = _MESSAGES[signal]
        try:
            encoding = (self.headers.get("Content-Encoding") or "").lower()
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            msg = req_cls()
            if ctype == "application/json":
                parsed = hex_ids_to_base64(json.loads(body))
                json_format.ParseDict(parsed, msg, ignore_unknown_fields=True)
            else:
                msg.ParseFromString(body)
        except Exception as exc:  # malformed payload -> 400 like a collector
            self.send_body(400, f"bad payload: {exc}".encode(), "text/plain")
            return
        rx._record(signal, "http", msg, {k.lower(): v for k, v in self.headers.items()})
        if ctype == "application/json":
            self.send_body(200, json_format.MessageToJson(resp_cls()).encode(), "application/json")
        else:
            self.send_body(200, resp_cls().SerializeToString(), "application/x-protobuf")


class OtlpReceiver(Service):
    """In-process OTLP receiver: gRPC and HTTP endpoints on 127.0.0.1."""

    def __init__(
        self,
        *,
        mode: str = "ok",
        slow_seconds: float = 2.0,
        http_error_status: int = 503,
        grpc_error_code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE,
        retry_after: float | None = None,
        max_receive_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        """``max_receive_bytes``: the gRPC receive limit (a Collector's default is
        4 MiB, ``4 * 1024 * 1024``; larger requests are refused whole)."""
        self.max_receive_bytes = max_receive_bytes
        self.slow_seconds = slow_seconds
        self.http_error_status = http_error_status
        self.grpc_error_code = grpc_error_code
        self.retry_after = retry_after  # HTTP Retry-After seconds sent in error mode
        self._cond = threading.Condition(threading.RLock())
        self._mode = "ok"
        self.mode = mode
        self._stopped = threading.Event()
        self._spans: list[ReceivedSpan] = []
        self._logs: list[ReceivedLog] = []
        self._metrics: list[ReceivedMetric] = []
        self._raw: list[RawRequest] = []
        self._data: dict[str, list[Any]] = {
            "traces": self._spans,
            "logs": self._logs,
            "metrics": self._metrics,
        }
        self._arrived: Counter[tuple[str, str]] = Counter()
        self._accepted: Counter[tuple[str, str]] = Counter()
        self._grpc_server: grpc.Server | None = None
        self._grpc_port: int | None = None
        self._http: LocalHTTPServer | None = None

    # ---- lifecycle
    def start(self) -> OtlpReceiver:
        if self._grpc_server is not None:
            return self
        self._stopped.clear()
        server = grpc.server(
            ThreadPoolExecutor(max_workers=16, thread_name_prefix="otlp-rx-grpc"),
            options=[("grpc.max_receive_message_length", self.max_receive_bytes)],
        )
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Servicer(self, "traces"), server)
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(_Servicer(self, "logs"), server)
        add_metrics = metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server
        add_metrics(_Servicer(self, "metrics"), server)
        self._grpc_port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self._grpc_server = server
        self._http = LocalHTTPServer(_OtlpHttpHandler, self)
        self._http.start_background("otlp-rx-http")
        # grpc's (non-daemon) worker pool is joined at interpreter exit *before* plain atexit
        # handlers run; register with threading's exit hooks so blackholed calls are released.
        register = getattr(threading, "_register_atexit", atexit.register)
        try:
            register(self.stop)
        except RuntimeError:  # interpreter already shutting down
            atexit.register(self.stop)
        return self

    def stop(self) -> None:
        """Stop both servers (idempotent); releases blackholed/slow requests."""
        self._stopped.set()
        with self._cond:
            self._cond.notify_all()
        server, self._grpc_server = self._grpc_server, None
        if server is not None:
            server.stop(grace=0.2).wait(5)
        http, self._http = self._http, None
        if http is not None:
            http.stop()

    @property
    def grpc_endpoint(self) -> str:
        if self._grpc_server is None or self._grpc_port is None:
            raise RuntimeError("receiver not started")
        return f"http://127.0.0.1:{self._grpc_port}"

    @property
    def http_endpoint(self) -> str:
        if self._http is None:
            raise RuntimeError("receiver not started")
        return f"http://127.0.0.1:{self._http.port}"

    def http_url(self, signal: Signal) -> str:
        """Full per-signal URL, e.g. ``http://127.0.0.1:PORT/v1/traces``."""
        return f"{self.http_endpoint}/v1/{signal}"

    # ---- fault modes
    @property
    def mode(self) -> str:
        return self._mode

    @mode.setter
    def mode(self, value: str) -> None:
        if value not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {value!r}")
        with self._cond:
            self._mode = value
            self._cond.notify_all()

    def _admit(self, signal: str, protocol: str, alive: Callable[[], bool]) -> str:
        """Count an arriving request and apply the fault mode: 'ok' | 'error' | 'dropped'."""
        with self._cond:
            self._arrived[(signal, protocol)] += 1
            self._cond.notify_all()
            mode = self._mode
            if mode == "blackhole":
                while self._mode == "blackhole" and not self._stopped.is_set() and alive():
                    self._cond.wait(0.05)
                return "dropped"
        if mode == "error":
            return "error"
        if mode == "slow" and self._stopped.wait(self.slow_seconds):
            return "dropped"
        return "ok"

    def _record(self, signal: str, protocol: str, msg: Message, headers: dict[str, str]) -> None:
        decoded = decode_otlp(signal, msg)
        with self._cond:
            self._raw.append(RawRequest(signal, protocol, headers, msg))
            self._data[signal].extend(decoded)
            self._accepted[(signal, protocol)] += 1
            self._cond.notify_all()

    def _grpc_export(self, signal: str, request: Message, context: Any) -> Message:
        outcome = self._admit(signal, "grpc", context.is_active)
        if outcome == "error":
            context.abort(self.grpc_error_code, "otlp receiver in error mode")
        if outcome == "dropped":
            context.abort(grpc.StatusCode.UNAVAILABLE, "blackholed request released")
        headers = {str(k).lower(): str(v) for k, v in context.invocation_metadata()}
        self._record(signal, "grpc", request, headers)
        return _MESSAGES[signal][1]()

    # ---- accessors (all return copies; safe to call from any thread)
    def _matching(self, items: list[_T], field: str, wanted: object) -> list[_T]:
        """The items whose ``field`` is ``wanted`` (all when ``wanted`` is None), copied
        under the lock."""
        with self._cond:
            return [x for x in items if wanted is None or getattr(x, field) == wanted]

    def spans(self, name: str | None = None) -> list[ReceivedSpan]:
        return self._matching(self._spans, "name", name)

    def logs(self, event_name: str | None = None) -> list[ReceivedLog]:
        return self._matching(self._logs, "event_name", event_name)

    def metrics(self, name: str | None = None) -> list[ReceivedMetric]:
        return self._matching(self._metrics, "name", name)

    def raw_requests(self, signal: Signal | None = None) -> list[RawRequest]:
        return self._matching(self._raw, "signal", signal)

    def request_count(self, signal: Signal | None = None, protocol: Protocol | None = None) -> int:
        """Requests that *arrived* (whatever the fault mode then did with them)."""
        return self._count(self._arrived, signal, protocol)

    def accepted_count(self, signal: Signal | None = None, protocol: Protocol | None = None) -> int:
        """Requests answered with success and recorded."""
        return self._count(self._accepted, signal, protocol)

    @property
    def request_counts(self) -> dict[tuple[str, str], int]:
        """Arrived requests keyed by ``(signal, protocol)``."""
        with self._cond:
            return dict(self._arrived)

    def _count(self, counter: Counter[Any], signal: str | None, proto: str | None) -> int:
        with self._cond:
            return sum(
                n
                for (sig, pro), n in counter.items()
                if (signal is None or sig == signal) and (proto is None or pro == proto)
            )

    def clear(self) -> None:
        """Drop all received data and reset the request counters."""
        with self._cond:
            for items in (self._spans, self._logs, self._metrics, self._raw):
                items.clear()
            self._arrived.clear()
            self._accepted.clear()

    # ---- waiting
    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        """Block until ``predicate()`` is true; raise ``TimeoutError`` after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"condition not met within {timeout}s: {self._summary()}")
                self._cond.wait(min(remaining, 0.1))

    def wait_for_spans(self, n: int, timeout: float = 10.0) -> list[ReceivedSpan]:
        """Wait until at least ``n`` spans arrived; return all spans."""
        self.wait_for(lambda: len(self._spans) >= n, timeout)
        return self.spans()

    def wait_for_logs(self, n: int, timeout: float = 10.0) -> list[ReceivedLog]:
        self.wait_for(lambda: len(self._logs) >= n, timeout)
        return self.logs()

    def wait_for_metric(self, name: str, timeout: float = 10.0) -> list[ReceivedMetric]:
        self.wait_for(lambda: any(m.name == name for m in self._metrics), timeout)
        return self.metrics(name)

    def _summary(self) -> str:
        names = [s.name for s in self._spans][:20]
        return (
            f"{len(self._spans)} spans {names}, {len(self._logs)} logs, "
            f"{len(self._metrics)} metrics, arrived={dict(self._arrived)}"
        )

"""Real, in-process test servers for otelmw's test-suite.

* :mod:`_support.otlp_receiver` -- an OTLP receiver (gRPC + HTTP/protobuf/JSON).
* :mod:`_support.scripted_llm` -- a scripted OpenAI/Anthropic-compatible LLM server.

Both bind 127.0.0.1 on ephemeral ports and run on daemon threads. This module holds the
shared pieces: :func:`free_port`, :class:`LocalHTTPServer` and the decoded OTLP data model
(``Received*`` dataclasses and the protobuf -> python decoders).
"""

from __future__ import annotations

import base64
import contextlib
import re
import socket
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple, Self

from google.protobuf.message import Message
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

__all__ = [
    "DataPoint",
    "LocalHTTPServer",
    "LocalHandler",
    "RawRequest",
    "ReceivedEvent",
    "ReceivedLog",
    "ReceivedMetric",
    "ReceivedSpan",
    "Service",
    "decode_any_value",
    "decode_attributes",
    "decode_otlp",
    "free_port",
    "hex_ids_to_base64",
]

_ID_KEYS = {"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"}
_HEX_ID = re.compile(r"^(?:[0-9a-fA-F]{16}|[0-9a-fA-F]{32})$")


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free at the time of the call."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Service:
    """A server a test starts and stops, or runs for a ``with`` block."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class LocalHTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer on 127.0.0.1 that serves on a daemon thread.

    Tracks open client connections so :meth:`stop` also tears down idle
    keep-alive connections (otherwise a stopped server would keep answering
    on connections a client pooled earlier).
    """

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, handler: type[BaseHTTPRequestHandler], owner: Any, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), handler)
        self.owner = owner
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conns_lock:
            self._conns.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._conns_lock:
            self._conns.discard(request)
        super().shutdown_request(request)

    def start_background(self, name: str) -> None:
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, name=name, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self.shutdown()  # blocks until serve_forever returns; only valid once started
        self.server_close()
        with self._conns_lock:
            conns = list(self._conns)
            self._conns.clear()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)


class LocalHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive request handler base: quiet logging plus small response helpers."""

    protocol_version = "HTTP/1.1"
    server: LocalHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def read_body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def send_head(
        self, status: int, ctype: str, extra: Mapping[str, str] = {}, length: int | None = None
    ) -> None:
        """Status line + headers; ``length=None`` means a chunked (streamed) body follows."""
        self.send_response(status)
        headers = {"Content-Type": ctype, **extra}
        if length is None:
            headers |= {"Transfer-Encoding": "chunked", "Cache-Control": "no-cache"}
        else:
            headers["Content-Length"] = str(length)
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()

    def send_body(
        self, status: int, body: bytes, ctype: str, extra: Mapping[str, str] = {}
    ) -> None:
        self.send_head(status, ctype, extra, len(body))
        self.wfile.write(body)

    def send_chunk(self, data: bytes) -> None:
        """Write one HTTP/1.1 chunk (an empty ``data`` terminates the body)."""
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


@dataclass(frozen=True)
class ReceivedEvent:
    name: str
    time_ns: int
    attributes: dict[str, Any]


@dataclass(frozen=True)
class ReceivedSpan:
    trace_id: str  # 32 hex chars
    span_id: str  # 16 hex chars
    parent_span_id: str | None  # None for root spans
    name: str
    kind: int  # proto SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer
    status_code: int  # 0 unset, 1 ok, 2 error
    status_message: str
    attributes: dict[str, Any]
    events: list[ReceivedEvent]
    resource: dict[str, Any]
    scope_name: str
    start_ns: int
    end_ns: int
    links: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class ReceivedLog:
    trace_id: str | None
    span_id: str | None
    event_name: str
    body: Any
    attributes: dict[str, Any]
    severity_number: int
    resource: dict[str, Any]
    severity_text: str = ""
    scope_name: str = ""
    time_ns: int = 0


class DataPoint(NamedTuple):
    attributes: dict[str, Any]
    value: Any  # int | float for sum/gauge; dict for histogram/exp-histogram/summary


@dataclass(frozen=True)
class ReceivedMetric:
    name: str
    unit: str
    kind: str  # 'sum' | 'gauge' | 'histogram' | 'exponential_histogram' | 'summary'
    data_points: list[DataPoint]
    description: str = ""
    resource: dict[str, Any] = field(default_factory=dict)
    scope_name: str = ""
    is_monotonic: bool | None = None
    temporality: int | None = None  # 1 delta, 2 cumulative


@dataclass(frozen=True)
class RawRequest:
    signal: str
    protocol: str
    headers: dict[str, str]  # lower-cased names (HTTP headers / gRPC metadata)
    message: Message


def decode_any_value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [decode_any_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return decode_attributes(value.kvlist_value.values)
    return getattr(value, which)


def decode_attributes(kvs: Iterable[KeyValue]) -> dict[str, Any]:
    return {kv.key: decode_any_value(kv.value) for kv in kvs}


def _hex(raw: bytes) -> str | None:
    return raw.hex() if raw and any(raw) else None


def _scoped(resources: Iterable[Any], scopes: str, items: str
            ) -> Iterator[tuple[dict[str, Any], str, Any]]:
    """(decoded resource attributes, scope name, item) for each item of an OTLP export
    request's ``resources`` (``scopes``/``items``: the field names of that signal)."""
    for r in resources:
        resource = decode_attributes(r.resource.attributes)
        for scoped in getattr(r, scopes):
            for item in getattr(scoped, items):
                yield resource, scoped.scope.name, item


def _decode_spans(req: Any) -> list[ReceivedSpan]:
    out: list[ReceivedSpan] = []
    for resource, scope_name, s in _scoped(req.resource_spans, "scope_spans", "spans"):
        events = [
            ReceivedEvent(e.name, e.time_unix_nano, decode_attributes(e.attributes))
            for e in s.events
        ]
        links = [
            (lk.trace_id.hex(), lk.span_id.hex(), decode_attributes(lk.attributes))
            for lk in s.links
        ]
        out.append(
            ReceivedSpan(
                trace_id=s.trace_id.hex(),
                span_id=s.span_id.hex(),
                parent_span_id=_hex(s.parent_span_id),
                name=s.name,
                kind=int(s.kind),
                status_code=int(s.status.code),
                status_message=s.status.message,
                attributes=decode_attributes(s.attributes),
                events=events,
                resource=resource,
                scope_name=scope_name,
                start_ns=s.start_time_unix_nano,
                end_ns=s.end_time_unix_nano,
                links=links,
            )
        )
    return out


def _decode_logs(req: Any) -> list[ReceivedLog]:
    out: list[ReceivedLog] = []
    for resource, scope_name, r in _scoped(req.resource_logs, "scope_logs", "log_records"):
        body = decode_any_value(r.body) if r.HasField("body") else None
        out.append(
            ReceivedLog(
                trace_id=_hex(r.trace_id),
                span_id=_hex(r.span_id),
                event_name=r.event_name,
                body=body,
                attributes=decode_attributes(r.attributes),
                severity_number=int(r.severity_number),
                resource=resource,
                severity_text=r.severity_text,
                scope_name=scope_name,
                time_ns=r.time_unix_nano or r.observed_time_unix_nano,
            )
        )
    return out


def _point_value(kind: str, dp: Any) -> Any:
    if kind in ("sum", "gauge"):
        which = dp.WhichOneof("value")
        return None if which is None else getattr(dp, which)
    base: dict[str, Any] = {"count": dp.count, "sum": dp.sum if dp.HasField("sum") else None}
    if kind == "summary":
        base["sum"] = dp.sum
        base["quantiles"] = {q.quantile: q.value for q in dp.quantile_values}
        return base
    base["min"] = dp.min if dp.HasField("min") else None
    base["max"] = dp.max if dp.HasField("max") else None
    if kind == "histogram":
        base["bucket_counts"] = list(dp.bucket_counts)
        base["explicit_bounds"] = list(dp.explicit_bounds)
    else:
        base["scale"] = dp.scale
        base["zero_count"] = dp.zero_count
        for side in ("positive", "negative"):
            buckets = getattr(dp, side)
            base[side] = {"offset": buckets.offset, "bucket_counts": list(buckets.bucket_counts)}
    return base


def _decode_metrics(req: Any) -> list[ReceivedMetric]:
    out: list[ReceivedMetric] = []
    for resource, scope_name, m in _scoped(req.resource_metrics, "scope_metrics", "metrics"):
        kind = m.WhichOneof("data") or "unknown"
        data = getattr(m, kind) if kind != "unknown" else None
        points = [
            DataPoint(decode_attributes(dp.attributes), _point_value(kind, dp))
            for dp in (data.data_points if data is not None else [])
        ]
        temporality = getattr(data, "aggregation_temporality", None)
        out.append(
            ReceivedMetric(
                name=m.name,
                unit=m.unit,
                kind=kind,
                data_points=points,
                description=m.description,
                resource=resource,
                scope_name=scope_name,
                is_monotonic=data.is_monotonic
                if kind == "sum" and data is not None
                else None,
                temporality=None if temporality is None else int(temporality),
            )
        )
    return out


def hex_ids_to_base64(obj: Any) -> Any:
    """OTLP/JSON encodes trace/span ids as hex; protobuf's JSON mapping wants base64."""
    if isinstance(obj, dict):
        return {
            k: (
                base64.b64encode(bytes.fromhex(v)).decode()
                if k in _ID_KEYS and isinstance(v, str) and _HEX_ID.match(v)
                else hex_ids_to_base64(v)
            )
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [hex_ids_to_base64(v) for v in obj]
    return obj


_DECODERS: dict[str, Callable[[Any], list[Any]]] = {
    "traces": _decode_spans,
    "logs": _decode_logs,
    "metrics": _decode_metrics,
}


def decode_otlp(signal: str, request: Any) -> list[Any]:
    """Decode an Export{Trace,Logs,Metrics}ServiceRequest into Received* objects."""
    return _DECODERS[signal](request)

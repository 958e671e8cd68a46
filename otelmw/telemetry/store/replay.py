"""Send the embedded store's OTLP-JSON to an OTLP endpoint (``otelmw replay``).

The store's requests are sent and kept; then the spool's (``<store>/spool``: what
a program could not deliver itself), each spool file removed once all of its
requests were taken, so a second replay does not send them again. A file
interrupted half-way, or still being written by a live program, is sent whole
next time (at least once, never lost).
"""

from __future__ import annotations

import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from google.protobuf.message import Message

from ...config import settings as cfg
from .files import SPOOL_SUBDIR, _delete_unless_held, data_dir
from .otlp_json import from_otlp_json
from .readers import SkippedLine, StoredRequest, read_stored

SIGNALS = ("traces", "metrics", "logs")


class ReplayError(Exception):
    """A request the endpoint did not take; ``target`` is the URL (HTTP) or the
    ``host:port`` (gRPC) it was sent to, the cause is chained."""

    def __init__(self, signal: str, protocol: str, target: str, cause: BaseException) -> None:
        detail = getattr(cause, "details", None)  # grpc.RpcError: the server's words
        reason = detail() if callable(detail) else cause
        super().__init__(f"{signal} to {target} ({protocol}): {type(cause).__name__}: {reason}")
        self.signal = signal
        self.protocol = protocol
        self.target = target


def default_endpoint(protocol: str, settings: cfg.Settings) -> str:
    """``OTEL_EXPORTER_OTLP_ENDPOINT`` of ``settings``, else OTLP's local default."""
    endpoint: str = settings[cfg.OTLP_ENDPOINT]
    if endpoint:
        return endpoint.rstrip("/")
    return "http://localhost:4317" if protocol == "grpc" else "http://localhost:4318"


def _http_url(endpoint: str, signal: str) -> str:
    return f"{endpoint.rstrip('/')}/v1/{signal}"


def _send_http(endpoint: str, signal: str, msg: Message, timeout: float) -> None:
    req = urllib.request.Request(
        _http_url(endpoint, signal), data=msg.SerializeToString(), method="POST",
        headers={"Content-Type": "application/x-protobuf"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        if resp.status >= 300:
            raise OSError(f"{signal}: HTTP {resp.status}")


def _grpc_target(endpoint: str) -> str:
    return endpoint.split("://", 1)[-1]


def _grpc_stubs(endpoint: str) -> tuple[Any, dict[str, Any]]:
    import grpc
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc
    from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    channel = grpc.insecure_channel(_grpc_target(endpoint))
    return channel, {
        "traces": trace_service_pb2_grpc.TraceServiceStub(channel),  # type: ignore[no-untyped-call]
        "metrics": metrics_service_pb2_grpc.MetricsServiceStub(channel),  # type: ignore[no-untyped-call]
        "logs": logs_service_pb2_grpc.LogsServiceStub(channel),  # type: ignore[no-untyped-call]
    }


def replay(endpoint: str | None = None, protocol: str = "http/protobuf",
           directory: Path | None = None, timeout: float = 10.0,
           skipped: list[SkippedLine] | None = None,
           signals: Sequence[str] = SIGNALS) -> dict[str, int]:
    """Replay every stored request; returns the number of requests sent per signal.
    Raises :class:`ReplayError` naming the endpoint when a request is not taken.
    Lines that cannot be read are skipped (listed in ``skipped`` when given).
    ``signals``: which of traces, metrics, logs to send (a traces-only backend
    such as Phoenix or Tempo takes ``("traces",)``)."""
    unknown = [x for x in signals if x not in SIGNALS]
    if unknown:
        raise ValueError(f"unknown signal(s) {unknown}: expected {', '.join(SIGNALS)}")
    if protocol not in ("grpc", "http/protobuf"):
        raise ValueError(f"protocol must be grpc or http/protobuf, got {protocol!r}")
    # A bad store or endpoint setting raises ValueError here, before anything is sent.
    settings = cfg.load(strict=[cfg.DATA_DIR, cfg.OTLP_ENDPOINT])
    endpoint = endpoint or default_endpoint(protocol, settings)
    sent = dict.fromkeys(signals, 0)
    channel = None
    stubs: dict[str, Any] = {}
    if protocol == "grpc":
        channel, stubs = _grpc_stubs(endpoint)
    try:
        import json

        def send(signal: str, stored: StoredRequest) -> None:
            try:
                msg = from_otlp_json(signal, json.dumps(stored.request))
            except Exception as exc:  # valid JSON the OTLP schema refuses
                if skipped is not None:
                    skipped.append(SkippedLine(stored.path, stored.line,
                                               f"not OTLP: {exc}"[:200]))
                return
            try:
                if protocol == "grpc":
                    stubs[signal].Export(msg, timeout=timeout)
                else:
                    _send_http(endpoint, signal, msg, timeout)
            except Exception as exc:
                target = (_grpc_target(endpoint) if protocol == "grpc"
                          else _http_url(endpoint, signal))
                raise ReplayError(signal, protocol, target, exc) from exc
            sent[signal] += 1

        store = directory if directory is not None else data_dir(settings)
        for signal in signals:
            for stored in read_stored(signal, store, skipped):
                send(signal, stored)
            previous: Path | None = None  # the spool file being sent
            for stored in read_stored(signal, store / SPOOL_SUBDIR, skipped):
                if previous is not None and stored.path != previous:
                    _delete_unless_held(previous)  # all sent; a live writer's file stays
                send(signal, stored)
                previous = stored.path
            if previous is not None:
                _delete_unless_held(previous)
    finally:
        if channel is not None:
            channel.close()
    return sent

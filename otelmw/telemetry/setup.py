"""SDK setup: ``configure()`` — idempotent, env-driven, batch-only, bounded shutdown.

Honours ``OTEL_SDK_DISABLED``, ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``,
``OTEL_EXPORTER_OTLP_ENDPOINT`` (+ per-signal variants), ``OTEL_EXPORTER_OTLP_PROTOCOL``
(``grpc`` default, as ``opentelemetry-instrument``; or ``http/protobuf``),
``OTEL_TRACES_SAMPLER``, ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` /
``OTEL_LOGS_EXPORTER`` (``otlp``, ``console``, ``none``, ``file``; metrics also
``prometheus``). With no exporter and no endpoint configured, every signal goes
to the embedded OTLP-JSON store (``file``). Providers the application already
installed are used as they are (otelmw adds no processors to them).
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import _logs, metrics, trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, ConsoleLogRecordExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

from ..pipeline import Pipeline, get_pipeline
from . import health
from .content import ContentPolicy
from .context import instrument_threads
from .observer import TelemetryObserver, hook_events_mode, middleware_metrics_on

logger = logging.getLogger("otelmw")

SIGNALS = ("traces", "metrics", "logs")
_EXPORTERS = {"traces": {"otlp", "console", "none", "file"},
              "metrics": {"otlp", "console", "none", "file", "prometheus"},
              "logs": {"otlp", "console", "none", "file"}}


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def exporter_choice(signal: str) -> list[str]:
    """The exporters for ``signal`` per env; ``file`` when nothing is configured."""
    raw = os.environ.get(f"OTEL_{signal.upper()}_EXPORTER", "").strip()
    if raw:
        names = [x.strip().lower() for x in raw.split(",") if x.strip()]
        bad = [x for x in names if x not in _EXPORTERS[signal]]
        if bad:
            raise ValueError(f"OTEL_{signal.upper()}_EXPORTER: unsupported exporter(s) {bad}; "
                             f"expected {sorted(_EXPORTERS[signal])}")
        return [x for x in names if x != "none"]
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get(
            f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT"):
        return ["otlp"]
    return ["file"]


def _protocol(signal: str) -> str:
    var = f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL"
    if not os.environ.get(var):
        var = "OTEL_EXPORTER_OTLP_PROTOCOL"
    raw = (os.environ.get(var) or "grpc").strip().lower()
    if raw not in ("grpc", "http/protobuf"):
        raise ValueError(f"{var}={raw!r}: expected grpc or http/protobuf")
    return raw


def _otlp(signal: str) -> Any:
    grpc = _protocol(signal) == "grpc"
    if signal == "traces":
        if grpc:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[assignment]
                OTLPSpanExporter,
            )
        return OTLPSpanExporter()
    if signal == "metrics":
        if grpc:
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # type: ignore[assignment]
                OTLPMetricExporter,
            )
        return OTLPMetricExporter()
    if grpc:
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
    else:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import (  # type: ignore[assignment]
            OTLPLogExporter,
        )
    return OTLPLogExporter()


def _exporter(signal: str, name: str) -> Any:
    if name == "otlp":
        return _otlp(signal)
    if name == "file":
        from . import filestore as fs

        return {"traces": fs.FileSpanExporter, "metrics": fs.FileMetricExporter,
                "logs": fs.FileLogExporter}[signal]()
    return {"traces": ConsoleSpanExporter, "metrics": ConsoleMetricExporter,
            "logs": ConsoleLogRecordExporter}[signal]()


def _prometheus_reader() -> Any:
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import start_http_server
    except ImportError as exc:
        raise ValueError("OTEL_METRICS_EXPORTER=prometheus needs "
                         "`pip install otelmw[prometheus]`") from exc
    host = os.environ.get("OTEL_EXPORTER_PROMETHEUS_HOST", "127.0.0.1")
    port = int(os.environ.get("OTEL_EXPORTER_PROMETHEUS_PORT", "9464"))
    start_http_server(port=port, addr=host)
    return PrometheusMetricReader()


@dataclass
class Telemetry:
    """What ``configure()`` set up; ``shutdown()`` is bounded in time."""

    observer: TelemetryObserver | None
    tracer_provider: Any = None
    meter_provider: Any = None
    logger_provider: Any = None
    owned: list[Any] = field(default_factory=list)  # providers otelmw created
    disabled: bool = False

    def force_flush(self, timeout_s: float = 5.0) -> bool:
        ms = int(timeout_s * 1000)
        return _bounded([functools.partial(p.force_flush, ms) for p in self.owned], timeout_s)

    def shutdown(self, timeout_s: float | None = None) -> bool:
        """Flush and stop otelmw's providers; returns False if the deadline hit."""
        t = timeout_s if timeout_s is not None else float(
            os.environ.get("OTELMW_SHUTDOWN_TIMEOUT", "5"))
        owned, self.owned = self.owned, []
        # One deadline for all providers (they shut down in parallel), not one each.
        ok = _bounded([p.shutdown for p in owned], t) if owned else True
        if owned:
            health.summarize()  # final drop totals: one line, only if something was lost
        return ok


def _bounded(fns: list[Callable[[], Any]], timeout_s: float) -> bool:
    """Run each of ``fns`` on its own daemon thread and wait at most ``timeout_s``
    in total (a dead collector must not hang interpreter exit)."""
    events = []
    for fn in fns:
        done = threading.Event()

        def run(fn: Callable[[], Any] = fn, done: threading.Event = done) -> None:
            try:
                fn()
            except Exception:
                logger.debug("otelmw: telemetry shutdown step failed", exc_info=True)
            finally:
                done.set()

        threading.Thread(target=run, name="otelmw-shutdown", daemon=True).start()
        events.append(done)
    deadline = time.monotonic() + timeout_s
    if not all(e.wait(max(0.0, deadline - time.monotonic())) for e in events):
        logger.warning("otelmw: telemetry flush/shutdown exceeded %.1fs; abandoned", timeout_s)
        return False
    return True


_lock = threading.Lock()
_current: Telemetry | None = None


def configure(service_name: str | None = None, *, pipeline: Pipeline | None = None,
              propagate_threads: bool | None = None) -> Telemetry:
    """Set up OpenTelemetry for otelmw and install the telemetry observer.

    Idempotent: a second call returns the first result. Raises ``ValueError`` on
    invalid configuration (a typo in an exporter name, capture mode, protocol,
    ``OTELMW_HOOK_EVENTS``, ``OTELMW_MIDDLEWARE_METRICS``), before installing anything.
    """
    global _current
    with _lock:
        if _current is not None:
            return _current
        pipe = pipeline if pipeline is not None else get_pipeline()
        content = ContentPolicy.from_env()  # validate before installing anything
        hook_events, layer_metrics = hook_events_mode(), middleware_metrics_on()
        if _truthy("OTEL_SDK_DISABLED"):
            _current = Telemetry(observer=None, disabled=True)
            return _current
        choices = {s: exporter_choice(s) for s in SIGNALS}
        for s in SIGNALS:  # a bad protocol must fail before any provider is installed
            if "otlp" in choices[s]:
                _protocol(s)
        resource = Resource.create(
            {} if os.environ.get("OTEL_SERVICE_NAME") or "service.name" in os.environ.get(
                "OTEL_RESOURCE_ATTRIBUTES", "") else {"service.name": service_name or "otelmw"})
        owned: list[Any] = []
        tp = trace.get_tracer_provider()
        if not isinstance(tp, TracerProvider):
            tp = TracerProvider(resource=resource, shutdown_on_exit=False)
            for name in choices["traces"]:
                tp.add_span_processor(BatchSpanProcessor(
                    health.counting_span_exporter(_exporter("traces", name))))
            trace.set_tracer_provider(tp)
            owned.append(tp)
        mp = metrics.get_meter_provider()
        if not isinstance(mp, MeterProvider):
            readers = [_prometheus_reader() if n == "prometheus" else
                       PeriodicExportingMetricReader(_exporter("metrics", n))
                       for n in choices["metrics"]]
            mp = MeterProvider(resource=resource, metric_readers=readers,
                               shutdown_on_exit=False)
            metrics.set_meter_provider(mp)
            owned.append(mp)
        lp = _logs.get_logger_provider()
        if not isinstance(lp, LoggerProvider):
            lp = LoggerProvider(resource=resource, shutdown_on_exit=False)
            for name in choices["logs"]:
                lp.add_log_record_processor(BatchLogRecordProcessor(
                    health.counting_log_exporter(_exporter("logs", name))))
            _logs.set_logger_provider(lp)
            owned.append(lp)
        health.MAX_TEXT = max(4096, content.max_length)  # exporter guard's string bound
        observer = TelemetryObserver(tp, mp, lp, content=content, failures=pipe.failures,
                                     hook_events=hook_events, middleware_metrics=layer_metrics)
        health.install_queue_filter()
        health.register_drop_metric(observer.meter)
        pipe.observer = observer
        if propagate_threads if propagate_threads is not None else not _truthy(
                "OTELMW_NO_THREAD_PROPAGATION"):
            instrument_threads()
        _current = Telemetry(observer, tp, mp, lp, owned)
        atexit.register(_current.shutdown)
        return _current


def current() -> Telemetry | None:
    return _current

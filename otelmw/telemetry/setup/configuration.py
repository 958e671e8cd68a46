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
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry import _logs, metrics, trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, ConsoleLogRecordExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider, sampling
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from opentelemetry.sdk.trace.sampling import Sampler

from ...config import settings as cfg
from ...core.pipeline import Pipeline, get_pipeline
from ..content import digests
from ..content.policy import ContentPolicy
from ..export import guard, process_exit, spool
from ..shapes.streams import abandon_open_streams
from .context import instrument_threads
from .observer import TelemetryObserver

logger = logging.getLogger("otelmw")

SIGNALS = cfg.SIGNALS


def exporter_choice(signal: str, settings: cfg.Settings | None = None) -> list[str]:
    """The exporters for ``signal`` per ``settings`` (default: the environment,
    strictly); ``file`` when nothing is configured."""
    s = settings if settings is not None else cfg.load()
    names = s[cfg.EXPORTERS[signal]]
    if s.is_set(cfg.EXPORTERS[signal]):
        return [x for x in dict.fromkeys(names) if x != "none"]
    if s[cfg.OTLP_ENDPOINT] or s[cfg.SIGNAL_ENDPOINT[signal]]:
        return ["otlp"]
    return ["file"]


def describe_destination(signal: str, exporters: list[str], settings: cfg.Settings) -> str:
    """Where ``signal`` goes with these exporters, in words: ``store /abs/dir``,
    ``OTLP/grpc http://localhost:4317``, ``console``; ``nowhere`` for none."""
    places = []
    for name in exporters:
        if name == "file":
            places.append(f"store {Path(settings[cfg.DATA_DIR]).resolve()}")
        elif name == "otlp":
            protocol = _protocol(signal, settings)
            endpoint = (settings[cfg.SIGNAL_ENDPOINT[signal]] or settings[cfg.OTLP_ENDPOINT]
                        or ("http://localhost:4317" if protocol == "grpc"
                            else "http://localhost:4318"))
            places.append(f"OTLP/{'grpc' if protocol == 'grpc' else 'http'} {endpoint}")
        else:
            places.append(name)
    return " and ".join(places) or "nowhere (exporter none)"


def _protocol(signal: str, settings: cfg.Settings) -> str:
    return settings[cfg.SIGNAL_PROTOCOL[signal]] or settings[cfg.OTLP_PROTOCOL]


def _otlp(signal: str, settings: cfg.Settings) -> Any:
    grpc = _protocol(signal, settings) == "grpc"
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


def _exporter(signal: str, name: str, settings: cfg.Settings) -> Any:
    if name == "otlp":
        return _otlp(signal, settings)
    if name == "file":
        from ..store import exporters

        return {"traces": exporters.FileSpanExporter, "metrics": exporters.FileMetricExporter,
                "logs": exporters.FileLogExporter}[signal](settings=settings)
    return {"traces": ConsoleSpanExporter, "metrics": ConsoleMetricExporter,
            "logs": ConsoleLogRecordExporter}[signal]()


PROMETHEUS_EXTRA = "pip install 'otelmw[prometheus]'"


def _prometheus_reader(settings: cfg.Settings) -> Any:
    """The Prometheus reader and its scrape endpoint, or ``None`` (one warning:
    only metrics are lost, never the other signals) when the extra is missing
    or the port cannot be bound."""
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import start_http_server
    except ImportError as exc:
        logger.warning("otelmw: OTEL_METRICS_EXPORTER=prometheus needs the prometheus extra "
                       "(%s): metrics are not exported; traces and logs are (%s)",
                       PROMETHEUS_EXTRA, exc)
        return None
    host, port = settings[cfg.PROMETHEUS_HOST], settings[cfg.PROMETHEUS_PORT]
    try:
        start_http_server(port=port, addr=host)
    except OSError as exc:
        logger.warning("otelmw: Prometheus endpoint %s:%d: %s: metrics are not exported; "
                       "traces and logs are", host, port, exc.strerror or exc)
        return None
    return PrometheusMetricReader()


def _metric_readers(names: list[str], settings: cfg.Settings) -> list[Any]:
    readers = []
    for name in names:
        if name == "prometheus":
            reader = _prometheus_reader(settings)
            if reader is not None:
                readers.append(reader)
        else:
            readers.append(PeriodicExportingMetricReader(
                _exporter("metrics", name, settings),
                export_interval_millis=settings[cfg.METRIC_EXPORT_INTERVAL],
                export_timeout_millis=settings[cfg.METRIC_EXPORT_TIMEOUT]))
    return readers


def _sampler(settings: cfg.Settings) -> Sampler:
    name, ratio = settings[cfg.SAMPLER], settings[cfg.SAMPLER_ARG]
    if name == "traceidratio":
        return sampling.TraceIdRatioBased(ratio)
    if name == "parentbased_traceidratio":
        return sampling.ParentBasedTraceIdRatio(ratio)
    root = sampling.ALWAYS_OFF if name.endswith("always_off") else sampling.ALWAYS_ON
    return sampling.ParentBased(root) if name.startswith("parentbased_") else root


@dataclass
class Telemetry:
    """What ``configure()`` set up; ``shutdown()`` is bounded in time."""

    observer: TelemetryObserver | None
    tracer_provider: Any = None
    meter_provider: Any = None
    logger_provider: Any = None
    owned: list[Any] = field(default_factory=list)  # providers otelmw created
    disabled: bool = False
    shutdown_timeout_s: float = cfg.SHUTDOWN_TIMEOUT.default
    # where each signal goes, for people: "store /abs/.otelmw", "OTLP http://…:4317"
    destinations: dict[str, str] = field(default_factory=dict)
    spool: spool.Spool | None = None  # where the OTLP export guards keep what failed
    settings: cfg.Settings | None = None  # what configure() read and handed down

    # the shutdown under way: a second caller waits for it instead of returning at
    # once (a signal during a main-thread shutdown is deferred: lifecycle)
    stopping: BoundedRun | None = field(default=None, init=False, repr=False)

    def force_flush(self, timeout_s: float = 5.0) -> bool:
        ms = int(timeout_s * 1000)
        return BoundedRun([functools.partial(p.force_flush, ms) for p in self.owned],
                          timeout_s).wait()

    def shutdown(self, timeout_s: float | None = None) -> bool:
        """End the stream spans still open, flush and stop otelmw's providers;
        returns False if the deadline hit."""
        t = timeout_s if timeout_s is not None else self.shutdown_timeout_s
        with process_exit.signals_deferred():
            owned, self.owned = self.owned, []
            if not owned:
                return self.stopping.wait() if self.stopping is not None else True
            try:
                abandon_open_streams()  # before the flush, so their spans go out with it
            except Exception:
                logger.debug("otelmw: ending open streams failed", exc_info=True)
            # One deadline for all providers (they shut down in parallel), not one each.
            self.stopping = BoundedRun([p.shutdown for p in owned], t)
            ok = self.stopping.wait(reserve=t * SPOOL_RESERVE)
            if not ok:  # a backend still not answering: keep the rest in the spool
                guard.give_up_exports()
                ok = self.stopping.wait()
            if self.spool is not None:
                self.spool.close()
            guard.summarize()  # final drop totals: one line, only if something was lost
            spool.summarize()
            return ok

    def flush_on_signal(self, final: bool) -> None:
        """SIGTERM/SIGINT: everything out within the shutdown budget; all the way
        down when the default action is about to end the process."""
        if final:
            self.shutdown()
        elif self.owned:
            self.force_flush(self.shutdown_timeout_s)


SPOOL_RESERVE = 0.3  # share of the shutdown budget kept for spooling what is undelivered


def _spool_as(signal: str, exporter: str, choices: dict[str, list[str]]) -> str | None:
    """Where an exporter's undeliverable items go: the spool for OTLP, unless the
    signal also goes to the embedded store (which then has them already)."""
    return signal if exporter == "otlp" and "file" not in choices[signal] else None


class BoundedRun:
    """Each of ``fns`` on its own daemon thread; ``wait()`` returns when all are done
    or ``timeout_s`` after the start (a dead collector must not hang interpreter
    exit). Any number of callers may wait, on the same deadline."""

    def __init__(self, fns: list[Callable[[], Any]], timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + timeout_s
        self.events = [self._start(fn) for fn in fns]
        self._warned = False

    @staticmethod
    def _start(fn: Callable[[], Any]) -> threading.Event:
        done = threading.Event()

        def run() -> None:
            try:
                fn()
            except Exception:
                logger.debug("otelmw: telemetry shutdown step failed", exc_info=True)
            finally:
                done.set()

        threading.Thread(target=run, name="otelmw-shutdown", daemon=True).start()
        return done

    def wait(self, reserve: float = 0.0) -> bool:
        """True when all are done; ``reserve``: return that many seconds before the
        deadline (quietly), to leave time for a fallback."""
        end = self.deadline - reserve
        if all(e.wait(max(0.0, end - time.monotonic())) for e in self.events):
            return True
        if not reserve and not self._warned:
            self._warned = True
            logger.warning("otelmw: telemetry flush/shutdown exceeded %.1fs; abandoned",
                           self.timeout_s)
        return False


_lock = threading.Lock()
_current: Telemetry | None = None


def configure(service_name: str | None = None, *, pipeline: Pipeline | None = None,
              propagate_threads: bool | None = None,
              settings: cfg.Settings | None = None) -> Telemetry:
    """Set up OpenTelemetry for otelmw and install the telemetry observer.

    Idempotent: a second call returns the first result. ``settings`` default to
    ``otelmw.config.settings.load()`` of the environment, which raises ``ValueError`` on
    an invalid value (naming the variable, the value and what is allowed) before
    anything is installed; auto-instrumentation passes leniently loaded settings.
    ``propagate_threads`` overrides ``OTELMW_NO_THREAD_PROPAGATION``. The settings
    are read once, here, and handed to what this builds (content policy, exporters,
    export guards, spool, observer); ``Telemetry.settings`` keeps them.
    """
    global _current
    with _lock:
        if _current is not None:
            return _current
        s = settings if settings is not None else cfg.load()
        if propagate_threads is not None:  # the argument wins over the environment
            s = s.with_value(cfg.NO_THREAD_PROPAGATION, not propagate_threads)
        pipe = pipeline if pipeline is not None else get_pipeline()
        content = ContentPolicy.from_settings(s)
        if s[cfg.SDK_DISABLED]:
            _current = Telemetry(observer=None, disabled=True, settings=s)
            return _current
        choices = {sig: exporter_choice(sig, s) for sig in SIGNALS}
        resource = Resource.create(
            {} if s[cfg.SERVICE_NAME] or "service.name" in s[cfg.RESOURCE_ATTRIBUTES]
            else {"service.name": service_name or "otelmw"})
        owned: list[Any] = []
        limits = guard.GuardLimits.from_settings(s)
        spool_to = spool.Spool.from_settings(s)

        def guarded(signal: str, name: str) -> Any:
            """Exporter ``name`` for ``signal`` inside its export guard."""
            counting = (guard.counting_span_exporter if signal == "traces"
                        else guard.counting_log_exporter)
            return counting(_exporter(signal, name, s), _spool_as(signal, name, choices),
                         limits, spool_to)

        tp = trace.get_tracer_provider()
        if not isinstance(tp, TracerProvider):
            tp = TracerProvider(resource=resource, sampler=_sampler(s), shutdown_on_exit=False)
            for name in choices["traces"]:
                tp.add_span_processor(BatchSpanProcessor(guarded("traces", name),
                                                         **s.batch(cfg.SPAN_BATCH)))
            trace.set_tracer_provider(tp)
            owned.append(tp)
        mp = metrics.get_meter_provider()
        if not isinstance(mp, MeterProvider):
            mp = MeterProvider(resource=resource,
                               metric_readers=_metric_readers(choices["metrics"], s),
                               shutdown_on_exit=False)
            metrics.set_meter_provider(mp)
            owned.append(mp)
        lp = _logs.get_logger_provider()
        if not isinstance(lp, LoggerProvider):
            lp = LoggerProvider(resource=resource, shutdown_on_exit=False)
            for name in choices["logs"]:
                lp.add_log_record_processor(BatchLogRecordProcessor(
                    guarded("logs", name), **s.batch(cfg.LOG_BATCH)))
            _logs.set_logger_provider(lp)
            owned.append(lp)
        observer = TelemetryObserver(tp, mp, lp, content=content, failures=pipe.failures,
                                     settings=s)
        digests.use_settings(s)
        guard.install_queue_filter()
        guard.register_drop_metric(observer.meter)
        spool.register_spool_metric(observer.meter)
        pipe.observer = observer
        if not s[cfg.NO_THREAD_PROPAGATION]:
            instrument_threads()
        mine = {"traces": tp in owned, "metrics": mp in owned, "logs": lp in owned}
        _current = Telemetry(observer, tp, mp, lp, owned,
                             shutdown_timeout_s=s[cfg.SHUTDOWN_TIMEOUT],
                             destinations={sig: describe_destination(sig, choices[sig], s)
                                           if mine[sig] else "the program's own provider"
                                           for sig in SIGNALS},
                             spool=spool_to, settings=s)
        atexit.register(_current.shutdown)
        if owned:  # the exits atexit does not see: signals, multiprocessing children
            process_exit.install_signal_flush(_current.flush_on_signal)
            process_exit.flush_in_multiprocessing_children(_current.shutdown)
        return _current


def current() -> Telemetry | None:
    return _current

"""In-memory OpenTelemetry harness for the telemetry-layer tests.

No global providers: each ``TelemetryHarness`` owns a tracer, logger and meter
provider with in-memory exporters and a ``Pipeline`` whose observer is a
``TelemetryObserver`` wired to them. The shared fixture ``h`` (conftest) builds one
per test. ``ObservedPipeline`` adds a count of every span's start and end and hook
events for every hook point, for the reliability tests.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from _support.calls import (
    EXEC_KIND,
    MODEL,
    PAYLOAD_KEY,
    PLUGIN,
    REQUEST_KIND,
    TOOL,
    BaseCall,
    callback,
    named,
)
from otelmw import Pipeline, RuntimeMiddlewareRegistry, get_pipeline
from otelmw.telemetry import ContentPolicy, TelemetryObserver
from otelmw.telemetry.content.policy import NO_CONTENT


class TelemetryHarness:
    """Providers + exporters + a pipeline observed by ``TelemetryObserver``."""

    def __init__(self, mode: str = NO_CONTENT, max_length: int = 4096, *,
                 span_processors: Iterable[SpanProcessor] = (), **observer_kw: Any) -> None:
        """``span_processors`` run before the exporter; ``observer_kw`` goes to
        ``TelemetryObserver`` (``hook_events``, ``middleware_metrics``)."""
        self.span_exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        for processor in span_processors:
            self.tracer_provider.add_span_processor(processor)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.span_exporter))
        self.log_exporter = InMemoryLogRecordExporter()
        self.logger_provider = LoggerProvider()
        self.logger_provider.add_log_record_processor(
            SimpleLogRecordProcessor(self.log_exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.pipeline = Pipeline(normalizers=RuntimeMiddlewareRegistry())
        self.observer = TelemetryObserver(
            self.tracer_provider, self.meter_provider, self.logger_provider,
            content=ContentPolicy(mode, max_length), failures=self.pipeline.failures,
            **observer_kw)
        self.pipeline.observer = self.observer
        # A tracer for spans opened by "host code" (base calls, worker threads).
        self.tracer = self.tracer_provider.get_tracer("host")
        # OpenTelemetry's own complaints ("Calling end() on an ended span", failed
        # detach, ...) are collected and checked by ``assert_clean``.
        self.sdk_warnings: list[logging.LogRecord] = []
        self._handler = _ListHandler(self.sdk_warnings)
        logging.getLogger("opentelemetry").addHandler(self._handler)

    @property
    def complaints(self) -> list[str]:
        """OpenTelemetry's warnings so far (double ends, failed detaches, ...)."""
        return [r.getMessage() for r in self.sdk_warnings]

    def internal_failures(self) -> dict[tuple[str, str], int]:
        """Telemetry-internal failures counted so far, by (kind, call site)."""
        return {(k[1], k[2]): v for k, v in self.pipeline.failures.counts.items()
                if k[0] == "instrumentation"}

    def assert_clean(self) -> None:
        """No telemetry-internal failure and no OpenTelemetry warning happened."""
        assert self.complaints == [], self.complaints
        assert self.internal_failures() == {}, self.internal_failures()

    def close(self) -> None:
        logging.getLogger("opentelemetry").removeHandler(self._handler)
        self.observer.close()
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()
        self.meter_provider.shutdown()

    # ------------------------------------------------------------- spans
    def spans(self) -> list[ReadableSpan]:
        return list(self.span_exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, (name, [s.name for s in self.spans()])
        return found[0]

    def clear(self) -> None:
        self.span_exporter.clear()
        self.log_exporter.clear()

    # -------------------------------------------------------------- logs
    def logs(self) -> list[Any]:
        return [r.log_record for r in self.log_exporter.get_finished_logs()]

    def logs_named(self, event_name: str) -> list[Any]:
        return [r for r in self.logs() if r.event_name == event_name]

    # ----------------------------------------------------------- metrics
    def metrics(self) -> dict[str, list[Any]]:
        """Metric name → its data points (cumulative since the harness began)."""
        out: dict[str, list[Any]] = {}
        data = self.reader.get_metrics_data()
        if data is None:
            return out
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    out.setdefault(m.name, []).extend(m.data.data_points)
        return out

    def points(self, name: str) -> list[Any]:
        return self.metrics().get(name, [])


class SdkTelemetry:
    """A ``TelemetryObserver`` on in-memory exporters, for tests that put it on the
    process's own pipeline (``get_pipeline()``, where instrumented SDKs report; see
    ``observing``) rather than on a pipeline of their own as ``TelemetryHarness`` does."""

    def __init__(self, mode: str = NO_CONTENT, max_length: int = 4096) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.observer = TelemetryObserver(
            self.tracer_provider, MeterProvider(metric_readers=[self.reader]), LoggerProvider(),
            content=ContentPolicy(mode, max_length), failures=get_pipeline().failures)

    def finished(self) -> list[ReadableSpan]:
        """Every finished span, in start order."""
        return sorted(self.spans.get_finished_spans(), key=lambda s: s.start_time or 0)

    def named(self, prefix: str) -> list[ReadableSpan]:
        """The finished spans whose name starts with ``prefix``, in start order."""
        return [s for s in self.finished() if s.name.startswith(prefix)]

    def chat_spans(self) -> list[ReadableSpan]:
        """The finished ``chat`` spans, in the order they ended."""
        return [s for s in self.spans.get_finished_spans() if s.name.startswith("chat")]

    def chat(self) -> ReadableSpan:
        """The one finished ``chat`` span."""
        chats = self.chat_spans()
        assert len(chats) == 1, [s.name for s in chats]
        return chats[0]

    def metric_points(self, name: str) -> list[Any]:
        out = []
        for rm in self.reader.get_metrics_data().resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == name:
                        out.extend(m.data.data_points)
        return out


@contextmanager
def observing(telemetry: SdkTelemetry, *instrumentors: Any) -> Iterator[SdkTelemetry]:
    """For the block: ``telemetry`` observes the process's pipeline and ``instrumentors``
    are on; after it they are off, its observer is closed and the pipeline has its own
    observer back."""
    pipe = get_pipeline()
    saved = pipe.observer
    pipe.observer = telemetry.observer
    for instrumentor in instrumentors:
        instrumentor.instrument()
    try:
        yield telemetry
    finally:
        for instrumentor in reversed(instrumentors):
            instrumentor.uninstrument()
        telemetry.observer.close()
        pipe.observer = saved


class Lifecycle(SpanProcessor):
    """Counts starts and ends per span id (double ends show up as SDK complaints)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open: set[int] = set()
        self.started = 0
        self.ended = 0

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        with self.lock:
            self.open.add(span.context.span_id)
            self.started += 1

    def on_end(self, span: ReadableSpan) -> None:
        with self.lock:
            self.open.discard(span.context.span_id)
            self.ended += 1


class ObservedPipeline(TelemetryHarness):
    """The harness with every span's start/end counted (``lifecycle``) and hook events
    emitted for every hook point."""

    def __init__(self, content: ContentPolicy) -> None:
        self.lifecycle = Lifecycle()
        super().__init__(content.mode, content.max_length, span_processors=(self.lifecycle,),
                         hook_events="all")


class _ListHandler(logging.Handler):
    def __init__(self, sink: list[logging.LogRecord]) -> None:
        super().__init__(logging.WARNING)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.append(record)


# ------------------------------------------------------------------ helpers
def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    return span.context.span_id


def is_child(child: ReadableSpan, parent: ReadableSpan) -> bool:
    return (child.parent is not None and child.parent.span_id == parent.context.span_id
            and child.context.trace_id == parent.context.trace_id)


def is_error(span: ReadableSpan) -> bool:
    return span.status.status_code is StatusCode.ERROR


def is_unset(span: ReadableSpan) -> bool:
    return span.status.status_code is StatusCode.UNSET


# ------------------------------------------------- calls and their middleware
def payload_for(op: str) -> dict[str, Any]:
    """The payload of one ``op`` call in the telemetry tests."""
    if op == "llm":
        return {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    return {"q": "weather"}


def response_for(op: str) -> Any:
    """What the host answers to ``op``: a chat completion with usage, or a tool result."""
    if op == "llm":
        return {"id": "chatcmpl-1", "model": MODEL, "choices": [{"finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    return "sunny"


def host_base(h: TelemetryHarness, op: str, *, span: bool = True,
              raises: BaseException | None = None) -> BaseCall:
    """The host's base call for ``op``: answers ``response_for(op)`` (or raises
    ``raises``), inside a host span ``base`` unless ``span`` is false."""
    return BaseCall(response_for(op), error=raises, tracer=h.tracer if span else None)


def rewriter(mode: str, op: str, i: int, behavior: str = "rewrite") -> Any:
    """Request middleware ``rw<i>``: adds ``k<i>`` to the payload, or (``behavior``)
    raises, returns ``None`` or returns a result without the payload key."""
    key = PAYLOAD_KEY[op]

    def body(kw: dict[str, Any]) -> Any:
        if behavior == "raise":
            raise ValueError(f"rewrite {i} failed")
        if behavior == "none":
            return None
        if behavior == "bad":
            return {"not_the_key": 1}
        new = dict(kw[key])
        new[f"k{i}"] = i
        return {key: new, "source": f"src{i}", "reason": f"why{i}"}

    return callback(mode, f"rw{i}", lambda **kw: body(kw))


def short_result(op: str) -> Any:
    return {"id": "short", "model": MODEL, "choices": []} if op == "llm" else "short"


def wrapper(mode: str, op: str, i: int, behavior: str = "pass") -> Any:
    """Execution middleware ``w<i>``: passes on, or (``behavior``) raises before or
    after ``next_call``, or answers ``short_result(op)`` without calling it."""
    if mode == "sync":
        def cb(**kw: Any) -> Any:
            if behavior == "before":
                raise ValueError(f"wrapper {i} before")
            if behavior == "short":
                return short_result(op)
            result = kw["next_call"]()
            if behavior == "after":
                raise KeyError(f"wrapper {i} after")
            return result
    else:
        async def cb(**kw: Any) -> Any:
            await asyncio.sleep(0)
            if behavior == "before":
                raise ValueError(f"wrapper {i} before")
            if behavior == "short":
                return short_result(op)
            result = await kw["next_call"]()
            if behavior == "after":
                raise KeyError(f"wrapper {i} after")
            return result
    return named(cb, f"w{i}")


def add_rewriters(h: TelemetryHarness, mode: str, op: str, behaviors: list[str]) -> None:
    for i, b in enumerate(behaviors):
        h.pipeline.registry.add_middleware(REQUEST_KIND[op], rewriter(mode, op, i, b),
                                           plugin=PLUGIN)


def add_wrappers(h: TelemetryHarness, mode: str, op: str, behaviors: list[str]) -> None:
    for i, b in enumerate(behaviors):
        h.pipeline.registry.add_middleware(EXEC_KIND[op], wrapper(mode, op, i, b),
                                           plugin=PLUGIN)


def rw_name(op: str, i: int) -> str:
    return f"{REQUEST_KIND[op]} {PLUGIN}.rw{i}"


def w_name(op: str, i: int) -> str:
    return f"{EXEC_KIND[op]} {PLUGIN}.w{i}"


def op_span_name(op: str) -> str:
    return f"chat {MODEL}" if op == "llm" else f"execute_tool {TOOL}"


def all_exported_text(harness: TelemetryHarness) -> list[str]:
    """Every span attribute / status / event and log body / attribute, as text."""
    out: list[str] = []

    def add(value: Any) -> None:
        if value is None:
            return
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, bytes):
            out.append(value.decode("utf-8", "replace"))
        elif isinstance(value, dict):
            for k, v in value.items():
                add(k)
                add(v)
        elif isinstance(value, Iterable):
            for v in value:
                add(v)
        else:
            out.append(str(value))

    for s in harness.spans():
        add(s.name)
        add(dict(s.attributes or {}))
        add(s.status.description)
        for ev in s.events:
            add(ev.name)
            add(dict(ev.attributes or {}))
    for rec in harness.logs():
        add(rec.body)
        add(dict(rec.attributes or {}))
    return out


def json_attr(value: Any) -> Any:
    assert isinstance(value, str), value
    return json.loads(value)


def cut_kind(value: str) -> str | None:
    """How a captured text was cut to the content limit: ``"text"`` (it ends with
    ``…[truncated]``), ``"json"`` (a rendered structure, still JSON, cut inside: a
    ``…``), ``None`` (whole). A rendered structure must parse, cut or not."""
    if value.endswith("…[truncated]"):
        return "text"
    if value.startswith(("{", "[")):
        json.loads(value)
        return "json" if "…" in value else None
    return None


def assert_cut_to(value: Any, limit: int) -> str:
    """``value``, a captured text longer than the content limit was, is cut to ``limit``
    characters: a structure stays JSON, cut inside its strings or items (each cut ends
    with ``…``); a text ends with ``…[truncated]``. Returns how it was cut."""
    assert isinstance(value, str) and len(value) <= limit, (len(value), value)
    kind = cut_kind(value)
    assert kind is not None, f"not cut: {value}"
    return kind

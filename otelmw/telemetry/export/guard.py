"""Export health: telemetry that could not be delivered is counted, not spammed.

* The SDK's batch processors log ``Queue full, dropping span.`` once per dropped
  item; ``QueueFullFilter`` turns that into a count plus one summary WARNING per
  minute.
* ``CountingSpanExporter`` / ``CountingLogExporter`` (the export guard) keep each
  request under the byte bound (``request_size``) and hand what an OTLP exporter
  could not deliver (backend refused, unreachable, timed out) to the spool
  (``spool``); only what cannot be spooled is counted as dropped. Before exporting they bound
  every string of an item — span name, status description, event names, attribute
  values (and sequence items), log event name and body — to ``GuardLimits.max_text``
  characters (4096, or ``OTELMW_CONTENT_MAX_LENGTH`` when larger) and replace text that cannot
  be encoded as UTF-8 (lone surrogates, e.g. an exception message carrying a
  ``surrogateescape``-decoded file name): protobuf refuses such strings, and one of
  them in a span name or log body fails the whole batch; a multi-megabyte tool name
  or response id would make the batch too large for the collector. Items that need
  neither are passed through untouched (one ``isascii``/length check per string).
* The counts are exported as ``otelmw.telemetry.dropped`` (observable counter,
  attributes ``otelmw.signal`` and ``otelmw.drop.reason``) and readable with
  ``drop_counts()``; ``export_totals()`` adds what was delivered (spans, traces,
  log records), an ``ExportTotals``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from ...config import settings as cfg
from . import request_size, spool

logger = logging.getLogger("otelmw")

# Process-wide runtime state, not settings: the drop counts, their lock (replaced in a
# forked child) and when the last once-a-minute summary was logged.
_lock = threading.Lock()
_counts: Counter[tuple[str, str]] = Counter()
_last_summary = 0.0
SUMMARY_INTERVAL_S = 60.0


def record_drop(signal: str, reason: str, n: int = 1) -> None:
    global _last_summary
    with _lock:
        _counts[(signal, reason)] += n
        now = time.monotonic()
        due = now - _last_summary >= SUMMARY_INTERVAL_S
        if due:
            _last_summary = now
        total = sum(_counts.values())
    if due:
        logger.warning("otelmw: telemetry not delivered (%s: %s); %d item(s) dropped so far — "
                       "summarized at most once a minute; see metric otelmw.telemetry.dropped",
                       signal, reason, total)


def drop_counts() -> dict[tuple[str, str], int]:
    with _lock:
        return dict(_counts)


class QueueFullFilter(logging.Filter):
    """Swallow the SDK's per-item queue-full warnings and count them instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.msg if isinstance(record.msg, str) else ""
        if msg.startswith("Queue full, dropping"):
            args = record.args
            what = str(args[0]) if isinstance(args, tuple) and args else "item"
            # The SDK says "Span" / "Log"; the metric uses "span" / "log".
            record_drop(what.split()[0].lower() if what.strip() else "item", "queue_full")
            return False
        return True


_filter = QueueFullFilter()


def install_queue_filter() -> None:
    lg = logging.getLogger("opentelemetry.sdk._shared_internal")
    if _filter not in lg.filters:
        # First in line: the SDK's own DuplicateFilter on this logger lets one
        # identical record through per 20 s, so a filter placed after it would
        # count one drop per 20 s instead of every dropped item.
        lg.filters.insert(0, _filter)


def summarize() -> None:
    """One WARNING with the final drop totals (at shutdown), if anything was dropped:
    the once-a-minute summary may predate most of the drops, and with a dead
    backend the drop metric itself cannot be delivered."""
    counts = drop_counts()
    if counts:
        detail = ", ".join(f"{s} {r}: {n}" for (s, r), n in sorted(counts.items()))
        logger.warning("otelmw: telemetry not delivered in total: %s "
                       "(metric otelmw.telemetry.dropped)", detail)


DEFAULT_MAX_TEXT = 4096


@dataclass(frozen=True, slots=True)
class GuardLimits:
    """The export guard's bounds: characters per string (``max_text``) and bytes per
    export request (``max_request_bytes``, ``request_size``)."""

    max_text: int = DEFAULT_MAX_TEXT
    max_request_bytes: int = request_size.DEFAULT_MAX_REQUEST_BYTES

    @classmethod
    def from_settings(cls, settings: cfg.Settings) -> GuardLimits:
        """Strings: 4096 characters, or ``OTELMW_CONTENT_MAX_LENGTH`` when larger (the
        guard must not cut what the content policy kept); requests:
        ``OTELMW_EXPORT_MAX_BYTES``."""
        return cls(max(DEFAULT_MAX_TEXT, settings[cfg.CONTENT_MAX_LENGTH]),
                   settings[cfg.EXPORT_MAX_BYTES])


def _fit(text: Any, limit: int) -> Any:
    """``text`` bounded to ``limit`` characters and made encodable as UTF-8 (lone
    surrogates → ``?``); other values, and text needing neither, returned as is."""
    if type(text) is not str:
        return text
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


def _fit_value(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return _fit(value, limit)
    if isinstance(value, list | tuple):
        return type(value)(_fit_value(v, limit) for v in value)
    if isinstance(value, dict):
        return {_fit(k, limit): _fit_value(v, limit) for k, v in value.items()}
    return value


def _needs_fit(value: Any, limit: int) -> bool:
    if isinstance(value, str):
        return _fit(value, limit) is not value
    if isinstance(value, list | tuple):
        return any(_needs_fit(v, limit) for v in value)
    if isinstance(value, dict):
        return _fit_size_map(value, limit) < 0
    return False


def _needs_fit_map(mapping: Any, limit: int) -> bool:
    return _fit_size_map(mapping, limit) < 0


def _fit_size_map(mapping: Any, limit: int) -> int:
    """The estimated encoded size of an attribute mapping (``request_size``), or -1
    when one of its strings needs bounding (``limit`` characters) or repair: one pass
    does both."""
    number, framing = request_size.NUMBER, request_size.ATTRIBUTE
    n = 0
    for k, v in mapping.items():  # inlined fast path: short ASCII strings and numbers
        t = type(v)
        if t is str:
            size = len(v)
            if size > limit or not v.isascii():
                if _fit(v, limit) is not v:
                    return -1
                size = request_size.text_size(v)
            n += size
        elif t is int or t is float or t is bool:
            n += number
        elif _needs_fit(v, limit):
            return -1
        else:
            n += request_size.value_size(v)
        size = len(k) if type(k) is str else limit + 1
        if size <= limit and k.isascii():
            n += size + framing
        elif _needs_fit(k, limit):
            return -1
        else:
            n += request_size.value_size(k) + framing
    return n


def _sized_span(span: Any, limit: int) -> tuple[Any, int]:
    """``span`` cleaned (``_clean_span``) and its estimated encoded size; the
    common span that needs no cleaning is sized in the same pass that checks it."""
    n = _fit_size_map(span.attributes or {}, limit)
    if n >= 0 and not (_needs_fit(span.name, limit)
                       or _needs_fit(span.status.description, limit)):
        for e in span.events:
            m = -1 if _needs_fit(e.name, limit) else _fit_size_map(e.attributes or {}, limit)
            if m < 0:
                break
            n += m + request_size.EVENT + request_size.text_size(e.name or "")
        else:
            return span, n + request_size.span_frame_size(span)
    clean = _clean_span(span, limit)
    return clean, request_size.span_size(clean)


def _sized_log(item: Any, limit: int) -> tuple[Any, int]:
    clean = _clean_log(item, limit)
    return clean, request_size.log_size(clean)


def _clean_span(span: Any, limit: int) -> Any:
    """``span``, or a copy whose strings are all bounded (``limit`` characters) and
    UTF-8 encodable."""
    attrs = span.attributes or {}
    status = span.status
    if not (_needs_fit(span.name, limit) or _needs_fit(status.description, limit)
            or _needs_fit_map(attrs, limit)
            or any(_needs_fit(e.name, limit) or _needs_fit_map(e.attributes or {}, limit)
                   for e in span.events)):
        return span
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.trace import Status

    return ReadableSpan(
        name=_fit(span.name, limit), context=span.context, parent=span.parent,
        resource=span.resource, attributes=_fit_value(dict(attrs), limit),
        events=[Event(_fit(e.name, limit), _fit_value(dict(e.attributes or {}), limit),
                      e.timestamp)
                for e in span.events],
        links=span.links, kind=span.kind,
        status=Status(status.status_code, _fit(status.description, limit)),
        start_time=span.start_time, end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope)


def _clean_log(item: Any, limit: int) -> Any:
    """``item`` (a ``ReadableLogRecord``), or a copy whose strings are bounded
    (``limit`` characters) and UTF-8 encodable."""
    import copy
    import dataclasses

    rec = item.log_record
    attrs = rec.attributes or {}
    if not (_needs_fit(rec.body, limit) or _needs_fit(rec.event_name, limit)
            or _needs_fit_map(attrs, limit) or _needs_fit(rec.severity_text, limit)):
        return item
    clean = copy.copy(rec)
    clean.body = _fit_value(rec.body, limit)
    clean.event_name = _fit(rec.event_name, limit)
    clean.severity_text = _fit(rec.severity_text, limit)
    clean.attributes = _fit_value(dict(attrs), limit)
    return dataclasses.replace(item, log_record=clean)


class ExportTotals(NamedTuple):
    """What otelmw's exporters delivered so far in this process (``export_totals()``):
    what ``otelmw run`` reports at exit."""

    spans: int
    traces: int  # root spans delivered (a trace continued from elsewhere counts here once)
    log_records: int
    dropped: int  # not delivered: every signal and reason (``drop_counts()``), and
    # the items of an export still under way (abandoned when the process exits now)
    spooled: int = 0  # not delivered but kept in the spool for ``otelmw replay``
    spool_dir: Path | None = None


_exporters: weakref.WeakSet[_Counting] = weakref.WeakSet()


def export_totals() -> ExportTotals:
    """Totals over otelmw's exporters; a signal exported twice (``otlp,console``)
    counts what its most successful exporter delivered."""
    best: dict[str, tuple[int, int]] = {}
    for exporter in list(_exporters):
        mine = (exporter.written, exporter.roots)
        best[exporter.signal] = max(best.get(exporter.signal, (0, 0)), mine)
    spans, traces = best.get("span", (0, 0))
    in_flight = sum(e.in_flight for e in list(_exporters))
    kept = spool.spooled()
    return ExportTotals(spans, traces, best.get("log", (0, 0))[0],
                        sum(drop_counts().values()) + in_flight, kept.total, kept.directory)


class _Counting:
    """The export guard around one exporter: cleans each batch (strings bounded to
    ``limits.max_text``), cuts it into requests under ``limits.max_request_bytes``
    (``request_size``), exports them in order and hands what was not delivered to
    ``spool`` (as ``spool_as``: ``traces``/``logs``; None, or no spool: failures are
    only counted). After the first
    failed request the rest of the batch is spooled without being tried: one
    outage costs one exporter timeout per batch, not one per request."""

    signal = "item"
    spool_as: str | None = None
    success: Any = None
    failure: Any = None

    def __init__(self, inner: Any, spool_as: str | None, limits: GuardLimits,
                 spool_to: spool.Spool | None,
                 sized: Callable[[Any, int], tuple[Any, int]], size_of: Callable[[Any], int],
                 shrink: Callable[[Any, int], Any] | None = None) -> None:
        self.inner = inner
        self.written = 0  # items delivered (one batch worker thread per exporter)
        self.roots = 0
        self.in_flight = 0  # items of the export under way
        _exporters.add(self)
        self.spool_as = spool_as
        self.spool = spool_to
        self.limits = limits
        self._sized, self._size, self._shrink = sized, size_of, shrink
        self._offline = False  # given up (shutdown budget nearly spent): spool directly
        self._inner_closed = False
        self._inflight: dict[int, list[Any]] = {}  # requests inside inner.export
        if spool_as is not None:
            _spooling.append(self)

    def export(self, batch: Sequence[Any]) -> Any:
        try:
            max_text = self.limits.max_text
            parts = request_size.split([self._sized(x, max_text) for x in batch], self._size,
                                       self._shrink, self.limits.max_request_bytes)
        except Exception:  # never let the guard itself lose a batch
            parts = request_size.Split([list(batch)], [])
        if parts.too_large:
            record_drop(self.signal, "too_large", len(parts.too_large))
        requests = parts.requests
        for i, request in enumerate(requests):
            if self._offline:
                self._undelivered(requests[i:])
                return self.failure
            key = id(request)
            self._inflight[key] = request
            self.in_flight = sum(len(r) for r in requests[i:])  # the rest of the batch
            try:
                result = self.inner.export(request)
            except Exception:
                result = self.failure
            mine = self._inflight.pop(key, None) is not None  # else give_up() spooled it
            self.in_flight = 0
            if result is self.success:
                self._delivered(request)
            else:
                self._undelivered(requests[i if mine else i + 1:])
                return self.failure
        return self.failure if parts.too_large else self.success

    def _delivered(self, request: list[Any]) -> None:
        self.written += len(request)
        if self.signal == "span":
            self.roots += sum(1 for x in request if x.parent is None or x.parent.is_remote)

    def _undelivered(self, requests: Sequence[list[Any]]) -> None:
        for request in requests:
            reason = ("export_failed" if self.spool is None or self.spool_as is None
                      else self.spool.keep(self.spool_as, request))
            if reason is not None:
                record_drop(self.signal, reason, len(request))

    def give_up(self) -> None:
        """Stop trying the backend: spool the requests in flight and everything
        exported from now on, and interrupt the exporter's retries."""
        self._offline = True
        for key in list(self._inflight):
            request = self._inflight.pop(key, None)
            if request is not None:
                self._undelivered([request])
        self.in_flight = 0  # spooled, not lost
        self._close_inner()

    def _close_inner(self, *args: Any, **kwargs: Any) -> Any:
        if self._inner_closed:
            return None
        self._inner_closed = True
        return self.inner.shutdown(*args, **kwargs)

    def shutdown(self, *args: Any, **kwargs: Any) -> Any:
        return self._close_inner(*args, **kwargs)

    def force_flush(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.force_flush(*args, **kwargs)


_spooling: list[_Counting] = []  # guards whose failures go to the spool


def give_up_exports() -> None:
    """Shutdown budget nearly spent: every spooling guard stops waiting for its
    backend and keeps what is still undelivered in the spool."""
    for guard in list(_spooling):
        try:
            guard.give_up()
        except Exception:
            logger.debug("otelmw: giving up an export failed", exc_info=True)


def _forget_parent_counts() -> None:
    """In a forked child: its counts start at zero (its exit reports only its own).
    Fresh locks: one held by another thread at the fork would never be released."""
    global _lock
    _lock = threading.Lock()
    _counts.clear()
    for exporter in list(_exporters):
        exporter.written = exporter.roots = exporter.in_flight = 0
        exporter._inflight.clear()
    spool.forget_parent()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_parent_counts)


def counting_span_exporter(inner: Any, spool_as: str | None = None,
                           limits: GuardLimits = GuardLimits(),
                           spool_to: spool.Spool | None = None) -> Any:
    """The export guard around the span exporter ``inner``; ``spool_to``: where what
    it cannot deliver goes (as ``spool_as``)."""
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class CountingSpanExporter(_Counting, SpanExporter):  # type: ignore[misc]
        signal = "span"
        success, failure = SpanExportResult.SUCCESS, SpanExportResult.FAILURE

    return CountingSpanExporter(inner, spool_as, limits, spool_to, _sized_span,
                                request_size.span_size, request_size.shrink_span)


def counting_log_exporter(inner: Any, spool_as: str | None = None,
                          limits: GuardLimits = GuardLimits(),
                          spool_to: spool.Spool | None = None) -> Any:
    """The export guard around the log record exporter ``inner`` (as
    ``counting_span_exporter``)."""
    from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult

    class CountingLogExporter(_Counting, LogRecordExporter):  # type: ignore[misc]
        signal = "log"
        success, failure = LogRecordExportResult.SUCCESS, LogRecordExportResult.FAILURE

    return CountingLogExporter(inner, spool_as, limits, spool_to, _sized_log,
                               request_size.log_size)


def register_drop_metric(meter: Meter) -> None:
    def observe(options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(v, {"otelmw.signal": s, "otelmw.drop.reason": r})
                for (s, r), v in drop_counts().items()]

    meter.create_observable_counter("otelmw.telemetry.dropped", [observe], unit="{item}",
                                    description="Telemetry items that could not be delivered")

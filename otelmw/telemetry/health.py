"""Export health: telemetry that could not be delivered is counted, not spammed.

* The SDK's batch processors log ``Queue full, dropping span.`` once per dropped
  item; ``QueueFullFilter`` turns that into a count plus one summary WARNING per
  minute.
* ``CountingSpanExporter`` / ``CountingLogExporter`` count items whose export
  failed (backend refused, unreachable, timed out). Before exporting they bound
  every string of an item — span name, status description, event names, attribute
  values (and sequence items), log event name and body — to ``MAX_TEXT`` characters
  (4096, or ``OTELMW_CONTENT_MAX_LENGTH`` when larger) and replace text that cannot
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
import threading
import time
import weakref
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from opentelemetry.metrics import CallbackOptions, Meter, Observation

logger = logging.getLogger("otelmw")

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


def reset_drop_counts() -> None:
    global _last_summary
    with _lock:
        _counts.clear()
        _last_summary = 0.0


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


MAX_TEXT = 4096  # configure() raises it to OTELMW_CONTENT_MAX_LENGTH when that is larger


def _fit(text: Any) -> Any:
    """``text`` bounded to ``MAX_TEXT`` characters and made encodable as UTF-8 (lone
    surrogates → ``?``); other values, and text needing neither, returned as is."""
    if type(text) is not str:
        return text
    if len(text) > MAX_TEXT:
        text = text[: MAX_TEXT - 1] + "…"
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


def _fit_value(value: Any) -> Any:
    if isinstance(value, str):
        return _fit(value)
    if isinstance(value, list | tuple):
        return type(value)(_fit_value(v) for v in value)
    if isinstance(value, dict):
        return {_fit(k): _fit_value(v) for k, v in value.items()}
    return value


def _needs_fit(value: Any) -> bool:
    if isinstance(value, str):
        return _fit(value) is not value
    if isinstance(value, list | tuple):
        return any(_needs_fit(v) for v in value)
    if isinstance(value, dict):
        return _needs_fit_map(value)
    return False


def _needs_fit_map(mapping: Any) -> bool:
    limit = MAX_TEXT
    for k, v in mapping.items():  # inlined fast path: short ASCII strings and numbers
        t = type(v)
        if t is str:
            if (len(v) > limit or not v.isascii()) and _fit(v) is not v:
                return True
        elif t is not int and t is not float and t is not bool and _needs_fit(v):
            return True
        if not (type(k) is str and k.isascii() and len(k) <= limit) and _needs_fit(k):
            return True
    return False


def _clean_span(span: Any) -> Any:
    """``span``, or a copy whose strings are all bounded and UTF-8 encodable."""
    attrs = span.attributes or {}
    status = span.status
    if not (_needs_fit(span.name) or _needs_fit(status.description)
            or _needs_fit_map(attrs)
            or any(_needs_fit(e.name) or _needs_fit_map(e.attributes or {})
                   for e in span.events)):
        return span
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.trace import Status

    return ReadableSpan(
        name=_fit(span.name), context=span.context, parent=span.parent,
        resource=span.resource, attributes=_fit_value(dict(attrs)),
        events=[Event(_fit(e.name), _fit_value(dict(e.attributes or {})), e.timestamp)
                for e in span.events],
        links=span.links, kind=span.kind,
        status=Status(status.status_code, _fit(status.description)),
        start_time=span.start_time, end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope)


def _clean_log(item: Any) -> Any:
    """``item`` (a ``ReadableLogRecord``), or a copy whose strings are bounded and
    UTF-8 encodable."""
    import copy
    import dataclasses

    rec = item.log_record
    attrs = rec.attributes or {}
    if not (_needs_fit(rec.body) or _needs_fit(rec.event_name) or _needs_fit_map(attrs)
            or _needs_fit(rec.severity_text)):
        return item
    clean = copy.copy(rec)
    clean.body = _fit_value(rec.body)
    clean.event_name = _fit(rec.event_name)
    clean.severity_text = _fit(rec.severity_text)
    clean.attributes = _fit_value(dict(attrs))
    return dataclasses.replace(item, log_record=clean)


def _cleaned(batch: Sequence[Any], clean: Any) -> Sequence[Any]:
    try:
        out = [clean(x) for x in batch]
    except Exception:  # never let the guard itself lose a batch
        return batch
    return out


class ExportTotals(NamedTuple):
    """What otelmw's exporters delivered so far in this process (``export_totals()``):
    what ``otelmw run`` reports at exit."""

    spans: int
    traces: int  # root spans delivered (a trace continued from elsewhere counts here once)
    log_records: int
    dropped: int  # not delivered: every signal and reason (``drop_counts()``), and
    # the items of an export still under way (abandoned when the process exits now)


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
    return ExportTotals(spans, traces, best.get("log", (0, 0))[0],
                        sum(drop_counts().values()) + in_flight)


class _Counting:
    signal = "item"

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.written = 0  # items delivered (one batch worker thread per exporter)
        self.roots = 0
        self.in_flight = 0  # items of the export under way
        _exporters.add(self)

    def _count(self, batch: Sequence[Any], result: Any, success: Any) -> Any:
        if result is not success:
            record_drop(self.signal, "export_failed", len(batch))
        else:
            self.written += len(batch)
        return result

    def shutdown(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.shutdown(*args, **kwargs)

    def force_flush(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.force_flush(*args, **kwargs)


def counting_span_exporter(inner: Any) -> Any:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class CountingSpanExporter(_Counting, SpanExporter):  # type: ignore[misc]
        signal = "span"

        def export(self, spans: Sequence[Any]) -> Any:
            self.in_flight = len(spans)
            try:
                result = self.inner.export(_cleaned(spans, _clean_span))
            except Exception:
                result = SpanExportResult.FAILURE
            finally:
                self.in_flight = 0
            if result is SpanExportResult.SUCCESS:
                self.roots += sum(1 for s in spans if s.parent is None or s.parent.is_remote)
            return self._count(spans, result, SpanExportResult.SUCCESS)

    return CountingSpanExporter(inner)


def counting_log_exporter(inner: Any) -> Any:
    from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult

    class CountingLogExporter(_Counting, LogRecordExporter):  # type: ignore[misc]
        signal = "log"

        def export(self, batch: Sequence[Any]) -> Any:
            self.in_flight = len(batch)
            try:
                result = self.inner.export(_cleaned(batch, _clean_log))
            except Exception:
                result = LogRecordExportResult.FAILURE
            finally:
                self.in_flight = 0
            return self._count(batch, result, LogRecordExportResult.SUCCESS)

    return CountingLogExporter(inner)


def register_drop_metric(meter: Meter) -> None:
    def observe(options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(v, {"otelmw.signal": s, "otelmw.drop.reason": r})
                for (s, r), v in drop_counts().items()]

    meter.create_observable_counter("otelmw.telemetry.dropped", [observe], unit="{item}",
                                    description="Telemetry items that could not be delivered")

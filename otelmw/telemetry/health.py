"""Export health: telemetry that could not be delivered is counted, not spammed.

* The SDK's batch processors log ``Queue full, dropping span.`` once per dropped
  item; ``QueueFullFilter`` turns that into a count plus one summary WARNING per
  minute.
* ``CountingSpanExporter`` / ``CountingLogExporter`` count items whose export
  failed (backend refused, unreachable, timed out).
* The counts are exported as ``otelmw.telemetry.dropped`` (observable counter,
  attributes ``otelmw.signal`` and ``otelmw.drop.reason``) and readable with
  ``drop_counts()``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

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
            record_drop(what.split()[0] if what else "item", "queue_full")
            return False
        return True


_filter = QueueFullFilter()


def install_queue_filter() -> None:
    lg = logging.getLogger("opentelemetry.sdk._shared_internal")
    if _filter not in lg.filters:
        lg.addFilter(_filter)


class _Counting:
    signal = "item"

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def _count(self, batch: Sequence[Any], result: Any, success: Any) -> Any:
        if result is not success:
            record_drop(self.signal, "export_failed", len(batch))
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
            try:
                result = self.inner.export(spans)
            except Exception:
                result = SpanExportResult.FAILURE
            return self._count(spans, result, SpanExportResult.SUCCESS)

    return CountingSpanExporter(inner)


def counting_log_exporter(inner: Any) -> Any:
    from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult

    class CountingLogExporter(_Counting, LogRecordExporter):  # type: ignore[misc]
        signal = "log"

        def export(self, batch: Sequence[Any]) -> Any:
            try:
                result = self.inner.export(batch)
            except Exception:
                result = LogRecordExportResult.FAILURE
            return self._count(batch, result, LogRecordExportResult.SUCCESS)

    return CountingLogExporter(inner)


def register_drop_metric(meter: Meter) -> None:
    def observe(options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(v, {"otelmw.signal": s, "otelmw.drop.reason": r})
                for (s, r), v in drop_counts().items()]

    meter.create_observable_counter("otelmw.telemetry.dropped", [observe], unit="{item}",
                                    description="Telemetry items that could not be delivered")

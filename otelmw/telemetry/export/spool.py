"""The spool: spans and log records that could not be delivered, kept for later.

When an OTLP export fails for good (endpoint unreachable past the exporter's
retries, batch rejected), or the shutdown budget runs out while an export is
still trying, the export guard hands the requests here instead of dropping them.
They are written as OTLP-JSON lines (the embedded store's encoding) under
``<OTELMW_DATA_DIR>/spool/``; ``otelmw replay`` sends them and removes each spool
file once all of it has been delivered. The spool is bounded by
``OTELMW_SPOOL_MAX_BYTES`` (default 64 MiB, counted over the whole directory,
``0`` turns spooling off); what does not fit is counted as dropped
(``spool_full``). Counts: ``spooled()`` and the metric ``otelmw.telemetry.spooled``.
Signals that also go to the embedded store (``file`` exporter) are not spooled:
the store already has them.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from opentelemetry.metrics import CallbackOptions, Meter, Observation

from ...config import settings as cfg
from ..store.files import SPOOL_SUBDIR

logger = logging.getLogger("otelmw")



class SpoolTotals(NamedTuple):
    """What this process spooled: items per signal and where."""

    spans: int
    log_records: int
    directory: Path | None

    @property
    def total(self) -> int:
        return self.spans + self.log_records


class Spool:
    """The spool ``configure()`` builds from its settings (``from_settings``) and hands
    to the export guards of the OTLP exporters; counts what it kept."""

    def __init__(self, directory: Path, max_bytes: int, settings: cfg.Settings) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.settings = settings
        self.used: int | None = None  # bytes in the directory; measured on first use
        self.writers: dict[str, Any] = {}
        self.lock = threading.Lock()  # the writers and ``used``
        self.counts: Counter[str] = Counter()  # items kept per signal
        self.counts_lock = threading.Lock()
        _made.append(self)

    @classmethod
    def from_settings(cls, settings: cfg.Settings) -> Spool | None:
        """Under ``<OTELMW_DATA_DIR>/spool``; None when ``OTELMW_SPOOL_MAX_BYTES`` is 0 (off)."""
        max_bytes = settings[cfg.SPOOL_MAX_BYTES]
        if not max_bytes:
            return None
        return cls(settings[cfg.DATA_DIR] / SPOOL_SUBDIR, max_bytes, settings)

    def _writer(self, signal: str) -> Any:
        out = self.writers.get(signal)
        if out is None:
            from ..store.files import RotatingLines

            out = RotatingLines(signal, self.directory, self.settings)
            # never prune the spool by file count: its bound is max_bytes
            out.max_files = max(out.max_files, self.max_bytes // max(1, out.max_bytes) + 2)
            self.writers[signal] = out
        return out

    def _measure(self) -> int:
        total = 0
        with contextlib.suppress(OSError):
            for p in self.directory.glob("*.jsonl"):
                with contextlib.suppress(OSError):
                    total += p.stat().st_size
        return total

    def full(self) -> bool:
        """Known to be full (then a request is not even encoded)."""
        return self.used is not None and self.used >= self.max_bytes

    def keep(self, signal: str, items: Sequence[Any]) -> str | None:
        """Spool ``items`` of ``signal`` (``traces``/``logs``) as one request: None when
        kept (and counted), else why not."""
        if not items:
            return "export_failed"
        if self.full():
            return "spool_full"
        try:
            line = _encode(signal, items)
        except Exception:
            logger.debug("otelmw: spool encoding failed", exc_info=True)
            return "spool_failed"
        reason = self._write(signal, line)
        if reason is None:
            with self.counts_lock:
                self.counts[signal] += len(items)
        return reason

    def _write(self, signal: str, line: str) -> str | None:
        """Write one encoded request; None when kept, else the drop reason."""
        size = len(line.encode("utf-8")) + 1
        with self.lock:
            if self.used is None:
                self.used = self._measure()
            if self.used + size > self.max_bytes:
                return "spool_full"
            try:
                self._writer(signal).write(line)
            except Exception:
                logger.debug("otelmw: spool write failed", exc_info=True)
                return "spool_failed"
            self.used += size
        return None

    def close(self) -> None:
        with self.lock:
            for out in self.writers.values():
                with contextlib.suppress(Exception):
                    out.close()

    def forget_parent(self) -> None:
        """In a forked child: its own counts from zero, fresh locks (one held by another
        thread at the fork would never be released)."""
        self.lock, self.counts_lock = threading.Lock(), threading.Lock()
        self.counts.clear()


# Process-wide runtime state, not settings: every spool this process built (one per
# ``configure()``), for the exit totals (``spooled()``) and the reset after a fork.
_made: list[Spool] = []


def _encode(signal: str, items: Sequence[Any]) -> str:
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from ..store.otlp_json import to_otlp_json

    return to_otlp_json(encode_spans(items) if signal == "traces" else encode_logs(items))


def spooled() -> SpoolTotals:
    """What this process spooled, and where (the latest spool's directory)."""
    spans = logs = 0
    for spool in list(_made):
        with spool.counts_lock:
            spans, logs = spans + spool.counts["traces"], logs + spool.counts["logs"]
    return SpoolTotals(spans, logs, _made[-1].directory if _made else None)


def forget_parent() -> None:
    """In a forked child (``health``): its own counts from zero, fresh locks."""
    for spool in list(_made):
        spool.forget_parent()


def summarize() -> None:
    """One WARNING at shutdown when anything was spooled: how much, where, how to send it."""
    totals = spooled()
    if totals.total:
        logger.warning("otelmw: %d span(s) and %d log record(s) could not be delivered and "
                       "are spooled in %s; send them with `otelmw replay`",
                       totals.spans, totals.log_records, totals.directory)


def register_spool_metric(meter: Meter) -> None:
    def observe(options: CallbackOptions) -> Iterable[Observation]:
        totals = spooled()
        return [Observation(n, {"otelmw.signal": s})
                for s, n in (("span", totals.spans), ("log", totals.log_records)) if n]

    meter.create_observable_counter(
        "otelmw.telemetry.spooled", [observe], unit="{item}",
        description="Telemetry items kept in the local spool after export failed")

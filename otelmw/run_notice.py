"""The two lines ``otelmw run`` says about itself, so it is never silent.

At start: the instrumentors installed and the ones skipped, with why (a host not
installed, or installed outside its supported range), and where telemetry goes. At
exit: the spans, traces and log records written, where to, how many items were
dropped and how many spooled for ``otelmw replay``, and any ``OTELMW_WRAP`` target
still unwrapped.

On a terminal they are written to stderr; otherwise (a service, a pipe, a test) they
go to the ``otelmw`` logger at INFO, where the program's own logging can pick them up.
``OTELMW_QUIET=1`` silences both.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, NamedTuple

from .config.settings import WrapTarget

if TYPE_CHECKING:  # autoinstrument imports the records below and must stay light
    from .telemetry.configuration import Telemetry

logger = logging.getLogger("otelmw")


class SkippedInstrumentor(NamedTuple):
    name: str  # entry point, e.g. otelmw_hermes
    reason: str  # "hermes-agent is not installed", "... outside the supported range ..."


class InstrumentationReport(NamedTuple):
    """What ``instrument_all`` did: instrumentors installed (each instruments its host
    when the host is imported) and the ones skipped, with why."""

    active: tuple[str, ...]
    skipped: tuple[SkippedInstrumentor, ...]


def notify(line: str) -> None:
    """``line`` to stderr on a terminal, else to the ``otelmw`` logger at INFO."""
    try:
        terminal = sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        terminal = False
    if terminal:
        try:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
            return
        except (OSError, ValueError):
            pass
    logger.info("%s", line)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _where(telemetry: Telemetry, signal: str) -> str:
    return telemetry.destinations.get(signal, "nowhere")


def start_line(report: InstrumentationReport, telemetry: Telemetry) -> str:
    if telemetry.disabled:
        return "otelmw: telemetry disabled (OTEL_SDK_DISABLED); nothing is recorded"
    active = ", ".join(report.active) or "none"
    line = f"otelmw: instrumenting with {active}"
    if report.skipped:
        line += "; skipped " + ", ".join(f"{s.name} ({s.reason})" for s in report.skipped)
    spans, logs = _where(telemetry, "traces"), _where(telemetry, "logs")
    return f"{line}; telemetry to {spans}" + ("" if logs == spans else f", logs to {logs}")


def exit_line(telemetry: Telemetry, unwrapped: dict[WrapTarget, str], *,
              flushed: bool = True) -> str:
    if telemetry.disabled:
        line = "otelmw: telemetry disabled (OTEL_SDK_DISABLED); nothing was written"
    else:
        from .telemetry.export import guard

        totals = guard.export_totals()
        spans = (f"{_plural(totals.spans, 'span')} "
                 f"({_plural(totals.traces, 'trace')})")
        logs = _plural(totals.log_records, "log record")
        to_spans, to_logs = _where(telemetry, "traces"), _where(telemetry, "logs")
        written = (f"{spans} and {logs} to {to_spans}" if to_spans == to_logs
                   else f"{spans} to {to_spans}, {logs} to {to_logs}")
        line = f"otelmw: wrote {written}; {totals.dropped} dropped"
        if totals.spooled:
            line += (f"; {totals.spooled} spooled in {totals.spool_dir} "
                     "(`otelmw replay` sends them)")
        if not flushed:
            line += (f" (flush abandoned after {telemetry.shutdown_timeout_s:g}s: items "
                     "still queued are lost too; OTELMW_SHUTDOWN_TIMEOUT)")
    if unwrapped:
        line += "; OTELMW_WRAP not wrapped: " + ", ".join(
            f"{target} ({why})" for target, why in unwrapped.items())
    return line

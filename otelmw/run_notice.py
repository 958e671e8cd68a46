"""The two lines ``otelmw run`` says about itself, so it is never silent.

At start: the instrumentors installed and the ones skipped, with why (a host not
installed, or installed outside its supported range), and where telemetry goes. At
exit: the spans, traces and log records written, where to, how many items were
dropped and how many spooled for ``otelmw replay``, and any ``OTELMW_WRAP`` target
still unwrapped.

On a terminal they are written to stderr; otherwise (a service, a pipe, a test) they
go to the ``otelmw`` logger at INFO, where the program's own logging can pick them up.
``OTELMW_QUIET=1`` silences both.

Under ``opentelemetry-instrument`` (the ``otelmw`` configurator), when another
instrumentation of a library otelmw instruments is about to start too (``peers``), one
line per library says which, what each call gets twice and the
``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`` value that turns it off: ``peer_lines``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from .config.settings import WrapTarget

if TYPE_CHECKING:  # autoinstrument imports the records below and must stay light
    from .peers import ActivePeer
    from .telemetry.setup.configuration import Telemetry

logger = logging.getLogger("otelmw")


class SkippedInstrumentor(NamedTuple):
    name: str  # entry point, e.g. otelmw_hermes
    reason: str  # "hermes-agent is not installed", "... outside the supported range ..."


class InstrumentationReport(NamedTuple):
    """What ``instrument_all`` did: instrumentors installed (each instruments its host
    when the host is imported) and the ones skipped, with why."""

    active: tuple[str, ...]
    skipped: tuple[SkippedInstrumentor, ...]


def notify(line: str, level: int = logging.INFO) -> None:
    """``line`` to stderr on a terminal, else to the ``otelmw`` logger at ``level``."""
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
    logger.log(level, "%s", line)


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


def _disabling(disabled: Sequence[str], name: str) -> str:
    """``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`` as it is, plus ``name``."""
    return ",".join([*disabled, name])


def peer_lines(peers: Sequence[ActivePeer], disabled: Sequence[str]) -> list[str]:
    """One line per library that another instrumentation instruments beside otelmw:
    each peer (package, release, project) and what every call gets from it, then the
    ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`` values that turn it (or otelmw's) off.
    Peers sharing an entry-point name (the openai ones all call theirs ``openai``) are
    turned off together, and the line says so."""
    by_library: dict[str, list[ActivePeer]] = {}
    for peer in peers:
        by_library.setdefault(peer.peer.otelmw, []).append(peer)
    lines = []
    for ours, group in by_library.items():
        library = ours.removeprefix("otelmw_")
        each = "; and by ".join(f"{p.distribution} {p.version} ({p.peer.project}): every "
                                f"{library} call gets {p.peer.doubles}" for p in group)
        offs = []
        for name in dict.fromkeys(p.entry_point for p in group):
            sharing = [p.distribution for p in group if p.entry_point == name]
            if len(group) == 1:
                what = "turns it off"
            elif len(sharing) == 1:
                what = f"turns off {sharing[0]}"
            else:
                what = (f"turns off {' and '.join(sharing)} together (they share the "
                        f"entry-point name {name!r}; uninstall the one you do not want)")
            offs.append(f"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS={_disabling(disabled, name)} "
                        f"{what}")
        offs.append(f"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS={_disabling(disabled, ours)} "
                    "turns off otelmw's")
        lines.append(f"otelmw: {library} is also instrumented by {each}. " + "; ".join(offs))
    return lines

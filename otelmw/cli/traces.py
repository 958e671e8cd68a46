"""``otelmw traces list|show|tail``: the local store's traces as lines and waterfalls."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ..config.environment import terminal_conventions
from ._shared import color_options, command, positive, seconds, store_dir, store_options
from .terminal import Style, printable

if TYPE_CHECKING:
    from ..telemetry.store.readers import SkippedLine
    from .views import SpanView


_reported_skips: set[tuple[str, int]] = set()  # `traces tail --follow` says it once


def report_skipped(skipped: list[SkippedLine]) -> None:
    """One line on stderr naming the store lines a reader skipped (new ones only)."""
    from ..telemetry.store.readers import describe_skipped

    new = [x for x in skipped if (str(x.path), x.line) not in _reported_skips]
    _reported_skips.update((str(x.path), x.line) for x in new)
    if new:
        print(printable(describe_skipped(new)), file=sys.stderr, flush=True)


def _load_traces(directory: Path | None) -> dict[str, list[SpanView]]:
    from ..telemetry.store.readers import read_requests
    from .views import events_from_requests, group_traces, spans_from_requests

    skipped: list[SkippedLine] = []
    traces = group_traces(spans_from_requests(read_requests("traces", directory, skipped)),
                          events_from_requests(read_requests("logs", directory, skipped)))
    report_skipped(skipped)
    return traces


def _store_state(directory: Path | None) -> tuple[tuple[str, int, int], ...]:
    """What changes when a writer appends to or rotates the store (names, sizes, mtimes)."""
    from ..telemetry.store.files import data_dir

    d = directory if directory is not None else data_dir()
    state = []
    for path in d.glob("*.jsonl"):
        try:
            st = path.stat()
        except OSError:  # pruned meanwhile
            continue
        state.append((path.name, st.st_size, st.st_mtime_ns))
    return tuple(sorted(state))


def _out(text: str = "") -> None:
    print(text, flush=True)


def _no_traces(directory: Path | None) -> None:
    from ..telemetry.store.files import data_dir

    where = printable(str(directory if directory is not None else data_dir()))
    _out(f"no stored traces in {where} (run `otelmw demo` or `otelmw run -- python app.py`)")


def run_list(args: argparse.Namespace) -> int:
    from .views import newest_first, render_list

    traces = _load_traces(store_dir(args))
    if not traces:
        _no_traces(store_dir(args))
        return 0
    style = Style.for_stream(sys.stdout, args.color)
    if not sys.stdout.isatty() and not terminal_conventions().columns_given:
        style = Style(width=1 << 16, color=style.color)  # pipes get whole names to grep
    for line in render_list(newest_first(traces)[: args.limit], style):
        _out(line)
    return 0


def run_show(args: argparse.Namespace) -> int:
    from .views import render_trace

    traces = _load_traces(store_dir(args))
    wanted = args.trace_id.lower()
    matches = [t for t in traces if t.startswith(wanted)]
    if not matches:
        print(f"otelmw: no stored trace {printable(args.trace_id)!r}", file=sys.stderr)
        return 1
    style = Style.for_stream(sys.stdout, args.color)
    for i, tid in enumerate(matches):
        _out(("\n" if i else "") + render_trace(tid, traces[tid], style))
    return 0


class _TraceState(NamedTuple):
    """What ``tail --follow`` knows of one trace: its size when last seen and
    shown, and when it last grew (wall-clock seconds)."""

    size: tuple[int, int]  # spans, events
    shown: tuple[int, int] | None
    changed: float


def _size(roots: list[SpanView]) -> tuple[int, int]:
    from .views import walk

    spans = list(walk(roots))
    return len(spans), sum(len(s.events) for s in spans)


def run_tail(args: argparse.Namespace) -> int:
    from .views import render_trace, walk

    directory = store_dir(args)
    style = Style.for_stream(sys.stdout, args.color)
    traces = _load_traces(directory)
    if not args.follow:
        if not traces:
            _no_traces(directory)
        for i, tid in enumerate(list(traces)[-args.limit:]):
            _out(("\n" if i else "") + render_trace(tid, traces[tid], style))
        return 0
    # Follow: a trace is shown once it is whole — its root span has arrived, or
    # nothing new came for --settle seconds (its root lives in another service or
    # is still running) — and shown again, whole, when more of it arrives later.
    states: dict[str, _TraceState] = {}
    first, gap = True, ""
    last_seen: tuple[tuple[str, int, int], ...] | None = None
    while True:
        seen = _store_state(directory)
        if seen != last_seen:
            last_seen = seen
            traces = _load_traces(directory)
        now = time.time()
        ready = []
        for tid, roots in traces.items():
            size = _size(roots)
            old = states.get(tid)
            if old is None:  # at start: quiet since its last span ended
                changed = max(s.end_ns for s in walk(roots)) / 1e9 if first else now
                old = states[tid] = _TraceState(size, None, changed)
            elif old.size != size:
                old = states[tid] = _TraceState(size, old.shown, now)
            whole = any(not r.parent_id for r in roots)
            if old.shown != size and (whole or now - old.changed >= args.settle):
                ready.append(tid)
        if first:
            ready = ready[-args.limit:]
            first = False
        for tid in ready:
            again = states[tid].shown is not None
            text = render_trace(tid, traces[tid], style)
            if again:
                head, rest = text.split("\n", 1)
                text = f"{head}  (updated)\n{rest}"
            _out(gap + text)
            gap = "\n"
            states[tid] = states[tid]._replace(shown=states[tid].size)
        time.sleep(args.interval)


_TRACES_DESCRIPTION = """\
Reads the traces (and hook events) the file exporter kept in the local
store. Without an action: list."""
_TRACES_EXAMPLES = """\
  otelmw traces list --limit 5
  otelmw traces show 4bf92f35
  otelmw traces tail --follow --data-dir /var/lib/agent/.otelmw
  otelmw traces --color always | less -R"""
_LIST_DESCRIPTION = """\
One line per stored trace, newest first: start time (local), service,
root span, span count, spans with errors, duration and trace id."""
_LIST_EXAMPLES = """\
  otelmw traces list
  otelmw traces list --limit 5
  otelmw traces list --data-dir /var/lib/agent/.otelmw --color never"""
_SHOW_DESCRIPTION = """\
Draws a trace like a tracing UI's timeline: each span's start offset, its
duration and a bar scaled to the trace, its key attributes, the hook
events under it (⚑name@offset) and captured content when recorded.
Errors are red on a terminal; lines fit the terminal's width."""
_SHOW_EXAMPLES = """\
  otelmw traces show 4bf92f3577b34da6a3ce929d0e0e4736
  otelmw traces show 4bf92f35 --color never | less
  otelmw traces show 4bf92f35 --data-dir /var/lib/agent/.otelmw"""
_TAIL_DESCRIPTION = """\
Shows the last N traces, oldest first. With --follow it keeps watching the
store and shows each new trace whole: once its root span has arrived, or
after --settle quiet seconds when its root is elsewhere; a trace that grows
afterwards is shown again, marked (updated). Ctrl-C stops it (exit status 130)."""
_TAIL_EXAMPLES = """\
  otelmw traces tail
  otelmw traces tail --limit 3 --follow
  otelmw traces tail --follow --settle 30 --interval 2
  otelmw traces tail --data-dir /var/lib/agent/.otelmw --color never"""


def add_command(sub: Any) -> None:
    t = command(sub, "traces", "list, show and follow the traces in the local store",
                _TRACES_DESCRIPTION, _TRACES_EXAMPLES,
                parents=[store_options(), color_options()])
    t.set_defaults(func=run_list, limit=50)
    ta = t.add_subparsers(dest="action", metavar="ACTION")
    # Options repeated on each action default to SUPPRESS, so a value given
    # before the action (`traces --data-dir X list`) is not reset by the action.
    later = [store_options(), color_options()]
    for shared in later:
        for action in shared._actions:
            action.default = argparse.SUPPRESS
    tl = command(ta, "list", "one line per trace, newest first", _LIST_DESCRIPTION, _LIST_EXAMPLES,
                 parents=later)
    tl.add_argument("-n", "--limit", type=positive, default=50, metavar="N",
                    help="show the newest N traces (default 50)")
    tl.set_defaults(func=run_list)
    ts = command(ta, "show", "one trace as a waterfall", _SHOW_DESCRIPTION, _SHOW_EXAMPLES,
                 parents=later)
    ts.add_argument("trace_id", metavar="TRACE_ID",
                    help="a trace id or its first characters (all matching traces are shown)")
    ts.set_defaults(func=run_show)
    tt = command(ta, "tail", "the last traces; --follow to keep watching",
                 _TAIL_DESCRIPTION, _TAIL_EXAMPLES,
                 parents=later)
    tt.add_argument("-n", "--limit", type=positive, default=10, metavar="N",
                    help="show the last N traces (default 10)")
    tt.add_argument("-f", "--follow", action="store_true",
                    help="keep watching for new traces until Ctrl-C")
    tt.add_argument("--settle", type=seconds, default=10.0, metavar="SECONDS",
                    help="--follow: show a trace without a root span after this many "
                         "quiet seconds (default 10)")
    tt.add_argument("--interval", type=seconds, default=0.5, metavar="SECONDS",
                    help="--follow: how often to look at the store (default 0.5)")
    tt.set_defaults(func=run_tail)

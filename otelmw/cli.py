"""The otelmw command line: demo, run, traces, replay, plugins."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from .core.plugins import PluginManager
from .terminal import Style, printable

if TYPE_CHECKING:
    from .telemetry.filestore import SkippedLine
    from .telemetry.treeview import SpanView


def _cmd_plugins(args: argparse.Namespace) -> int:
    manager = PluginManager()
    if args.action == "enable" and not args.force:
        installed = sorted(manager.entry_points())
        if args.name not in installed:
            from .core.settings import closest

            near = closest(args.name, installed)
            print(f"otelmw: error: no installed plugin {args.name!r} (entry-point group "
                  f"'otelmw.plugins'); installed: {', '.join(installed) or 'none'}"
                  + (f"; did you mean {near!r}?" if near else "")
                  + " (--force enables it anyway)", file=sys.stderr)
            return 2
    if args.action in ("enable", "disable"):
        manager.set_enabled(args.name, args.action == "enable")
        print(f"{args.action}d {args.name} (in {manager.config.path})")
        return 0
    status = manager.reload()
    if not status:
        print("no plugins found (entry-point group 'otelmw.plugins'; "
              f"config {printable(manager.config.path)})")
        return 0
    for st in sorted(status.values(), key=lambda s: s.name):
        state = "loaded" if st.loaded else ("failed" if st.error else (
            "enabled" if st.enabled else "disabled"))
        line = f"{st.name:<24} {st.source:<13} {state}"
        if st.error:
            line += f"  ({st.error})"
        print(printable(line))  # names and errors come from installed code
        for item in st.middleware + st.hooks:
            print(f"    {printable(item)}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(quiet=args.quiet, style=Style.for_stream(sys.stdout, args.color))


def _cmd_run(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print("otelmw: error: otelmw run needs a COMMAND, e.g. otelmw run -- python app.py",
              file=sys.stderr)
        return 2
    # Validate every setting here, before the program starts: a typo is an error
    # (exit 2) where the user made it, not a warning inside their program.
    from .core import settings as cfg
    from .main_script import command_for

    settings = cfg.load()
    # A target in the script itself is wrapped as the script defines it.
    targets: tuple[cfg.WrapTarget, ...] = settings[cfg.WRAP]
    command = command_for(command, targets)
    bootstrap = str(Path(__file__).parent / "bootstrap")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (bootstrap, env.get("PYTHONPATH")) if x)
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        print(f"otelmw: error: cannot run {command[0]!r}: {exc}", file=sys.stderr)
        return 127
    return 0  # pragma: no cover - exec does not return


def _store(args: argparse.Namespace) -> Path | None:
    return Path(args.data_dir) if args.data_dir else None


_reported_skips: set[tuple[str, int]] = set()  # `traces tail --follow` says it once


def _report_skipped(skipped: list[SkippedLine]) -> None:
    """One line on stderr naming the store lines a reader skipped (new ones only)."""
    from .telemetry.filestore import describe_skipped

    new = [x for x in skipped if (str(x.path), x.line) not in _reported_skips]
    _reported_skips.update((str(x.path), x.line) for x in new)
    if new:
        print(printable(describe_skipped(new)), file=sys.stderr, flush=True)


def _load_traces(directory: Path | None) -> dict[str, list[SpanView]]:
    from .telemetry.filestore import read_requests
    from .telemetry.treeview import events_from_requests, group_traces, spans_from_requests

    skipped: list[SkippedLine] = []
    traces = group_traces(spans_from_requests(read_requests("traces", directory, skipped)),
                          events_from_requests(read_requests("logs", directory, skipped)))
    _report_skipped(skipped)
    return traces


def _store_state(directory: Path | None) -> tuple[tuple[str, int, int], ...]:
    """What changes when a writer appends to or rotates the store (names, sizes, mtimes)."""
    from .telemetry.filestore import data_dir

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
    from .telemetry.filestore import data_dir

    where = printable(str(directory if directory is not None else data_dir()))
    _out(f"no stored traces in {where} (run `otelmw demo` or `otelmw run -- python app.py`)")


def _cmd_traces_list(args: argparse.Namespace) -> int:
    from .telemetry.treeview import newest_first, render_list

    traces = _load_traces(_store(args))
    if not traces:
        _no_traces(_store(args))
        return 0
    style = Style.for_stream(sys.stdout, args.color)
    if not sys.stdout.isatty() and not os.environ.get("COLUMNS"):
        style = Style(width=1 << 16, color=style.color)  # pipes get whole names to grep
    for line in render_list(newest_first(traces)[: args.limit], style):
        _out(line)
    return 0


def _cmd_traces_show(args: argparse.Namespace) -> int:
    from .telemetry.treeview import render_trace

    traces = _load_traces(_store(args))
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
    from .telemetry.treeview import walk

    spans = list(walk(roots))
    return len(spans), sum(len(s.events) for s in spans)


def _cmd_traces_tail(args: argparse.Namespace) -> int:
    from .telemetry.treeview import render_trace, walk

    directory = _store(args)
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


def _cmd_replay(args: argparse.Namespace) -> int:
    from .telemetry.replay import ReplayError, replay

    skipped: list[SkippedLine] = []
    try:
        sent = replay(args.endpoint, args.protocol, _store(args), skipped=skipped,
                      signals=args.signals or ("traces", "metrics", "logs"))
    except ReplayError as exc:  # unreachable endpoint, HTTP or gRPC error: no traceback
        print(f"otelmw: replay failed: {printable(exc)}", file=sys.stderr)
        return 1
    except (OSError, RuntimeError) as exc:  # a store that cannot be read or decoded
        print(f"otelmw: replay failed: {type(exc).__name__}: {printable(exc)}",
              file=sys.stderr)
        return 1
    _report_skipped(skipped)
    print(", ".join(f"{k}: {v} request(s)" for k, v in sent.items()))
    return 0


_DESCRIPTION = """\
otelmw makes the inside of AI agents observable: a middleware chain around the
LLM provider call and the tool dispatch, and OpenTelemetry spans, hook events
and metrics for every step of it. Without an OTLP endpoint, telemetry is kept
as OTLP-JSON files in the local store (OTELMW_DATA_DIR, default ./.otelmw)."""

_EXAMPLES = """\
examples:
  otelmw demo                          run the offline demo agent, show its traces
  otelmw run -- python my_agent.py     instrument a program without changing it
  otelmw traces list                   the stored traces, newest first
  otelmw traces show 4bf92f35          one trace as a waterfall (an id prefix is enough)
  otelmw traces tail --follow          traces as they arrive (Ctrl-C stops, exit 130)
  otelmw replay --endpoint http://localhost:4318
                                       send the store to an OTLP endpoint
  otelmw plugins list                  installed plugins and their state
  otelmw --version                     the installed version

`otelmw COMMAND --help` describes each command. Configuration is read from the
environment (OTEL_* and OTELMW_*; see docs/telemetry.md)."""


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the hand-wrapped descriptions and example blocks as written."""


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def _command(sub: Any, name: str, summary: str, description: str, examples: str,
             parents: Sequence[argparse.ArgumentParser] = ()) -> argparse.ArgumentParser:
    return sub.add_parser(  # type: ignore[no-any-return]
        name, help=summary, description=description, epilog="examples:\n" + examples,
        formatter_class=_Formatter, parents=list(parents))


def _store_options() -> argparse.ArgumentParser:
    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument("--data-dir", metavar="DIR",
                        help="the store to read (default: $OTELMW_DATA_DIR, else ./.otelmw)")
    return shared


def _color_options() -> argparse.ArgumentParser:
    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                        help="colour the output: auto (default) colours a terminal unless "
                             "NO_COLOR is set")
    return shared


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(prog="otelmw", description=_DESCRIPTION,
                                     epilog=_EXAMPLES, formatter_class=_Formatter)
    parser.add_argument("--version", action="version", version=f"otelmw {__version__}")
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    store, color = _store_options(), _color_options()

    d = _command(sub, "demo", "run the built-in offline demo agent and show its traces",
                 "Runs two turns of a scripted agent (tool calls, a rewrite, a cache, a "
                 "failing\nguard, a normalized vendor error) fully offline and prints "
                 "their traces.\nTelemetry goes where the environment says (the local "
                 "store by default).",
                 "  otelmw demo\n  otelmw demo --quiet\n  otelmw demo --color never\n"
                 "  OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 otelmw demo",
                 parents=[color])
    d.add_argument("--quiet", action="store_true", help="print the answer and summary only")
    d.set_defaults(func=_cmd_demo)

    r = _command(sub, "run", "run a Python program with otelmw instrumentation",
                 "Runs COMMAND with OpenTelemetry configured from the environment, enabled\n"
                 "plugins loaded, every available otelmw instrumentor installed and the\n"
                 "OTELMW_WRAP targets wrapped, without the program importing otelmw.\n"
                 "Everything after `--` is passed to COMMAND untouched.",
                 "  otelmw run -- python my_agent.py\n"
                 "  otelmw run -- python -m my_package --verbose\n"
                 "  OTELMW_WRAP='my_agent:call_model=llm,my_agent:dispatch=tool' "
                 "otelmw run -- python my_agent.py")
    r.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS ...]",
                   help="the program to run and its arguments")
    r.set_defaults(func=_cmd_run)

    t = _command(sub, "traces", "list, show and follow the traces in the local store",
                 "Reads the traces (and hook events) the file exporter kept in the local\n"
                 "store. Without an action: list.",
                 "  otelmw traces list --limit 5\n  otelmw traces show 4bf92f35\n"
                 "  otelmw traces tail --follow --data-dir /var/lib/agent/.otelmw\n"
                 "  otelmw traces --color always | less -R",
                 parents=[store, color])
    t.set_defaults(func=_cmd_traces_list, limit=50)
    ta = t.add_subparsers(dest="action", metavar="ACTION")
    # Options repeated on each action default to SUPPRESS, so a value given
    # before the action (`traces --data-dir X list`) is not reset by the action.
    later = [_store_options(), _color_options()]
    for shared in later:
        for action in shared._actions:
            action.default = argparse.SUPPRESS
    tl = _command(ta, "list", "one line per trace, newest first",
                  "One line per stored trace, newest first: start time (local), service,\n"
                  "root span, span count, spans with errors, duration and trace id.",
                  "  otelmw traces list\n  otelmw traces list --limit 5\n"
                  "  otelmw traces list --data-dir /var/lib/agent/.otelmw --color never",
                  parents=later)
    tl.add_argument("-n", "--limit", type=_positive, default=50, metavar="N",
                    help="show the newest N traces (default 50)")
    tl.set_defaults(func=_cmd_traces_list)
    ts = _command(ta, "show", "one trace as a waterfall",
                  "Draws a trace like a tracing UI's timeline: each span's start offset, "
                  "its\nduration and a bar scaled to the trace, its key attributes, the "
                  "hook\nevents under it (\u2691name@offset) and captured content when "
                  "recorded.\nErrors are red on a terminal; lines fit the terminal's width.",
                  "  otelmw traces show 4bf92f3577b34da6a3ce929d0e0e4736\n"
                  "  otelmw traces show 4bf92f35 --color never | less\n"
                  "  otelmw traces show 4bf92f35 --data-dir /var/lib/agent/.otelmw",
                  parents=later)
    ts.add_argument("trace_id", metavar="TRACE_ID",
                    help="a trace id or its first characters (all matching traces are shown)")
    ts.set_defaults(func=_cmd_traces_show)
    tt = _command(ta, "tail", "the last traces; --follow to keep watching",
                  "Shows the last N traces, oldest first. With --follow it keeps "
                  "watching the\nstore and shows each new trace whole: once its root "
                  "span has arrived, or\nafter --settle quiet seconds when its root is "
                  "elsewhere; a trace that grows\nafterwards is shown again, marked "
                  "(updated). Ctrl-C stops it (exit status 130).",
                  "  otelmw traces tail\n  otelmw traces tail --limit 3 --follow\n"
                  "  otelmw traces tail --follow --settle 30 --interval 2\n"
                  "  otelmw traces tail --data-dir /var/lib/agent/.otelmw --color never",
                  parents=later)
    tt.add_argument("-n", "--limit", type=_positive, default=10, metavar="N",
                    help="show the last N traces (default 10)")
    tt.add_argument("-f", "--follow", action="store_true",
                    help="keep watching for new traces until Ctrl-C")
    tt.add_argument("--settle", type=_seconds, default=10.0, metavar="SECONDS",
                    help="--follow: show a trace without a root span after this many "
                         "quiet seconds (default 10)")
    tt.add_argument("--interval", type=_seconds, default=0.5, metavar="SECONDS",
                    help="--follow: how often to look at the store (default 0.5)")
    tt.set_defaults(func=_cmd_traces_tail)

    p = _command(sub, "replay", "send the stored telemetry to an OTLP endpoint",
                 "Sends every stored traces, metrics and logs request, unchanged (ids, "
                 "times,\nattributes), to an OTLP endpoint.",
                 "  otelmw replay --endpoint http://localhost:4318\n"
                 "  otelmw replay --protocol grpc --endpoint http://localhost:4317\n"
                 "  otelmw replay --data-dir /var/lib/agent/.otelmw\n"
                 "  otelmw replay --signal traces --endpoint http://localhost:6006",
                 parents=[store])
    p.add_argument("--endpoint", metavar="URL",
                   help="default: $OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318 "
                        "(4317 for grpc)")
    p.add_argument("--protocol", choices=["http/protobuf", "grpc"], default="http/protobuf",
                   help="OTLP transport (default http/protobuf)")
    p.add_argument("--signal", action="append", dest="signals",
                   choices=["traces", "metrics", "logs"],
                   help="send only this signal (repeatable; default all three), e.g. "
                        "--signal traces for a traces-only backend")
    p.set_defaults(func=_cmd_replay)

    g = _command(sub, "plugins", "list, enable or disable plugins",
                 "Plugins are found through the entry-point group 'otelmw.plugins'; "
                 "enable\nand disable write the choice to the plugins config under "
                 "OTELMW_HOME.\nWithout an action: list.",
                 "  otelmw plugins list\n  otelmw plugins enable my-guard\n"
                 "  otelmw plugins disable my-guard")
    g.set_defaults(func=_cmd_plugins, action="list", name=None, force=False)
    ga = g.add_subparsers(dest="action", metavar="ACTION")
    _command(ga, "list", "installed plugins, their state and registrations",
             "Installed plugins, whether each is loaded, enabled, disabled or failed,\n"
             "and what each registers.", "  otelmw plugins list")
    for verb in ("enable", "disable"):
        enable = verb == "enable"
        pv = _command(ga, verb, f"{verb} a plugin by name",
                      f"Marks plugin NAME as {verb}d in the plugins config."
                      + ("\nA NAME no installed plugin has is an error unless --force."
                         if enable else ""),
                      f"  otelmw plugins {verb} my-guard"
                      + ("\n  otelmw plugins enable my-guard --force" if enable else ""))
        pv.add_argument("name", metavar="NAME", help="the plugin's entry-point name")
        if enable:
            pv.add_argument("--force", action="store_true",
                            help="record NAME even if no such plugin is installed (yet)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except ValueError as exc:  # configuration mistakes: a clear message, no traceback
        print(f"otelmw: error: {printable(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C (traces tail --follow): stop quietly, as a shell would
        return 130
    except BrokenPipeError:  # `otelmw traces list | head`: the reader left
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

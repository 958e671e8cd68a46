"""``otelmw`` command line: demo, run, traces, replay, plugins."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .plugins import PluginManager


def _cmd_plugins(args: argparse.Namespace) -> int:
    manager = PluginManager()
    if args.action == "enable" and not args.force:
        installed = sorted(manager.entry_points())
        if args.name not in installed:
            from .settings import closest

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
              f"config {manager.config.path})")
        return 0
    for st in sorted(status.values(), key=lambda s: s.name):
        state = "loaded" if st.loaded else ("failed" if st.error else (
            "enabled" if st.enabled else "disabled"))
        line = f"{st.name:<24} {st.source:<13} {state}"
        if st.error:
            line += f"  ({st.error})"
        print(line)
        for item in st.middleware + st.hooks:
            print(f"    {item}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(quiet=args.quiet)


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
    from .settings import load

    load()
    bootstrap = str(Path(__file__).parent / "bootstrap")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (bootstrap, env.get("PYTHONPATH")) if x)
    try:
        os.execvpe(command[0], command, env)
    except OSError as exc:
        print(f"otelmw: error: cannot run {command[0]!r}: {exc}", file=sys.stderr)
        return 127
    return 0  # pragma: no cover - exec does not return


def _load_traces(args: argparse.Namespace) -> dict[str, list]:  # type: ignore[type-arg]
    from .telemetry.filestore import read_requests
    from .telemetry.treeview import group_traces, spans_from_requests

    directory = Path(args.data_dir) if args.data_dir else None
    return group_traces(spans_from_requests(read_requests("traces", directory)))


def _cmd_traces(args: argparse.Namespace) -> int:
    from .telemetry.treeview import render_tree, summarize

    traces = _load_traces(args)
    if args.action == "show":
        if not args.trace_id:
            print("otelmw: error: otelmw traces show needs a TRACE_ID", file=sys.stderr)
            return 2
        matches = [t for t in traces if t.startswith(args.trace_id.lower())]
        if not matches:
            print(f"otelmw: no stored trace {args.trace_id!r}", file=sys.stderr)
            return 1
        for tid in matches:
            print(f"trace {tid}")
            print(render_tree(traces[tid]))
        return 0
    if args.action == "tail":
        seen: set[str] = set()
        while True:
            for tid, roots in traces.items():
                if tid not in seen:
                    seen.add(tid)
                    print(f"trace {tid}")
                    print(render_tree(roots), flush=True)
            if not args.follow:
                return 0
            time.sleep(1.0)
            traces = _load_traces(args)
    if not traces:
        print("no stored traces (run `otelmw demo` or `otelmw run -- python app.py`)")
        return 0
    for tid, roots in list(traces.items())[-args.limit:]:
        print(summarize(tid, roots))
    return 0


def _cmd_replay(args: argparse.Namespace) -> int:
    from .telemetry.replay import replay

    try:
        sent = replay(args.endpoint, args.protocol,
                      Path(args.data_dir) if args.data_dir else None)
    except ValueError:
        raise
    except Exception as exc:  # unreachable endpoint, HTTP or gRPC error: no traceback
        detail = getattr(exc, "details", None)
        reason = detail() if callable(detail) else exc
        print(f"otelmw: replay failed: {type(exc).__name__}: {reason}", file=sys.stderr)
        return 1
    print(", ".join(f"{k}: {v} request(s)" for k, v in sent.items()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="otelmw", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)

    d = sub.add_parser("demo", help="run the built-in offline demo agent and show its traces")
    d.add_argument("--quiet", action="store_true", help="print only the summary")
    d.set_defaults(func=_cmd_demo)

    r = sub.add_parser("run", help="run a Python program with otelmw instrumentation")
    r.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    r.set_defaults(func=_cmd_run)

    t = sub.add_parser("traces", help="show traces kept by the embedded store")
    t.add_argument("action", choices=["list", "show", "tail"], nargs="?", default="list")
    t.add_argument("trace_id", nargs="?")
    t.add_argument("--data-dir", help="store directory (default $OTELMW_DATA_DIR or ./.otelmw)")
    t.add_argument("--limit", type=int, default=50, help="list: newest N traces")
    t.add_argument("--follow", action="store_true", help="tail: keep watching")
    t.set_defaults(func=_cmd_traces)

    p = sub.add_parser("replay", help="send the stored OTLP-JSON to an OTLP endpoint")
    p.add_argument("--endpoint", help="default $OTEL_EXPORTER_OTLP_ENDPOINT or localhost")
    p.add_argument("--protocol", choices=["http/protobuf", "grpc"], default="http/protobuf")
    p.add_argument("--data-dir")
    p.set_defaults(func=_cmd_replay)

    g = sub.add_parser("plugins", help="list, enable or disable plugins")
    g.add_argument("action", choices=["list", "enable", "disable"], nargs="?", default="list")
    g.add_argument("name", nargs="?")
    g.add_argument("--force", action="store_true",
                   help="enable: record NAME even if no such plugin is installed (yet)")
    g.set_defaults(func=_cmd_plugins)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.cmd == "plugins" and args.action in ("enable", "disable") and not args.name:
        parser.error(f"otelmw plugins {args.action} needs a plugin NAME")
    try:
        return int(args.func(args))
    except ValueError as exc:  # configuration mistakes: a clear message, no traceback
        print(f"otelmw: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

"""``otelmw`` command line: plugins, demo, run, traces, replay."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .plugins import PluginManager


def _cmd_plugins(args: argparse.Namespace) -> int:
    manager = PluginManager()
    if args.action == "enable":
        manager.set_enabled(args.name, True)
        print(f"enabled {args.name} (in {manager.config.path})")
        return 0
    if args.action == "disable":
        manager.set_enabled(args.name, False)
        print(f"disabled {args.name} (in {manager.config.path})")
        return 0
    status = manager.reload()
    if not status:
        print(f"no plugins found (entry-point group 'otelmw.plugins'; config {manager.config.path})")
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="otelmw", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("plugins", help="list, enable or disable plugins")
    p.add_argument("action", choices=["list", "enable", "disable"], nargs="?", default="list")
    p.add_argument("name", nargs="?")
    p.set_defaults(func=_cmd_plugins)

    d = sub.add_parser("demo", help="run the built-in offline demo agent")
    d.add_argument("--quiet", action="store_true", help="print only the summary")
    d.set_defaults(func=_cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "plugins" and args.action in ("enable", "disable") and not args.name:
        parser.error(f"otelmw plugins {args.action} needs a plugin NAME")
    try:
        return int(args.func(args))
    except ValueError as exc:  # configuration mistakes: a clear message, no traceback
        print(f"otelmw: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

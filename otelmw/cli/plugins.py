"""``otelmw plugins list|enable|disable``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..core.plugins import PluginManager
from ._shared import command
from .terminal import printable


def run(args: argparse.Namespace) -> int:
    manager = PluginManager()
    if args.action == "enable" and not args.force:
        installed = sorted(manager.entry_points())
        if args.name not in installed:
            from ..config.settings import closest

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


def add_command(sub: Any) -> None:
    g = command(sub, "plugins", "list, enable or disable plugins",
                "Plugins are found through the entry-point group 'otelmw.plugins'; "
                "enable\nand disable write the choice to the plugins config under "
                "OTELMW_HOME.\nWithout an action: list.",
                "  otelmw plugins list\n  otelmw plugins enable my-guard\n"
                "  otelmw plugins disable my-guard")
    g.set_defaults(func=run, action="list", name=None, force=False)
    ga = g.add_subparsers(dest="action", metavar="ACTION")
    command(ga, "list", "installed plugins, their state and registrations",
            "Installed plugins, whether each is loaded, enabled, disabled or failed,\n"
            "and what each registers.", "  otelmw plugins list")
    for verb in ("enable", "disable"):
        enable = verb == "enable"
        pv = command(ga, verb, f"{verb} a plugin by name",
                     f"Marks plugin NAME as {verb}d in the plugins config."
                     + ("\nA NAME no installed plugin has is an error unless --force."
                        if enable else ""),
                     f"  otelmw plugins {verb} my-guard"
                     + ("\n  otelmw plugins enable my-guard --force" if enable else ""))
        pv.add_argument("name", metavar="NAME", help="the plugin's entry-point name")
        if enable:
            pv.add_argument("--force", action="store_true",
                            help="record NAME even if no such plugin is installed (yet)")

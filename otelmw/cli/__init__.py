"""The otelmw command line: one module per command (demo, run, traces, replay,
plugins), the trace views and the terminal helpers they print with."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from . import demo, plugins, replay, run, traces
from ._shared import Formatter
from .terminal import printable

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


def build_parser() -> argparse.ArgumentParser:
    from ..version import __version__

    parser = argparse.ArgumentParser(prog="otelmw", description=_DESCRIPTION,
                                     epilog=_EXAMPLES, formatter_class=Formatter)
    parser.add_argument("--version", action="version", version=f"otelmw {__version__}")
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    for module in (demo, run, traces, replay, plugins):
        module.add_command(sub)
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

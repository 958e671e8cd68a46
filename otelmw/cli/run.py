"""``otelmw run -- COMMAND``: a program run with otelmw's zero-code bootstrap."""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from ..config.environment import child_environment, inherited
from ._shared import command


def run(args: argparse.Namespace) -> int:
    program = list(args.command)
    if program and program[0] == "--":
        program = program[1:]
    if not program:
        print("otelmw: error: otelmw run needs a COMMAND, e.g. otelmw run -- python app.py",
              file=sys.stderr)
        return 2
    # Validate every setting here, before the program starts: a typo is an error
    # (exit 2) where the user made it, not a warning inside their program.
    from ..config import settings as cfg
    from ..main_script import command_for

    settings = cfg.load()
    # A target in the script itself is wrapped as the script defines it.
    targets: tuple[cfg.WrapTarget, ...] = settings[cfg.WRAP]
    program = command_for(program, targets)
    bootstrap = str(Path(__file__).parent.parent / "bootstrap")
    overrides = {"PYTHONPATH": os.pathsep.join(
        x for x in (bootstrap, inherited("PYTHONPATH")) if x)}
    if not settings.is_set(cfg.MCP_CONTRACT_KEY):
        # a key of this run's own: the processes that inherit the run's environment (an
        # MCP stdio server the program starts) trust each other's word on the plugins
        # they ran (otelmw_mcp), and no one outside the run can sign one
        overrides[cfg.MCP_CONTRACT_KEY.name] = secrets.token_hex(32)
    env = child_environment(**overrides)
    try:
        os.execvpe(program[0], program, env)
    except OSError as exc:
        print(f"otelmw: error: cannot run {program[0]!r}: {exc}", file=sys.stderr)
        return 127
    return 0  # pragma: no cover - exec does not return


_RUN_DESCRIPTION = """\
Runs COMMAND with OpenTelemetry configured from the environment, enabled
plugins loaded, every available otelmw instrumentor installed and the
OTELMW_WRAP targets wrapped, without the program importing otelmw.
Everything after `--` is passed to COMMAND untouched."""
_RUN_EXAMPLES = """\
  otelmw run -- python my_agent.py
  otelmw run -- python -m my_package --verbose
  OTELMW_WRAP='my_agent:call_model=llm,my_agent:dispatch=tool' otelmw run -- python my_agent.py"""


def add_command(sub: Any) -> None:
    r = command(sub, "run", "run a Python program with otelmw instrumentation",
                _RUN_DESCRIPTION, _RUN_EXAMPLES)
    r.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS ...]",
                   help="the program to run and its arguments")
    r.set_defaults(func=run)

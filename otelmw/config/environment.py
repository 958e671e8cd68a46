"""The process environment where otelmw reads it for something other than a setting:
the terminal conventions the CLI follows and the environment a child program inherits.
Kept here so that this package stays the only reader of ``os.environ``."""

from __future__ import annotations

import os
from typing import NamedTuple


class TerminalConventions(NamedTuple):
    """What the environment says about drawing on a terminal."""

    no_color: bool  # NO_COLOR (https://no-color.org): any non-empty value
    dumb: bool  # TERM=dumb
    columns_given: bool  # COLUMNS set: the user chose a width, also for pipes


def terminal_conventions() -> TerminalConventions:
    env = os.environ
    return TerminalConventions(bool(env.get("NO_COLOR")), env.get("TERM") == "dumb",
                               bool(env.get("COLUMNS")))


def child_environment(**overrides: str) -> dict[str, str]:
    """A copy of this process's environment with ``overrides`` applied, for a
    program otelmw starts (``otelmw run``)."""
    env = dict(os.environ)
    env.update(overrides)
    return env


def inherited(name: str) -> str | None:
    """The variable ``name`` as this process has it (a value handed on, not a setting)."""
    return os.environ.get(name)

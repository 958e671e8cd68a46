"""What the commands share: argparse helpers and the store/colour options."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the hand-wrapped descriptions and example blocks as written."""


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def command(sub: Any, name: str, summary: str, description: str, examples: str,
            parents: Sequence[argparse.ArgumentParser] = ()) -> argparse.ArgumentParser:
    return sub.add_parser(  # type: ignore[no-any-return]
        name, help=summary, description=description, epilog="examples:\n" + examples,
        formatter_class=Formatter, parents=list(parents))


def store_options() -> argparse.ArgumentParser:
    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument("--data-dir", metavar="DIR",
                        help="the store to read (default: $OTELMW_DATA_DIR, else ./.otelmw)")
    return shared


def color_options() -> argparse.ArgumentParser:
    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument("--color", choices=["auto", "always", "never"], default="auto",
                        help="colour the output: auto (default) colours a terminal unless "
                             "NO_COLOR is set")
    return shared


def store_dir(args: argparse.Namespace) -> Path | None:
    """The store a command reads: ``--data-dir``, else ``None`` (the configured one)."""
    return Path(args.data_dir) if args.data_dir else None

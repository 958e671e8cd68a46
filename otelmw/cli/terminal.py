"""What the CLI writes to a terminal: safe text, colour when wanted, cell widths.

Everything the CLI prints that came from a program (span names, attribute
values, plugin errors) goes through :func:`printable` first, so a model-chosen
tool name cannot move the cursor, retitle the window or clear the screen; the
CLI's own colours are added after that, and only on a terminal.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from typing import Final, TextIO

from wcwidth import wcwidth

from ..config.environment import terminal_conventions

# C0 and C1 controls, DEL, and the Unicode bidi/format controls that reorder or
# hide text on screen ("Trojan Source"); the zero-width joiner of emoji stays.
_UNSAFE: Final = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]")
_NAMED: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

RESET: Final = "\x1b[0m"
BOLD: Final = "1"
DIM: Final = "2"
RED: Final = "31"
GREEN: Final = "32"
YELLOW: Final = "33"
MAGENTA: Final = "35"
CYAN: Final = "36"


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(value: object) -> str:
    """``str(value)`` with every control character shown as an escape (``\\x1b``)."""
    return _UNSAFE.sub(_escape, str(value))


def cells(text: str) -> int:
    """Terminal cells ``text`` takes (wide CJK and emoji count two)."""
    if text.isascii():
        return len(text)
    return sum(max(0, wcwidth(ch)) for ch in text)


def fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells, with ``…`` marking the cut."""
    if cells(text) <= width:
        return text
    out, used = [], 0
    for ch in text:
        w = max(0, wcwidth(ch)) if not ch.isascii() else 1
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + "…"


def wrap(words: list[str], width: int, max_lines: int) -> list[str]:
    """Greedy word wrap into lines of at most ``width`` cells. A word wider than
    a line is elided (``…``), never split; past ``max_lines`` the last line ends
    in ``…``."""
    width = max(width, 4)
    lines: list[str] = []
    line, used = "", 0
    for word in words:
        word = fit(word, width)
        w = cells(word)
        if line and used + 1 + w > width:
            lines.append(line)
            line, used = "", 0
        line, used = (f"{line} {word}", used + 1 + w) if line else (word, w)
    if line:
        lines.append(line)
    if len(lines) > max_lines:
        last = lines[max_lines - 1]
        lines = [*lines[: max_lines - 1], fit(last, width - 2) + " …"
                 if cells(last) > width - 2 else last + " …"]
    return lines


def color_wanted(stream: TextIO, choice: str = "auto") -> bool:
    """``always``/``never``, or ``auto``: a terminal, no ``NO_COLOR``, not ``TERM=dumb``."""
    if choice != "auto":
        return choice == "always"
    conventions = terminal_conventions()
    if conventions.no_color or conventions.dumb:
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


@dataclass(frozen=True, slots=True)
class Style:
    """How to draw for one output stream: its width and whether to colour."""

    width: int = 120
    color: bool = False

    @classmethod
    def for_stream(cls, stream: TextIO, choice: str = "auto") -> Style:
        # COLUMNS first, then the terminal's own size; 120 for pipes and files.
        width = shutil.get_terminal_size((120, 50)).columns
        return cls(width=max(40, width), color=color_wanted(stream, choice))

    def paint(self, text: str, *codes: str) -> str:
        """``text`` (already printable) in the given SGR codes, when colouring."""
        if not self.color or not codes or not text:
            return text
        return f"\x1b[{';'.join(codes)}m{text}{RESET}"

#!/usr/bin/env python3
"""Generate otelmw/core/calls_sync.py from otelmw/core/calls.py (the one definition of
how a call runs, written as asynchronous code), or with ``--check`` fail when the
committed file differs from what would be generated (tests/test_core_unasync.py runs
that).

What the synchronous module holds: the source's imports, then each top-level definition
that awaits (an ``async def``), rewritten line by line (as
encode/httpcore's scripts/unasync.py does, plus one directive, because a synchronous
call cannot wait for an awaitable and says what it does instead):

* ``async def`` → ``def``, ``async with`` → ``with``, ``async for`` → ``for``, and each
  ``await`` goes (its operand stays); the lines that continue such a statement move
  left as far as its open bracket did;
* a comment line ``# sync: CODE`` is not copied, and the statement after it (its
  first line, or all of them while brackets are open) is replaced by ``CODE`` at its
  indentation; ``# sync: -`` drops that statement instead, with the indented block it
  opens when it ends in ``:`` (a ``def``, an ``if``).

Every other top-level definition (the rules, which never await) is not copied: the
synchronous module imports, from the source, the ones its code names. A top-level
definition preceded by ``# sync: -`` is neither copied nor imported.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "otelmw" / "core" / "calls.py"
TARGET = ROOT / "otelmw" / "core" / "calls_sync.py"
HEADER = ("# Generated from calls.py by scripts/unasync.py: do not edit; edit that file and run\n"
          "# the script (tests/test_core_unasync.py fails when the two disagree).\n")

_DIRECTIVE = re.compile(r"^(\s*)# sync: (.*)$")
_SUBS = [(re.compile(r"\basync def "), "def "), (re.compile(r"\basync with "), "with "),
         (re.compile(r"\basync for "), "for "), (re.compile(r"\bawait "), "")]
_ASYNC_NODES = (ast.AsyncFunctionDef, ast.Await, ast.AsyncWith, ast.AsyncFor)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _code(line: str) -> str:
    return line.split("#", 1)[0].rstrip()  # no "#" in the strings of a directive's target


def _balanced(code: str) -> bool:
    return all(code.count(a) == code.count(b) for a, b in ("()", "[]", "{}"))


def _sub(text: str) -> str:
    for pattern, replacement in _SUBS:
        text = pattern.sub(replacement, text)
    return text


def _moved(line: str) -> int:
    """How far the lines continuing ``line``'s statement move left: what the
    substitutions take out of ``line`` before its last bracket left open (an ``async
    def``'s parameters, an ``await``'s arguments); 0 when the statement ends here or
    its continuation is a hanging indent."""
    code, opened = _code(line), []
    for pos, char in enumerate(code):
        if char in "([{":
            opened.append(pos)
        elif char in ")]}" and opened:
            opened.pop()
    if not opened or opened[-1] == len(code) - 1:
        return 0
    head = line[:opened[-1]]
    return len(head) - len(_sub(head))


def _transform(lines: list[str], source: str) -> list[str]:
    """The line-by-line rewrite (substitutions and directives) of ``lines``."""
    out: list[str] = []
    open_code, shift = "", 0  # a statement still open, and how far its lines move left
    i = 0
    while i < len(lines):
        line = lines[i]
        directive = _DIRECTIVE.match(line)
        if directive is None:
            if open_code:  # a continuation line, aligned under what moved left
                if line.startswith(" " * shift):
                    line = line[shift:]
                open_code += "\n" + _code(line)
                if _balanced(open_code):
                    open_code = ""
            else:
                shift = _moved(line)
                if shift:
                    open_code = _code(line)
            out.append(_sub(line))
            i += 1
            continue
        i += 1
        if i >= len(lines) or not lines[i].strip():
            raise SystemExit(f"{source}:{i}: a '# sync:' directive must precede a line of code")
        target, statement, code = lines[i], _code(lines[i]), directive.group(2).strip()
        i += 1
        while not _balanced(statement):  # a statement over several lines is one target
            if i >= len(lines):
                raise SystemExit(f"{source}: unbalanced brackets after line {i}")
            statement += "\n" + _code(lines[i])
            i += 1
        if code != "-":
            out.append(" " * _indent(target) + code)
            continue
        if statement.endswith(":"):  # its block goes with it
            while i < len(lines) and (not lines[i].strip()
                                      or _indent(lines[i]) > _indent(target)):
                i += 1
    return out


def _defined(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    targets = node.targets if isinstance(node, ast.Assign) else (
        [node.target] if isinstance(node, ast.AnnAssign) else [])
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


DOCSTRING = ('"""How a call runs, in a synchronous call: generated from calls.py, the one '
             'definition\n(its docstring says how).\n"""\n')


def _order(name: str) -> tuple[int, str]:
    """isort's order within an import: constants, classes, functions."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


def unasync(text: str, source: str = "calls.py") -> str:
    lines = text.splitlines()
    tree = ast.parse(text)
    imports = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    first = imports[0].lineno - 1 if imports else 0
    last = max((node.end_lineno or node.lineno for node in imports), default=0)
    kept: list[str] = []  # the definitions that await, rewritten
    shared: set[str] = set()  # what the synchronous code imports instead
    directives = {k for k, line in enumerate(lines) if _DIRECTIVE.match(line)}
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom) or (node is tree.body[0] and (
                isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))):
            continue  # the imports are copied whole; the module docstring is its own
        start = node.lineno - 1
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and (
                node.decorator_list):
            start = node.decorator_list[0].lineno - 1
        if start and lines[start - 1].strip() == "# sync: -":
            directives.discard(start - 1)
            continue
        if any(isinstance(n, _ASYNC_NODES) for n in ast.walk(node)):
            kept.append("\n".join(_transform(lines[start:node.end_lineno], source)))
            directives -= set(range(start, node.end_lineno or start))
        else:
            shared.update(_defined(node))
    if directives:
        raise SystemExit(f"{source}:{min(directives) + 1}: a '# sync:' directive must precede "
                         "a line of code in a definition that awaits, or a top-level "
                         "definition ('# sync: -')")
    body = "\n\n\n".join(kept) + "\n"
    used = sorted({n.id for n in ast.walk(ast.parse(body)) if isinstance(n, ast.Name)}
                  & shared, key=_order)
    own = "from .calls import (\n" + "".join(f"    {name},\n" for name in used) + ")\n"
    return (HEADER + DOCSTRING + "\n" + "\n".join(lines[first:last]) + "\n" + own
            + "\n\n" + body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when calls_sync.py is not what would be generated")
    args = parser.parse_args(argv)
    generated = unasync(SOURCE.read_text(encoding="utf-8"))
    if args.check:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != generated:
            print(f"{TARGET} is out of date: run scripts/unasync.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(generated, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The package's structure as docs/architecture.md states it: imports point one way,
no module imports another that imports it back, and only the configuration package
reads the process environment."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from _support.imports import PACKAGE, cycles, graph, imported_names, module_name, modules

DOC = PACKAGE.parent / "docs" / "architecture.md"
_ROW = re.compile(r"^\|\s*(?P<who>[^|]+?)\s*\|\s*(?P<may>[^|]+?)\s*\|\s*$")
_PATH = re.compile(r"`(otelmw/[\w/]*?(?:\.py|/))`")


def _group_name(path: str) -> str:
    """``otelmw/telemetry/export/`` → ``otelmw.telemetry.export``; ``otelmw/__init__.py``
    → ``otelmw`` (the package root module alone)."""
    name = path.removesuffix("/").removesuffix(".py").replace("/", ".")
    return name.removesuffix(".__init__")


def documented_rules() -> dict[str, set[str]]:
    """The table under "What may import what": group → the groups it may import."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## What may import what", 1)[1].split("\n## ", 1)[0]
    rules: dict[str, set[str]] = {}
    for line in section.splitlines():
        row = _ROW.match(line)
        if not row or set(row["who"]) <= {"-"} or row["who"] == "package":
            continue
        allowed = {_group_name(p) for p in _PATH.findall(row["may"])}
        for who in _PATH.findall(row["who"]):
            rules[_group_name(who)] = allowed
    return rules


RULES = documented_rules()


def group_of(module: str) -> str:
    """The most specific documented group ``module`` belongs to (the root module
    ``otelmw`` is a group of its own, not the parent of every other)."""
    best = ""
    for group in RULES:
        inside = module == group or (group != "otelmw" and module.startswith(group + "."))
        if inside and len(group) > len(best):
            best = group
    return best


def test_the_table_is_read_and_covers_every_module() -> None:
    assert {"otelmw.core", "otelmw.config", "otelmw.telemetry", "otelmw.cli",
            "otelmw.instrumentation"} <= RULES.keys()
    ungrouped = [m for m in modules() if not group_of(m)]
    assert ungrouped == [], f"modules in no row of docs/architecture.md: {ungrouped}"


def test_the_documented_directions_have_no_circle() -> None:
    """The table itself is one direction: no group may reach itself through others."""
    edges = {g: {a: 0 for a in allowed if a != g} for g, allowed in RULES.items()}
    assert cycles(edges) == []


def test_no_module_imports_itself_through_others() -> None:
    """Module-level circles (type-only imports included): each is a pair of modules that
    cannot be read, tested or moved one without the other."""
    assert cycles(graph()) == []


def test_every_import_follows_the_documented_directions() -> None:
    known = modules()
    wrong = []
    for module, imported in graph().items():
        mine = group_of(module)
        for target, line in imported.items():
            theirs = group_of(target)
            if theirs != mine and theirs not in RULES[mine]:
                path = known[module].relative_to(PACKAGE.parent)
                wrong.append(f"{path}:{line}: {module} ({mine}) imports {target} ({theirs})")
    assert wrong == [], "imports docs/architecture.md does not allow:\n" + "\n".join(wrong)


def test_every_otelmw_import_names_a_module_or_a_name_in_one() -> None:
    """A lazy import of a module that moved fails only when its line runs: find it here."""
    known = modules()
    missing = []
    for path in known.values():
        for line, name in imported_names(path):
            if name.startswith("otelmw") and name not in known \
                    and name.rpartition(".")[0] not in known:
                missing.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {name}")
    assert missing == []


def _environment_reads(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "os" and node.attr in (
                    "environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"):
            found.append(f"{node.lineno}: os.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            found += [f"{node.lineno}: from os import {a.name}" for a in node.names
                      if a.name in ("environ", "environb", "getenv", "getenvb")]
    return found


# Every module but the configuration package's, where the environment is read.
@pytest.mark.parametrize("path", [p for p in sorted(PACKAGE.rglob("*.py"))
                                  if not module_name(p).startswith("otelmw.config")],
                         ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_only_the_configuration_package_reads_the_environment(path: Path) -> None:
    assert _environment_reads(path) == []


def test_the_environment_check_sees_a_read() -> None:
    """The AST check above finds the forms of a read it forbids."""
    sample = PACKAGE.parent / "tests" / "data" / "environment_reads.py"
    assert sorted(r.split(": ", 1)[1] for r in _environment_reads(sample)) == [
        "from os import environ", "os.environ", "os.getenv"]


_WALKS = ("## One tool call, file by file", "## One LLM call through the openai SDK, file by file")
_NUMBERED = re.compile(r"^\d+\. `(otelmw/[\w/]+\.py)`", re.MULTILINE)
_STATED = re.compile(r"\*\*(\d+) files:\*\*")
_NAMED = re.compile(r"`((?:otelmw/)?(?:core|telemetry|instrumentation|config|cli)/[\w/]*?\w+\.py)`")


def _walk(title: str) -> str:
    return DOC.read_text(encoding="utf-8").split(title, 1)[1].split("\n## ", 1)[0]


@pytest.mark.parametrize("title", _WALKS)
def test_each_walk_numbers_at_most_twelve_files_each_once(title: str) -> None:
    """Issue 27: a reader follows one call from the decorator or the wrapped SDK method
    to the exporter opening at most 12 files, each numbered once where the call first
    enters it, and the count the walk states is the count it numbers."""
    text = _walk(title)
    numbered = _NUMBERED.findall(text)
    assert 0 < len(numbered) <= 12, numbered
    assert len(set(numbered)) == len(numbered), numbered
    assert [int(n) for n in _STATED.findall(text)] == [len(numbered)]


@pytest.mark.parametrize("title", _WALKS)
def test_every_file_a_walk_names_exists(title: str) -> None:
    """A module that moved leaves no stale name in the walks."""
    text = _walk(title)
    missing = []
    for name in set(_NAMED.findall(text)):
        path = name if name.startswith("otelmw/") else f"otelmw/{name}"
        short = PACKAGE / "telemetry" / name  # `export/guard.py`, `spans/tool.py`
        if not (PACKAGE.parent / path).exists() and not short.exists():
            missing.append(name)
    assert missing == []


def test_telemetry_groups_its_modules_by_concern() -> None:
    """Issue 39: the telemetry side is packages by concern (setup, span kinds, provider
    shapes, content rules, export, store) with at most 8 modules loose beside them."""
    telemetry = PACKAGE / "telemetry"
    loose = sorted(p.name for p in telemetry.glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= 8, loose
    assert {p.name for p in telemetry.iterdir() if (p / "__init__.py").exists()} >= {
        "setup", "spans", "shapes", "content", "export", "store"}

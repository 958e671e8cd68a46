"""How a call runs is written once, as asynchronous code (``otelmw/core/calls.py``);
the synchronous calls run ``calls_sync.py``, generated from it by ``scripts/unasync.py``.
The committed file must be exactly what the script generates, and the transformation
does what the script says."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "unasync.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("otelmw_unasync", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_calls_sync_is_what_the_script_generates() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr


def test_the_check_fails_on_a_hand_edit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
    script = _script()
    edited = tmp_path / "calls_sync.py"
    edited.write_text(script.TARGET.read_text() + "# edited by hand\n")
    monkeypatch.setattr(script, "TARGET", edited)
    assert script.main(["--check"]) == 1


def _generated_body(source: str) -> list[str]:
    """What the script makes of ``source``, after its header, docstring and imports."""
    generated = _script().unasync(source).splitlines()
    return generated[generated.index(")") + 1:] if ")" in generated else generated


def test_the_transformation() -> None:
    source = '''"""A module."""

import asyncio


LIMIT = 3


def rule(x):
    return x


async def run(x):
    """Runs ``async def`` callbacks."""
    r = await step(rule(x))
    # sync: r = refuse(r)
    r = await r
    # sync: -
    if isawaitable(r):
        r = await r
    # sync: done(r, True)
    done(r,
         False)
    async with lock:
        async for item in r:
            pass
    return r


# sync: -
def hand_out(a,
             b):
    return level(a, b)


async def level(a, b):
    return await a(LIMIT)
'''
    generated = _script().unasync(source)
    assert generated.splitlines()[:6] == [
        "# Generated from calls.py by scripts/unasync.py: do not edit; edit that file and run",
        "# the script (tests/test_core_unasync.py fails when the two disagree).",
        '"""How a call runs, in a synchronous call: generated from calls.py, the one '
        'definition', "(its docstring says how).", '"""', ""]
    # the imports are copied; what never awaits is imported from the source, not copied
    # (only what the synchronous code names: LIMIT and rule, not hand_out)
    assert "import asyncio\nfrom .calls import (\n    LIMIT,\n    rule,\n)\n" in generated
    assert _generated_body(source) == [
        "", "",
        "def run(x):",
        '    """Runs ``async def`` callbacks."""',
        "    r = step(rule(x))",
        "    r = refuse(r)",
        "    done(r, True)",
        "    with lock:",
        "        for item in r:",
        "            pass",
        "    return r",
        "", "",
        "def level(a, b):",
        "    return a(LIMIT)"]


def test_a_directive_replaces_a_whole_statement() -> None:
    source = "async def f():\n    # sync: g(1)\n    await g(2,\n            3)\n    h()\n"
    assert _generated_body(source)[-3:] == ["def f():", "    g(1)", "    h()"]


def test_a_directive_without_a_statement_after_it_is_refused() -> None:
    with pytest.raises(SystemExit, match="must precede a line of code"):
        _script().unasync("async def f():\n    await g()\n    # sync: -\n")


def test_continuation_lines_move_left_with_their_bracket() -> None:
    source = ("async def f(a,\n            b):\n"
              "    x = await g(a,\n                b)\n"
              "    y = h(await k(\n        a))\n")
    assert _generated_body(source)[-6:] == [
        "def f(a,", "      b):", "    x = g(a,", "          b)",
        "    y = h(k(", "        a))"]  # a hanging indent stays


def test_a_level_unpacks_what_the_chain_shares_in_its_order() -> None:
    """``ExecutionChain.shared`` is a tuple ``_level`` unpacks in one step (cheaper than
    attribute loads per layer): the names it unpacks into are the names it was built
    from, in the same order."""
    import ast

    def names(node: ast.AST) -> list[str]:
        assert isinstance(node, ast.Tuple)
        return [n.id for n in node.elts if isinstance(n, ast.Name)]

    steps = ast.parse((ROOT / "otelmw" / "core" / "calls.py").read_text())
    built = [node.value for node in ast.walk(steps) if isinstance(node, ast.Assign)
             and isinstance(node.targets[0], ast.Attribute)
             and node.targets[0].attr == "shared"]
    calls = ast.parse((ROOT / "otelmw" / "core" / "calls.py").read_text())
    unpacked = [node.targets[0] for node in ast.walk(calls) if isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Attribute) and node.value.attr == "shared"]
    assert len(built) == 1 and len(unpacked) == 1
    assert names(built[0]) == names(unpacked[0])
    assert len(names(built[0])) == 9

"""The core works with OpenTelemetry absent: it imports nothing from it."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "otelmw"
CORE = sorted((ROOT / "core").glob("*.py"))


def _imported(node: ast.AST, level_base: tuple[str, ...]) -> list[str]:
    """Absolute names an import node brings in (relative ones resolved against the package)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        if not node.level:
            return [node.module or ""]
        base = level_base[: len(level_base) - node.level + 1]
        return [".".join((*base, node.module)) if node.module else ".".join(base)]
    return []


def test_the_core_folder_imports_nothing_outside_itself_or_from_opentelemetry() -> None:
    """Every module in otelmw/core, every import (lazy ones too): no OpenTelemetry,
    nothing from otelmw outside otelmw.core but the configuration package (a leaf that
    imports the standard library only)."""
    assert {"pipeline.py", "calls.py", "contract.py", "host.py"} <= {p.name for p in CORE}, CORE
    for path in CORE:
        for node in ast.walk(ast.parse(path.read_text())):
            for mod in _imported(node, ("otelmw", "core")):
                assert not mod.startswith("opentelemetry"), (path.name, mod)
                assert not mod.startswith("otelmw") or mod.startswith(
                    ("otelmw.core", "otelmw.config")), (path.name, mod)


def test_the_demo_agent_imports_no_telemetry() -> None:
    """The demo agent is core-only; ``otelmw demo`` (cli/demo.py) adds the telemetry."""
    tree = ast.parse((ROOT / "demo.py").read_text())
    for node in ast.walk(tree):
        for mod in _imported(node, ("otelmw",)):
            assert not mod.startswith(("opentelemetry", "otelmw.telemetry")), mod


BLOCKED = textwrap.dedent("""
    import sys
    class Block:
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ImportError("opentelemetry is blocked for this test")
            return None
    sys.meta_path.insert(0, Block())
    import otelmw
    from otelmw import Pipeline, runtime_context
    p = Pipeline()
    seen = []
    p.registry.add_middleware("llm_request",
        lambda **kw: {"request": {**kw["request"], "model": "b"}, "source": "t"}, "t")
    p.registry.add_hook("post_api_request", lambda **kw: seen.append(kw["middleware_trace"]), "t")
    with runtime_context(session_id="s"):
        out = p.run_llm({"model": "a"}, lambda r: r["model"])
        tool = p.run_tool("x", '{"a": 1}', lambda a: a["a"] + 1)
    assert out == "b" and tool == 2, (out, tool)
    assert seen and seen[0][0]["source"] == "t"
    assert not any(m.startswith("opentelemetry") for m in sys.modules), "otel was imported"
    print("core-ok")
""")


def test_core_runs_with_opentelemetry_blocked() -> None:
    proc = subprocess.run([sys.executable, "-c", BLOCKED], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "core-ok"

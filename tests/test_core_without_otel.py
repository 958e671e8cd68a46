"""The core works with OpenTelemetry absent: it imports nothing from it."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

CORE = ["contract", "chain", "hooks", "registry", "plugins", "pipeline", "llm_calls",
        "tool_calls", "callstate", "results", "memory", "payloads", "failures", "observe",
        "demo"]
ROOT = Path(__file__).resolve().parent.parent / "otelmw"


def test_core_modules_import_nothing_from_opentelemetry_at_module_level() -> None:
    for name in CORE:
        tree = ast.parse((ROOT / f"{name}.py").read_text())
        for node in tree.body:  # module level only: demo imports telemetry lazily
            mods = []
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [node.module or ""]
                if node.level and (node.module or "").startswith(("telemetry", "instrumentation")):
                    mods.append("opentelemetry")
            assert not any(m.startswith("opentelemetry") for m in mods), (name, mods)


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

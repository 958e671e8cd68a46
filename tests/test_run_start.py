"""``otelmw run`` starts cheap: when the program's first line runs, no host framework
and none of the pieces otelmw defers until they are needed (the SDK's configurator
module, protobuf and the OTLP encoders of the embedded store) has been imported, while
the telemetry is set up (the SDK providers installed, the instrumentors active) and a
span the program makes still reaches the store. Its speed is benchmark 8's
(benchmarks/bench_start.py); this checks only what is imported, never a time."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from _support.cli import otelmw
from _support.components import clean_env

from otelmw.telemetry.store.readers import read_requests

pytestmark = pytest.mark.timeout(180)

# Top-level modules of every host otelmw instruments (hermes-agent's included).
HOSTS = ("openai", "anthropic", "langchain", "langchain_core", "langchain_openai", "langgraph",
         "litellm", "mcp", "pydantic_ai", "agents", "praisonaiagents", "run_agent",
         "hermes_cli", "model_tools")
DEFERRED = ("opentelemetry.sdk._configuration", "google.protobuf", "opentelemetry.proto",
            "opentelemetry.exporter.otlp.proto.common")

PROBE = """\
import importlib.util, json, sys
modules = sorted(sys.modules)  # first: what the program finds when it starts
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
hosts = {HOSTS!r}
print(json.dumps({{
    "imported_hosts": sorted({{m.split(".")[0] for m in modules}} & set(hosts)),
    "installed_hosts": [h for h in hosts if importlib.util.find_spec(h) is not None],
    "deferred": [m for m in modules if m.startswith({DEFERRED!r})],
    "bootstrap": "otelmw.autoinstrument" in modules,
    "instrumentors": [m for m in modules
                      if m.startswith("otelmw.instrumentation.") and m.endswith(".instrumentor")],
    "sdk_provider": isinstance(trace.get_tracer_provider(), TracerProvider),
}}))
with trace.get_tracer("probe").start_as_current_span("probe-span"):
    pass
"""


def test_nothing_of_a_host_or_the_deferred_exporters_is_imported_at_start(
        tmp_path: Path) -> None:
    store = tmp_path / "store"
    env = clean_env(tmp_path, OTELMW_DATA_DIR=str(store))
    code = PROBE.format(HOSTS=HOSTS, DEFERRED=DEFERRED)
    proc = otelmw("run", "--", sys.executable, "-c", code, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["bootstrap"] and seen["sdk_provider"], seen  # otelmw did set things up
    assert seen["instrumentors"], seen  # loaded (and instrumenting) without their hosts
    assert seen["installed_hosts"], "no host installed: nothing to check"
    assert seen["imported_hosts"] == [], seen
    assert seen["deferred"] == [], seen
    # the deferred encoders are imported when the store first writes: the span is there
    names = [span["name"] for request in read_requests("traces", store)
             for resource in request.get("resourceSpans", [])
             for scope in resource.get("scopeSpans", []) for span in scope.get("spans", [])]
    assert names == ["probe-span"]

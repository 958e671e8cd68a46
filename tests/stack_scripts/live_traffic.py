"""otelmw traffic for tests/test_stack_live_prometheus.py, scraped by a real Prometheus.

Runs the demo pipeline (``otelmw.demo``) with telemetry from ``configure()``
and ``OTEL_METRICS_EXPORTER=prometheus`` (``opentelemetry-exporter-prometheus``'s
PrometheusMetricReader plus prometheus_client's HTTP server on
``OTEL_EXPORTER_PROMETHEUS_HOST``/``PORT``), and adds what the demo does not
do on every round so that each metric of the contract gets data continuously:

* an LLM call whose provider raises (``error_type`` on the operation duration),
* a tool-execution middleware that raises before ``next_call`` for one tool
  (middleware failures, outcome ``failed_before_next``),
* an observer hook that raises (hook failures),
* a tool call under a runtime whose normalizer raises (normalize failures).

Prints ``READY`` after the first round, then runs a round every
``LIVE_TRAFFIC_INTERVAL`` seconds (default 0.25). Stops by itself when its
stdin is closed (the test, or the test process dying) or after
``LIVE_TRAFFIC_MAX_SECONDS`` (default 300). With ``LIVE_TRAFFIC_HEALTHY=1`` only
the demo turns run: no hook or normalizer ever fails, so those counters have no
series at all (what a dashboard meets before the first failure).
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from otelmw.core.plugins import PluginContext, PluginManager
from otelmw.core.results import MiddlewareContext, NormalizedToolResult
from otelmw.demo import (
    DEMO_MODEL,
    DEMO_RUNTIME,
    TOOLS,
    ScriptedProvider,
    build_demo_pipeline,
    register_demo_plugins,
    run_agent,
)
from otelmw.telemetry.setup.configuration import configure

BROKEN_RUNTIME = "live_broken_runtime"
FAILING_HOOK = "post_api_request"
FAILING_MIDDLEWARE_TOOL = "calculate"


class ProviderDown(ConnectionError):
    """What the failing LLM provider raises (becomes ``error_type``)."""


class BrokenNormalizer:
    """A normalizer that always raises (counted in otelmw.normalize.failures)."""

    @property
    def runtime_id(self) -> str:
        return BROKEN_RUNTIME

    def normalize(self, result: Any, tool_name: str, ctx: MiddlewareContext
                  ) -> NormalizedToolResult:
        raise ValueError(f"cannot normalize the result of {tool_name}")


def register_failing_plugins(ctx: PluginContext) -> None:
    def failing_hook(**kw: Any) -> None:
        raise RuntimeError("live hook always fails")

    def failing_guard(**kw: Any) -> Any:
        if kw["tool_name"] == FAILING_MIDDLEWARE_TOOL:
            raise RuntimeError("live guard fails before next_call")
        return kw["next_call"](kw["args"])

    ctx.register_hook(FAILING_HOOK, failing_hook)
    ctx.register_middleware("tool_execution", failing_guard)


def provider_down(request: Any) -> Any:
    raise ProviderDown("demo provider unreachable")


def one_round(pipeline: Any, n: int, healthy: bool = False) -> None:
    session = f"live-{n}"
    # A full demo turn: 4 LLM calls (tokens, a rewrite by "demo-router"),
    # 3 tool calls (ok, vendor error, raising tool), middleware and hooks.
    with pipeline.turn("live-agent", session_id=session, runtime_id=DEMO_RUNTIME):
        run_agent(pipeline, ScriptedProvider(), f"Weather in Lisbon, round {n}?")
    if healthy:
        return
    # A turn whose LLM call fails.
    with pipeline.turn("live-agent", session_id=session, runtime_id=DEMO_RUNTIME) as turn:
        try:
            pipeline.run_llm({"model": DEMO_MODEL, "messages": [
                {"role": "user", "content": "are you there?"}]}, provider_down,
                provider="demo", api_mode="chat_completions")
        except ProviderDown:
            turn.mark_failed()
    # A tool call whose runtime's normalizer raises (falls back to pass-through).
    pipeline.run_tool("get_weather", {"city": f"Porto-{n}"}, TOOLS["get_weather"],
                      tool_call_id=f"call_broken_{n}", runtime_id=BROKEN_RUNTIME)


def _exit_when_stdin_closes() -> None:
    try:
        sys.stdin.buffer.read()
    finally:
        os._exit(0)


def main() -> int:
    interval = float(os.environ.get("LIVE_TRAFFIC_INTERVAL", "0.25"))
    max_seconds = float(os.environ.get("LIVE_TRAFFIC_MAX_SECONDS", "300"))
    healthy = os.environ.get("LIVE_TRAFFIC_HEALTHY") == "1"
    pipeline, _memory = build_demo_pipeline()
    if not healthy:
        pipeline.normalizers.register(BROKEN_RUNTIME, BrokenNormalizer())
    configure("otelmw-live-prometheus", pipeline=pipeline)
    with tempfile.TemporaryDirectory() as home:
        plugins = PluginManager(pipeline, home=Path(home))
        plugins.add_plugin("demo", register_demo_plugins)
        if not healthy:
            plugins.add_plugin("live-failures", register_failing_plugins)
    threading.Thread(target=_exit_when_stdin_closes, name="stdin-watch", daemon=True).start()
    one_round(pipeline, 0, healthy)
    print("READY", flush=True)
    deadline = time.monotonic() + max_seconds
    n = 1
    while time.monotonic() < deadline:
        time.sleep(interval)
        one_round(pipeline, n, healthy)
        n += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

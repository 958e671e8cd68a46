"""End-to-end tests of ``otelmw.telemetry.configure()`` against a real OTLP receiver.

``configure()`` is process-global, so every configuration runs in a fresh interpreter
with a clean environment (no inherited ``OTEL_*`` / ``OTELMW_*``) and cwd = tmp_path.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from _support.components import clean_env
from _support.otlp_receiver import OtlpReceiver, free_port

TIMEOUT = 90

# A demo-agent turn through a pipeline with request-rewrite and execution middleware,
# a short-circuit, a fail-open failure, a vendor-shaped tool error, a raising tool and
# a registered observer hook. Prints one JSON line summary as the last stdout line.
PROGRAM = textwrap.dedent("""
    import json, os, sys, tempfile, time
    from pathlib import Path

    from otelmw.demo import (DEMO_RUNTIME, ScriptedProvider, build_demo_pipeline,
                             register_demo_plugins, run_agent)
    from otelmw.core.plugins import PluginManager
    from otelmw.telemetry.setup.configuration import configure

    pipeline, memory = build_demo_pipeline()
    telemetry = configure("configure-test", pipeline=pipeline)
    hook_calls = []

    def plugin(ctx):
        register_demo_plugins(ctx)
        ctx.register_hook("post_tool_call",
                          lambda **kw: hook_calls.append(kw.get("tool_name")))
        for name in ("pre_api_request", "post_api_request", "pre_tool_call"):
            ctx.register_hook(name, lambda **kw: None)

    with tempfile.TemporaryDirectory() as home:
        PluginManager(pipeline, home=Path(home)).add_plugin("demo", plugin)
    answers = []
    for _ in range(2):  # the second turn hits the cache: short_circuit
        with pipeline.turn("demo-agent", session_id="s-1", runtime_id=DEMO_RUNTIME):
            answers.append(run_agent(pipeline, ScriptedProvider(), "weather?"))
    summary = {"answers": answers, "hook_calls": hook_calls,
               "tool_results": len(memory.records), "disabled": telemetry.disabled,
               "failures": pipeline.failures.total()}
    if os.environ.get("T_NO_SHUTDOWN") != "1":
        t0 = time.monotonic()
        summary["shutdown_ok"] = telemetry.shutdown(
            timeout_s=float(os.environ.get("T_SHUTDOWN_S", "10")))
        summary["shutdown_s"] = time.monotonic() - t0
    print(json.dumps(summary), flush=True)
""")

ANSWER = "Lisbon is sunny; ZZZZ is unknown."
TOOLS = ["get_weather", "get_stock", "calculate"]
SPANS_PER_TURN = 22  # 1 invoke_agent + 4 chat (+8 llm mw) + 3 execute_tool (+6 tool mw)


def run_py(code: str, env: dict[str, str], cwd: Path, *, check: bool = True
           ) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=TIMEOUT)
    if check:
        assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def summary_of(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    last = [x for x in proc.stdout.splitlines() if x.strip()][-1]
    return json.loads(last)


def assert_program_worked(summary: dict[str, Any]) -> None:
    assert summary["answers"] == [ANSWER, ANSWER]
    assert summary["hook_calls"] == TOOLS * 2
    assert summary["tool_results"] == 6


def endpoint_for(rx: OtlpReceiver, protocol: str) -> str:
    return rx.grpc_endpoint if protocol == "grpc" else rx.http_endpoint



@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_otlp_export_delivers_spans_logs_and_metrics(rx: OtlpReceiver, tmp_path: Path,
                                                     protocol: str) -> None:
    env = clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=endpoint_for(rx, protocol),
                    OTEL_EXPORTER_OTLP_PROTOCOL=protocol,
                    OTEL_SERVICE_NAME="svc-under-test",
                    OTEL_RESOURCE_ATTRIBUTES="deployment.environment=e2e,team.name=agents")
    summary = summary_of(run_py(PROGRAM, env, tmp_path))
    assert_program_worked(summary)
    assert summary["shutdown_ok"] is True

    spans = rx.wait_for_spans(2 * SPANS_PER_TURN, timeout=15)
    assert len(spans) == 2 * SPANS_PER_TURN
    wire = "grpc" if protocol == "grpc" else "http"
    other = "http" if wire == "grpc" else "grpc"
    assert rx.accepted_count("traces", wire) >= 1
    assert rx.request_count(protocol=other) == 0  # type: ignore[arg-type]

    by_id = {s.span_id: s for s in spans}
    roots = [s for s in spans if s.parent_span_id is None]
    assert [r.name for r in roots] == ["invoke_agent demo-agent"] * 2
    trace_ids = {r.trace_id for r in roots}
    assert len(trace_ids) == 2
    for s in spans:
        assert s.trace_id in trace_ids
        if s.parent_span_id is not None:
            assert s.parent_span_id in by_id, f"orphan {s.name}"
            assert by_id[s.parent_span_id].trace_id == s.trace_id
        assert s.resource["service.name"] == "svc-under-test"
        assert s.resource["deployment.environment"] == "e2e"
        assert s.resource["team.name"] == "agents"

    names = [s.name for s in spans]
    assert names.count("chat demo-model-1") == 8
    for tool in TOOLS:
        assert names.count(f"execute_tool {tool}") == 2
    assert names.count("llm_request demo.route_model") == 8
    assert names.count("llm_execution demo.time_llm") == 8
    assert names.count("tool_execution demo.flaky_guard") == 6
    assert names.count("tool_execution demo.cache_tools") == 6

    for s in spans:
        parent = by_id.get(s.parent_span_id or "")
        if s.name.startswith(("chat ", "execute_tool ")):
            assert parent is not None and parent.name == "invoke_agent demo-agent"
        if s.name.startswith(("llm_request ", "llm_execution ")):
            assert parent is not None and parent.name.startswith("chat ")
        if s.name.startswith("tool_execution "):
            assert parent is not None and parent.name.startswith(
                ("execute_tool ", "tool_execution "))
    chat = next(s for s in spans if s.name.startswith("chat "))
    assert chat.kind == 3  # CLIENT
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.request.model"] == "demo-model-1"
    assert chat.attributes["gen_ai.usage.output_tokens"] == 7
    outcomes = {s.attributes.get("otelmw.middleware.outcome") for s in spans}
    assert {"rewritten", "passed", "short_circuit", "failed_before_next", "error"} <= outcomes
    stock = next(s for s in spans if s.name == "execute_tool get_stock")
    assert stock.status_code == 2
    assert stock.attributes["otelmw.result.success"] is False

    logs = rx.wait_for_logs(1, timeout=15)
    events = {log.event_name for log in logs}
    assert {"otelmw.hook.pre_api_request", "otelmw.hook.post_api_request",
            "otelmw.hook.pre_tool_call", "otelmw.hook.post_tool_call"} <= events
    for log in logs:
        assert log.event_name.startswith("otelmw.hook.")
        assert log.trace_id in trace_ids, "hook log not correlated to the turn's trace"
        assert log.span_id in by_id
        assert by_id[log.span_id].trace_id == log.trace_id
        assert log.resource["service.name"] == "svc-under-test"
    post_tool = rx.logs("otelmw.hook.post_tool_call")
    assert len(post_tool) == 6
    assert {by_id[x.span_id].name for x in post_tool} == {f"execute_tool {t}" for t in TOOLS}

    for name in ("gen_ai.client.operation.duration", "gen_ai.client.token.usage",
                 "gen_ai.execute_tool.duration", "gen_ai.invoke_agent.duration",
                 "otelmw.middleware.duration", "otelmw.middleware.failures"):
        assert rx.wait_for_metric(name, timeout=15), name
    [duration] = rx.metrics("gen_ai.client.operation.duration")[-1:]
    assert duration.kind == "histogram"
    assert duration.unit == "s"
    assert duration.resource["team.name"] == "agents"
    assert sum(dp.value["count"] for dp in duration.data_points) == 8


def test_sampler_always_off_records_no_spans_but_program_works(rx: OtlpReceiver,
                                                               tmp_path: Path) -> None:
    env = clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint,
                    OTEL_TRACES_SAMPLER="always_off")
    summary = summary_of(run_py(PROGRAM, env, tmp_path))
    assert_program_worked(summary)
    assert summary["failures"] == 1  # the demo's fail-open middleware failure, nothing else
    rx.wait_for_metric("gen_ai.client.operation.duration", timeout=15)  # telemetry is live
    assert rx.spans() == []
    assert rx.request_count("traces") == 0


def test_sdk_disabled_exports_nothing_and_calls_work(rx: OtlpReceiver, tmp_path: Path) -> None:
    env = clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=rx.http_endpoint,
                    OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf", OTEL_SDK_DISABLED="true")
    code = PROGRAM + textwrap.dedent("""
        from opentelemetry import metrics, trace
        print(type(trace.get_tracer_provider()).__name__,
              type(metrics.get_meter_provider()).__name__)
    """)
    proc = run_py(code, env, tmp_path)
    lines = proc.stdout.splitlines()
    summary = json.loads(lines[-2])
    assert_program_worked(summary)
    assert summary["disabled"] is True
    assert "TracerProvider" in lines[-1] and lines[-1].split()[0] != "TracerProvider"
    assert rx.request_count() == 0
    assert not (tmp_path / ".otelmw").exists()


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_traces_exporter_none_keeps_other_signals(rx: OtlpReceiver, tmp_path: Path,
                                                  protocol: str) -> None:
    env = clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=endpoint_for(rx, protocol),
                    OTEL_EXPORTER_OTLP_PROTOCOL=protocol, OTEL_TRACES_EXPORTER="none")
    assert_program_worked(summary_of(run_py(PROGRAM, env, tmp_path)))
    rx.wait_for_metric("gen_ai.execute_tool.duration", timeout=15)
    assert rx.wait_for_logs(1, timeout=15)
    assert rx.request_count("traces") == 0
    assert not (tmp_path / ".otelmw").exists()


def test_traces_exporter_console_prints_spans(rx: OtlpReceiver, tmp_path: Path) -> None:
    env = clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint,
                    OTEL_TRACES_EXPORTER="console")
    proc = run_py(PROGRAM, env, tmp_path)
    assert_program_worked(summary_of(proc))
    assert '"name": "invoke_agent demo-agent"' in proc.stdout
    assert '"name": "execute_tool get_weather"' in proc.stdout
    assert proc.stdout.count('"name": "chat demo-model-1"') == 8
    rx.wait_for_metric("gen_ai.client.operation.duration", timeout=15)
    assert rx.request_count("traces") == 0


@pytest.mark.parametrize(("var", "value"), [
    ("OTEL_TRACES_EXPORTER", "zipkin"),
    ("OTEL_METRICS_EXPORTER", "otlp,bogus"),
    ("OTEL_LOGS_EXPORTER", "prometheus"),
    ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "EVERYTHING"),
    ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
    ("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "http/json"),
    ("OTELMW_HOOK_EVENTS", "sometimes"),
    ("OTELMW_MIDDLEWARE_METRICS", "maybe"),
    ("OTELMW_HOOK_EVENTS", "allx"),
    ("OTEL_SDK_DISABLED", "ture"),
    ("OTEL_BSP_MAX_QUEUE_SIZE", "abc"),
    ("OTELMW_SHUTDOWN_TIMEOUT", "x"),
])
def test_invalid_configuration_raises_value_error(tmp_path: Path, var: str, value: str) -> None:
    env = clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{free_port()}",
                    **{var: value})
    code = textwrap.dedent("""
        from opentelemetry import _logs, metrics, trace
        from otelmw.telemetry.setup.configuration import configure
        try:
            configure()
        except ValueError as exc:
            print("VALUE_ERROR", exc)
        else:
            print("CONFIGURED")
        print(type(trace.get_tracer_provider()).__name__,
              type(metrics.get_meter_provider()).__name__,
              type(_logs.get_logger_provider()).__name__)
    """)
    out = run_py(code, env, tmp_path).stdout.splitlines()
    assert out[0].startswith("VALUE_ERROR"), out
    assert var in out[0]  # the message names the variable
    assert value.split(",")[-1] in out[0]  # ... and the offending value
    assert "expected" in out[0] or "is not one of" in out[0]  # ... and what is allowed
    near = {"allx": "all", "ture": "true"}.get(value)
    if near:  # ... and the value probably meant
        assert out[0].endswith(f"did you mean {near!r}?"), out[0]
    # nothing was installed half-way: the global providers are still the API's proxies
    assert all(x.lstrip("_").startswith("Proxy") for x in out[1].split()), out[1]


def test_configure_is_idempotent(rx: OtlpReceiver, tmp_path: Path) -> None:
    env = clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint)
    code = textwrap.dedent("""
        import json
        from otelmw.core.pipeline import get_pipeline
        from otelmw.telemetry.setup import configuration

        first = configuration.configure()
        second = configuration.configure("another-name")
        third = configuration.configure()
        pipe = get_pipeline()
        out = pipe.run_llm({"model": "m-1", "messages": []},
                           lambda req: {"id": "r1", "model": "m-1", "choices": [],
                                        "usage": {"prompt_tokens": 1, "completion_tokens": 1}},
                           provider="openai")
        print(json.dumps({
            "same": first is second is third is configuration.current(),
            "observer_same": pipe.observer is first.observer,
            "processors": len(first.tracer_provider._active_span_processor._span_processors),
            "owned": len(first.owned),
            "out": out["id"],
        }))
        first.shutdown(timeout_s=10)
    """)
    summary = summary_of(run_py(code, env, tmp_path))
    assert summary == {"same": True, "observer_same": True, "processors": 1, "owned": 3,
                       "out": "r1"}
    spans = rx.wait_for_spans(1, timeout=15)
    assert [s.name for s in spans] == ["chat m-1"]  # exactly one: no duplicate processors
    assert spans[0].resource["service.name"] == "otelmw"


def test_application_tracer_provider_is_kept(rx: OtlpReceiver, tmp_path: Path) -> None:
    # no hooks registered in this program: ask for every hook firing as a log event
    env = clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint,
                    OTELMW_HOOK_EVENTS="all")
    code = textwrap.dedent("""
        import json
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter)

        app_tp = TracerProvider(resource=Resource.create({"service.name": "the-app"}))
        memory = InMemorySpanExporter()
        app_tp.add_span_processor(SimpleSpanProcessor(memory))
        trace.set_tracer_provider(app_tp)
        before = list(app_tp._active_span_processor._span_processors)

        from otelmw.demo import DEMO_RUNTIME, ScriptedProvider, build_demo_pipeline, run_agent
        from otelmw.telemetry.setup.configuration import configure

        pipeline, _ = build_demo_pipeline()
        telemetry = configure(pipeline=pipeline)
        with trace.get_tracer("app").start_as_current_span("app-request") as app_span:
            with pipeline.turn("demo-agent", runtime_id=DEMO_RUNTIME):
                answer = run_agent(pipeline, ScriptedProvider(), "q")
        after = list(app_tp._active_span_processor._span_processors)
        spans = memory.get_finished_spans()
        result = {
            "answer": answer,
            "kept": trace.get_tracer_provider() is app_tp,
            "telemetry_tp_is_app": telemetry.tracer_provider is app_tp,
            "app_tp_owned": any(p is app_tp for p in telemetry.owned),
            "processors_unchanged": before == after,
            "names": [s.name for s in spans],
            "trace_ids": sorted({format(s.context.trace_id, "032x") for s in spans}),
            "app_trace": format(app_span.get_span_context().trace_id, "032x"),
            "agent_parent": [format(s.parent.span_id, "016x") for s in spans
                             if s.name.startswith("invoke_agent")],
            "app_span": format(app_span.get_span_context().span_id, "016x"),
        }
        telemetry.shutdown(timeout_s=10)
        print(json.dumps(result))
    """)
    r = summary_of(run_py(code, env, tmp_path))
    assert r["answer"] == ANSWER
    assert r["kept"] and r["telemetry_tp_is_app"]
    assert not r["app_tp_owned"]
    assert r["processors_unchanged"]
    assert r["names"].count("chat demo-model-1") == 4
    assert "invoke_agent demo-agent" in r["names"] and "app-request" in r["names"]
    assert r["trace_ids"] == [r["app_trace"]]  # otelmw spans joined the app's trace
    assert r["agent_parent"] == [r["app_span"]]
    # otelmw's own providers for logs/metrics export; the app's traces are not touched
    logs = rx.wait_for_logs(1, timeout=15)
    assert {log.trace_id for log in logs} == {r["app_trace"]}
    rx.wait_for_metric("gen_ai.client.operation.duration", timeout=15)
    assert rx.request_count("traces") == 0


def _blackhole_or_closed(rx: OtlpReceiver, protocol: str, target: str) -> str:
    if target == "closed":
        return f"http://127.0.0.1:{free_port()}"
    rx.mode = "blackhole"
    return endpoint_for(rx, protocol)


@pytest.mark.parametrize("target", ["blackhole", "closed"])
@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_shutdown_is_bounded_on_a_dead_collector(rx: OtlpReceiver, tmp_path: Path,
                                                 protocol: str, target: str) -> None:
    env = clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=_blackhole_or_closed(
        rx, protocol, target), OTEL_EXPORTER_OTLP_PROTOCOL=protocol, T_SHUTDOWN_S="2")
    t0 = time.monotonic()
    proc = run_py(PROGRAM, env, tmp_path)
    wall = time.monotonic() - t0
    summary = summary_of(proc)
    assert_program_worked(summary)
    assert summary["shutdown_s"] < 3.0, summary  # one 2 s deadline for all three signals
    assert summary["shutdown_ok"] is False  # the deadline hit: data abandoned, not hung
    assert "abandoned" in proc.stderr
    assert wall < 15, f"process took {wall:.1f}s to exit"
    if target == "blackhole":
        assert rx.request_count() >= 1  # the exporter really was stuck on our receiver
        assert rx.accepted_count() == 0


def test_process_exit_is_bounded_without_explicit_shutdown(rx: OtlpReceiver,
                                                           tmp_path: Path) -> None:
    env = clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=_blackhole_or_closed(
        rx, "grpc", "blackhole"), T_NO_SHUTDOWN="1", OTELMW_SHUTDOWN_TIMEOUT="1")
    t0 = time.monotonic()
    proc = run_py(PROGRAM, env, tmp_path)
    wall = time.monotonic() - t0
    assert_program_worked(summary_of(proc))
    assert wall < 15, f"process took {wall:.1f}s to exit"
    rx.wait_for(lambda: rx.request_count() >= 1, timeout=5)  # the atexit flush did run


@pytest.mark.parametrize("explicit_dir", [True, False])
def test_no_endpoint_goes_to_embedded_store(tmp_path: Path, explicit_dir: bool) -> None:
    from otelmw.cli.views import spans_from_requests
    from otelmw.telemetry.store.readers import read_requests

    store = tmp_path / "store" if explicit_dir else tmp_path / ".otelmw"
    extra = {"OTELMW_DATA_DIR": str(store)} if explicit_dir else {}
    env = clean_env(tmp_path, **extra)
    assert_program_worked(summary_of(run_py(PROGRAM, env, tmp_path)))
    for signal in ("traces", "logs", "metrics"):
        assert list(store.glob(f"{signal}-*.jsonl")), f"no {signal} in {store}"
    if explicit_dir:
        assert not (tmp_path / ".otelmw").exists()

    spans = list(spans_from_requests(read_requests("traces", store)))
    assert len(spans) == 2 * SPANS_PER_TURN
    names = [s.name for s in spans]
    assert names.count("invoke_agent demo-agent") == 2
    assert names.count("chat demo-model-1") == 8
    assert {s.service for s in spans} == {"configure-test"}
    span_ids = {s.span_id for s in spans}
    trace_ids = {s.trace_id for s in spans}
    assert len(trace_ids) == 2
    assert all(s.parent_id in span_ids for s in spans if s.parent_id)

    events = set()
    for req in read_requests("logs", store):
        for rl in req["resourceLogs"]:
            for sl in rl["scopeLogs"]:
                for rec in sl["logRecords"]:
                    events.add(rec["eventName"])
                    assert rec["traceId"] in trace_ids and rec["spanId"] in span_ids
    assert {"otelmw.hook.pre_api_request", "otelmw.hook.post_tool_call"} <= events
    metric_names = {m["name"] for req in read_requests("metrics", store)
                    for rm in req["resourceMetrics"] for sm in rm["scopeMetrics"]
                    for m in sm["metrics"]}
    assert {"gen_ai.client.operation.duration", "otelmw.middleware.duration"} <= metric_names


# What configure() and a turn may rebind at module level: process-wide runtime state,
# each named as such where it lives. Settings are handed down by constructor instead.
RUNTIME_STATE = {"otelmw.telemetry.setup.configuration._current",
                 "otelmw.telemetry.export.process_exit._flush",
                 "otelmw.telemetry.setup.context._installed",
                 "otelmw.telemetry.content.digests._mac"}
REBINDS = textwrap.dedent("""
    import json, sys
    import otelmw.demo, otelmw.telemetry.setup.configuration

    def module_globals():
        # Each module once, under its own name (not under an old path kept for it).
        return {f"{m}.{k}": v for m, mod in list(sys.modules.items())
                if (m == "otelmw" or m.startswith("otelmw.")) and mod.__name__ == m
                for k, v in vars(mod).items()
                if not (k.startswith("__") and k.endswith("__"))}

    before = module_globals()
    from otelmw.demo import DEMO_RUNTIME, ScriptedProvider, build_demo_pipeline, run_agent
    pipeline, _ = build_demo_pipeline()
    telemetry = otelmw.telemetry.setup.configuration.configure("rebinds", pipeline=pipeline)
    with pipeline.turn("demo-agent", session_id="s-1", runtime_id=DEMO_RUNTIME):
        run_agent(pipeline, ScriptedProvider(), "weather?")
    telemetry.shutdown()
    after = module_globals()
    print(json.dumps(sorted(k for k, v in before.items() if k in after and after[k] is not v)))
""")


def test_configure_rebinds_no_module_global_but_the_named_runtime_state(
        tmp_path: Path) -> None:
    rebound = set(summary_of(run_py(REBINDS, clean_env(tmp_path), tmp_path)))
    assert rebound <= RUNTIME_STATE, rebound - RUNTIME_STATE


def test_the_propagate_threads_argument_wins_over_the_environment(tmp_path: Path) -> None:
    code = textwrap.dedent("""
        import json
        from otelmw.config import settings as cfg
        from otelmw.telemetry.setup.context import threads_instrumented
        from otelmw.telemetry.setup.configuration import configure
        telemetry = configure("threads", propagate_threads=False)
        print(json.dumps([telemetry.settings[cfg.NO_THREAD_PROPAGATION],
                          threads_instrumented()]))
        telemetry.shutdown()
    """)
    assert summary_of(run_py(code, clean_env(tmp_path), tmp_path)) == [True, False]

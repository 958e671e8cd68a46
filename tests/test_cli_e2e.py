"""The ``otelmw`` command line, end to end, in real subprocesses:
``demo`` (offline) → ``traces list/show`` → ``replay`` to a real OTLP receiver,
and ``run`` instrumenting a program that never imports otelmw."""

from __future__ import annotations

import datetime
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from _support.cli import TRACE_LINE, ok, otelmw, pythonpath, waterfall_rows
from _support.components import clean_env
from _support.otlp_receiver import OtlpReceiver, free_port

from otelmw.cli.views import SpanView, spans_from_requests
from otelmw.telemetry.store.readers import read_requests


def stored_spans(store: Path) -> list[SpanView]:
    return list(spans_from_requests(read_requests("traces", store)))


def depth_of(span: SpanView, by_id: dict[str, SpanView]) -> int:
    depth = 0
    while span.parent_id and span.parent_id in by_id:
        span = by_id[span.parent_id]
        depth += 1
    return depth


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One offline ``otelmw demo`` run, with every socket connect refused."""
    root = tmp_path_factory.mktemp("demo")
    offline = root / "offline"
    offline.mkdir()
    (offline / "sitecustomize.py").write_text(textwrap.dedent("""
        import socket

        def _refuse(self, *args, **kwargs):
            raise OSError("network disabled by the test")

        socket.socket.connect = _refuse
        socket.socket.connect_ex = _refuse
    """))
    store = root / "store"
    env = clean_env(root, OTELMW_DATA_DIR=str(store), PYTHONPATH=pythonpath(offline))
    proc = ok(otelmw("demo", env=env, cwd=root))
    return {"root": root, "store": store, "env": env, "proc": proc}


def test_demo_runs_offline_prints_trees_and_writes_the_store(demo_store: dict[str, Any]) -> None:
    out = demo_store["proc"].stdout
    assert "answer: Lisbon is sunny; ZZZZ is unknown." in out
    assert out.count("invoke_agent demo-agent") == 2
    assert "chat demo-model-1" in out
    for tool in ("get_weather", "get_stock", "calculate"):
        assert f"execute_tool {tool}" in out
    for outcome in ("rewritten", "passed", "short_circuit", "failed_before_next"):
        assert f"outcome={outcome}" in out, outcome
    assert "[ERROR]" in out
    assert "error=ticker 'ZZZZ' not found" in out  # vendor error normalized
    assert "error.type=tool_error" in out
    assert "error.type=builtins.ZeroDivisionError" in out  # a raising tool
    assert "1 middleware failure absorbed (fail-open)" in out
    assert f"stored in {demo_store['store'].resolve()}" in out
    assert "demo guard failed once before next_call" in demo_store["proc"].stderr
    assert "network disabled" not in demo_store["proc"].stderr

    store: Path = demo_store["store"]
    for signal in ("traces", "logs", "metrics"):
        assert list(store.glob(f"{signal}-*.jsonl")), signal
    assert not (demo_store["root"] / ".otelmw").exists()
    printed = [m.group(1) for m in map(TRACE_LINE.match, out.splitlines()) if m]
    spans = stored_spans(store)
    assert sorted(printed) == sorted({s.trace_id for s in spans})
    assert len(spans) == 44
    # the printed trees show exactly the stored spans, each at its depth
    by_id = {s.span_id: s for s in spans}
    assert sorted(waterfall_rows(out)) == sorted((depth_of(s, by_id), s.name) for s in spans)


def _list_rows(stdout: str) -> list[list[str]]:
    """The cells of ``traces list`` output (columns are two or more spaces apart)."""
    return [re.split(r"\s{2,}", line.strip()) for line in stdout.splitlines() if line.strip()]


def test_traces_list_shows_the_demo_traces(demo_store: dict[str, Any]) -> None:
    spans = stored_spans(demo_store["store"])
    by_trace: dict[str, list[SpanView]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    newest = sorted(by_trace, key=lambda t: min(s.start_ns for s in by_trace[t]), reverse=True)
    # via OTELMW_DATA_DIR ...
    proc = ok(otelmw("traces", "list", env=demo_store["env"], cwd=demo_store["root"]))
    header, *rows = _list_rows(proc.stdout)
    assert header == ["STARTED", "SERVICE", "ROOT SPAN", "SPANS", "ERRORS", "DURATION",
                      "TRACE ID"]
    assert [r[-1] for r in rows] == newest  # newest first
    for started, service, root, n, errors, duration, tid in rows:
        mine = by_trace[tid]
        first = min(s.start_ns for s in mine)
        local = datetime.datetime.fromtimestamp(first / 1e9).strftime("%Y-%m-%d %H:%M:%S.%f")
        assert started == local[:-3]  # local time, to the millisecond
        assert service == "otelmw-demo"
        assert root == "invoke_agent demo-agent"
        assert int(n) == len(mine) == 22
        assert int(errors) == sum(s.status == "ERROR" for s in mine) > 0
        took = (max(s.end_ns for s in mine) - first) / 1e6
        assert duration.endswith("ms")
        assert float(duration[:-2]) == pytest.approx(took, abs=0.06)
    # --limit N means N: the newest one
    proc = ok(otelmw("traces", "list", "--limit", "1", env=demo_store["env"],
                     cwd=demo_store["root"]))
    assert [r[-1] for r in _list_rows(proc.stdout)[1:]] == newest[:1]
    for bad in ("0", "-3", "x"):
        proc = otelmw("traces", "list", "--limit", bad, env=demo_store["env"],
                      cwd=demo_store["root"])
        assert proc.returncode == 2, bad
        assert "--limit" in proc.stderr and "Traceback" not in proc.stderr
    # ... and via --data-dir from anywhere, before or after the action
    env = clean_env(demo_store["root"])
    for args in (["traces", "--data-dir", str(demo_store["store"])],
                 ["traces", "list", "--data-dir", str(demo_store["store"])],
                 ["traces", "--data-dir", str(demo_store["store"]), "list", "-n", "5"]):
        proc = ok(otelmw(*args, env=env, cwd=demo_store["root"]))
        assert [r[-1] for r in _list_rows(proc.stdout)[1:]] == newest, args
    empty = demo_store["root"] / "empty"
    empty.mkdir(exist_ok=True)
    proc = ok(otelmw("traces", "list", env=env, cwd=empty))
    assert "no stored traces" in proc.stdout


def test_traces_show_prints_the_whole_tree(demo_store: dict[str, Any]) -> None:
    spans = stored_spans(demo_store["store"])
    by_id = {s.span_id: s for s in spans}
    for tid in sorted({s.trace_id for s in spans}):
        mine = [s for s in spans if s.trace_id == tid]
        proc = ok(otelmw("traces", "show", tid[:10], env=demo_store["env"],
                         cwd=demo_store["root"]))
        lines = proc.stdout.splitlines()
        assert lines[0] == f"trace {tid}"
        assert waterfall_rows(proc.stdout)[0] == (0, "invoke_agent demo-agent")
        assert sorted(waterfall_rows(proc.stdout)) == sorted((depth_of(s, by_id), s.name)
                                                             for s in mine)
        assert len(waterfall_rows(proc.stdout)) == len(mine) == 22
    proc = otelmw("traces", "show", "deadbeef", env=demo_store["env"], cwd=demo_store["root"])
    assert proc.returncode == 1
    assert "no stored trace 'deadbeef'" in proc.stderr
    proc = otelmw("traces", "show", env=demo_store["env"], cwd=demo_store["root"])
    assert proc.returncode == 2
    assert "TRACE_ID" in proc.stderr


def _received_view(rx: OtlpReceiver) -> dict[str, tuple[Any, ...]]:
    return {s.span_id: (s.trace_id, s.parent_span_id or "", s.name, s.attributes,
                        {1: "OK", 2: "ERROR"}.get(s.status_code, ""), s.start_ns, s.end_ns,
                        s.resource.get("service.name"))
            for s in rx.spans()}


def _stored_view(store: Path) -> dict[str, tuple[Any, ...]]:
    return {s.span_id: (s.trace_id, s.parent_id, s.name, s.attributes, s.status, s.start_ns,
                        s.end_ns, s.service)
            for s in stored_spans(store)}


def _stored_events(store: Path) -> set[str]:
    return {rec["eventName"] for req in read_requests("logs", store)
            for rl in req["resourceLogs"] for sl in rl["scopeLogs"] for rec in sl["logRecords"]}


def _count_records(store: Path, signal: str) -> int:
    if signal == "logs":
        return sum(len(sl.get("logRecords", [])) for req in read_requests("logs", store)
                   for rl in req["resourceLogs"] for sl in rl["scopeLogs"])
    return sum(len(sm.get("metrics", [])) for req in read_requests("metrics", store)
               for rm in req["resourceMetrics"] for sm in rm["scopeMetrics"])


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_replay_sends_the_store_intact(demo_store: dict[str, Any], protocol: str) -> None:
    store: Path = demo_store["store"]
    expected = _stored_view(store)
    assert len(expected) == 44
    with OtlpReceiver() as rx:
        endpoint = rx.grpc_endpoint if protocol == "grpc" else rx.http_endpoint
        args = ["replay", "--endpoint", endpoint, "--data-dir", str(store)]
        if protocol == "grpc":
            args[1:1] = ["--protocol", "grpc"]
        proc = ok(otelmw(*args, env=clean_env(demo_store["root"]), cwd=demo_store["root"]))
        rx.wait_for_spans(len(expected), timeout=15)
        n_logs = _count_records(store, "logs")
        rx.wait_for_logs(n_logs, timeout=15)
        received = _received_view(rx)
        wire = "grpc" if protocol == "grpc" else "http"
        assert rx.accepted_count(protocol=wire) == rx.request_count()
        assert len(rx.spans()) == len(expected)  # nothing duplicated
        assert len(rx.logs()) == n_logs
        assert len(rx.metrics()) == _count_records(store, "metrics")
        assert {x.event_name for x in rx.logs()} == _stored_events(store)
        assert {x.trace_id for x in rx.logs()} == {v[0] for v in expected.values()}
    assert "traces: 1 request(s)" in proc.stdout
    assert received == expected  # ids, parent links, names, attributes, status, times


def test_replay_to_a_dead_endpoint_fails_cleanly(demo_store: dict[str, Any]) -> None:
    proc = otelmw("replay", "--endpoint", f"http://127.0.0.1:{free_port()}", "--data-dir",
                  str(demo_store["store"]), env=clean_env(demo_store["root"]),
                  cwd=demo_store["root"])
    assert proc.returncode == 1
    assert "otelmw: replay failed" in proc.stderr
    assert "Traceback" not in proc.stderr


MYMOD = textwrap.dedent("""
    import json


    def call_model(**kwargs):
        return {"id": "chatcmpl-e2e", "object": "chat.completion", "model": kwargs["model"],
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                    "role": "assistant", "content": None, "tool_calls": [{
                        "id": "call_e2e", "type": "function", "function": {
                            "name": "add", "arguments": json.dumps({"a": 1, "b": 2})}}]}}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}}


    def dispatch(tool_name, args, tool_call_id=None):
        if tool_name == "add":
            return {"sum": args["a"] + args["b"]}
        raise KeyError(tool_name)
""")

SCRIPT = textwrap.dedent("""
    import json
    import sys
    from pathlib import Path

    from opentelemetry import trace  # the program uses the API only, never otelmw

    import mymod

    # otelmw was loaded by the bootstrap sitecustomize before this line ran
    assert "otelmw.autoinstrument" in sys.modules, "otelmw run bootstrap did not load"
    Path("ran.marker").write_text("1")
    with trace.get_tracer("app").start_as_current_span("app-main"):
        reply = mymod.call_model(model="gpt-e2e", messages=[{"role": "user", "content": "1+2"}])
        call = reply["choices"][0]["message"]["tool_calls"][0]
        out = mymod.dispatch(call["function"]["name"],
                             json.loads(call["function"]["arguments"]),
                             tool_call_id=call["id"])
    print("RESULT", json.dumps(out), type(mymod.call_model).__name__)
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
""")

WRAP = "mymod:call_model=llm,mymod:dispatch=tool"


def rx_logs_of(logs: list[Any], event_name: str) -> list[Any]:
    return [x for x in logs if x.event_name == event_name]


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    (tmp_path / "mymod.py").write_text(MYMOD)
    (tmp_path / "script.py").write_text(SCRIPT)
    return tmp_path


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_run_instruments_a_program_that_never_imports_otelmw(app_dir: Path,
                                                             protocol: str) -> None:
    with OtlpReceiver() as rx:
        env = clean_env(app_dir, OTELMW_WRAP=WRAP, OTEL_SERVICE_NAME="wrapped-app",
                        OTELMW_HOOK_EVENTS="all",  # no hooks registered: log every firing
                        OTEL_EXPORTER_OTLP_PROTOCOL=protocol,
                        OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint if protocol == "grpc"
                        else rx.http_endpoint)
        proc = otelmw("run", "--", sys.executable, "script.py", "3", env=env, cwd=app_dir)
        assert proc.returncode == 3, proc.stderr  # the script's own exit code
        assert 'RESULT {"sum": 3} FunctionWrapper' in proc.stdout
        spans = rx.wait_for_spans(3, timeout=15)
        rx.wait_for(lambda: bool(rx.logs("otelmw.hook.post_tool_call")), timeout=15)
        logs = rx.logs()
        rx.wait_for_metric("gen_ai.execute_tool.duration", timeout=15)
    by_name = {s.name: s for s in spans}
    assert sorted(by_name) == ["app-main", "chat gpt-e2e", "execute_tool add"]
    root, chat, tool = by_name["app-main"], by_name["chat gpt-e2e"], by_name["execute_tool add"]
    assert root.parent_span_id is None
    assert chat.trace_id == tool.trace_id == root.trace_id
    assert chat.parent_span_id == root.span_id
    assert tool.parent_span_id == root.span_id
    assert chat.kind == 3
    assert chat.attributes["gen_ai.request.model"] == "gpt-e2e"
    assert chat.attributes["gen_ai.response.id"] == "chatcmpl-e2e"
    assert chat.attributes["gen_ai.usage.input_tokens"] == 11
    assert tool.attributes["gen_ai.tool.call.id"] == "call_e2e"
    assert tool.attributes["otelmw.result.success"] is True
    assert {s.resource["service.name"] for s in spans} == {"wrapped-app"}
    assert {x.trace_id for x in logs} == {root.trace_id}
    assert {x.event_name for x in logs} >= {"otelmw.hook.pre_api_request",
                                            "otelmw.hook.pre_tool_call",
                                            "otelmw.hook.post_tool_call"}
    assert {x.span_id for x in rx_logs_of(logs, "otelmw.hook.pre_tool_call")} == {tool.span_id}
    assert (app_dir / "ran.marker").exists()
    assert not (app_dir / ".otelmw").exists()


def test_run_without_endpoint_keeps_traces_in_the_store(app_dir: Path) -> None:
    # the environment already has a sitecustomize: otelmw's bootstrap must chain to it
    user_site = app_dir / "usersite"
    user_site.mkdir()
    (user_site / "sitecustomize.py").write_text(
        "import os\nos.environ['USER_SITECUSTOMIZE'] = 'ran'\n")
    env = clean_env(app_dir, OTELMW_WRAP=WRAP, OTELMW_DATA_DIR=str(app_dir / "store"),
                    PYTHONPATH=pythonpath(user_site))
    code = "import os, runpy; print('USER', os.environ.get('USER_SITECUSTOMIZE')); " \
           "runpy.run_path('script.py', run_name='__main__')"
    proc = otelmw("run", "--", sys.executable, "-c", code, env=env, cwd=app_dir)
    assert proc.returncode == 0, proc.stderr
    assert "USER ran" in proc.stdout
    assert 'RESULT {"sum": 3} FunctionWrapper' in proc.stdout
    spans = stored_spans(app_dir / "store")
    assert sorted(s.name for s in spans) == ["app-main", "chat gpt-e2e", "execute_tool add"]
    [tid] = {s.trace_id for s in spans}
    listed = ok(otelmw("traces", "list", env=env, cwd=app_dir)).stdout
    assert listed.splitlines()[1].split()[-1] == tid
    shown = ok(otelmw("traces", "show", tid, env=env, cwd=app_dir)).stdout
    assert waterfall_rows(shown) == [(0, "app-main"), (1, "chat gpt-e2e"),
                                     (1, "execute_tool add")]


@pytest.mark.parametrize(("var", "value", "message"), [
    ("OTELMW_WRAP", "mymod:call_model=llm,mymod",
     "OTELMW_WRAP='mymod:call_model=llm,mymod': entry 'mymod'"),
    ("OTELMW_WRAP", "mymod:dispatch=toolz",
     "OTELMW_WRAP='mymod:dispatch=toolz': entry 'mymod:dispatch=toolz': expected "
     "module:Qual.name=llm|tool; did you mean 'tool'?"),
    ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "ALL",
     "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT='ALL'"),
    ("OTEL_TRACES_EXPORTER", "zipkin", "OTEL_TRACES_EXPORTER"),
])
def test_run_with_bad_configuration_exits_2(app_dir: Path, var: str, value: str,
                                            message: str) -> None:
    env = clean_env(app_dir, **{var: value})
    proc = otelmw("run", "--", sys.executable, "script.py", env=env, cwd=app_dir)
    assert proc.returncode == 2
    assert proc.stderr.startswith("otelmw: error: ")
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (app_dir / "ran.marker").exists()  # the program was not started


@pytest.mark.parametrize("args", [["run"], ["run", "--"]])
def test_run_without_command_exits_2(tmp_path: Path, args: list[str]) -> None:
    proc = otelmw(*args, env=clean_env(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2
    assert "needs a COMMAND" in proc.stderr


def test_run_with_a_missing_wrap_target_still_runs_the_program(app_dir: Path) -> None:
    env = clean_env(app_dir, OTELMW_WRAP="mymod:no_such_function=llm",
                    OTELMW_DATA_DIR=str(app_dir / "store"))
    proc = otelmw("run", "--", sys.executable, "script.py", "5", env=env, cwd=app_dir)
    assert proc.returncode == 5
    assert "could not wrap mymod:no_such_function" in proc.stderr
    assert 'RESULT {"sum": 3} function' in proc.stdout


def test_run_with_a_missing_program_exits_127(tmp_path: Path) -> None:
    proc = otelmw("run", "--", str(tmp_path / "no-such-program"), env=clean_env(tmp_path),
                  cwd=tmp_path)
    assert proc.returncode == 127
    assert "cannot run" in proc.stderr

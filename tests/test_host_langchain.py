"""LangChain/LangGraph instrumentor against real ``create_agent`` and ``StateGraph`` runs,
fully offline.

Every scenario runs in a fresh subprocess (``tests/langchain_scripts/driver.py``, or an
unmodified LangChain program under ``otelmw run``) whose model is ``ChatOpenAI`` talking
to a ``ScriptedLLMServer`` (call the tool, then answer) and whose telemetry goes through
``otelmw.telemetry.configure()`` to a real ``OtlpReceiver``. Assertions are on what the
receiver, the server and the tools got. Marked ``host("langchain")``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support.digest_key import deployment_key
from _support.otlp_receiver import OtlpReceiver, ReceivedSpan
from _support.scripted_llm import ScriptedLLMServer

pytestmark = pytest.mark.host("langchain")

SCRIPTS = Path(__file__).resolve().parent / "langchain_scripts"
CITY = "Paris"
REWRITTEN = "Rewritten-City"
TIMEOUT = 150
INTERNAL, ERROR = 1, 2
MODES = ["invoke", "ainvoke", "stream", "astream"]


@pytest.fixture()
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(tool_first=True, tool_args={"get_weather": {"city": CITY},
                                                       "broken": {"city": CITY}}) as srv:
        yield srv


@pytest.fixture()
def rx() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as receiver:
        yield receiver


def child_env(tmp_path: Path, base_url: str, rx: OtlpReceiver) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "OTELMW_", "OPENAI_", "LANGSMITH_", "LANGCHAIN_"))}
    env.update(OPENAI_BASE_URL=base_url, OPENAI_API_KEY="dummy", OPENAI_MAX_RETRIES="0",
               OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint, OTELMW_HOME=str(tmp_path / "home"),
               OTELMW_DIGEST_KEY=deployment_key().decode(),
               OTEL_SERVICE_NAME="langchain-host-test", PYTHONUNBUFFERED="1",
               LC_NOTES=str(tmp_path / "notes.jsonl"))
    return env


def drive(spec: dict[str, Any], server: ScriptedLLMServer, rx: OtlpReceiver,
          tmp_path: Path) -> dict[str, Any]:
    """Run one driver scenario; returns its RESULT (telemetry is flushed on exit)."""
    proc = subprocess.run([sys.executable, str(SCRIPTS / "driver.py"), json.dumps(spec)],
                          env=child_env(tmp_path, server.base_url, rx), cwd=tmp_path,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")][-1]
    out: dict[str, Any] = json.loads(line.removeprefix("RESULT "))
    assert "error" not in out, out
    return out


def plugin_notes(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "notes.jsonl"
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def one_trace(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    assert len({s.trace_id for s in spans}) == 1, [(s.name, s.trace_id) for s in spans]
    return sorted(spans, key=lambda s: s.start_ns)


def turn_tree(spans: list[ReceivedSpan], agent: str) -> tuple[ReceivedSpan, list[ReceivedSpan]]:
    """The one root ``invoke_agent`` span and the operation spans under it (layer spans
    of otelmw's middleware sit under their call's span)."""
    spans = one_trace(spans)
    roots = [s for s in spans if s.parent_span_id is None]
    assert [r.name for r in roots] == [f"invoke_agent {agent}"], [s.name for s in spans]
    root = roots[0]
    assert root.kind == INTERNAL
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == agent
    assert root.attributes["otelmw.runtime.id"] == "langchain"
    children = [s for s in spans if s.parent_span_id == root.span_id]
    return root, children


def operations(spans: list[ReceivedSpan]) -> list[str]:
    return [s.name for s in spans if s.name.startswith(("chat ", "execute_tool "))]


def sent_tool_call_ids(server: ScriptedLLMServer) -> list[str]:
    return [c["id"] for r in server.requests for m in r.body["messages"]
            if m.get("role") == "assistant" for c in m.get("tool_calls") or ()]


def tool_messages(server: ScriptedLLMServer) -> list[dict[str, Any]]:
    """The tool results the model was sent back (the last request's)."""
    return [m for m in server.requests[-1].body["messages"] if m.get("role") == "tool"]


def assert_chat_span_per_request(chats: list[ReceivedSpan], server: ScriptedLLMServer,
                                 streamed: bool = False) -> None:
    """Exactly one ``chat`` span per provider request: the response ids the server gave
    are the spans' ids, each once (the openai SDK layer below only enriches). A stream
    reports usage only when asked (langchain-openai does not by default)."""
    assert len(chats) == len(server.requests)
    assert [c.attributes.get("gen_ai.response.id") for c in chats] == [
        r.response_id for r in server.requests]
    for c in chats:
        assert c.attributes["gen_ai.provider.name"] == "openai"
        assert c.attributes["gen_ai.request.model"] == "scripted-model"
        assert c.attributes["server.address"] == "127.0.0.1"
        assert c.attributes["gen_ai.response.finish_reasons"]
        if not streamed:
            assert c.attributes["gen_ai.usage.input_tokens"] > 0


# ------------------------------------------------------------------ agent turns
@pytest.mark.parametrize("mode", MODES)
def test_an_agent_run_is_one_trace_with_chat_and_tool_spans(
        mode: str, server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": mode}, server, rx, tmp_path)
    assert out["messages"][-1]["content"] == f"done: sunny in {CITY}"
    assert out["tool_args"] == [{"tool": "get_weather", "city": CITY}]
    assert out["failures"] == {}
    if mode in ("stream", "astream"):
        assert out["chunks"] > 2  # the model's tokens arrived as message chunks
    rx.wait_for(lambda: len(rx.spans()) >= 4)
    root, children = turn_tree(rx.spans(), "weather")
    assert operations(children) == ["chat scripted-model", "execute_tool get_weather",
                                    "chat scripted-model"]
    assert root.start_ns <= children[0].start_ns and root.end_ns >= children[-1].end_ns
    chats = [s for s in children if s.name.startswith("chat ")]
    assert_chat_span_per_request(chats, server, streamed=mode in ("stream", "astream"))
    if mode in ("stream", "astream"):
        assert all(c.attributes["gen_ai.request.stream"] is True for c in chats)
    (tool,) = [s for s in children if s.name.startswith("execute_tool ")]
    a = tool.attributes
    assert a["gen_ai.tool.call.id"] == sent_tool_call_ids(server)[0]
    assert a["otelmw.result.success"] is True and a["otelmw.result.status"] == "ok"
    assert a["otelmw.result.metadata.langchain.status"] == "success"
    assert a["otelmw.result.raw.type"] == "langchain_core.messages.tool.ToolMessage"
    assert a["otelmw.result.raw.digest"].startswith("sha256-keyed:")
    assert a["otelmw.result.content.digest"].startswith("sha256-keyed:")
    assert tool.start_ns > chats[0].end_ns - 1 and tool.end_ns < chats[1].start_ns + 1
    leaked = [s.name for s in rx.spans() if "CANARY-PROMPT" in json.dumps(s.attributes)]
    assert leaked == []  # content is not captured by default


def test_the_users_plugin_changes_what_the_model_and_the_tool_receive(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": "invoke", "plugin": ["rewrite", "wrap", "observe"]}, server, rx,
                tmp_path)
    assert [r.body.get("temperature") for r in server.requests] == [0.25, 0.25]
    assert out["tool_args"] == [{"tool": "get_weather", "city": REWRITTEN}]
    assert tool_messages(server)[0]["content"] == f"sunny in {REWRITTEN}"
    notes = plugin_notes(tmp_path)
    assert {"what": "wrapped", "tool": "get_weather", "args": {"city": REWRITTEN}} in notes
    assert {"what": "post_tool_call", "tool": "get_weather", "success": True, "error": None,
            "status": "ok"} in notes
    rx.wait_for(lambda: len(rx.spans()) >= 4)
    spans = one_trace(rx.spans())
    by_id = {s.span_id: s for s in spans}
    layers = [s for s in spans if s.name.startswith(("llm_request ", "tool_request ",
                                                     "tool_execution "))]
    assert sorted({s.name for s in layers}) == [
        "llm_request lc-plugin.pin_temperature", "tool_execution lc-plugin.pass_through",
        "tool_request lc-plugin.rewrite_city"]
    for layer in layers:  # each layer span sits under its call's span
        parent = by_id[layer.parent_span_id or ""]
        assert parent.name.startswith("execute_tool " if layer.name.startswith("tool_")
                                      else "chat ")
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert [c.attributes["gen_ai.request.temperature"] for c in chats] == [0.25, 0.25]


@pytest.mark.parametrize("mode", ["invoke", "astream"])
def test_a_user_middleware_runs_exactly_as_without_otelmw(
        mode: str, rx: OtlpReceiver, tmp_path: Path) -> None:
    """Regression of the official instrumentation's bug (it patched ``AgentMiddleware``
    and every user hook stopped running): with otelmw the user's ``before_agent``,
    retrying ``wrap_model_call`` and ``wrap_tool_call`` run as without it, the model and
    the tool get the same, the run answers the same; each retry attempt is a ``chat``
    span of its own."""
    runs: dict[bool, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    for with_otelmw in (False, True):
        with ScriptedLLMServer(tool_first=True, tool_args={"get_weather": {"city": CITY}}
                               ) as srv:
            out = drive({"mode": mode, "otelmw": with_otelmw, "user_middleware": True}, srv,
                        rx, tmp_path)
            runs[with_otelmw] = (out, [r.body for r in srv.requests])
    (bare, bare_bodies), (traced, traced_bodies) = runs[False], runs[True]
    assert traced["notes"] == bare["notes"] == [
        "before_agent:1", "model:1", "retry", f"tool:{json.dumps({'city': CITY})}", "model:3"]
    assert traced["messages"] == bare["messages"]
    assert traced["tool_args"] == bare["tool_args"] == [{"tool": "get_weather", "city": CITY}]
    assert traced_bodies == bare_bodies and len(bare_bodies) == 3
    rx.wait_for(lambda: len(rx.spans()) >= 5)
    _, children = turn_tree(rx.spans(), "weather")
    assert operations(children) == ["chat scripted-model", "chat scripted-model",
                                    "execute_tool get_weather", "chat scripted-model"]


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_pre_tool_call_block_answers_an_error_tool_message_without_running_the_tool(
        mode: str, server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": mode, "plugin": ["block", "observe"]}, server, rx, tmp_path)
    assert out["tool_args"] == []  # the tool never ran
    (sent,) = tool_messages(server)
    assert sent["content"] == "get_weather is blocked by policy"
    assert sent["tool_call_id"] == sent_tool_call_ids(server)[0]
    (tool_msg,) = [m for m in out["messages"] if m["type"] == "tool"]
    assert tool_msg["status"] == "error"
    rx.wait_for(lambda: len(rx.spans()) >= 4)
    _, children = turn_tree(rx.spans(), "weather")
    (tool,) = [s for s in children if s.name.startswith("execute_tool ")]
    assert tool.attributes["otelmw.result.status"] == "blocked"
    assert tool.attributes["otelmw.result.success"] is False
    assert tool.attributes["otelmw.result.metadata.otelmw.blocked"] is True
    assert tool.attributes["gen_ai.tool.call.id"] == sent["tool_call_id"]


@pytest.mark.parametrize("mode", ["invoke", "astream"])
def test_a_failing_tool_is_a_normalized_failure(
        mode: str, server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": mode, "tool": "broken", "plugin": ["observe"]}, server, rx,
                tmp_path)
    assert out["tool_args"] == [{"tool": "broken", "city": CITY}]
    (sent,) = tool_messages(server)
    assert sent["content"] == "vendor is down"  # LangChain's own error message, unchanged
    notes = plugin_notes(tmp_path)
    assert {"what": "post_tool_call", "tool": "broken", "success": False,
            "error": "vendor is down", "status": "error"} in notes
    rx.wait_for(lambda: len(rx.spans()) >= 4)
    _, children = turn_tree(rx.spans(), "weather")
    (tool,) = [s for s in children if s.name.startswith("execute_tool ")]
    assert tool.attributes["otelmw.result.success"] is False
    assert tool.attributes["otelmw.result.status"] == "error"
    assert tool.attributes["otelmw.result.metadata.langchain.status"] == "error"
    assert tool.status_code == ERROR


# ------------------------------------------------------------------ plain graphs
@pytest.mark.parametrize("mode", MODES)
def test_a_plain_state_graph_gets_the_same_spans_through_the_fallback_seams(
        mode: str, server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": mode, "graph": "plain", "plugin": ["rewrite"]}, server, rx,
                tmp_path)
    assert out["messages"][-1]["content"] == f"done: sunny in {REWRITTEN}"
    assert out["tool_args"] == [{"tool": "get_weather", "city": REWRITTEN}]
    assert [r.body.get("temperature") for r in server.requests] == [0.25, 0.25]
    rx.wait_for(lambda: len(rx.spans()) >= 4)
    _, children = turn_tree(rx.spans(), "plain-graph")
    assert operations(children) == ["chat scripted-model", "execute_tool get_weather",
                                    "chat scripted-model"]
    assert_chat_span_per_request([s for s in children if s.name.startswith("chat ")], server,
                                 streamed=mode in ("stream", "astream"))
    (tool,) = [s for s in children if s.name.startswith("execute_tool ")]
    assert tool.attributes["gen_ai.tool.call.id"] == sent_tool_call_ids(server)[0]


# ------------------------------------------------------------------ zero code
def _plugin_site(root: Path) -> Path:
    """The test plugin, really installed (a dist-info with an ``otelmw.plugins`` entry
    point) in a directory for PYTHONPATH."""
    site = root / "site"
    info = site / "otelmw_lc_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: otelmw-lc-plugin\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text("[otelmw.plugins]\nlc_plugin = lc_plugin:register\n")
    shutil.copy(SCRIPTS / "lc_plugin.py", site / "lc_plugin.py")
    return site


def test_otelmw_run_instruments_an_unmodified_program_with_the_plugin_enabled(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    beside = Path(sys.executable).with_name("otelmw")
    cmd = [str(beside)] if beside.exists() else [sys.executable, "-m", "otelmw.cli"]
    env = child_env(tmp_path, server.base_url, rx)
    env["PYTHONPATH"] = os.pathsep.join(
        x for x in (str(_plugin_site(tmp_path)), env.get("PYTHONPATH")) if x)
    env["LC_PLUGIN"] = "rewrite,wrap"
    enabled = subprocess.run([*cmd, "plugins", "enable", "lc_plugin"], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=TIMEOUT)
    assert enabled.returncode == 0, enabled.stderr
    proc = subprocess.run([*cmd, "run", "--", sys.executable, str(SCRIPTS / "plain_agent.py")],
                          env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    assert f"SYNC done: sunny in {REWRITTEN}" in proc.stdout
    assert f"ASYNC done: sunny in {REWRITTEN}" in proc.stdout
    assert [r.body.get("temperature") for r in server.requests] == [0.25] * 4
    rx.wait_for(lambda: len([s for s in rx.spans() if s.name.startswith("invoke_agent")]) >= 2
                and len(rx.spans("chat scripted-model")) >= 4)
    by_trace: dict[str, list[ReceivedSpan]] = {}
    for s in rx.spans():
        by_trace.setdefault(s.trace_id, []).append(s)
    assert len(by_trace) == 2  # one trace per run
    for spans in by_trace.values():
        _, children = turn_tree(spans, "plain")
        assert operations(children) == ["chat scripted-model", "execute_tool get_weather",
                                        "chat scripted-model"]
        assert any(s.name == "tool_execution lc_plugin.pass_through" for s in spans)
    assert len(rx.spans("chat scripted-model")) == len(server.requests) == 4


UNINSTRUMENT = """
import wrapt, langchain.agents, langchain.agents.factory as factory
from langgraph.pregel.main import Pregel
from langchain_core.tools import BaseTool
from otelmw.instrumentation.langchain import LangChainInstrumentor
targets = lambda: [langchain.agents.create_agent, factory.create_agent, vars(Pregel)["stream"],
                   vars(Pregel)["astream"], vars(BaseTool)["run"], vars(BaseTool)["arun"]]
before = targets()
LangChainInstrumentor().instrument()
print(sum(isinstance(t, wrapt.FunctionWrapper) for t in targets()))
LangChainInstrumentor().uninstrument()
print([a is b for a, b in zip(targets(), before)])
"""


def test_uninstrument_restores_every_original(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", UNINSTRUMENT], capture_output=True,
                          text=True, timeout=TIMEOUT, cwd=tmp_path,
                          env={**os.environ, "OTEL_SDK_DISABLED": "true"})
    assert proc.returncode == 0, proc.stderr
    wrapped, restored = proc.stdout.split("\n")[:2]
    assert wrapped == "6"  # the re-export of create_agent is the wrapped function
    assert restored == str([True] * 6)


def test_dependencies_are_declared_honestly() -> None:
    from opentelemetry.instrumentation.dependencies import get_dependency_conflicts

    from otelmw.instrumentation.langchain import LangChainInstrumentor

    deps = LangChainInstrumentor().instrumentation_dependencies()
    assert tuple(deps) == ("langchain >= 1.3.0, < 2",)
    assert get_dependency_conflicts(deps) is None

"""PraisonAI agents instrumentor against real ``praisonaiagents`` turns, fully offline.

Every scenario runs in a fresh subprocess (``tests/praisonai_scripts/driver.py``, or a
plain PraisonAI program under ``otelmw run``) whose agent talks to a ``ScriptedLLMServer``
(call the tool, then answer) and whose telemetry goes through
``otelmw.telemetry.configure()`` to a real ``OtlpReceiver``. Assertions are made on what
the receiver got. Marked ``host("praisonai")``: deselected in a matrix environment
without PraisonAI; elsewhere without ``praisonaiagents`` the tests skip — except under
``CI=true``, where that is a failure.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support.cli import otelmw_cmd
from _support.host_scenarios import TIMEOUT, assert_no_canary, run_scenario, scenario_env
from _support.otlp_receiver import OtlpReceiver, ReceivedSpan, free_port
from _support.scripted_llm import ScriptedLLMServer

from otelmw.telemetry.content.digests import digest

pytestmark = pytest.mark.host("praisonai")

SCRIPTS = Path(__file__).resolve().parent / "praisonai_scripts"
CITY = "CANARY-CITY-9c1e"
PROMPT = "What is the weather in Paris? CANARY-PROMPT-52d0"
CANARIES = ("CANARY-CITY", "CANARY-PROMPT", "CANARY-RESULT")
INTERNAL, CLIENT, ERROR, UNSET = 1, 3, 2, 0


@pytest.fixture()
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer.calling_tools(CITY, ("get_weather", "broken")) as srv:
        yield srv


def child_env(tmp_path: Path, base_url: str, rx: OtlpReceiver) -> dict[str, str]:
    return scenario_env(tmp_path, rx, service="praisonai-host-test", openai_base_url=base_url)


def drive(spec: dict[str, Any], server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path,
          base_url: str | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run one driver scenario; returns its RESULT (telemetry is flushed on exit)."""
    return run_scenario(SCRIPTS / "driver.py", {"prompt": PROMPT, **spec},
                        {**child_env(tmp_path, base_url or server.base_url, rx), **(env or {})},
                        tmp_path)


def traces(spans: list[ReceivedSpan]) -> dict[str, list[ReceivedSpan]]:
    out: dict[str, list[ReceivedSpan]] = {}
    for s in spans:
        out.setdefault(s.trace_id, []).append(s)
    return out


def turn_tree(spans: list[ReceivedSpan], agent: str = "Weather"
              ) -> tuple[ReceivedSpan, list[ReceivedSpan]]:
    """The one root ``invoke_agent`` span of a trace and its children (no orphans,
    no grandchildren without middleware)."""
    roots = [s for s in spans if s.parent_span_id is None]
    assert [r.name for r in roots] == [f"invoke_agent {agent}"], [s.name for s in spans]
    root = roots[0]
    assert all(s.parent_span_id == root.span_id for s in spans if s is not root), \
        [(s.name, s.parent_span_id) for s in spans]
    children = sorted((s for s in spans if s is not root), key=lambda s: s.start_ns)
    return root, children


def names(spans: list[ReceivedSpan]) -> list[str]:
    return [s.name for s in spans]


def assert_turn_root(root: ReceivedSpan, agent: str = "Weather",
                     runtime_id: str = "praisonai") -> None:
    a = root.attributes
    assert root.kind == INTERNAL
    assert a["gen_ai.operation.name"] == "invoke_agent" and a["gen_ai.agent.name"] == agent
    assert a["otelmw.runtime.id"] == runtime_id and a["otelmw.turn.id"]


def tool_call_id(messages: list[dict[str, Any]]) -> str:
    """The id of the tool call the model made (as sent back in the follow-up request)."""
    return [m for m in messages if m.get("tool_calls")][-1]["tool_calls"][0]["id"]


# --------------------------------------------------------------------- turn trees
@pytest.mark.parametrize("mode", ["chat", "achat"])
def test_turns_give_one_trace_each_with_chat_and_tool_spans(
        mode: str, server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": mode, "turns": 2}, server, rx, tmp_path)
    assert out["errors"] == [] and all(r.startswith("done: ") for r in out["results"])
    assert out["tool_calls"] == ["get_weather", "get_weather"]
    by_trace = traces(rx.spans())
    assert len(by_trace) == 2 and len(server.requests) == 4
    requests = iter(server.requests)
    for spans in by_trace.values():
        root, children = turn_tree(spans)
        assert_turn_root(root)
        assert names(children) == ["chat gpt-4o-mini", "execute_tool get_weather",
                                   "chat gpt-4o-mini"]
        first, tool, second = children
        assert first.end_ns <= tool.start_ns and tool.end_ns <= second.start_ns
        assert root.start_ns <= first.start_ns and second.end_ns <= root.end_ns
        recs = [next(requests), next(requests)]
        for chat, finish, rec in ((first, "tool_calls", recs[0]), (second, "stop", recs[1])):
            a = chat.attributes
            assert chat.kind == CLIENT and chat.status_code == UNSET
            assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "openai"
            assert a["gen_ai.request.model"] == "gpt-4o-mini"
            assert a["gen_ai.response.id"] == rec.response_id
            assert a["gen_ai.usage.input_tokens"] == rec.usage["input_tokens"]
            assert a["gen_ai.usage.output_tokens"] == rec.usage["output_tokens"]
            assert list(a["gen_ai.response.finish_reasons"]) == [finish]
            assert a["server.address"] == "127.0.0.1" and a["server.port"] == server.port
            assert a["otelmw.turn.id"] == root.attributes["otelmw.turn.id"]
        t = tool.attributes
        assert tool.kind == INTERNAL and tool.status_code == UNSET
        assert t["gen_ai.operation.name"] == "execute_tool" and t["gen_ai.tool.type"] == "function"
        assert t["gen_ai.tool.name"] == "get_weather"
        assert t["gen_ai.tool.call.id"] == tool_call_id(recs[1].body["messages"])
        assert t["otelmw.api_request.id"] == first.attributes["otelmw.api_request.id"]
        assert t["otelmw.runtime.id"] == "praisonai"  # native: normalization bypassed
        raw = {"status": "ok", "data": f"sunny in {CITY}", "note": "CANARY-RESULT-7f3a"}
        assert t["otelmw.result.success"] is True and t["otelmw.result.status"] == "ok"
        assert t["otelmw.result.raw.digest"] == digest(raw)[0] == t["otelmw.result.content.digest"]
        assert t["otelmw.result.raw.type"] == "dict" and t["otelmw.result.execution_time_ms"] > 0
    assert_no_canary(rx, CANARIES)


@pytest.mark.parametrize("mode", ["start", "run", "start_stream", "iter_stream"])
def test_start_run_and_streams_are_one_turn(mode: str, server: ScriptedLLMServer,
                                            rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": mode}, server, rx, tmp_path)
    assert out["errors"] == [] and "sunny in" in out["results"][0]
    (spans,) = traces(rx.spans()).values()
    root, children = turn_tree(spans)  # start → chat re-entrancy: one invoke_agent
    assert_turn_root(root)
    assert names(children) == ["chat gpt-4o-mini", "execute_tool get_weather",
                               "chat gpt-4o-mini"]
    assert children[-1].end_ns <= root.end_ns  # a stream's turn ends when it is consumed
    if "stream" in mode:
        assert [c.attributes["otelmw.stream.ended_by"] for c in children if c.kind == CLIENT] \
            == ["exhausted", "exhausted"]
        assert all(c.attributes["gen_ai.request.stream"] is True for c in children
                   if c.kind == CLIENT)


# ------------------------------------------------------------------ tool results
@pytest.mark.parametrize("mode", ["chat", "achat"])
def test_a_raising_tool_is_a_failed_result_on_both_paths(
        mode: str, server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": mode, "tool": "broken"}, server, rx, tmp_path)
    (spans,) = traces(rx.spans()).values()
    root, children = turn_tree(spans)
    (tool,) = [c for c in children if c.name == "execute_tool broken"]
    t = tool.attributes
    assert tool.status_code == ERROR and t["otelmw.result.success"] is False
    assert t["otelmw.result.status"] == "error" and "tool exploded" in t[
        "otelmw.result.error_message"]
    assert t["error.type"] == "praisonaiagents.errors.ToolExecutionError"
    assert t["otelmw.result.raw.type"] == "praisonaiagents.errors.ToolExecutionError"
    if mode == "chat":  # PraisonAI's sync path raises out of chat(): unchanged
        assert out["errors"] == ["praisonaiagents.errors.ToolExecutionError"]
        assert root.status_code == ERROR
        assert root.attributes["error.type"] == "praisonaiagents.errors.ToolExecutionError"
    else:  # its async path hands the model an error dict: unchanged, the turn goes on
        assert out["errors"] == [] and out["results"][0].startswith("done: ")
        tool_msg = server.requests[1].body["messages"][-1]
        assert tool_msg["role"] == "tool" and "Error executing broken" in tool_msg["content"]
        assert root.status_code == UNSET


@pytest.mark.parametrize(("mode", "vendor"), [("chat", "ok"), ("achat", "ok"),
                                              ("chat", "error"), ("achat", "error")])
def test_otelmw_normalizer_applies_for_the_declared_runtime_id(
        mode: str, vendor: str, server: ScriptedLLMServer, rx: OtlpReceiver,
        tmp_path: Path) -> None:
    out = drive({"mode": mode, "runtime_id": "acme", "normalizers": True, "vendor": vendor},
                server, rx, tmp_path)
    # otelmw's normalizer ran once; PraisonAI's registration for the same id did not
    assert out["normalized"] == ["otelmw:get_weather:acme:Weather"]
    (spans,) = traces(rx.spans()).values()
    root, children = turn_tree(spans)
    assert_turn_root(root, runtime_id="acme")
    (tool,) = [c for c in children if c.name == "execute_tool get_weather"]
    t = tool.attributes
    assert t["otelmw.runtime.id"] == "acme" and t["otelmw.result.metadata.vendor"] == "acme"
    tool_msg = server.requests[1].body["messages"][-1]
    if vendor == "ok":
        raw = {"status": "ok", "data": f"sunny in {CITY}", "note": "CANARY-RESULT-7f3a"}
        assert t["otelmw.result.success"] is True and tool.status_code == UNSET
        assert t["otelmw.result.metadata.cache_hit"] is True
        assert t["otelmw.result.raw.digest"] == digest(raw)[0]
        assert t["otelmw.result.content.digest"] == digest(f"sunny in {CITY}")[0]
        assert json.loads(tool_msg["content"]) == f"sunny in {CITY}"  # the model saw content
    else:
        assert t["otelmw.result.success"] is False and tool.status_code == ERROR
        assert t["error.type"] == "tool_error"
        assert t["otelmw.result.error_message"] == "vendor said no"
        assert json.loads(tool_msg["content"]) == "Tool Error: vendor said no"


# ------------------------------------------------------------------------- hooks
@pytest.mark.parametrize("mode", ["chat", "achat"])
def test_praisonai_hooks_become_log_records_and_change_nothing(
        mode: str, server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": mode, "hooks": True}, server, rx, tmp_path)
    events = ["before_agent", "before_llm", "before_tool", "after_tool", "after_llm",
              "after_agent"]
    assert sorted(out["hooks_seen"]) == sorted(events)  # the user's hooks still all ran
    assert out["errors"] == [] and out["results"][0].startswith("done: {")
    assert CITY in server.requests[1].body["messages"][-1]["content"]  # result unchanged
    (spans,) = traces(rx.spans()).values()
    root, children = turn_tree(spans)
    (tool,) = [c for c in children if c.kind == INTERNAL]
    logs = {x.event_name: x for x in rx.logs()}
    assert set(logs) == {f"otelmw.hook.{e}" for e in events}
    for event in events:
        rec = logs[f"otelmw.hook.{event}"]
        a = rec.attributes
        assert rec.trace_id == root.trace_id and rec.body in (None, {}, "")
        assert rec.span_id == (tool.span_id if "tool" in event else root.span_id)
        assert a["otelmw.hook.name"] == event and a["otelmw.hook.failures"] == 0
        assert a["otelmw.result.status"] == "ok"
        assert a["otelmw.turn.id"] == root.attributes["otelmw.turn.id"]
        assert a["otelmw.schema.telemetry"] == "otelmw.observer.v1"
        if "tool" in event:
            assert a["gen_ai.tool.name"] == "get_weather"
            assert a["otelmw.tool.args.digest"] == digest({"city": CITY})[0]
        else:
            assert "gen_ai.tool.name" not in a
        if "llm" in event:
            assert a["gen_ai.request.model"] == "gpt-4o-mini"
    assert_no_canary(rx, CANARIES)


@pytest.mark.parametrize("mode", ["chat", "achat"])
def test_praisonai_hook_points_it_does_not_fire_are_not_recorded(
        mode: str, server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    # no hook registered: PraisonAI's has_hooks answers False as without otelmw, so
    # PraisonAI fires none of its lifecycle points and nothing is recorded
    out = drive({"mode": mode, "has_hooks": True}, server, rx, tmp_path)
    assert out["errors"] == [] and out["results"][0].startswith("done: {")
    assert out["has_hooks"] == dict.fromkeys(
        ["before_agent", "before_llm", "before_tool", "after_tool", "after_llm",
         "after_agent"], False)
    (spans,) = traces(rx.spans()).values()
    _root, children = turn_tree(spans)
    assert [c for c in children if c.kind == INTERNAL]  # the tool call still traced
    assert [x.event_name for x in rx.logs()] == []


def test_praisonai_hook_events_none_records_nothing(server: ScriptedLLMServer,
                                                    rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": "chat"}, server, rx, tmp_path, env={"OTELMW_HOOK_EVENTS": "none"})
    assert out["errors"] == []
    assert [x.event_name for x in rx.logs()] == []


# --------------------------------------------------------------------- failures
@pytest.mark.parametrize(("mode", "failure"), [("chat", "http_500"), ("achat", "http_500"),
                                               ("chat", "refused"), ("achat", "refused")])
def test_llm_failure_returning_none_marks_the_turn_error(
        mode: str, failure: str, server: ScriptedLLMServer, rx: OtlpReceiver,
        tmp_path: Path) -> None:
    base_url = None
    if failure == "http_500":
        for _ in range(6):
            server.push_error(500)
    else:
        base_url = f"http://127.0.0.1:{free_port()}/v1"
    out = drive({"mode": mode}, server, rx, tmp_path, base_url=base_url)
    assert out["results"] == [None] and out["errors"] == []  # PraisonAI swallowed it
    (spans,) = traces(rx.spans()).values()
    root, children = turn_tree(spans)
    assert root.status_code == ERROR and root.attributes["error.type"] == "turn_failed"
    expected = "openai.InternalServerError" if failure == "http_500" else (
        "openai.APIConnectionError")
    assert children and all(c.name == "chat gpt-4o-mini" and c.status_code == ERROR
                            and c.attributes["error.type"] == expected for c in children)
    if failure == "http_500":  # each attempt PraisonAI makes is its own span
        assert len(children) == len(server.requests)


def test_instrumentation_errors_fail_open(server: ScriptedLLMServer, rx: OtlpReceiver,
                                          tmp_path: Path) -> None:
    out = drive({"mode": "chat", "break_pipeline": True}, server, rx, tmp_path)
    assert out["errors"] == [] and out["results"][0].startswith("done: {")
    assert out["tool_calls"] == ["get_weather"]  # run once, not again on the error
    assert len(server.requests) == 2
    assert out["failures"]["instrumentation:praisonai:chat"] == 2
    assert out["failures"]["instrumentation:praisonai:execute_tool"] == 1


# ------------------------------------------------------------- layers and scope
@pytest.mark.parametrize("layers", [["openai", "praisonai"], ["praisonai", "openai"]])
@pytest.mark.parametrize("mode", ["chat", "start_stream"])
def test_with_the_openai_sdk_layer_each_request_has_exactly_one_chat_span(
        layers: list[str], mode: str, server: ScriptedLLMServer, rx: OtlpReceiver,
        tmp_path: Path) -> None:
    out = drive({"mode": mode, "layers": layers}, server, rx, tmp_path)
    assert out["errors"] == []
    (spans,) = traces(rx.spans()).values()
    _, children = turn_tree(spans)
    chats = [c for c in children if c.kind == CLIENT]
    assert len(chats) == len(server.requests) == 2
    for chat, rec in zip(chats, server.requests, strict=True):
        assert chat.attributes["gen_ai.response.id"] == rec.response_id  # enriched once
        if mode == "chat":  # (PraisonAI's streams do not ask for usage)
            assert chat.attributes["gen_ai.usage.output_tokens"] == rec.usage["output_tokens"]
    assert rx.metrics("gen_ai.client.operation.duration")


def test_sdk_clients_that_are_mocks_or_proxies_keep_their_own_create(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    """PraisonAI's ``test_create_completion_accepts_response_format`` (a MagicMock SDK
    client) and a ``__getattr__`` proxy: the host call works and the mock's assertions
    hold; the proxied real request still gets its chat span."""
    out = run_scenario(SCRIPTS / "foreign_resources.py", {},
                       child_env(tmp_path, server.base_url, rx), tmp_path)
    assert out["errors"] == []
    assert out["mock_response_format"] is True
    assert out["proxy_answer"] == server.default_text
    assert len(server.requests) == 1 and out["proxy_response_id"] == \
        server.requests[0].response_id
    assert out["mock_after_uninstrument"] == ["MagicMock", 1]
    assert out["failures"] == {}
    rx.wait_for(lambda: len(rx.spans()) >= 2)
    chats = rx.spans("chat gpt-4o-mini")
    assert len(chats) == 2  # the mocked request and the proxied one
    assert [c.attributes.get("gen_ai.response.id") for c in chats].count(
        server.requests[0].response_id) == 1


def test_otelmw_run_instruments_a_program_that_never_imports_otelmw(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    proc = subprocess.run([*otelmw_cmd(), "run", "--", sys.executable,
                           str(SCRIPTS / "plain_agent.py")],
                          env=child_env(tmp_path, server.base_url, rx), cwd=tmp_path,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    assert "SYNC done: " in proc.stdout and "ASYNC done: " in proc.stdout
    rx.wait_for(lambda: len(rx.spans()) >= 8)
    by_trace = traces(rx.spans())
    assert len(by_trace) == 2
    for spans in by_trace.values():
        root, children = turn_tree(spans, agent="Plain")
        assert_turn_root(root, agent="Plain")
        assert names(children) == ["chat gpt-4o-mini", "execute_tool get_weather",
                                   "chat gpt-4o-mini"]  # otelmw_openai active: no duplicate
    assert len(rx.spans("chat gpt-4o-mini")) == len(server.requests) == 4


def test_uninstrument_restores_the_originals_and_leaves_no_trace(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": "chat", "uninstrument": True}, server, rx, tmp_path)
    assert out["not_restored"] == []  # every target and property is the original object
    assert out["patched_before"] > 0 and out["patched_after"] == 0
    assert out["after_result"].startswith("done: ")
    assert len(server.requests) == 4
    spans = rx.spans()
    assert {s.name for s in spans if s.name.startswith("invoke_agent")} == {
        "invoke_agent Weather"}
    assert len(spans) == 4  # the instrumented turn only


def test_dependencies_are_declared_honestly() -> None:
    from opentelemetry.instrumentation.dependencies import get_dependency_conflicts

    from otelmw.instrumentation.praisonai import PraisonAIInstrumentor

    deps = PraisonAIInstrumentor().instrumentation_dependencies()
    assert tuple(deps) == ("praisonaiagents >= 1.7.17, < 2",)
    assert get_dependency_conflicts(deps) is None

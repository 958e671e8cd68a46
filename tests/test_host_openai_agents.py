"""The OpenAI Agents SDK instrumentor against real ``openai-agents`` runs, fully offline.

Every scenario runs in a fresh subprocess (``tests/openai_agents_scripts/driver.py``, or
a plain Agents SDK program under ``otelmw run``) whose agent talks through the SDK's
default ``AsyncOpenAI`` client to a ``ScriptedLLMServer`` (call the tool, then answer),
on the Responses route or the chat-completions route. The SDK's own tracing goes to a
recording processor (``set_trace_processors``), never to the OpenAI platform; otelmw's
telemetry goes through ``otelmw.telemetry.configure()`` to a real ``OtlpReceiver``.
Assertions are made on what the receiver, the server and the tools got.
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
from _support.host_scenarios import (
    TIMEOUT,
    assert_no_canary,
    installed_plugin,
    run_scenario,
    scenario_env,
)
from _support.otlp_receiver import OtlpReceiver, ReceivedSpan
from _support.scripted_llm import ScriptedLLMServer
from _support.targets import current_targets

from otelmw.telemetry.content.digests import digest

pytestmark = pytest.mark.host("openai-agents", "openai")

SCRIPTS = Path(__file__).resolve().parent / "openai_agents_scripts"
CITY = "CANARY-CITY-9c1e"
CANARIES = ("CANARY-CITY", "CANARY-PROMPT", "CANARY-RESULT")
INTERNAL, CLIENT, ERROR, UNSET = 1, 3, 2, 0
TOOLS = ("get_weather", "aget_weather", "broken", "forbidden")
MODES = ("run_sync", "run", "run_streamed")
APIS = ("responses", "chat_completions")


@pytest.fixture()
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer.calling_tools(CITY, TOOLS) as srv:
        yield srv



def child_env(tmp_path: Path, base_url: str, rx: OtlpReceiver) -> dict[str, str]:
    return scenario_env(tmp_path, rx, service="openai-agents-host-test",
                        openai_base_url=base_url)


def drive(spec: dict[str, Any], server: ScriptedLLMServer, rx: OtlpReceiver,
          tmp_path: Path) -> dict[str, Any]:
    """Run one driver scenario; returns its RESULT (telemetry is flushed on exit)."""
    return run_scenario(SCRIPTS / "driver.py", spec, child_env(tmp_path, server.base_url, rx),
                        tmp_path)


def traces(spans: list[ReceivedSpan]) -> dict[str, list[ReceivedSpan]]:
    out: dict[str, list[ReceivedSpan]] = {}
    for s in sorted(spans, key=lambda s: s.start_ns):
        out.setdefault(s.trace_id, []).append(s)
    return out


def children(spans: list[ReceivedSpan], parent: ReceivedSpan) -> list[ReceivedSpan]:
    return sorted((s for s in spans if s.parent_span_id == parent.span_id),
                  key=lambda s: s.start_ns)


def root_of(spans: list[ReceivedSpan], agent: str = "Weather") -> ReceivedSpan:
    roots = [s for s in spans if s.parent_span_id is None]
    assert [r.name for r in roots] == [f"invoke_agent {agent}"], [s.name for s in spans]
    root = roots[0]
    a = root.attributes
    assert root.kind == INTERNAL and a["gen_ai.operation.name"] == "invoke_agent"
    assert a["gen_ai.agent.name"] == agent and a["otelmw.runtime.id"] == "openai-agents"
    return root


def names(spans: list[ReceivedSpan]) -> list[str]:
    return [s.name for s in spans]


def sent_call_id(body: dict[str, Any]) -> str:
    """The id of the tool call the model made, as the follow-up request sends it back."""
    items = body.get("input") or body.get("messages") or []
    for item in items:
        if item.get("type") == "function_call":
            return str(item["call_id"])
        for call in item.get("tool_calls") or ():
            return str(call["id"])
    raise AssertionError(f"no tool call in {body}")


def tool_output_sent(body: dict[str, Any]) -> str:
    """What the follow-up request hands the model as the tool's output."""
    items = body.get("input") or body.get("messages") or []
    found = [i.get("output") if i.get("type") == "function_call_output" else i.get("content")
             for i in items if i.get("type") == "function_call_output" or i.get("role") == "tool"]
    assert found, body
    return str(found[-1])


# --------------------------------------------------------------------- run trees
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("mode", MODES)
def test_a_run_is_one_trace_with_its_chat_and_tool_spans(
        mode: str, api: str, server: ScriptedLLMServer, rx: OtlpReceiver,
        tmp_path: Path) -> None:
    out = drive({"mode": mode, "api": api, "runs": 2}, server, rx, tmp_path)
    assert out["errors"] == [] and out["failures"] == {}
    assert out["results"] == [f"done: sunny in {CITY} CANARY-RESULT-7f3a"] * 2
    # the sync tool ran on the SDK's worker thread, and its span is in the run's trace
    assert [t["main_thread"] for t in out["tool_received"]] == [False, False]
    by_trace = traces(rx.spans())
    assert len(by_trace) == 2 and len(server.requests) == 4
    requests = iter(server.requests)
    for spans in by_trace.values():
        root = root_of(spans)
        kids = children(spans, root)
        assert names(kids) == ["chat scripted-model", "execute_tool get_weather",
                               "chat scripted-model"]
        assert len(spans) == 4  # one chat span per provider request: nothing nested
        first, tool, second = kids
        assert first.end_ns <= tool.start_ns and tool.end_ns <= second.start_ns
        assert root.start_ns <= first.start_ns and second.end_ns <= root.end_ns
        recs = [next(requests), next(requests)]
        for chat, rec in ((first, recs[0]), (second, recs[1])):
            a = chat.attributes
            assert chat.kind == CLIENT and chat.status_code == UNSET
            assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "openai"
            assert a["gen_ai.request.model"] == "scripted-model"
            assert a["openai.api.type"] == api
            assert a["gen_ai.response.id"] == rec.response_id  # enriched from the SDK below
            assert a["server.address"] == "127.0.0.1" and a["server.port"] == server.port
            assert a["otelmw.turn.id"] == root.attributes["otelmw.turn.id"]
            if mode == "run_streamed":
                assert a["otelmw.stream.ended_by"] == "exhausted"
                assert a["gen_ai.request.stream"] is True
            if not (mode == "run_streamed" and api == "chat_completions"):  # no usage
                assert a["gen_ai.usage.input_tokens"] == rec.usage["input_tokens"]
        t = tool.attributes
        assert tool.kind == INTERNAL and tool.status_code == UNSET
        assert t["gen_ai.operation.name"] == "execute_tool" and t["gen_ai.tool.type"] == "function"
        assert t["gen_ai.tool.call.id"] == sent_call_id(recs[1].body)
        assert t["otelmw.api_request.id"] == first.attributes["otelmw.api_request.id"]
        assert t["otelmw.runtime.id"] == "openai-agents"
        raw = f"sunny in {CITY} CANARY-RESULT-7f3a"
        assert t["otelmw.result.success"] is True and t["otelmw.result.status"] == "ok"
        assert t["otelmw.result.raw.digest"] == digest(raw)[0] == t["otelmw.result.content.digest"]
        assert tool_output_sent(recs[1].body) == raw
    assert_no_canary(rx, CANARIES)


def test_an_async_tool_is_one_tool_call(server: ScriptedLLMServer, rx: OtlpReceiver,
                                        tmp_path: Path) -> None:
    out = drive({"mode": "run", "tools": ["aget_weather"]}, server, rx, tmp_path)
    assert out["tool_received"] == [{"tool": "aget_weather", "city": CITY}]
    (spans,) = traces(rx.spans()).values()
    assert names(children(spans, root_of(spans))) == [
        "chat scripted-model", "execute_tool aget_weather", "chat scripted-model"]


# ------------------------------------------------------------------- the contract
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("mode", MODES)
def test_the_plugin_changes_what_the_model_and_the_tool_receive(
        mode: str, api: str, server: ScriptedLLMServer, rx: OtlpReceiver,
        tmp_path: Path) -> None:
    out = drive({"mode": mode, "api": api, "plugin": True}, server, rx, tmp_path)
    assert out["errors"] == [] and out["failures"] == {}
    assert out["tool_received"][0]["city"] == "Rome-rewritten"  # tool_request rewrite
    assert out["plugin_seen"] == ["llm_request", "tool_request", "tool_execution",
                                  "post_tool_call:get_weather:ok", "llm_request"]
    for rec in server.requests:  # llm_request rewrite: instructions and temperature
        body = rec.body
        system = (body.get("instructions") if api == "responses"
                  else body["messages"][0]["content"])
        assert system == "Answer briefly. [acme-rewritten]" and body["temperature"] == 0.25
    (spans,) = traces(rx.spans()).values()
    root = root_of(spans)
    first, tool, second = children(spans, root)
    for chat in (first, second):
        assert names(children(spans, chat)) == ["llm_request acme.mark_instructions"]
        assert chat.attributes["gen_ai.request.temperature"] == 0.25
    assert names(children(spans, tool)) == ["tool_request acme.to_rome",
                                            "tool_execution acme.passthrough"]
    assert tool.attributes["otelmw.result.status"] == "ok"
    assert tool_output_sent(server.requests[1].body) == (
        "sunny in Rome-rewritten CANARY-RESULT-7f3a")


@pytest.mark.parametrize("api", APIS)
def test_a_blocked_tool_never_runs_and_the_model_gets_the_message(
        api: str, server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": "run_sync", "api": api, "plugin": True, "tools": ["forbidden"]},
                server, rx, tmp_path)
    assert out["tool_received"] == [] and out["errors"] == []
    assert tool_output_sent(server.requests[1].body) == "blocked by acme policy"
    assert "post_tool_call:forbidden:blocked" in out["plugin_seen"]
    (spans,) = traces(rx.spans()).values()
    tool = next(s for s in spans if s.name == "execute_tool forbidden")
    assert tool.attributes["otelmw.result.status"] == "blocked"
    assert tool.attributes["otelmw.result.success"] is False
    # the SDK's own hooks saw the call the SDK started and the answer it got
    assert "tool_end:forbidden:blocked by acme policy" in out["hooks_seen"]


def test_a_raising_tool_is_a_failed_call_and_the_sdk_answers_as_without_otelmw(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": "run", "tools": ["broken"]}, server, rx, tmp_path)
    assert out["errors"] == []
    sent = tool_output_sent(server.requests[1].body)
    assert sent.startswith("An error occurred while running the tool")  # the SDK's message
    (spans,) = traces(rx.spans()).values()
    tool = next(s for s in spans if s.name == "execute_tool broken")
    t = tool.attributes
    assert tool.status_code == ERROR and t["error.type"] == "builtins.ValueError"
    assert t["otelmw.result.status"] == "error" and t["otelmw.result.success"] is False
    assert "tool exploded" in t["otelmw.result.error_message"]


def test_an_mcp_tool_is_one_tool_call_and_the_mcp_server_gets_the_rewrite(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    """An MCP tool (the SDK's ``MCPServerStdio``, a real MCP server process) is one
    ``execute_tool`` call through the contract; the MCP SDK's own client span of the
    ``tools/call`` nests under it (otelmw_mcp's to enrich), never a second tool call."""
    out = drive({"mode": "run", "mcp": True, "plugin": True}, server, rx, tmp_path)
    assert out["errors"] == [] and out["failures"] == {}
    assert out["results"][0].startswith("done: sunny in Rome-rewritten (from MCP)")
    runs = [t for t in traces(rx.spans()).values() if t[0].name.startswith("invoke_agent")]
    (spans,) = runs  # besides the run: the MCP SDK's own span of connecting, before it
    assert {s.name for s in rx.spans() if s not in spans} <= {"MCP send server/discover"}
    root = root_of(spans)
    tools = [s for s in spans if s.name.startswith("execute_tool")]
    assert names(tools) == ["execute_tool get_weather"]
    (tool,) = tools
    assert tool.parent_span_id == root.span_id
    assert tool.attributes["gen_ai.tool.call.id"] == sent_call_id(server.requests[1].body)
    assert tool.attributes["otelmw.result.status"] == "ok"
    inside = names(children(spans, tool))
    assert inside[:2] == ["tool_request acme.to_rome", "tool_execution acme.passthrough"]
    mcp_calls = [s for s in spans if "tools/call" in s.name]
    assert mcp_calls and all(s.trace_id == root.trace_id for s in mcp_calls)
    assert all(s.parent_span_id in {tool.span_id} | {c.span_id for c in children(spans, tool)}
               for s in mcp_calls)


# ------------------------------------------------------------------- handoffs
@pytest.mark.parametrize("mode", MODES)
def test_a_handoff_is_the_next_agents_turn_inside_the_run(
        mode: str, server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    server.push_tool_calls([("transfer_to_billing", {})])
    out = drive({"mode": mode, "handoff": True}, server, rx, tmp_path)
    assert out["errors"] == [] and "handoff:Weather->Billing" in out["hooks_seen"]
    (spans,) = traces(rx.spans()).values()
    root = root_of(spans)
    kids = children(spans, root)
    assert names(kids) == ["chat scripted-model", "invoke_agent Billing"]
    billing = kids[1]
    assert billing.attributes["gen_ai.agent.name"] == "Billing"
    assert billing.attributes["otelmw.runtime.id"] == "openai-agents"
    (answer,) = children(spans, billing)
    assert answer.name == "chat scripted-model"
    assert answer.attributes["otelmw.turn.id"] == billing.attributes["otelmw.turn.id"] != (
        root.attributes["otelmw.turn.id"])
    assert billing.end_ns <= root.end_ns and kids[0].end_ns <= billing.start_ns
    assert len(server.requests) == 2 == len([s for s in spans if s.name.startswith("chat ")])


# ------------------------------------------------- the host's own behaviour unchanged
@pytest.mark.parametrize("mode", MODES)
def test_guardrails_hooks_and_sdk_tracing_work_as_without_otelmw(
        mode: str, rx: OtlpReceiver, tmp_path: Path) -> None:
    """The same runs with and without otelmw (each on a fresh scripted server): what
    the runs return, every request the model got, what the tools received, the SDK's
    ``RunHooks`` events and the span types its tracing processor got are the same. The
    second run's tool arguments trip the tool input guardrail."""
    seen: list[dict[str, Any]] = []
    for with_otelmw in (False, True):
        with ScriptedLLMServer(tool_first=True, tool_args={
                "get_weather": {"city": CITY}}) as srv:
            srv.push_tool_calls([("get_weather", {"city": "secret base"})])
            out = drive({"mode": mode, "otelmw": with_otelmw, "runs": 2, "handoff": True},
                        srv, rx, tmp_path)
            seen.append({"out": {k: out[k] for k in ("results", "errors", "tool_received",
                                                     "hooks_seen", "sdk_spans")},
                         "bodies": [r.body for r in srv.requests]})
    without, with_ = seen
    assert with_ == without
    assert "guardrail: no secrets" in json.dumps(without["bodies"][1])  # it did trip
    assert without["out"]["sdk_spans"].count("FunctionSpanData") == 2
    assert {"trace", "AgentSpanData"} <= set(without["out"]["sdk_spans"])
    assert len(traces(rx.spans())) == 2  # the runs with otelmw only


def test_without_the_openai_layer_the_agents_layer_alone_makes_the_chat_spans(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"layers": ["openai_agents"]}, server, rx, tmp_path)
    assert out["errors"] == []
    (spans,) = traces(rx.spans()).values()
    assert names(children(spans, root_of(spans))) == [
        "chat scripted-model", "execute_tool get_weather", "chat scripted-model"]


def test_the_openai_layer_alone_is_what_it_was(server: ScriptedLLMServer, rx: OtlpReceiver,
                                               tmp_path: Path) -> None:
    """Only ``otelmw_openai``: two chat roots, one per request (issue 25's 'before')."""
    out = drive({"layers": ["openai"]}, server, rx, tmp_path)
    assert out["errors"] == []
    assert sorted(names(rx.spans())) == ["chat scripted-model"] * 2
    assert len(traces(rx.spans())) == 2


# ------------------------------------------------------------------- zero code
def test_otelmw_run_instruments_an_unmodified_program_with_a_plugin_enabled(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    env = child_env(tmp_path, server.base_url, rx)
    installed_plugin(tmp_path, SCRIPTS / "acme_agents_plugin.py",
                     "acme = acme_agents_plugin:plugin", env)
    # the SDK's trace export to the OpenAI platform off, as docs/telemetry.md says
    env["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
    enable = subprocess.run([*otelmw_cmd(), "plugins", "enable", "acme"], env=env,
                            cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    assert enable.returncode == 0, enable.stderr
    proc = subprocess.run([*otelmw_cmd(), "run", "--", sys.executable,
                           str(SCRIPTS / "plain_agent.py")], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    assert "ASYNC done: sunny in Rome-rewritten" in proc.stdout
    assert "STREAMED done: sunny in Rome-rewritten" in proc.stdout
    rx.wait_for(lambda: len(rx.spans()) >= 8)
    by_trace = traces(rx.spans())
    assert len(by_trace) == 2 and len(server.requests) == 4
    for spans in by_trace.values():
        root = root_of(spans, "Plain")
        first, tool, second = children(spans, root)
        assert names([first, tool, second]) == [
            "chat scripted-model", "execute_tool get_weather", "chat scripted-model"]
        assert names(children(spans, tool)) == ["tool_request acme.to_rome",
                                                "tool_execution acme.passthrough"]
        assert tool.attributes["gen_ai.tool.call.id"].startswith("call_")
    assert all(r.body["instructions"] == "Answer briefly. [acme-rewritten]"
               for r in server.requests)


def test_uninstrument_restores_the_originals() -> None:
    pytest.importorskip("agents")
    from otelmw.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    inst = OpenAIAgentsInstrumentor()
    before = current_targets(inst)
    inst.instrument()
    try:
        during = current_targets(inst)
        assert all(during[k] is not v for k, v in before.items())
    finally:
        inst.uninstrument()
    after = current_targets(inst)
    assert all(after[k] is v for k, v in before.items())


def test_dependencies_are_declared_honestly() -> None:
    from opentelemetry.instrumentation.dependencies import get_dependency_conflicts

    from otelmw.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    deps = OpenAIAgentsInstrumentor().instrumentation_dependencies()
    assert tuple(deps) == ("openai-agents >= 0.20.0, < 0.26",)
    assert get_dependency_conflicts(deps) is None

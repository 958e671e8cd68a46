"""LangChain/LangGraph instrumentor against real ``create_agent`` and ``StateGraph`` runs,
fully offline.

Every scenario runs in a fresh subprocess (``tests/langchain_scripts/driver.py``, or an
unmodified LangChain program under ``otelmw run``) whose model is ``ChatOpenAI`` talking
to a ``ScriptedLLMServer`` (call the tool, then answer) and whose telemetry goes through
``otelmw.telemetry.configure()`` to a real ``OtlpReceiver``. Assertions are on what the
receiver, the server and the tools got. A ``create_agent`` test is marked
``host("langchain")``; a plain graph's ``host("langgraph")``: a LangGraph program without
``langchain`` (``pip install langgraph langchain-openai``), which the ``langgraph``
matrix environment is, and ``current``/``hosts-oldest`` run beside ``langchain`` (the
MCP tool test, plain graphs included, stays with the ``langchain`` environments, which
have ``mcp``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support.cli import otelmw_cmd
from _support.distributions import install_distribution, on_pythonpath
from _support.host_scenarios import exported_texts, installed_plugin, run_scenario, scenario_env
from _support.otlp_receiver import OtlpReceiver, ReceivedSpan
from _support.scripted_llm import ScriptedLLMServer
from _support.semconv_schemas import MESSAGE_KEYS, validate, validate_value

from otelmw.telemetry.content.digests import digest

AGENT = pytest.mark.host("langchain")  # create_agent: needs the langchain package
GRAPH = pytest.mark.host("langgraph")  # langgraph + langchain-core + langchain-openai

SCRIPTS = Path(__file__).resolve().parent / "langchain_scripts"
CITY = "Paris"
REWRITTEN = "Rewritten-City"
INTERNAL, ERROR = 1, 2
MODES = ["invoke", "ainvoke", "stream", "astream"]
TIMEOUT = 150  # a LangChain child imports for longer than most


@pytest.fixture()
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer.calling_tools(CITY, ("get_weather", "broken")) as srv:
        yield srv


def child_env(tmp_path: Path, base_url: str, rx: OtlpReceiver) -> dict[str, str]:
    return scenario_env(tmp_path, rx, service="langchain-host-test", openai_base_url=base_url,
                        strip=("LANGSMITH_", "LANGCHAIN_"), LC_NOTES=str(tmp_path / "notes.jsonl"))


def drive(spec: dict[str, Any], server: ScriptedLLMServer, rx: OtlpReceiver,
          tmp_path: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run one driver scenario (``env``: more variables of the child); returns its
    RESULT (telemetry is flushed on exit)."""
    out = run_scenario(SCRIPTS / "driver.py", spec,
                       {**child_env(tmp_path, server.base_url, rx), **(env or {})}, tmp_path,
                       TIMEOUT)
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
@AGENT
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


@AGENT
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


@AGENT
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


@AGENT
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


@pytest.mark.parametrize(("graph", "mode"), [
    pytest.param("agent", "invoke", marks=AGENT), pytest.param("agent", "astream", marks=AGENT),
    pytest.param("plain", "invoke", marks=GRAPH), pytest.param("plain", "astream", marks=GRAPH)])
def test_a_failing_tool_is_a_normalized_failure(
        graph: str, mode: str, server: ScriptedLLMServer, rx: OtlpReceiver,
        tmp_path: Path) -> None:
    out = drive({"mode": mode, "graph": graph, "tool": "broken", "plugin": ["observe"]},
                server, rx, tmp_path)
    assert out["tool_args"] == [{"tool": "broken", "city": CITY}]
    (sent,) = tool_messages(server)
    assert sent["content"] == "vendor is down"  # LangChain's own error message, unchanged
    notes = plugin_notes(tmp_path)
    assert {"what": "post_tool_call", "tool": "broken", "success": False,
            "error": "vendor is down", "status": "error"} in notes
    rx.wait_for(lambda: len(rx.spans()) >= 4)
    _, children = turn_tree(rx.spans(), "weather" if graph == "agent" else "plain-graph")
    (tool,) = [s for s in children if s.name.startswith("execute_tool ")]
    assert tool.attributes["gen_ai.tool.call.id"] == sent["tool_call_id"]
    assert tool.attributes["otelmw.result.success"] is False
    assert tool.attributes["otelmw.result.status"] == "error"
    assert tool.attributes["otelmw.result.metadata.langchain.status"] == "error"
    assert tool.status_code == ERROR


@AGENT
@pytest.mark.parametrize(("graph", "mode"), [("agent", m) for m in MODES]
                         + [("plain", "invoke"), ("plain", "astream")])
def test_an_mcp_call_inside_a_langchain_tool_enriches_its_span_and_runs_the_contract_once(
        graph: str, mode: str, server: ScriptedLLMServer, rx: OtlpReceiver,
        tmp_path: Path) -> None:
    """A LangChain tool whose body is an MCP ``tools/call`` (what an MCP adapter tool
    does): the MCP client finds the LangChain tool call in flight (``current_tool_call``)
    and puts its attributes on that ``execute_tool`` span; it opens no client tool span
    of its own and the user's hooks fire once for the call. Through otelmw's middleware
    (``create_agent``) and the ``BaseTool`` fallback seam (a plain graph's ``ToolNode``)."""
    out = drive({"mode": mode, "graph": graph, "tool": "mcp", "plugin": ["observe"]}, server,
                rx, tmp_path)
    assert out["tool_args"] == [{"tool": "get_weather", "city": CITY}]
    (sent,) = tool_messages(server)
    assert sent["content"].startswith(f"sunny in {CITY} CANARY-RESULT")  # the MCP answer
    assert out["failures"] == {}
    notes = plugin_notes(tmp_path)
    # twice, not three times: the LangChain tool call and the in-process server's own
    # execution (one process, one pipeline); the MCP client call is no call of its own
    assert [n for n in notes if n["what"] == "post_tool_call"] == [
        {"what": "post_tool_call", "tool": "get_weather", "success": True, "error": None,
         "status": "ok"}] * 2
    rx.wait_for(lambda: any(s.attributes.get("jsonrpc.request.id") is not None
                            for s in rx.spans()) and len(rx.spans()) >= 5)
    spans = one_trace(rx.spans())  # the in-process server's span joins the turn's trace
    tools = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    mcp_server = [s for s in tools if "jsonrpc.request.id" in s.attributes]
    client = [s for s in tools if s not in mcp_server]
    assert len(mcp_server) == 1 and len(client) == 1, [s.name for s in spans]
    (tool,) = client
    _, children = turn_tree(spans, "weather" if graph == "agent" else "plain-graph")
    assert tool in children and tool.name == "execute_tool get_weather"
    assert tool.attributes["gen_ai.tool.call.id"] == sent_tool_call_ids(server)[0]
    assert tool.attributes["otelmw.runtime.id"] == "langchain"
    assert tool.attributes["mcp.method.name"] == "tools/call"  # enriched by the MCP layer
    assert tool.attributes["otelmw.result.status"] == "ok"
    server_ancestors = {mcp_server[0].parent_span_id}
    by_id = {s.span_id: s for s in spans}
    while (parent := by_id.get(next(iter(server_ancestors)) or "")) is not None:
        if parent is tool:
            break
        server_ancestors = {parent.parent_span_id}
    assert parent is tool  # the server's tool span sits under the LangChain tool's span


# ------------------------------------------------------- content and hook records
DETAILS = "gen_ai.client.inference.operation.details"


def plain(value: Any) -> Any:
    """A log attribute's structured value as plain lists and dicts."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


@pytest.mark.parametrize(("graph", "mode"), [
    pytest.param("agent", "invoke", marks=AGENT), pytest.param("agent", "astream", marks=AGENT),
    pytest.param("plain", "ainvoke", marks=GRAPH)])
def test_under_content_capture_the_turns_content_is_schema_valid(
        graph: str, mode: str, server: ScriptedLLMServer, rx: OtlpReceiver,
        tmp_path: Path) -> None:
    """``SPAN_AND_EVENT``: each ``chat`` span carries the conventions' message attributes
    (valid against the GenAI JSON schemas, each part as its own type) and one
    inference-details event carries the same structured; the ``execute_tool`` span
    carries the arguments the tool got and the result the model was sent."""
    out = drive({"mode": mode, "graph": graph}, server, rx, tmp_path,
                env={"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_AND_EVENT"})
    assert out["tool_args"] == [{"tool": "get_weather", "city": CITY}]
    rx.wait_for(lambda: len(rx.spans()) >= 4 and len(rx.logs(DETAILS)) >= 2)
    root, children = turn_tree(rx.spans(), "weather" if graph == "agent" else "plain-graph")
    chats = [s for s in children if s.name.startswith("chat ")]
    assert len(chats) == len(server.requests) == 2
    for chat, request in zip(chats, server.requests, strict=True):
        got = {k: validate(k, chat.attributes[k]) for k in MESSAGE_KEYS
               if k in chat.attributes}
        # an OpenAI chat-shaped request keeps its system message in the history
        assert set(got) == {"gen_ai.input.messages", "gen_ai.output.messages",
                            "gen_ai.tool.definitions"}, sorted(got)
        sent = request.body["messages"]
        assert [m["role"] for m in got["gen_ai.input.messages"]] == [m["role"] for m in sent]
        (tool_def,) = got["gen_ai.tool.definitions"]
        assert tool_def["type"] == "function" and tool_def["name"] == "get_weather"
        (event,) = [x for x in rx.logs(DETAILS) if x.span_id == chat.span_id]
        assert event.trace_id == chat.trace_id
        for key, value in got.items():
            assert validate_value(key, plain(event.attributes[key])) == value, key
    first_in = json.loads(chats[0].attributes["gen_ai.input.messages"])
    assert any("CANARY-PROMPT" in json.dumps(m) for m in first_in)
    (first_out,) = json.loads(chats[0].attributes["gen_ai.output.messages"])
    assert first_out["finish_reason"] == "tool_call"
    (call_part,) = [p for p in first_out["parts"] if p["type"] == "tool_call"]
    assert call_part["name"] == "get_weather" and call_part["arguments"] == {"city": CITY}
    second_in = json.loads(chats[1].attributes["gen_ai.input.messages"])
    responses = [p for m in second_in for p in m["parts"] if p["type"] == "tool_call_response"]
    assert [p["id"] for p in responses] == [call_part["id"]]
    assert f"sunny in {CITY}" in json.dumps(responses[0]["response"])
    (final,) = json.loads(chats[1].attributes["gen_ai.output.messages"])
    assert final["finish_reason"] == "stop"
    assert final["parts"] == [{"type": "text", "content": f"done: sunny in {CITY}"}]
    (tool,) = [s for s in children if s.name.startswith("execute_tool ")]
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"city": CITY}
    assert f"sunny in {CITY}" in tool.attributes["gen_ai.tool.call.result"]
    assert "CANARY-PROMPT" in root.attributes["input.value"]
    assert f"done: sunny in {CITY}" in root.attributes["output.value"]


@AGENT
@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_the_plugins_hook_points_are_log_records_on_the_tool_span_and_nothing_is_captured(
        mode: str, server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    """LangChain has no hook points of its own: the records are those of otelmw's
    pipeline where the plugin registered a callback (``pre_tool_call``,
    ``post_tool_call``), once per tool call, on its ``execute_tool`` span; without
    content capture no prompt, argument or result text is exported anywhere."""
    out = drive({"mode": mode, "plugin": ["observe"]}, server, rx, tmp_path)
    assert out["tool_args"] == [{"tool": "get_weather", "city": CITY}]
    rx.wait_for(lambda: len(rx.spans()) >= 4 and len(rx.logs()) >= 2)
    root, children = turn_tree(rx.spans(), "weather")
    (tool,) = [s for s in children if s.name.startswith("execute_tool ")]
    logs = sorted(rx.logs(), key=lambda x: x.time_ns)
    assert [x.event_name for x in logs] == ["otelmw.hook.pre_tool_call",
                                            "otelmw.hook.post_tool_call"]
    call_id = sent_tool_call_ids(server)[0]
    for rec in logs:
        a = rec.attributes
        assert rec.trace_id == root.trace_id and rec.span_id == tool.span_id
        assert rec.body in (None, {}, "")
        assert a["otelmw.hook.name"] == rec.event_name.removeprefix("otelmw.hook.")
        assert a["otelmw.hook.failures"] == 0
        assert a["otelmw.schema.telemetry"] == "otelmw.observer.v1"
        assert a["gen_ai.tool.name"] == "get_weather" and a["gen_ai.tool.call.id"] == call_id
        assert a["otelmw.tool.args.digest"] == digest({"city": CITY})[0]
        assert a["otelmw.turn.id"] == root.attributes["otelmw.turn.id"]
    post = logs[1].attributes
    assert post["otelmw.result.status"] == "ok" and post["otelmw.result.success"] is True
    assert post["otelmw.result.raw.digest"] == tool.attributes["otelmw.result.raw.digest"]
    for key in (*MESSAGE_KEYS, "gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
                "input.value", "output.value"):
        assert not [s.name for s in rx.spans() if key in s.attributes], key
    leaked = [b for b in exported_texts(rx)
              if "CANARY-PROMPT" in b or "sunny in" in b or "Answer briefly" in b]
    assert leaked == []


@AGENT
def test_hook_events_all_records_every_hook_point_of_each_call(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    """``OTELMW_HOOK_EVENTS=all``: each model call's API-request hook points too, on
    its ``chat`` span."""
    drive({"mode": "invoke", "plugin": ["observe"]}, server, rx, tmp_path,
          env={"OTELMW_HOOK_EVENTS": "all"})
    rx.wait_for(lambda: len(rx.spans()) >= 4 and len(rx.logs()) >= 6)
    _, children = turn_tree(rx.spans(), "weather")
    chats = [s for s in children if s.name.startswith("chat ")]
    (tool,) = [s for s in children if s.name.startswith("execute_tool ")]
    for chat in chats:
        on_chat = sorted(x.event_name for x in rx.logs() if x.span_id == chat.span_id)
        assert on_chat == ["otelmw.hook.post_api_request", "otelmw.hook.pre_api_request"]
        for rec in (x for x in rx.logs() if x.span_id == chat.span_id):
            assert rec.attributes["gen_ai.request.model"] == "scripted-model"
            assert rec.attributes["otelmw.request.digest"].startswith("sha256-keyed:")
    on_tool = {x.event_name for x in rx.logs() if x.span_id == tool.span_id}
    assert {"otelmw.hook.pre_tool_call", "otelmw.hook.post_tool_call"} <= on_tool
    assert all(x.span_id in {c.span_id for c in (*chats, tool)} for x in rx.logs())


# ------------------------------------------------------------------ plain graphs
@GRAPH
@pytest.mark.parametrize("mode", MODES)
def test_a_plain_state_graph_runs_the_contract_through_the_fallback_seams(
        mode: str, server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    """A ``StateGraph`` of a model node and a ``ToolNode``, no ``create_agent`` and no
    ``langchain`` imported: the graph run is the turn (one trace), each model call a
    ``chat`` through the plugin's ``llm_request`` rewrite, the ToolNode's tool call an
    ``execute_tool`` through its ``tool_request`` rewrite (the tool gets the rewritten
    city) and ``tool_execution`` wrapper, with the model's call id, a normalized result
    and the plugin's hook records on its span."""
    out = drive({"mode": mode, "graph": "plain", "plugin": ["rewrite", "wrap", "observe"]},
                server, rx, tmp_path)
    assert out["imported_langchain"] is False
    assert out["failures"] == {}
    if mode in ("stream", "astream"):
        assert out["chunks"] > 2  # stream_mode="messages": the model streamed its tokens
    assert out["messages"][-1]["content"] == f"done: sunny in {REWRITTEN}"
    assert out["tool_args"] == [{"tool": "get_weather", "city": REWRITTEN}]
    assert [r.body.get("temperature") for r in server.requests] == [0.25, 0.25]
    assert tool_messages(server)[0]["content"] == f"sunny in {REWRITTEN}"
    notes = plugin_notes(tmp_path)
    assert [n for n in notes if n["what"] == "wrapped"] == [
        {"what": "wrapped", "tool": "get_weather", "args": {"city": REWRITTEN}}]
    assert [n for n in notes if n["what"] == "post_tool_call"] == [
        {"what": "post_tool_call", "tool": "get_weather", "success": True, "error": None,
         "status": "ok"}]
    rx.wait_for(lambda: len(rx.spans()) >= 7 and len(rx.logs()) >= 2)
    root, children = turn_tree(rx.spans(), "plain-graph")
    assert operations(children) == ["chat scripted-model", "execute_tool get_weather",
                                    "chat scripted-model"]
    chats = [s for s in children if s.name.startswith("chat ")]
    assert_chat_span_per_request(chats, server, streamed=mode in ("stream", "astream"))
    assert [c.attributes["gen_ai.request.temperature"] for c in chats] == [0.25, 0.25]
    assert all(c.attributes.get("gen_ai.request.stream", False) is (mode in ("stream", "astream"))
               for c in chats)
    (tool,) = [s for s in children if s.name.startswith("execute_tool ")]
    a = tool.attributes
    assert a["gen_ai.tool.call.id"] == sent_tool_call_ids(server)[0]
    assert a["otelmw.runtime.id"] == "langchain"
    assert a["otelmw.result.success"] is True and a["otelmw.result.status"] == "ok"
    assert a["otelmw.result.metadata.langchain.status"] == "success"
    assert a["otelmw.result.raw.type"] == "langchain_core.messages.tool.ToolMessage"
    layers = {s.name: s for s in rx.spans() if s.name.startswith(("llm_request ", "tool_"))}
    assert layers["tool_request lc-plugin.rewrite_city"].parent_span_id == tool.span_id
    assert layers["tool_execution lc-plugin.pass_through"].parent_span_id == tool.span_id
    assert layers["llm_request lc-plugin.pin_temperature"].parent_span_id in {
        c.span_id for c in chats}
    records = sorted(rx.logs(), key=lambda x: x.time_ns)
    assert [x.event_name for x in records] == ["otelmw.hook.pre_tool_call",
                                               "otelmw.hook.post_tool_call"]
    for rec in records:
        assert rec.span_id == tool.span_id and rec.trace_id == root.trace_id
        assert rec.attributes["gen_ai.tool.call.id"] == a["gen_ai.tool.call.id"]
        assert rec.attributes["otelmw.tool.args.digest"] == digest({"city": REWRITTEN})[0]


@GRAPH
def test_a_plain_graph_tool_call_blocked_by_the_plugin_never_runs(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": "ainvoke", "graph": "plain", "plugin": ["block"]}, server, rx,
                tmp_path)
    assert out["tool_args"] == []
    (sent,) = tool_messages(server)
    assert sent["content"] == "get_weather is blocked by policy"
    assert sent["tool_call_id"] == sent_tool_call_ids(server)[0]
    rx.wait_for(lambda: len(rx.spans()) >= 4)
    _, children = turn_tree(rx.spans(), "plain-graph")
    (tool,) = [s for s in children if s.name.startswith("execute_tool ")]
    assert tool.attributes["otelmw.result.status"] == "blocked"
    assert tool.attributes["gen_ai.tool.call.id"] == sent["tool_call_id"]


# ------------------------------------------------------------------ zero code
@AGENT
def test_otelmw_run_instruments_an_unmodified_program_with_the_plugin_enabled(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    cmd = otelmw_cmd()
    env = child_env(tmp_path, server.base_url, rx)
    installed_plugin(tmp_path, SCRIPTS / "lc_plugin.py", "lc_plugin = lc_plugin:register", env)
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


@AGENT
def test_uninstrument_restores_every_original(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", UNINSTRUMENT], capture_output=True,
                          text=True, timeout=TIMEOUT, cwd=tmp_path,
                          env={**os.environ, "OTEL_SDK_DISABLED": "true"})
    assert proc.returncode == 0, proc.stderr
    wrapped, restored = proc.stdout.split("\n")[:2]
    assert wrapped == "6"  # the re-export of create_agent is the wrapped function
    assert restored == str([True] * 6)


@GRAPH
def test_an_unmodified_langgraph_program_under_otelmw_run_gets_a_turn_per_graph_run(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    """The program LangGraph's docs write (a model node and a ``ToolNode``, no
    ``langchain``) under ``otelmw run`` with the plugin enabled: each of ``invoke``,
    ``stream``, ``ainvoke`` and ``astream`` is one trace, its ``invoke_agent`` the root of
    both ``chat`` spans and the ``execute_tool``; the plugin's rewrites reach the model
    and the tool, its wrapper runs."""
    cmd = otelmw_cmd()
    env = child_env(tmp_path, server.base_url, rx)
    installed_plugin(tmp_path, SCRIPTS / "lc_plugin.py", "lc_plugin = lc_plugin:register", env)
    env["LC_PLUGIN"] = "rewrite,wrap"
    enabled = subprocess.run([*cmd, "plugins", "enable", "lc_plugin"], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=TIMEOUT)
    assert enabled.returncode == 0, enabled.stderr
    proc = subprocess.run([*cmd, "run", "--", sys.executable, str(SCRIPTS / "plain_graph.py")],
                          env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    for mode in ("INVOKE", "STREAM", "AINVOKE", "ASTREAM"):
        assert f"{mode} done: sunny in {REWRITTEN}" in proc.stdout, proc.stdout
    assert "LANGCHAIN_IMPORTED False" in proc.stdout
    assert [r.body.get("temperature") for r in server.requests] == [0.25] * 8
    rx.wait_for(lambda: len(rx.spans("tool_execution lc_plugin.pass_through")) >= 4
                and len(rx.spans("chat scripted-model")) >= 8)
    by_trace: dict[str, list[ReceivedSpan]] = {}
    for s in rx.spans():
        by_trace.setdefault(s.trace_id, []).append(s)
    assert len(by_trace) == 4  # one trace per graph run
    ids = iter(sent_tool_call_ids(server))
    for spans in sorted(by_trace.values(), key=lambda t: min(s.start_ns for s in t)):
        _, children = turn_tree(spans, "plain-graph")
        assert operations(children) == ["chat scripted-model", "execute_tool get_weather",
                                        "chat scripted-model"]
        (tool,) = [s for s in children if s.name.startswith("execute_tool ")]
        assert tool.attributes["gen_ai.tool.call.id"] == next(ids)
        assert tool.attributes["otelmw.result.status"] == "ok"
        assert {"tool_request lc_plugin.rewrite_city", "tool_execution lc_plugin.pass_through"
                } <= {s.name for s in spans if s.parent_span_id == tool.span_id}
    assert len(rx.spans("chat scripted-model")) == len(server.requests) == 8


@GRAPH
def test_dependencies_are_declared_honestly() -> None:
    """The instrumentor needs langchain-core (its seams); ``create_agent`` and the graph
    turn are wrapped when their packages are installed (in range): here, as installed."""
    from importlib.util import find_spec

    from opentelemetry.instrumentation.dependencies import get_dependency_conflicts

    from otelmw.instrumentation.langchain import LangChainInstrumentor

    instrumentor = LangChainInstrumentor()
    deps = instrumentor.instrumentation_dependencies()
    assert tuple(deps) == ("langchain-core >= 1.4.0, < 2",)
    assert get_dependency_conflicts(deps) is None
    modules = {module for module, _, _ in instrumentor.targets()}
    assert ("langchain.agents" in modules) is (find_spec("langchain") is not None)
    assert {"langgraph.pregel.main", "langchain_core.tools.base",
            "langchain_core.language_models.chat_models"} <= modules


PARTS = """
from otelmw.instrumentation.langchain import LangChainInstrumentor
instrumentor = LangChainInstrumentor()
instrumentor.instrument()
print(instrumentor.skipped_because, sorted({m for m, _, _ in instrumentor.targets()}))
"""


@GRAPH
def test_a_langchain_outside_its_range_leaves_create_agent_alone_with_one_warning(
        tmp_path: Path) -> None:
    """A ``langchain`` release otelmw's middleware was never run on (1.0, found first on
    the path): ``create_agent`` is not wrapped, one WARNING says why, the graph turn and
    the seams are instrumented all the same."""
    env = on_pythonpath({k: v for k, v in os.environ.items() if not k.startswith("OTEL")},
                        install_distribution(tmp_path / "site", "langchain", {}, {}))
    env["OTEL_SDK_DISABLED"] = "true"
    proc = subprocess.run([sys.executable, "-c", PARTS], capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "None " + str(sorted({
        "langgraph.pregel.main", "langchain_core.language_models.chat_models",
        "langchain_core.tools.base"}))
    warnings = [x for x in proc.stderr.splitlines() if "otelmw_langchain" in x]
    assert warnings == ["otelmw: otelmw_langchain: create_agent not instrumented: "
                        "langchain 1.0 is installed, outside the supported range "
                        "langchain >= 1.3.0, < 2 (see README, Host instrumentors)"], proc.stderr


@GRAPH
def test_this_environment_has_langchain_exactly_when_its_env_file_pins_it() -> None:
    """The ``langgraph`` matrix environment is LangGraph without ``langchain``: the
    import fails there (and the tests marked ``langgraph`` above ran without it)."""
    name = os.environ.get("OTELMW_TEST_ENV")
    if not name:
        pytest.skip("not run by scripts/test-all.sh (no OTELMW_TEST_ENV)")
    pins = (Path(__file__).resolve().parent.parent / "scripts" / "envs" / f"{name}.txt"
            ).read_text(encoding="utf-8")
    pinned = any(line.startswith("langchain==") for line in pins.splitlines())
    probe = subprocess.run([sys.executable, "-c", "import langchain"], capture_output=True,
                           text=True, timeout=TIMEOUT)
    assert (probe.returncode == 0) is pinned, probe.stderr
    if not pinned:
        assert "No module named 'langchain'" in probe.stderr

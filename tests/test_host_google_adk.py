"""Google ADK instrumentor (``otelmw_google_adk``) against real ADK runs, fully offline.

Every scenario runs in a fresh subprocess (``tests/google_adk_scripts/driver.py``, or an
unmodified ADK program under ``otelmw run`` / ``opentelemetry-instrument``) whose
``LlmAgent`` talks to a ``ScriptedLLMServer`` (call the first tool offered, then answer
with its result) through ADK's LiteLLM route (``LiteLlm("openai/...")``, the server's
chat route) or its native ``Gemini`` model (the server's Gemini route), and whose
telemetry goes through the stock OTLP exporters to a real ``OtlpReceiver``. Assertions
are on what the receiver, the server and the program got. The same run without otelmw
(with a tracer provider of the program's own, so ADK's own spans are there) is the
reference for "ADK behaves as without otelmw".

The rule this host is held to (docs/telemetry.md, ``otelmw_google_adk``): ADK's own spans
stay and are not doubled: its ``invoke_agent`` is the turn's span, its ``execute_tool`` the
tool call's (otelmw records the call on it), and otelmw's ``chat`` CLIENT span is the one
span of the model request, a child of ADK's ``generate_content`` span.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support.cli import otelmw_cmd
from _support.components import clean_env
from _support.host_scenarios import PROMPT_EXPORT, TIMEOUT, run_scenario, scenario_env
from _support.otlp_receiver import OtlpReceiver, ReceivedSpan
from _support.scripted_llm import RecordedRequest, ScriptedLLMServer
from _support.semconv_schemas import validate

pytestmark = pytest.mark.host("google-adk")

SCRIPTS = Path(__file__).resolve().parent / "google_adk_scripts"
CLIENT, ERROR = 3, 2  # span kind, status code
# route → (the scripted server's API, otelmw's chat span, ADK's generate_content span)
ROUTES = {"litellm": ("chat", "chat openai/scripted-model",
                      "generate_content openai/scripted-model"),
          "gemini": ("gemini", "chat scripted-model", "generate_content scripted-model")}
CONTENT_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages")
ADK_SPANS = ("invoke_workflow", "invoke_agent", "generate_content", "execute_tool")


@pytest.fixture()
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer.calling_tools("Paris", ("get_weather", "broken")) as srv:
        yield srv


def drive(spec: dict[str, Any], server: ScriptedLLMServer, rx: OtlpReceiver,
          tmp_path: Path, **env: str) -> dict[str, Any]:
    """Run one driver scenario; returns its RESULT (telemetry is flushed on exit)."""
    child = scenario_env(tmp_path, rx, service="google-adk-host-test",
                         SCRIPTED_ROOT=server.root_url, LITELLM_LOCAL_MODEL_COST_MAP="True",
                         **PROMPT_EXPORT, **env)
    return run_scenario(SCRIPTS / "driver.py", spec, child, tmp_path)


def posts(server: ScriptedLLMServer, route: str) -> list[RecordedRequest]:
    return [r for r in server.requests if r.api == ROUTES[route][0]]


def budget_sent(post: RecordedRequest) -> Any:
    body = post.body
    if "generationConfig" in body:
        return body["generationConfig"].get("maxOutputTokens")
    return body.get("max_tokens", body.get("max_completion_tokens"))


def tool_answer_sent(post: RecordedRequest) -> str:
    """What the model's second request says the tool answered (as JSON text)."""
    return json.dumps(post.body.get("contents") or post.body.get("messages"))


def by_id(spans: list[ReceivedSpan]) -> dict[str, ReceivedSpan]:
    return {s.span_id: s for s in spans}


def parent(span: ReceivedSpan, spans: list[ReceivedSpan]) -> ReceivedSpan | None:
    return by_id(spans).get(span.parent_span_id or "")


def settled(rx: OtlpReceiver, chats: int) -> list[ReceivedSpan]:
    rx.wait_for(lambda: len([s for s in rx.spans() if s.name.startswith("chat ")]) >= chats
                and any(s.name.startswith("invoke_workflow") for s in rx.spans()))
    return rx.spans()


# ------------------------------------------------------------------ the contract, per route
@pytest.mark.parametrize("mode", ["run_async", "run", "sse"])
@pytest.mark.parametrize("route", ["litellm", "gemini"])
def test_a_turn_runs_the_contract_once_per_request_and_tool_call(
        route: str, mode: str, server: ScriptedLLMServer, rx: OtlpReceiver,
        tmp_path: Path) -> None:
    out = drive({"route": route, "mode": mode, "plugin": {
        "llm_request": True, "tool_request": True, "tool_execution": True}},
        server, rx, tmp_path)
    _, chat_name, generate_name = ROUTES[route]
    sent = posts(server, route)
    # the plugin changes what the model and the tool receive
    assert len(sent) == 2 and [budget_sent(p) for p in sent] == [77, 77]
    assert out["received"] == [{"tool": "get_weather", "args": {"city": "Oslo"}}]
    assert "Oslo" in tool_answer_sent(sent[1])
    assert out["wrapped"] == ["get_weather"]
    assert out["events"][-1]["text"].startswith("done: ")
    assert out["failures"] == {}
    spans = settled(rx, 2)
    # one trace for the run, ADK's invoke_workflow its root
    assert len({s.trace_id for s in spans}) == 1
    (root,) = [s for s in spans if s.parent_span_id is None]
    assert root.name == "invoke_workflow weather"
    (agent,) = rx.spans("invoke_agent weather")
    assert parent(agent, spans) is root
    assert agent.attributes["gen_ai.conversation.id"] == out["session"]
    # one chat CLIENT span per provider request, each under ADK's generate_content span
    chats = rx.spans(chat_name)
    assert len(chats) == len(sent) == 2
    for chat in chats:
        above = parent(chat, spans)
        assert chat.kind == CLIENT and chat.status_code != ERROR
        assert above is not None and above.name == generate_name
        assert parent(above, spans) is agent
        a = chat.attributes
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.request.max_tokens"] == 77
        assert a["gen_ai.conversation.id"] == out["session"]
        assert a["server.address"] == "127.0.0.1" and a["gen_ai.usage.input_tokens"] > 0
        assert a["gen_ai.provider.name"] == ("openai" if route == "litellm" else "gcp.gemini")
        rewrites = [s for s in spans if s.name.startswith("llm_request ")
                    and s.parent_span_id == chat.span_id]
        assert len(rewrites) == 1
    # one execute_tool span per tool call: ADK's own, with otelmw's record of the call
    (tool,) = [s for s in spans if s.name.startswith("execute_tool")]
    assert tool.name == "execute_tool get_weather" and parent(tool, spans) is agent
    a = tool.attributes
    call_ids = [c for e in out["events"] for c in e.get("calls", [])]
    assert a["gen_ai.tool.call.id"].startswith(("call_", "fc_")) and len(call_ids) >= 1
    assert a["otelmw.result.status"] == "ok" and a["otelmw.result.success"] is True
    assert a["gen_ai.tool.type"] == "FunctionTool"  # ADK's own attribute, on the same span
    assert "gcp.vertex.agent.event_id" in a
    assert a["otelmw.turn.id"] == chats[0].attributes["otelmw.turn.id"]
    assert a["otelmw.api_request.id"] == chats[0].attributes["otelmw.api_request.id"]
    layers = sorted(s.name.split(" ")[0] for s in spans if s.parent_span_id == tool.span_id)
    assert layers == ["tool_execution", "tool_request"]


def test_the_tool_call_id_is_the_models(server: ScriptedLLMServer, rx: OtlpReceiver,
                                        tmp_path: Path) -> None:
    drive({"route": "gemini"}, server, rx, tmp_path)
    (first, _) = posts(server, "gemini")
    spans = settled(rx, 2)
    (tool,) = [s for s in spans if s.name == "execute_tool get_weather"]
    answer = server.requests[1].body["contents"][-1]["parts"][0]["functionResponse"]
    assert tool.attributes["gen_ai.tool.call.id"] == answer["id"]
    assert first.body["contents"][0]["parts"][0]["text"] == "Weather in Paris?"


# ------------------------------------------------------------ ADK behaves as without otelmw
def comparable(out: dict[str, Any]) -> dict[str, Any]:
    return {k: out[k] for k in ("events", "received", "seen", "tool_errors")}


def adk_span_shape(spans: list[ReceivedSpan]) -> list[tuple[str, str | None]]:
    """ADK's own spans (name, parent name), without otelmw's."""
    ids = by_id(spans)
    return sorted((s.name, ids[s.parent_span_id].name if s.parent_span_id in ids else None)
                  for s in spans if s.name.startswith(ADK_SPANS))


@pytest.mark.parametrize("route", ["litellm", "gemini"])
def test_adk_and_its_callbacks_and_tracing_behave_as_without_otelmw(
        route: str, rx: OtlpReceiver, tmp_path: Path) -> None:
    spec = {"route": route, "callbacks": True, "adk_plugin": True,
            "tools": ["get_weather", "broken"]}
    runs = []
    for otelmw in (False, True):
        with ScriptedLLMServer.calling_tools("Paris", ("get_weather",)) as srv:
            srv.push_tool_calls([("get_weather", {"city": "Paris"}), ("broken", {"city": "x"})])
            out = drive({**spec, "otelmw": otelmw, "adk_tracer": True}, srv, rx, tmp_path)
            bodies = [r.body for r in srv.requests]
        spans = settled(rx, 2) if otelmw else _wait_adk(rx)
        runs.append((out, bodies, adk_span_shape(spans)))
        rx.clear()
    (bare, bare_bodies, bare_shape), (observed, bodies, shape) = runs
    assert comparable(observed) == comparable(bare)
    assert bare["tool_errors"] == ["ValueError: tool exploded"]
    assert [s["hook"] for s in bare["seen"]][:3] == ["plugin_before_model", "before_model",
                                                    "after_model"]
    assert bodies == bare_bodies  # the same requests, byte for byte in JSON
    assert shape == bare_shape and len(shape) >= 6  # ADK's own tracing, undoubled


def _wait_adk(rx: OtlpReceiver) -> list[ReceivedSpan]:
    rx.wait_for(lambda: any(s.name.startswith("invoke_workflow") for s in rx.spans()))
    return rx.spans()


def test_a_short_circuiting_adk_callback_is_honoured(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    """``before_tool_callback`` answering: the tool never runs and otelmw's contract does
    not run on it (ADK's span has no otelmw record); ``after_tool_callback`` altering the
    result: the model gets the altered one; ``before_model_callback`` answering: no model
    request, no ``chat`` span."""
    out = drive({"callbacks": True, "short_circuit": ["before_tool"],
                 "plugin": {"tool_request": True}}, server, rx, tmp_path)
    assert out["received"] == []
    assert "answered_by" in tool_answer_sent(posts(server, "litellm")[1])
    spans = settled(rx, 2)
    (tool,) = [s for s in spans if s.name == "execute_tool get_weather"]
    assert "otelmw.result.status" not in tool.attributes
    assert not [s for s in spans if s.parent_span_id == tool.span_id]
    rx.clear()
    server.clear()
    out = drive({"callbacks": True, "short_circuit": ["after_tool"]}, server, rx, tmp_path)
    assert out["received"] == [{"tool": "get_weather", "args": {"city": "Paris"}}]
    assert "altered_by" in tool_answer_sent(posts(server, "litellm")[1])
    rx.clear()
    server.clear()
    out = drive({"callbacks": True, "short_circuit": ["before_model"]}, server, rx, tmp_path)
    assert out["events"][-1]["text"] == "answered by before_model"
    assert posts(server, "litellm") == []
    rx.wait_for(lambda: any(s.name.startswith("invoke_workflow") for s in rx.spans()))
    assert [s for s in rx.spans() if s.name.startswith("chat ")] == []


def test_a_raising_tool_is_a_failed_result_and_adk_handles_its_error(
        rx: OtlpReceiver, tmp_path: Path) -> None:
    with ScriptedLLMServer.calling_tools("Paris", ("broken",)) as srv:
        out = drive({"callbacks": True, "tools": ["broken"]}, srv, rx, tmp_path)
        assert "handled by on_tool_error" in tool_answer_sent(posts(srv, "litellm")[1])
    assert out["tool_errors"] == ["ValueError: tool exploded"]
    spans = settled(rx, 2)
    (tool,) = [s for s in spans if s.name == "execute_tool broken"]
    assert tool.attributes["otelmw.result.success"] is False
    assert tool.attributes["otelmw.result.status"] == "error"


@pytest.mark.parametrize("route", ["litellm", "gemini"])
def test_a_failed_model_request_is_an_error_span_and_adks_error_callback_answers(
        route: str, rx: OtlpReceiver, tmp_path: Path) -> None:
    with ScriptedLLMServer() as srv:
        srv.push_error(400, "scripted refusal")
        out = drive({"route": route, "callbacks": True}, srv, rx, tmp_path)
        assert len(posts(srv, route)) == 1  # sent once
    assert out["events"][-1]["text"] == "recovered by on_model_error"
    assert [s["hook"] for s in out["seen"]] == ["before_model", "on_model_error", "after_model"]
    spans = settled(rx, 1)
    (chat,) = [s for s in spans if s.name.startswith("chat ")]
    assert chat.status_code == ERROR and chat.attributes["error.type"]
    assert parent(chat, spans).name.startswith("generate_content")  # type: ignore[union-attr]


def test_an_otelmw_block_is_the_tools_answer(server: ScriptedLLMServer, rx: OtlpReceiver,
                                             tmp_path: Path) -> None:
    out = drive({"plugin": {"block": "get_weather"}}, server, rx, tmp_path)
    assert out["received"] == []
    assert "blocked by policy" in tool_answer_sent(posts(server, "litellm")[1])
    spans = settled(rx, 2)
    (tool,) = [s for s in spans if s.name == "execute_tool get_weather"]
    assert tool.attributes["otelmw.result.status"] == "blocked"


def test_an_llm_execution_answer_replaces_the_model_request(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"plugin": {"llm_answer": True}}, server, rx, tmp_path)
    assert out["events"][-1]["text"] == "answered by otelmw"
    assert posts(server, "litellm") == [] and out["failures"] == {}
    spans = settled(rx, 1)
    (chat,) = [s for s in spans if s.name.startswith("chat ")]
    assert parent(chat, spans).name.startswith("generate_content")  # type: ignore[union-attr]


# --------------------------------------------------------------------------- sub-agents
def test_a_transfer_to_a_sub_agent_is_an_invoke_agent_under_the_coordinator(
        rx: OtlpReceiver, tmp_path: Path) -> None:
    with ScriptedLLMServer() as srv:
        srv.push_tool_calls([("transfer_to_agent", {"agent_name": "helper"})])
        srv.push_text("the helper answers")
        out = drive({"sub_agent": True, "tools": []}, srv, rx, tmp_path)
        assert len(posts(srv, "litellm")) == 2
    assert out["events"][-1] == {"author": "helper", "partial": False,
                                 "text": "the helper answers"}
    spans = settled(rx, 2)
    # ADK runs the helper after the coordinator's run (its own invoke_agent, as without
    # otelmw): both in the run's one trace, under its invoke_workflow
    (root,) = [s for s in spans if s.parent_span_id is None]
    assert root.name == "invoke_workflow coordinator"
    assert len({s.trace_id for s in spans}) == 1
    (coordinator,) = rx.spans("invoke_agent coordinator")
    (helper,) = rx.spans("invoke_agent helper")
    assert parent(coordinator, spans) is root and parent(helper, spans) is root
    (transfer,) = [s for s in spans if s.name == "execute_tool transfer_to_agent"]
    assert transfer.attributes["otelmw.result.status"] == "ok"
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == 2
    turn_ids = {c.attributes["otelmw.turn.id"] for c in chats}
    assert len(turn_ids) == 2  # the helper's run is a turn of its own
    assert all(c.attributes["gen_ai.conversation.id"] == out["session"] for c in chats)


def test_adks_legacy_schema_keeps_the_rule(server: ScriptedLLMServer, rx: OtlpReceiver,
                                           tmp_path: Path) -> None:
    """ADK's schema 1 (``invocation`` root, a ``call_llm`` span over each request): still
    one ``chat`` under ADK's ``generate_content``, ADK's ``execute_tool`` the tool's."""
    drive({"plugin": {"tool_request": True}}, server, rx, tmp_path,
          ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN="1")
    rx.wait_for(lambda: len(rx.spans("chat openai/scripted-model")) >= 2
                and any(s.name == "invocation" for s in rx.spans()))
    spans = rx.spans()
    (root,) = [s for s in spans if s.parent_span_id is None]
    assert root.name == "invocation" and len({s.trace_id for s in spans}) == 1
    for chat in rx.spans("chat openai/scripted-model"):
        above = parent(chat, spans)
        assert above is not None and above.name == "generate_content openai/scripted-model"
        assert parent(above, spans).name == "call_llm"  # type: ignore[union-attr]
    (tool,) = [s for s in spans if s.name.startswith("execute_tool")]
    assert tool.attributes["otelmw.result.status"] == "ok"
    assert parent(tool, spans).name == "invoke_agent weather"  # type: ignore[union-attr]


# ---------------------------------------------------------- ADK's own spans not recording
def test_where_adk_traces_nothing_otelmw_opens_its_own_spans(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"adk_tracing": False, "plugin": {"tool_request": True}}, server, rx, tmp_path)
    assert out["received"] == [{"tool": "get_weather", "args": {"city": "Oslo"}}]
    rx.wait_for(lambda: len([s for s in rx.spans() if s.name.startswith("chat ")]) >= 2
                and any(s.name.startswith("execute_tool") for s in rx.spans()))
    spans = rx.spans()
    assert not [s for s in spans if s.name.startswith(("invoke_workflow", "generate_content"))]
    (root,) = [s for s in spans if s.parent_span_id is None]
    assert root.name == "invoke_agent weather"
    assert root.attributes["otelmw.runtime.id"] == "google-adk"
    under = sorted(s.name for s in spans if s.parent_span_id == root.span_id)
    assert under == ["chat openai/scripted-model", "chat openai/scripted-model",
                     "execute_tool get_weather"]


# ------------------------------------------------------------- metrics: one point each
# ADK's meter (scope gcp.vertex.agent, on the global meter provider configure() sets)
# records these for its own operations; per metric, the operations of one run
ONE_POINT_EACH = {"gen_ai.client.operation.duration": 2,  # model requests
                  "gen_ai.execute_tool.duration": 1, "gen_ai.invoke_agent.duration": 1}


def _points(rx: OtlpReceiver, name: str) -> dict[str, int]:
    """Points recorded per scope (one export, at shutdown: cumulative counts)."""
    counts: dict[str, int] = {}
    for metric in rx.wait_for_metric(name):
        counts[metric.scope_name] = counts.get(metric.scope_name, 0) + sum(
            point.value["count"] for point in metric.data_points)
    return counts


@pytest.mark.parametrize("route", ["litellm", "gemini"])
def test_each_operation_is_one_metric_point_adks_not_doubled_by_otelmw(
        route: str, server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    drive({"route": route, "mode": "run_async", "plugin": {"tool_execution": True}},
          server, rx, tmp_path)
    settled(rx, 2)
    for name, operations in ONE_POINT_EACH.items():
        assert _points(rx, name) == {"gcp.vertex.agent": operations}, name
    usage = [point.attributes["gen_ai.token.type"]
             for metric in rx.wait_for_metric("gen_ai.client.token.usage")
             for point in metric.data_points for _ in range(point.value["count"])]
    assert {m.scope_name for m in rx.metrics("gen_ai.client.token.usage")} == {
        "gcp.vertex.agent"}
    assert sorted(usage) == ["input", "input", "output", "output"]
    # otelmw's own metrics are still recorded: its tool result and its layer
    (results,) = rx.wait_for_metric("otelmw.tool.results")
    assert results.scope_name == "otelmw"
    assert sum(p.value for p in results.data_points) == 1
    assert rx.wait_for_metric("otelmw.middleware.duration")


def test_where_otelmw_opens_the_turns_span_adks_points_are_still_not_doubled(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    """ADK's spans do not record (otelmw's tracer provider is not the global one) while
    otelmw's meter provider is the global one ADK's meter records with: the turn, the
    model requests and the tool call are otelmw's spans, each still one point."""
    drive({"adk_tracing": False, "global_meters": True, "plugin": {"tool_execution": True}},
          server, rx, tmp_path)
    rx.wait_for(lambda: any(s.name == "invoke_agent weather" for s in rx.spans()))
    for name, operations in ONE_POINT_EACH.items():
        assert _points(rx, name) == {"gcp.vertex.agent": operations}, name
    (results,) = rx.wait_for_metric("otelmw.tool.results")
    assert results.scope_name == "otelmw"


# ----------------------------------------------------------------------- content capture
@pytest.mark.parametrize("capture", ["SPAN_ONLY", None], ids=["capture", "no-capture"])
def test_content_only_under_capture_and_schema_valid(
        capture: str | None, server: ScriptedLLMServer, rx: OtlpReceiver,
        tmp_path: Path) -> None:
    env = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": capture} if capture else {}
    drive({"route": "gemini"}, server, rx, tmp_path, **env)
    spans = settled(rx, 2)
    chats = [s for s in spans if s.name.startswith("chat ")]
    (tool,) = [s for s in spans if s.name == "execute_tool get_weather"]
    for chat in chats:
        present = [k for k in CONTENT_KEYS if k in chat.attributes]
        assert present == ([] if capture is None else list(CONTENT_KEYS))
        for key in present:
            validate(key, chat.attributes[key])
    if capture is None:
        assert "gen_ai.tool.call.arguments" not in tool.attributes
    else:
        assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"city": "Paris"}


def test_hook_records_are_on_adks_tool_span(server: ScriptedLLMServer, rx: OtlpReceiver,
                                            tmp_path: Path) -> None:
    drive({"plugin": {"block": "nothing"}}, server, rx, tmp_path, OTELMW_HOOK_EVENTS="all")
    spans = settled(rx, 2)
    (tool,) = [s for s in spans if s.name == "execute_tool get_weather"]
    rx.wait_for(lambda: any(x.event_name == "otelmw.hook.post_tool_call" for x in rx.logs()))
    records = [x for x in rx.logs() if x.event_name in ("otelmw.hook.pre_tool_call",
                                                        "otelmw.hook.post_tool_call")]
    assert sorted(x.event_name for x in records) == ["otelmw.hook.post_tool_call",
                                                     "otelmw.hook.pre_tool_call"]
    assert {x.span_id for x in records} == {tool.span_id}


# ------------------------------------------------------------- unmodified programs, zero code
PROGRAM = """
import asyncio

from google.adk.agents import LlmAgent
from google.adk.models.lite_llm import LiteLlm
from google.adk.runners import InMemoryRunner
from google.genai import types


def get_weather(city: str) -> dict:
    \"\"\"Current weather for a city.\"\"\"
    return {{"city": city, "sky": "sunny"}}


agent = LlmAgent(name="weather", instruction="Answer briefly.", tools=[get_weather],
                 model=LiteLlm(model="openai/scripted-model", api_base={base!r}, api_key="x"))
runner = InMemoryRunner(agent=agent, app_name="app")


async def main() -> None:
    session = await runner.session_service.create_session(app_name="app", user_id="u")
    message = types.Content(role="user", parts=[types.Part(text="Weather in Paris?")])
    async for event in runner.run_async(user_id="u", session_id=session.id,
                                        new_message=message):
        if event.is_final_response():
            print("ANSWER", event.content.parts[0].text)


asyncio.run(main())
"""


def test_otelmw_run_instruments_an_unmodified_program_with_a_plugin(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    from _support.host_scenarios import installed_plugin

    env = scenario_env(tmp_path, rx, service="adk-app", LITELLM_LOCAL_MODEL_COST_MAP="True",
                       **PROMPT_EXPORT)
    installed_plugin(tmp_path, SCRIPTS / "adk_probe.py", "adk_probe = adk_probe:register", env)
    cmd = otelmw_cmd()
    enable = subprocess.run([*cmd, "plugins", "enable", "adk_probe"], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=TIMEOUT)
    assert enable.returncode == 0, enable.stderr
    program = tmp_path / "app.py"
    program.write_text(textwrap.dedent(PROGRAM.format(base=server.base_url)))
    assert not re.search(r"^\s*(import|from)\s+otelmw", program.read_text(), re.MULTILINE)
    proc = subprocess.run([*cmd, "run", "--", sys.executable, str(program)], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    assert "ANSWER done: " in proc.stdout and "Oslo" in proc.stdout  # the tool rewrite ran
    assert all(budget_sent(p) == 55 for p in posts(server, "litellm"))
    spans = settled(rx, 2)
    assert len({s.trace_id for s in spans}) == 1
    assert len([s for s in spans if s.name.startswith("chat ")]) == 2
    assert len([s for s in spans if s.name.startswith("execute_tool")]) == 1
    assert len([s for s in spans if s.name.startswith("tool_request ")]) == 1


def test_opentelemetry_instrument_lights_up_an_unmodified_program(
        server: ScriptedLLMServer, tmp_path: Path) -> None:
    beside = Path(sys.executable).parent / "opentelemetry-instrument"
    launcher = str(beside) if beside.exists() else shutil.which("opentelemetry-instrument")
    assert launcher, "opentelemetry-instrument comes with opentelemetry-instrumentation"
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(PROGRAM.format(base=server.base_url)))
    with OtlpReceiver() as rx:
        env = clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint,
                        OTEL_SERVICE_NAME="adk-app", LITELLM_LOCAL_MODEL_COST_MAP="True",
                        **PROMPT_EXPORT)
        proc = subprocess.run([launcher, sys.executable, str(script)], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=TIMEOUT)
        assert proc.returncode == 0, proc.stderr
        assert "ANSWER done: " in proc.stdout
        spans = settled(rx, 2)
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == 2 and all(s.kind == CLIENT for s in chats)
    (tool,) = [s for s in spans if s.name.startswith("execute_tool")]
    assert tool.attributes["otelmw.result.status"] == "ok"


def test_dependencies_are_declared_honestly() -> None:
    from opentelemetry.instrumentation.dependencies import get_dependency_conflicts

    from otelmw.instrumentation.google_adk import GoogleADKInstrumentor

    deps = GoogleADKInstrumentor().instrumentation_dependencies()
    assert tuple(deps) == ("google-adk >= 2.13.0, < 3",)
    assert get_dependency_conflicts(deps) is None

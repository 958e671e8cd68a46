"""CrewAI instrumentor against real CrewAI runs, fully offline.

Every scenario runs in a fresh subprocess (``tests/crewai_scripts/driver.py``, or an
unmodified CrewAI program under ``otelmw run`` / ``opentelemetry-instrument``) whose
crew — a forecaster agent with tools, then a writer agent, one task each — or lone agent
talks through CrewAI's native OpenAI provider and the real openai SDK to a
``ScriptedLLMServer`` (call the first tool offered, then answer) and whose telemetry goes
through the stock OTLP exporters to a real ``OtlpReceiver``. CrewAI's own telemetry is
off (``CREWAI_DISABLE_TELEMETRY``/``CREWAI_DISABLE_TRACKING``, not ``OTEL_SDK_DISABLED``,
which would switch otelmw off too) and every driver refuses and reports any connection
beyond 127.0.0.1. The same run without otelmw is the reference for "CrewAI behaves as
without otelmw". Marked ``host("crewai", "openai")``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support.cli import otelmw_cmd
from _support.host_scenarios import (
    PROMPT_EXPORT,
    TIMEOUT,
    exported_texts,
    installed_plugin,
    result_of,
    run_ok,
    scenario_env,
)
from _support.otlp_receiver import OtlpReceiver, ReceivedSpan
from _support.scripted_llm import RecordedRequest, ScriptedLLMServer
from _support.semconv_schemas import MESSAGE_KEYS, validate

pytestmark = pytest.mark.host("crewai", "openai")

SCRIPTS = Path(__file__).resolve().parent / "crewai_scripts"
INTERNAL, CLIENT = 1, 3
UNSET, OK, ERROR = 0, 1, 2
CREW_SPAN = "invoke_agent WeatherCrew"
FORECASTER, WRITER = "invoke_agent Forecaster", "invoke_agent Writer"
CHAT_SPAN = "chat scripted-model"
TOOLS = ("get_weather", "broken", "closed")
NETWORK_PREFIX = "NETWORK-ATTEMPT "  # the driver's report of a refused connection
CREWAI_OFF = {"CREWAI_DISABLE_TELEMETRY": "true", "CREWAI_DISABLE_TRACKING": "true"}


@pytest.fixture()
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer.calling_tools("Paris", TOOLS) as srv:
        yield srv


def child_env(tmp_path: Path, base_url: str, rx: OtlpReceiver) -> dict[str, str]:
    return scenario_env(tmp_path, rx, service="crewai-host-test", openai_base_url=base_url,
                        strip=("CREWAI_",), **CREWAI_OFF)


def drive(spec: dict[str, Any], server: ScriptedLLMServer, rx: OtlpReceiver,
          tmp_path: Path, *, offline: bool = True, **env: str) -> dict[str, Any]:
    """Run one driver scenario (``env``: settings on top of ``child_env``'s); returns
    its RESULT (telemetry is flushed on exit). No scenario reaches beyond 127.0.0.1
    (``offline=False``: CrewAI's own telemetry is left on, its attempts refused)."""
    run_env = {**child_env(tmp_path, server.base_url, rx), **env}
    if not offline:
        for key in CREWAI_OFF:
            run_env.pop(key)
    proc = run_ok([sys.executable, str(SCRIPTS / "driver.py"), json.dumps(spec)], run_env,
                  tmp_path)
    out = result_of(proc.stdout, proc.stderr)
    out["network"] = [line.removeprefix(NETWORK_PREFIX) for line in proc.stderr.splitlines()
                      if line.startswith(NETWORK_PREFIX)]
    if offline:
        assert out["network"] == []
    return out


def traces(spans: list[ReceivedSpan]) -> list[list[ReceivedSpan]]:
    by_trace: dict[str, list[ReceivedSpan]] = {}
    for s in sorted(spans, key=lambda s: s.start_ns):
        by_trace.setdefault(s.trace_id, []).append(s)
    return list(by_trace.values())


def children(spans: list[ReceivedSpan], parent: ReceivedSpan) -> list[ReceivedSpan]:
    return [s for s in spans if s.parent_span_id == parent.span_id]


def only_root(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    """The one root span of a trace (named ``name``); every other span under it."""
    roots = [s for s in spans if s.parent_span_id is None]
    assert [r.name for r in roots] == [name], [(s.name, s.parent_span_id) for s in spans]
    ids = {s.span_id for s in spans}
    assert all(s.parent_span_id in ids for s in spans if s is not roots[0]), "orphan span"
    return roots[0]


def chat_posts(server: ScriptedLLMServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.api in ("chat", "responses")]


def bodies(server: ScriptedLLMServer) -> list[Any]:
    """What the provider received, with the server's own ids made comparable across
    runs."""
    return json.loads(re.sub(r'"call_\d+"', '"call_N"', json.dumps(
        [p.body for p in chat_posts(server)])))


def sent_tool_call_ids(server: ScriptedLLMServer) -> list[str]:
    """The ids of the tool calls the model made, as sent back to it."""
    return [call["id"] for post in chat_posts(server) for m in post.body["messages"]
            if m.get("role") == "assistant" for call in m.get("tool_calls") or ()]


def tool_messages(server: ScriptedLLMServer) -> list[str]:
    """What the model was sent as tool results, once each."""
    seen: list[str] = []
    for post in chat_posts(server):
        for m in post.body["messages"]:
            if m.get("role") == "tool" and m["content"] not in seen:
                seen.append(m["content"])
    return seen


def check_chats(spans: list[ReceivedSpan], server: ScriptedLLMServer,
                api_mode: str = "chat_completions") -> None:
    """One ``chat`` CLIENT span per provider request, describing that request's
    response (the openai SDK layer under CrewAI's provider only enriched it)."""
    posts = chat_posts(server)
    chats = sorted((s for s in spans if s.name.startswith("chat ")), key=lambda s: s.start_ns)
    assert len(chats) == len(posts)
    for chat, post in zip(chats, posts, strict=True):
        a = chat.attributes
        assert chat.kind == CLIENT and chat.status_code != ERROR
        assert a["gen_ai.provider.name"] == "openai"
        assert a["otelmw.api_mode"] == api_mode
        assert a["gen_ai.response.id"] == post.response_id
        assert post.usage is not None
        assert a["gen_ai.usage.input_tokens"] == post.usage["input_tokens"]
        assert a["server.address"] == "127.0.0.1" and a["server.port"] == server.port
        assert bool(a.get("gen_ai.request.stream")) == post.stream


def check_crew(spans: list[ReceivedSpan], server: ScriptedLLMServer, tool: str) -> None:
    """One trace: the crew's ``invoke_agent`` over one sub-agent turn per task; the
    forecaster's turn holds a chat, the tool call and a chat, the writer's one chat."""
    (trace,) = traces(spans)
    root = only_root(trace, CREW_SPAN)
    assert root.kind == INTERNAL and root.status_code != ERROR
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["otelmw.runtime.id"] == "crewai"
    assert root.attributes["gen_ai.conversation.id"]  # the crew's id
    forecaster, writer = children(trace, root)
    assert (forecaster.name, writer.name) == (FORECASTER, WRITER)
    assert forecaster.attributes["gen_ai.agent.name"] == "Forecaster"
    assert [s.name for s in children(trace, forecaster)] == [
        CHAT_SPAN, f"execute_tool {tool}", CHAT_SPAN]
    assert [s.name for s in children(trace, writer)] == [CHAT_SPAN]
    check_chats(trace, server)
    (tool_span,) = [s for s in trace if s.name.startswith("execute_tool ")]
    assert [tool_span.attributes["gen_ai.tool.call.id"]] == sent_tool_call_ids(server)
    assert tool_span.attributes["otelmw.runtime.id"] == "crewai"


# --------------------------------------------------------------------- run modes
@pytest.mark.parametrize(("mode", "stream"), [
    ("kickoff", False), ("kickoff", True), ("kickoff_async", False), ("akickoff", False),
    ("akickoff", True)])
def test_every_crew_run_is_one_trace_with_a_turn_per_agent_and_one_span_per_operation(
        mode: str, stream: bool, server: ScriptedLLMServer, rx: OtlpReceiver,
        tmp_path: Path) -> None:
    out = drive({"mode": mode, "stream": stream}, server, rx, tmp_path)
    assert out["errors"] == [] and out["results"] == ["ok"]
    assert out["tool_calls"] == [{"tool": "get_weather", "city": "Paris", "units": "imperial"}]
    rx.wait_for(lambda: len(rx.spans()) >= 7)
    check_crew(rx.spans(), server, "get_weather")
    assert [p.stream for p in chat_posts(server)] == [stream] * 3
    tool = rx.spans("execute_tool get_weather")[0].attributes
    assert tool["otelmw.result.success"] is True and tool["otelmw.result.status"] == "ok"
    assert tool["otelmw.result.raw.type"] == "str"
    assert out["failures"] == {}


@pytest.mark.parametrize(("mode", "stream"), [
    ("agent_kickoff", False), ("agent_kickoff_async", True)])
def test_a_lone_agents_kickoff_is_one_turn(mode: str, stream: bool, server: ScriptedLLMServer,
                                           rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": mode, "stream": stream}, server, rx, tmp_path)
    assert out["errors"] == [] and out["results"] == ["done: sunny in Paris (imperial)"]
    rx.wait_for(lambda: len(rx.spans()) >= 4)
    (trace,) = traces(rx.spans())
    root = only_root(trace, FORECASTER)
    assert [s.name for s in children(trace, root)] == [
        CHAT_SPAN, "execute_tool get_weather", CHAT_SPAN]
    check_chats(trace, server)
    assert [p.stream for p in chat_posts(server)] == [stream] * 2


@pytest.mark.parametrize("mode", ["agent_kickoff", "agent_kickoff_async"])
def test_the_responses_api_route_is_instrumented_the_same(
        mode: str, server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": mode, "api": "responses"}, server, rx, tmp_path)
    assert out["errors"] == [] and out["results"] == ["done: sunny in Paris (imperial)"]
    assert {p.api for p in server.requests} == {"responses"}
    rx.wait_for(lambda: len(rx.spans()) >= 4)
    (trace,) = traces(rx.spans())
    root = only_root(trace, FORECASTER)
    assert [s.name for s in children(trace, root)] == [
        CHAT_SPAN, "execute_tool get_weather", CHAT_SPAN]
    check_chats(trace, server, "responses")
    (tool,) = rx.spans("execute_tool get_weather")
    assert tool.attributes["gen_ai.tool.call.id"] == "call_1"


def test_a_streamed_responses_run_ends_as_without_otelmw(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    """CrewAI 1.15.30 gets no answer out of the scripted server's streamed Responses
    (it raises "Invalid response from LLM call"); with otelmw it ends the same way, the
    one request a ``chat`` span and the turn an error."""
    spec = {"mode": "agent_kickoff_async", "api": "responses", "stream": True}
    bare = drive({**spec, "otelmw": False}, server, rx, tmp_path)
    bare_posts = bodies(server)
    server.clear()
    out = drive(spec, server, rx, tmp_path)
    assert out["errors"] == bare["errors"] != [] and bodies(server) == bare_posts
    rx.wait_for(lambda: len(rx.spans()) >= 2)
    (root,) = rx.spans(FORECASTER)
    assert root.status_code == ERROR
    assert [s.name for s in children(rx.spans(), root)] == [CHAT_SPAN]


def test_each_kickoff_is_its_own_trace(server: ScriptedLLMServer, rx: OtlpReceiver,
                                       tmp_path: Path) -> None:
    out = drive({"mode": "kickoff", "turns": 2}, server, rx, tmp_path)
    assert out["errors"] == []
    rx.wait_for(lambda: len(rx.spans()) >= 14)
    runs = traces(rx.spans())
    assert len(runs) == 2
    for spans in runs:
        root = only_root(spans, CREW_SPAN)
        assert [s.name for s in children(spans, root)] == [FORECASTER, WRITER]


# ---------------------------------------------------------- the user's plugin
@pytest.mark.parametrize("stream", [False, True])
def test_the_plugin_changes_what_the_model_and_the_tool_receive(
        stream: bool, server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    """otelmw's layers are innermost: the request it rewrites is the one the user's own
    ``before_llm_call`` hook made (its system note), the arguments it rewrites those
    the ``before_tool_call`` hook made (its units); what otelmw's rewrites made is what
    the provider and the tool get; the layers' spans sit under the calls they rewrote."""
    out = drive({"mode": "kickoff", "stream": stream, "user_hooks": True,
                 "plugin": {"llm_request": 1, "tool_request": 1, "tool_execution": 1}},
                server, rx, tmp_path)
    assert out["errors"] == []
    # the tool got otelmw's city and the user's hook's units
    assert out["tool_calls"] == [{"tool": "get_weather", "city": "Oslo", "units": "kelvin"}]
    assert out["wrapped"] == ["get_weather"]
    posts = chat_posts(server)
    assert len(posts) == 3
    for post in posts:
        assert post.body["max_tokens"] == 77  # otelmw's rewrite
        messages = post.body["messages"]
        assert messages[0]["role"] == "system"
        assert messages[0]["content"].endswith("(hook: be brief)")  # the user's hook, kept
        users = [m["content"] for m in messages if m.get("role") == "user"]
        assert users and all(u.endswith(" [via otelmw]") for u in users)
    # the user's after_tool_call hook still marks the result the model gets
    assert tool_messages(server) == ["sunny in Oslo (kelvin) (checked)"]
    rx.wait_for(lambda: len(rx.spans()) >= 12)
    spans = rx.spans()
    check_crew([s for s in spans if s.name.startswith(("invoke_agent", "chat", "execute_tool"))],
               server, "get_weather")
    by_id = {s.span_id: s for s in spans}
    layers = sorted((s.name, by_id[s.parent_span_id or ""].name) for s in spans
                    if s.name.startswith(("llm_request", "tool_request", "tool_execution")))
    assert layers == sorted([("llm_request probe.rewrite_request", CHAT_SPAN)] * 3 + [
        ("tool_request probe.rewrite_args", "execute_tool get_weather"),
        ("tool_execution probe.wrap_tool", "execute_tool get_weather")])
    chat = rx.spans(CHAT_SPAN)[0].attributes
    assert chat["gen_ai.request.max_tokens"] == 77


def test_the_users_hooks_and_listener_see_and_do_the_same_with_and_without_otelmw(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    """CrewAI's own hooks (``before_llm_call``/``after_llm_call``/``before_tool_call``/
    ``after_tool_call``, in-place changes and a replaced result) and a listener on its
    event bus run as without otelmw; the provider gets the same requests."""
    spec = {"mode": "kickoff", "user_hooks": True, "listener": True}
    bare = drive({**spec, "otelmw": False}, server, rx, tmp_path)
    bare_posts = bodies(server)
    server.clear()
    with_otelmw = drive(spec, server, rx, tmp_path)
    assert with_otelmw["errors"] == bare["errors"] == []
    assert with_otelmw["results"] == bare["results"]
    assert with_otelmw["tool_calls"] == bare["tool_calls"] == [
        {"tool": "get_weather", "city": "Paris", "units": "kelvin"}]
    assert with_otelmw["seen"] == bare["seen"]  # every hook, in order, with its inputs
    assert [h["hook"] for h in bare["seen"]] == [
        "before_llm_call", "before_tool_call", "after_tool_call", "before_llm_call",
        "after_llm_call", "before_llm_call", "after_llm_call"]
    assert with_otelmw["events"] == bare["events"]
    assert "tool_usage_finished get_weather: sunny in Paris (kelvin) (checked)" in bare["events"]
    assert bodies(server) == bare_posts  # what the provider received


def test_a_tool_the_users_own_hook_blocks_never_runs_as_without_otelmw(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    """CrewAI's ``before_tool_call`` returning False blocks the tool before it runs:
    it never reaches otelmw's tool seam (no ``execute_tool`` span), and the model gets
    CrewAI's own block message, as without otelmw."""
    spec = {"mode": "agent_kickoff", "user_hooks": True, "tool": "broken"}
    bare = drive({**spec, "otelmw": False}, server, rx, tmp_path)
    bare_posts = bodies(server)
    server.clear()
    out = drive(spec, server, rx, tmp_path)
    assert out["results"] == bare["results"] and out["tool_calls"] == bare["tool_calls"] == []
    assert bodies(server) == bare_posts
    assert tool_messages(server)[0].startswith("Tool execution blocked by hook.")
    rx.wait_for(lambda: len(rx.spans()) >= 3)
    assert sorted(s.name for s in rx.spans()) == sorted([FORECASTER, CHAT_SPAN, CHAT_SPAN])


# ------------------------------------------------------- blocks, failures
def test_a_pre_tool_call_block_answers_for_the_tool(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": "agent_kickoff", "plugin": {"block": "get_weather"}},
                server, rx, tmp_path)
    assert out["errors"] == [] and out["tool_calls"] == []  # the tool never ran
    assert tool_messages(server) == ["blocked by policy"]
    rx.wait_for(lambda: len(rx.spans()) >= 4)
    (span,) = rx.spans("execute_tool get_weather")
    assert span.attributes["otelmw.result.status"] == "blocked"
    assert span.attributes["otelmw.result.success"] is False
    assert span.attributes["gen_ai.tool.call.id"] == sent_tool_call_ids(server)[0]


def test_a_transform_replaces_what_the_model_gets(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": "agent_kickoff", "plugin": {"transform": 1}}, server, rx, tmp_path)
    assert out["errors"] == [] and len(out["tool_calls"]) == 1
    assert tool_messages(server) == ["transformed: sunny in Paris (imperial)"]


def test_a_raising_tool_fails_its_span_and_crewai_answers_as_without_otelmw(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    bare = drive({"mode": "agent_kickoff", "tool": "broken", "otelmw": False},
                 server, rx, tmp_path)
    bare_posts = bodies(server)
    server.clear()
    out = drive({"mode": "agent_kickoff", "tool": "broken"}, server, rx, tmp_path)
    assert out["errors"] == bare["errors"] == [] and out["results"] == bare["results"]
    assert bodies(server) == bare_posts
    assert tool_messages(server) == ["Error executing tool: tool exploded"]  # CrewAI's own
    rx.wait_for(lambda: len(rx.spans()) >= 4)
    (span,) = rx.spans("execute_tool broken")
    assert span.status_code == ERROR
    assert span.attributes["error.type"] == "builtins.ValueError"
    assert span.attributes["otelmw.result.error_message"] == "tool exploded"
    assert out["failures"] == {}


def test_a_declared_tool_failure_is_a_failed_result(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    """A tool that returns CrewAI's ``ToolFailure`` failed (the ``crewai`` normalizer);
    CrewAI still gets the ``ToolFailure`` itself and tells the model as without otelmw."""
    bare = drive({"mode": "agent_kickoff", "tool": "closed", "otelmw": False},
                 server, rx, tmp_path)
    bare_posts = bodies(server)
    server.clear()
    out = drive({"mode": "agent_kickoff", "tool": "closed"}, server, rx, tmp_path)
    assert out["results"] == bare["results"] and bodies(server) == bare_posts
    assert "Paris station closed" in tool_messages(server)[0]
    rx.wait_for(lambda: len(rx.spans()) >= 4)
    (span,) = rx.spans("execute_tool closed")
    a = span.attributes
    assert a["otelmw.result.success"] is False
    assert a["otelmw.result.error_message"] == "Paris station closed"
    assert a["otelmw.result.metadata.crewai.failure.reason"] == "exception"
    assert a["otelmw.result.raw.type"] == "crewai.tools.tool_failure.ToolFailure"


# ------------------------------------------------------- content and hook records
def test_content_is_captured_only_when_asked_and_is_schema_valid(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": "agent_kickoff"}, server, rx, tmp_path)
    assert out["errors"] == []
    rx.wait_for(lambda: len(rx.spans()) >= 4)
    for key in (*MESSAGE_KEYS, "gen_ai.tool.call.arguments", "gen_ai.tool.call.result",
                "input.value", "output.value"):
        assert not [s.name for s in rx.spans() if key in s.attributes], key
    assert [b for b in exported_texts(rx) if "sunny in" in b or "meteorologist" in b] == []
    rx.clear()
    server.clear()
    drive({"mode": "agent_kickoff"}, server, rx, tmp_path,
          OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="SPAN_ONLY")
    rx.wait_for(lambda: len(rx.spans()) >= 4)
    chats = sorted(rx.spans(CHAT_SPAN), key=lambda s: s.start_ns)
    assert len(chats) == len(server.requests) == 2
    for chat, request in zip(chats, server.requests, strict=True):
        got = {k: validate(k, chat.attributes[k]) for k in MESSAGE_KEYS if k in chat.attributes}
        assert set(got) == {"gen_ai.input.messages", "gen_ai.output.messages",
                            "gen_ai.tool.definitions"}, sorted(got)
        sent = request.body["messages"]
        assert [m["role"] for m in got["gen_ai.input.messages"]] == [m["role"] for m in sent]
        assert [t["name"] for t in got["gen_ai.tool.definitions"]] == list(TOOLS)
    (first_out,) = json.loads(chats[0].attributes["gen_ai.output.messages"])
    (call_part,) = [p for p in first_out["parts"] if p["type"] == "tool_call"]
    assert call_part["name"] == "get_weather" and call_part["arguments"] == {"city": "Paris"}
    (tool,) = rx.spans("execute_tool get_weather")
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"city": "Paris"}
    assert tool.attributes["gen_ai.tool.call.result"] == "sunny in Paris (imperial)"


def test_the_plugins_hook_points_are_records_on_the_tool_span(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    drive({"mode": "agent_kickoff", "plugin": {"block": "nothing"}}, server, rx, tmp_path)
    rx.wait_for(lambda: len(rx.spans()) >= 4 and len(rx.logs()) >= 1)
    (tool,) = rx.spans("execute_tool get_weather")
    records = [x for x in rx.logs() if x.event_name.startswith("otelmw.hook.")]
    assert [x.event_name for x in records] == ["otelmw.hook.pre_tool_call"]
    (rec,) = records
    assert rec.span_id == tool.span_id and rec.trace_id == tool.trace_id
    assert rec.attributes["gen_ai.tool.call.id"] == tool.attributes["gen_ai.tool.call.id"]


def test_crewais_own_telemetry_stays_its_own(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    """Left on, CrewAI's telemetry goes to telemetry.crewai.com through a tracer
    provider of its own (refused here): none of its spans reaches the user's exporter
    nor becomes a parent of otelmw's, whose trace is the same as with it off."""
    out = drive({"mode": "kickoff"}, server, rx, tmp_path, offline=False)
    assert out["errors"] == [] and out["results"] == ["ok"]
    assert out["network"] and all(n.endswith("telemetry.crewai.com") for n in out["network"])
    rx.wait_for(lambda: len(rx.spans()) >= 7)
    check_crew(rx.spans(), server, "get_weather")
    assert {s.resource.get("service.name") for s in rx.spans()} == {"crewai-host-test"}


# ------------------------------------------------------------ fail open, wiring
def test_otelmw_errors_fail_open_and_are_counted(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": "agent_kickoff", "break": True, "layers": ["crewai"]},
                server, rx, tmp_path)
    assert out["errors"] == [] and out["results"] == ["done: sunny in Paris (imperial)"]
    assert len(out["tool_calls"]) == 1 and len(chat_posts(server)) == 2  # nothing twice
    assert out["failures"].get("instrumentation:crewai:chat", 0) == 2
    assert out["failures"].get("instrumentation:crewai:tool_run", 0) == 1


def test_uninstrument_restores_crewai(server: ScriptedLLMServer, rx: OtlpReceiver,
                                      tmp_path: Path) -> None:
    out = drive({"mode": "kickoff", "uninstrument": True}, server, rx, tmp_path)
    assert out["restored"] is True and out["errors"] == [] and out["after_result"] == "ok"
    rx.wait_for(lambda: len(rx.spans()) >= 7)
    assert len(rx.spans(CREW_SPAN)) == 1  # the instrumented run only; the second is bare
    assert len(rx.spans("execute_tool get_weather")) == 1


def _plain_crew_under(launcher: list[str], server: ScriptedLLMServer, rx: OtlpReceiver,
                      tmp_path: Path, env: dict[str, str]) -> str:
    program = SCRIPTS / "plain_crew.py"
    assert not re.search(r"^\s*(import|from)\s+otelmw", program.read_text(), re.MULTILINE)
    proc = subprocess.run([*launcher, sys.executable, str(program)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    assert "CREW ok" in proc.stdout
    return proc.stdout


def test_otelmw_run_instruments_an_unmodified_program_with_a_plugin(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    env = child_env(tmp_path, server.base_url, rx)
    installed_plugin(tmp_path, SCRIPTS / "crew_probe.py", "crew_probe = crew_probe:register",
                     env)
    cmd = otelmw_cmd()
    enable = subprocess.run([*cmd, "plugins", "enable", "crew_probe"], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=TIMEOUT)
    assert enable.returncode == 0, enable.stderr
    stdout = _plain_crew_under([*cmd, "run", "--"], server, rx, tmp_path, env)
    assert "TOOL got Oslo" in stdout  # the plugin's tool_request rewrite ran
    assert all(p.body["max_tokens"] == 77 for p in chat_posts(server))
    rx.wait_for(lambda: len(rx.spans()) >= 10)
    spans = rx.spans()
    check_crew([s for s in spans if s.name.startswith(("invoke_agent", "chat", "execute_tool"))],
               server, "get_weather")
    assert len([s for s in spans if s.name.startswith("tool_execution ")]) == 1
    assert len([s for s in spans if s.name.startswith("llm_request ")]) == 3


@pytest.mark.parametrize("capture", ["SPAN_ONLY", None], ids=["capture", "no-capture"])
def test_opentelemetry_instrument_lights_up_an_unmodified_program(
        capture: str | None, server: ScriptedLLMServer, rx: OtlpReceiver,
        tmp_path: Path) -> None:
    """The zero-code path (``otelmw_crewai`` and ``otelmw_openai`` by their entry points)
    with the stock OTLP exporter; content only under capture."""
    beside = Path(sys.executable).parent / "opentelemetry-instrument"
    launcher = str(beside) if beside.exists() else shutil.which("opentelemetry-instrument")
    assert launcher, "opentelemetry-instrument comes with opentelemetry-instrumentation"
    env = {**child_env(tmp_path, server.base_url, rx), **PROMPT_EXPORT,
           "OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "none",
           "OTEL_LOGS_EXPORTER": "none"}
    if capture is not None:
        env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = capture
    _plain_crew_under([launcher], server, rx, tmp_path, env)
    rx.wait_for(lambda: len(rx.spans()) >= 7, timeout=30)
    spans = rx.spans()
    check_crew(spans, server, "get_weather")
    for chat in rx.spans(CHAT_SPAN):
        present = [k for k in MESSAGE_KEYS if k in chat.attributes]
        if capture is None:
            assert present == []
        else:
            assert "gen_ai.input.messages" in present
            for key in present:
                validate(key, chat.attributes[key])


def test_dependencies_are_declared_honestly() -> None:
    from opentelemetry.instrumentation.dependencies import get_dependency_conflicts

    from otelmw.instrumentation.crewai import CrewAIInstrumentor

    deps = CrewAIInstrumentor().instrumentation_dependencies()
    assert tuple(deps) == ("crewai >= 1.15.30, < 2",)
    assert get_dependency_conflicts(deps) is None

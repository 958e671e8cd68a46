"""pydantic-ai instrumentor against real pydantic-ai runs, fully offline.

Every scenario runs in a fresh subprocess (``tests/pydantic_ai_scripts/driver.py``, or
an unmodified pydantic-ai program under ``otelmw run``) whose ``Agent`` talks through
the real openai SDK to a ``ScriptedLLMServer`` (call the first tool offered, then
answer with its result) and whose telemetry goes through the stock OTLP exporters to a
real ``OtlpReceiver``. Assertions are on what the receiver, the server and the program
got. The same run without otelmw is the reference for "pydantic-ai behaves as without
otelmw". Marked ``host("pydantic-ai", "openai")``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support.cli import otelmw_cmd
from _support.host_scenarios import TIMEOUT, installed_plugin, run_scenario, scenario_env
from _support.otlp_receiver import OtlpReceiver, ReceivedSpan
from _support.scripted_llm import RecordedRequest, ScriptedLLMServer

pytestmark = pytest.mark.host("pydantic-ai", "openai")

SCRIPTS = Path(__file__).resolve().parent / "pydantic_ai_scripts"
INTERNAL, CLIENT = 1, 3
UNSET, OK, ERROR = 0, 1, 2
MODES = ["run_sync", "run", "run_stream", "iter", "run_stream_events"]
AGENT_SPAN = "invoke_agent Weather"
CHAT_SPAN = "chat scripted-model"
TOOLS = ("get_weather", "flaky", "broken")


@pytest.fixture()
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer.calling_tools("Paris", TOOLS) as srv:
        yield srv


def child_env(tmp_path: Path, base_url: str, rx: OtlpReceiver) -> dict[str, str]:
    return scenario_env(tmp_path, rx, service="pydantic-ai-host-test", openai_base_url=base_url)


def drive(spec: dict[str, Any], server: ScriptedLLMServer, rx: OtlpReceiver,
          tmp_path: Path, **env: str) -> dict[str, Any]:
    """Run one driver scenario (``env``: settings on top of ``child_env``'s); returns
    its RESULT (telemetry is flushed on exit)."""
    return run_scenario(SCRIPTS / "driver.py", spec,
                        {**child_env(tmp_path, server.base_url, rx), **env}, tmp_path)


def traces(spans: list[ReceivedSpan]) -> list[list[ReceivedSpan]]:
    by_trace: dict[str, list[ReceivedSpan]] = {}
    for s in sorted(spans, key=lambda s: s.start_ns):
        by_trace.setdefault(s.trace_id, []).append(s)
    return list(by_trace.values())


def turn_tree(spans: list[ReceivedSpan]) -> tuple[ReceivedSpan, list[ReceivedSpan]]:
    """The one root ``invoke_agent`` span of a trace and its direct children in start
    order (every span of the trace under the root)."""
    roots = [s for s in spans if s.parent_span_id is None]
    assert [r.name for r in roots] == [AGENT_SPAN], [(s.name, s.parent_span_id) for s in spans]
    root = roots[0]
    ids = {s.span_id for s in spans}
    assert all(s.parent_span_id in ids for s in spans if s is not root), "orphan span"
    return root, [s for s in spans if s.parent_span_id == root.span_id]


def chat_posts(server: ScriptedLLMServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.api in ("chat", "responses")]


def sent_messages(post: RecordedRequest) -> list[dict[str, Any]]:
    body = post.body
    return list(body.get("messages") or body.get("input") or [])


def bodies(server: ScriptedLLMServer) -> list[Any]:
    """What the provider received, with the server's own call ids made comparable
    across two servers' runs."""
    return json.loads(re.sub(r'"call_\d+"', '"call_N"', json.dumps(
        [p.body for p in chat_posts(server)])))


def tool_call_ids(server: ScriptedLLMServer) -> list[str]:
    """The ids of the tool calls the model made, as sent back to it."""
    ids = []
    for m in sent_messages(chat_posts(server)[-1]):
        for call in m.get("tool_calls") or ():
            ids.append(call["id"])
        if m.get("type") == "function_call":
            ids.append(m["call_id"])
    return ids


def check_turn(spans: list[ReceivedSpan], server: ScriptedLLMServer, tool: str) -> None:
    """One trace: ``invoke_agent`` over a chat, the tool, a chat; one ``chat`` CLIENT
    span per provider request, describing that request's response."""
    (trace,) = traces(spans)
    root, children = turn_tree(trace)
    assert root.kind == INTERNAL and root.status_code != ERROR
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == "Weather"
    assert root.attributes["otelmw.runtime.id"] == "pydantic-ai"
    assert [s.name for s in children] == [CHAT_SPAN, f"execute_tool {tool}", CHAT_SPAN]
    posts = chat_posts(server)
    chats = [s for s in trace if s.name.startswith("chat ")]
    assert len(chats) == len(posts) == 2
    for chat, post in zip(chats, posts, strict=True):
        a = chat.attributes
        assert chat.kind == CLIENT and chat.status_code != ERROR
        assert a["gen_ai.provider.name"] == "openai"
        assert a["gen_ai.response.id"] == post.response_id
        assert post.usage is not None
        assert a["gen_ai.usage.input_tokens"] == post.usage["input_tokens"]
        assert a["server.port"] == server.port
        assert bool(a.get("gen_ai.request.stream")) == post.stream
    (tool_span,) = [s for s in trace if s.name.startswith("execute_tool ")]
    assert [tool_span.attributes["gen_ai.tool.call.id"]] == tool_call_ids(server)
    assert tool_span.attributes["otelmw.runtime.id"] == "pydantic-ai"


# --------------------------------------------------------------------- run modes
@pytest.mark.parametrize("mode", MODES)
def test_every_run_mode_is_one_trace_with_one_span_per_operation(
        mode: str, server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": mode}, server, rx, tmp_path)
    assert out["errors"] == [] and out["results"][0].startswith("done: ")
    assert out["tool_calls"] == [{"tool": "get_weather", "city": "Paris", "units": "imperial"}]
    rx.wait_for(lambda: len(rx.spans()) >= 4)
    check_turn(rx.spans(), server, "get_weather")
    assert [p.stream for p in chat_posts(server)] == [mode in ("run_stream",
                                                               "run_stream_events")] * 2
    tool = rx.spans("execute_tool get_weather")[0].attributes
    assert tool["otelmw.result.success"] is True and tool["otelmw.result.status"] == "ok"
    assert tool["otelmw.result.raw.type"] == "dict"  # the tool's own result, normalized
    assert out["failures"] == {}


@pytest.mark.parametrize("mode", ["run", "run_stream"])
def test_the_responses_api_route_is_instrumented_the_same(
        mode: str, server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": mode, "api": "responses"}, server, rx, tmp_path)
    assert out["errors"] == [] and out["results"][0].startswith("done: ")
    rx.wait_for(lambda: len(rx.spans()) >= 4)
    assert {p.api for p in server.requests} == {"responses"}
    check_turn(rx.spans(), server, "get_weather")


def test_each_run_is_its_own_trace(server: ScriptedLLMServer, rx: OtlpReceiver,
                                   tmp_path: Path) -> None:
    out = drive({"mode": "run_sync", "turns": 2}, server, rx, tmp_path)
    assert out["errors"] == []
    rx.wait_for(lambda: len(rx.spans()) >= 8)
    runs = traces(rx.spans())
    assert len(runs) == 2
    for spans in runs:
        _root, children = turn_tree(spans)
        assert [s.name for s in children] == [CHAT_SPAN, "execute_tool get_weather", CHAT_SPAN]


# ---------------------------------------------------------- the user's plugin
@pytest.mark.parametrize("mode", ["run_sync", "run_stream"])
def test_the_plugin_changes_what_the_model_and_the_tool_receive(
        mode: str, server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    """otelmw's layer is innermost: the request it rewrites is the one the user's own
    capability made (its temperature), and what otelmw's rewrites made is what the
    provider and the tool get; the layers' spans sit under the calls they rewrote."""
    out = drive({"mode": mode, "user_capability": True,
                 "plugin": {"llm_request": 1, "tool_request": 1, "tool_execution": 1}},
                server, rx, tmp_path)
    assert out["errors"] == []
    # the tool got otelmw's city; the user's own before_tool_execute still added units
    assert out["tool_calls"] == [{"tool": "get_weather", "city": "Oslo", "units": "metric"}]
    assert out["wrapped"] == ["get_weather"]
    for post in chat_posts(server):
        assert post.body["max_completion_tokens"] == 77  # otelmw's rewrite
        assert post.body["temperature"] == 0.25  # the user's capability's, kept
        users = [m["content"] for m in sent_messages(post) if m.get("role") == "user"]
        assert users == ["Weather in Paris? (turn 0) [via otelmw]"]
    assert "Oslo" in out["results"][0]
    rx.wait_for(lambda: len(rx.spans()) >= 8)
    spans = rx.spans()
    check_turn([s for s in spans if s.name.startswith(("invoke_agent", "chat", "execute_tool"))],
               server, "get_weather")
    by_id = {s.span_id: s for s in spans}
    layers = {s.name: by_id[s.parent_span_id or ""].name for s in spans
              if s.name.startswith(("llm_request", "tool_request", "tool_execution"))}
    assert layers == {"llm_request probe.rewrite_request": CHAT_SPAN,
                      "tool_request probe.rewrite_args": "execute_tool get_weather",
                      "tool_execution probe.wrap_tool": "execute_tool get_weather"}
    assert len(rx.spans("llm_request probe.rewrite_request")) == 2
    chat = rx.spans(CHAT_SPAN)[0].attributes
    assert chat["gen_ai.request.max_tokens"] == 77 and chat["gen_ai.request.temperature"] == 0.25


def test_the_users_own_capability_sees_and_does_the_same_with_and_without_otelmw(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    spec = {"mode": "run_stream", "user_capability": True}
    bare = drive({**spec, "otelmw": False}, server, rx, tmp_path)
    bare_posts = bodies(server)
    server.clear()
    with_otelmw = drive(spec, server, rx, tmp_path)
    assert with_otelmw["results"] == bare["results"]
    assert with_otelmw["tool_calls"] == bare["tool_calls"]
    assert with_otelmw["seen"] == bare["seen"]  # every hook, in order, with its inputs
    assert [h["hook"] for h in bare["seen"]] == [
        "before_model_request", "before_tool_execute", "after_tool_execute",
        "before_model_request"]
    assert bodies(server) == bare_posts  # what the provider received
    assert bare_posts[0]["temperature"] == 0.25


# ------------------------------------------------- pydantic-ai's own hook points
HOOK_SCHEMA = "pydantic-ai.capabilities.v1"


@pytest.mark.parametrize("tool", ["get_weather", "broken"])
def test_the_users_hook_firings_are_records_and_answer_as_without_otelmw(
        tool: str, server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    """The hooks the user registers on pydantic-ai (a ``Hooks`` capability) and a
    capability class of the user's run by pydantic-ai's rules, as without otelmw; each
    firing they answer is an ``otelmw.hook.<hook point>`` record where pydantic-ai fired
    it; otelmw registers nothing pydantic-ai can see."""
    spec = {"mode": "run", "user_hooks": True, "user_capability": True, "tool": tool}
    bare = drive({**spec, "otelmw": False}, server, rx, tmp_path)
    bare_posts = bodies(server)
    server.clear()
    out = drive(spec, server, rx, tmp_path)
    assert out["errors"] == bare["errors"] == []
    assert out["results"] == bare["results"] and out["seen"] == bare["seen"]
    assert out["tool_calls"] == bare["tool_calls"] and bodies(server) == bare_posts
    if tool == "get_weather":  # the hook's units over the capability's (pydantic-ai's order)
        assert out["tool_calls"] == [{"tool": "get_weather", "city": "Paris",
                                      "units": "kelvin"}]
    else:  # the hook answered for the tool: it never ran
        assert out["tool_calls"] == []
    rx.wait_for(lambda: len(rx.spans()) >= 4 and len(rx.logs()) >= 5)
    spans = rx.spans()
    (root,) = rx.spans(AGENT_SPAN)
    (tool_span,) = rx.spans(f"execute_tool {tool}")
    records = [x for x in rx.logs() if x.event_name.startswith("otelmw.hook.")]
    assert all(x.attributes["otelmw.schema.telemetry"] == HOOK_SCHEMA for x in records)
    assert all(x.trace_id == root.trace_id for x in records)
    by_hook: dict[str, list[Any]] = {}
    for x in sorted(records, key=lambda x: x.time_ns):
        by_hook.setdefault(x.event_name.removeprefix("otelmw.hook."), []).append(x)
    # answered by the user: the Recorder class (before_model_request, before/after
    # tool execute) and the Hooks functions; nothing else (before_tool_validate is
    # filtered to a tool not called; no user callback answers the node or run hooks);
    # a skipped tool's lifecycle ends at its before hook (pydantic-ai fires no after)
    assert sorted(by_hook) == sorted(["after_model_request", "before_model_request",
                                      "before_tool_execute"] + (
        ["after_tool_execute"] if tool == "get_weather" else [])), sorted(by_hook)
    assert len(by_hook["before_model_request"]) == len(by_hook["after_model_request"]) == 2
    for x in by_hook["before_model_request"] + by_hook["after_model_request"]:
        assert x.attributes["gen_ai.request.model"] == "scripted-model"
        assert x.span_id in {s.span_id for s in spans}
    (before,) = by_hook["before_tool_execute"]
    a = before.attributes
    assert a["gen_ai.tool.name"] == tool and a["otelmw.hook.failures"] == 0
    assert a["gen_ai.tool.call.id"] == tool_span.attributes["gen_ai.tool.call.id"]
    assert before.span_id == tool_span.span_id  # fired inside the tool call's lifecycle
    assert a["otelmw.tool.args.digest"].startswith("sha256")
    if tool == "get_weather":
        assert a["otelmw.result.status"] == "ok"
        assert by_hook["after_tool_execute"][0].span_id == tool_span.span_id
    else:  # the hook's SkipToolExecution: pydantic-ai's block
        assert (a["otelmw.result.status"], a["error.type"]) == ("blocked", "SkipToolExecution")


def test_hook_firings_are_not_recorded_with_hook_events_none(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": "run", "user_hooks": True}, server, rx, tmp_path,
                OTELMW_HOOK_EVENTS="none")
    assert out["errors"] == [] and len(out["seen"]) == 3
    rx.wait_for(lambda: len(rx.spans()) >= 4)
    assert [x.event_name for x in rx.logs() if x.event_name.startswith("otelmw.hook.")] == []


# -------------------------------------------------------- blocks, control flow
def test_a_pre_tool_call_block_is_skip_tool_execution(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": "run_stream_events", "plugin": {"block": "get_weather"}},
                server, rx, tmp_path)
    assert out["errors"] == [] and out["tool_calls"] == []  # the tool never ran
    tool_message = sent_messages(chat_posts(server)[-1])[-1]
    assert tool_message["role"] == "tool" and tool_message["content"] == "blocked by policy"
    rx.wait_for(lambda: len(rx.spans()) >= 4)
    (span,) = rx.spans("execute_tool get_weather")
    assert span.attributes["otelmw.result.status"] == "blocked"
    assert span.attributes["otelmw.result.success"] is False
    assert span.attributes["gen_ai.tool.call.id"] == tool_call_ids(server)[0]


def test_a_transform_replaces_what_the_model_gets(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": "run", "plugin": {"transform": 1}}, server, rx, tmp_path)
    assert out["errors"] == [] and len(out["tool_calls"]) == 1
    tool_message = sent_messages(chat_posts(server)[-1])[-1]
    assert tool_message["content"].startswith("transformed: ")


def test_model_retry_from_a_tool_is_control_flow_not_a_failure(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    bare = drive({"mode": "iter", "tool": "flaky", "otelmw": False}, server, rx, tmp_path)
    bare_posts = bodies(server)
    server.clear()
    out = drive({"mode": "iter", "tool": "flaky"}, server, rx, tmp_path)
    assert out["results"] == bare["results"] and out["errors"] == []
    assert bodies(server) == bare_posts  # the same retry prompt
    assert "try another city" in json.dumps(bare_posts[-1])
    rx.wait_for(lambda: len(rx.spans()) >= 4)
    (span,) = rx.spans("execute_tool flaky")
    assert span.status_code == UNSET and "error.type" not in span.attributes
    a = span.attributes
    assert a["otelmw.result.success"] is True
    assert a["otelmw.result.metadata.pydantic_ai.control_flow"] == "model_retry"
    (root,) = rx.spans(AGENT_SPAN)
    assert root.status_code != ERROR
    rx.wait_for_metric("otelmw.tool.results")
    points = [p for m in rx.metrics("otelmw.tool.results") for p in m.data_points]
    assert [p.attributes["otelmw.result.success"] for p in points] == [True]
    assert out["failures"] == {}


def test_a_raising_tool_fails_the_span_and_the_run_as_without_otelmw(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    bare = drive({"mode": "run_sync", "tool": "broken", "otelmw": False}, server, rx, tmp_path)
    out = drive({"mode": "run_sync", "tool": "broken"}, server, rx, tmp_path)
    assert out["errors"] == bare["errors"] == ["ValueError: tool exploded"]
    rx.wait_for(lambda: len(rx.spans()) >= 3)
    (span,) = rx.spans("execute_tool broken")
    assert span.status_code == ERROR
    assert span.attributes["error.type"] == "builtins.ValueError"
    assert span.attributes["otelmw.result.error_message"] == "tool exploded"
    (root,) = rx.spans(AGENT_SPAN)
    assert root.status_code == ERROR


# ------------------------------------------ pydantic-ai's own instrumentation
def test_with_pydantic_ais_own_instrumentation_each_operation_has_one_span(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    """The rule: pydantic-ai's spans are the run's; otelmw runs its contract (the
    plugin still rewrites) and opens no span of its own, nor does its openai layer."""
    native = drive({"mode": "run_stream", "native": True, "otelmw": False,
                    "user_hooks": True}, server, rx, tmp_path)
    rx.wait_for(lambda: len(rx.spans()) >= 4)
    native_names = sorted(s.name for s in rx.spans())
    rx.clear()
    server.clear()
    out = drive({"mode": "run_stream", "native": True, "user_hooks": True,
                 "plugin": {"llm_request": 1, "tool_request": 1}}, server, rx, tmp_path)
    assert out["errors"] == [] and native["errors"] == []
    # otelmw's rewrite, then the user's before_tool_execute hook (units)
    assert out["tool_calls"] == [{"tool": "get_weather", "city": "Oslo", "units": "kelvin"}]
    assert all(p.body["max_completion_tokens"] == 77 for p in chat_posts(server))
    rx.wait_for(lambda: len(rx.spans()) >= 4)
    spans = rx.spans()
    assert sorted(s.name for s in spans) == native_names == sorted(
        [AGENT_SPAN, CHAT_SPAN, CHAT_SPAN, "execute_tool get_weather"])
    assert not [s.name for s in spans if any(k.startswith("otelmw.") for k in s.attributes)]
    # the user's hook firings are not otelmw's records here either
    assert not [x for x in rx.logs() if x.event_name.startswith("otelmw.hook.")]
    assert all("logfire.msg" in s.attributes or "logfire.json_schema" in s.attributes
               or "model_request_parameters" in s.attributes for s in spans)


# ------------------------------------------------------------ fail open, wiring
def test_otelmw_errors_fail_open_and_are_counted(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"mode": "run_stream", "break": True, "layers": ["pydantic-ai"]},
                server, rx, tmp_path)
    assert out["errors"] == [] and out["results"][0].startswith("done: ")
    assert len(out["tool_calls"]) == 1 and len(chat_posts(server)) == 2  # nothing twice
    assert out["failures"].get("instrumentation:pydantic-ai:chat", 0) == 2
    assert out["failures"].get("instrumentation:pydantic-ai:execute_tool", 0) == 1


def test_uninstrument_restores_agent_iter(server: ScriptedLLMServer, rx: OtlpReceiver,
                                          tmp_path: Path) -> None:
    out = drive({"mode": "run_sync", "uninstrument": True}, server, rx, tmp_path)
    assert out["restored"] is True and out["errors"] == []
    rx.wait_for(lambda: len(rx.spans()) >= 4)
    assert len(rx.spans(AGENT_SPAN)) == 1  # the instrumented run only; the second is bare


def test_otelmw_run_instruments_an_unmodified_program_with_a_plugin(
        server: ScriptedLLMServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    env = child_env(tmp_path, server.base_url, rx)
    installed_plugin(tmp_path, SCRIPTS / "pai_probe.py", "pai_probe = pai_probe:register", env)
    cmd = otelmw_cmd()
    enable = subprocess.run([*cmd, "plugins", "enable", "pai_probe"], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=TIMEOUT)
    assert enable.returncode == 0, enable.stderr
    program = SCRIPTS / "plain_agent.py"
    assert not re.search(r"^\s*(import|from)\s+otelmw", program.read_text(), re.MULTILINE)
    proc = subprocess.run([*cmd, "run", "--", sys.executable, str(program)], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    assert "SYNC done: " in proc.stdout and "STREAM done: " in proc.stdout
    assert proc.stdout.count("Oslo") == 2  # the plugin's tool_request rewrite ran
    assert all(p.body["max_completion_tokens"] == 77 for p in chat_posts(server))
    rx.wait_for(lambda: len(rx.spans()) >= 12)
    runs = traces(rx.spans())
    assert len(runs) == 2
    for spans in runs:
        root, children = turn_tree(spans)
        assert root.name == AGENT_SPAN
        assert [s.name for s in children] == [CHAT_SPAN, "execute_tool get_weather", CHAT_SPAN]
        assert len([s for s in spans if s.name.startswith("tool_execution ")]) == 1
    assert len(rx.spans(CHAT_SPAN)) == len(chat_posts(server)) == 4


def test_dependencies_are_declared_honestly() -> None:
    from opentelemetry.instrumentation.dependencies import get_dependency_conflicts

    from otelmw.instrumentation.pydantic_ai import PydanticAIInstrumentor

    deps = PydanticAIInstrumentor().instrumentation_dependencies()
    assert tuple(deps) == ("pydantic-ai-slim >= 2.62.0, < 3",)
    assert get_dependency_conflicts(deps) is None

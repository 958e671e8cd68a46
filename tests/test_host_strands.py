"""Strands Agents instrumentor against real Strands runs, fully offline.

Every scenario runs in a fresh subprocess (``tests/strands_scripts/driver.py``, or an
unmodified Strands program under ``otelmw run``) whose ``Agent`` talks through Strands'
``OpenAIModel`` (the real openai SDK) to a ``ScriptedLLMServer`` (call the tool, then
answer with its result); telemetry goes through the stock OTLP exporters to a real
``OtlpReceiver``. The same run without otelmw is the reference for "Strands behaves as
without otelmw". Strands' own tracer records under otelmw (otelmw sets the tracer
provider): these tests hold otelmw to its rule about Strands' spans (one
``invoke_agent``, one ``chat`` per provider request, one ``execute_tool`` per tool call:
otelmw records on Strands' own, docs/telemetry.md). Marked ``host("strands", "openai")``.
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
from _support.host_scenarios import TIMEOUT, assert_no_canary, run_scenario, scenario_env
from _support.otlp_receiver import OtlpReceiver, ReceivedSpan
from _support.scripted_llm import RecordedRequest, ScriptedLLMServer
from _support.semconv_schemas import MESSAGE_KEYS, validate

pytestmark = pytest.mark.host("strands", "openai")

SCRIPTS = Path(__file__).resolve().parent / "strands_scripts"
INTERNAL, CLIENT = 1, 3
ERROR = 2
MODES = ["call", "invoke_async", "stream_async"]
AGENT_SPAN = "invoke_agent Weather"
CHAT_SPAN = "chat"  # Strands' model-invocation span, which otelmw records the call on
CYCLE_SPAN = "execute_event_loop_cycle"
# What Strands' own tracer sets on its chat span (measured: Strands 1.62), which otelmw
# leaves as Strands has them; the timing ones vary by run. By default, and under the
# latest conventions with Strands' messages as span attributes (and otelmw's capture on,
# whose message attributes and provider name would otherwise differ from Strands').
STRANDS_USAGE_KEYS = {"gen_ai.usage.prompt_tokens", "gen_ai.usage.input_tokens",
                      "gen_ai.usage.completion_tokens", "gen_ai.usage.output_tokens",
                      "gen_ai.usage.total_tokens"}
STRANDS_CHAT_KEYS = {
    "default": {"gen_ai.operation.name", "gen_ai.system", "gen_ai.request.model",
                *STRANDS_USAGE_KEYS},
    "latest": {"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model",
               "gen_ai.input.messages", "gen_ai.system_instructions",
               "gen_ai.output.messages", *STRANDS_USAGE_KEYS}}
CONVENTIONS = {"default": {}, "latest": {
    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental,gen_ai_span_attributes_only",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_AND_EVENT"}}
STRANDS_TIMING_KEYS = {"gen_ai.event.start_time", "gen_ai.event.end_time",
                       "gen_ai.server.time_to_first_token", "gen_ai.server.request.duration"}
TOOL_SPAN = "execute_tool get_weather"


@pytest.fixture()
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer.calling_tools("Paris", ("get_weather",)) as srv:
        yield srv


def drive(spec: dict[str, Any], server: ScriptedLLMServer, rx: OtlpReceiver,
          tmp_path: Path, **env: str) -> dict[str, Any]:
    """Run one driver scenario (``env``: settings on top of the scenario's)."""
    base = scenario_env(tmp_path, rx, service="strands-host-test",
                        openai_base_url=server.base_url)
    return run_scenario(SCRIPTS / "driver.py", spec, {**base, **env}, tmp_path)


def chat_posts(server: ScriptedLLMServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.api == "chat"]


def bodies(server: ScriptedLLMServer) -> list[Any]:
    """What the provider received, the server's own call ids made comparable."""
    return json.loads(re.sub(r'"call_\d+"', '"call_N"', json.dumps(
        [p.body for p in chat_posts(server)])))


def ancestors(spans: list[ReceivedSpan], span: ReceivedSpan) -> list[str]:
    by_id = {s.span_id: s for s in spans}
    out, parent = [], by_id.get(span.parent_span_id or "")
    while parent is not None:
        out.append(parent.name)
        parent = by_id.get(parent.parent_span_id or "")
    return out


def model_call_ids(server: ScriptedLLMServer) -> list[str]:
    return [c["id"] for m in chat_posts(server)[-1].body["messages"]
            if m["role"] == "assistant" for c in m.get("tool_calls") or ()]


@pytest.mark.parametrize("mode", MODES)
def test_a_run_is_one_trace_with_one_span_per_operation(
        mode: str, server: ScriptedLLMServer, tmp_path: Path) -> None:
    with OtlpReceiver() as rx:
        out = drive({"mode": mode}, server, rx, tmp_path)
        spans = rx.spans()
    assert out["answer"] == "done: sunny in Paris" and out["failures"] == {}
    assert len({s.trace_id for s in spans}) == 1, sorted(s.name for s in spans)
    roots = [s for s in spans if s.parent_span_id is None]
    # Strands' own invoke_agent span is the run's: otelmw's turn opens no second one
    assert [r.name for r in roots] == [AGENT_SPAN]
    assert [s.name for s in spans if s.name.startswith("invoke_agent")] == [AGENT_SPAN]
    root = roots[0]
    assert root.kind == INTERNAL and root.attributes["gen_ai.operation.name"] == "invoke_agent"
    posts = chat_posts(server)
    # one chat span per provider request: Strands' own, otelmw's call recorded on it
    assert [s.name for s in spans if s.name.startswith("chat")] == [CHAT_SPAN] * 2
    chats = sorted((s for s in spans if s.name == CHAT_SPAN), key=lambda s: s.start_ns)
    assert len(chats) == len(posts) == 2
    for chat, post in zip(chats, posts, strict=True):
        a = chat.attributes
        assert chat.kind == INTERNAL and chat.status_code != ERROR  # Strands' kind
        assert a["gen_ai.system"] == "strands-agents"  # Strands' own attributes
        assert post.usage is not None
        assert a["gen_ai.usage.total_tokens"] == sum(post.usage.values())
        assert a["gen_ai.provider.name"] == "openai"  # and otelmw's
        assert a["gen_ai.response.id"] == post.response_id  # enriched by the openai layer
        assert a["gen_ai.usage.input_tokens"] == post.usage["input_tokens"]
        assert a["server.port"] == server.port and a["otelmw.api_mode"] == "chat_completions"
        assert "otelmw.turn.id" in a and "otelmw.api_request.id" in a
        # otelmw's record ended with the model's stream, before Strands ended its span
        assert a["otelmw.stream.ended_by"] == "exhausted"
        assert a["gen_ai.response.finish_reasons"]
        assert ancestors(spans, chat)[0] == CYCLE_SPAN  # where Strands puts it
    (tool,) = [s for s in spans if s.name.startswith("execute_tool")]  # one span per call
    a = tool.attributes
    assert tool.name == TOOL_SPAN and tool.kind == INTERNAL
    assert a["gen_ai.tool.call.id"] == model_call_ids(server)[0]
    assert a["otelmw.result.status"] == "ok" and a["otelmw.result.success"] is True
    assert a["otelmw.runtime.id"] == "strands"
    assert a["gen_ai.system"] == "strands-agents"  # Strands' own span, decorated by otelmw
    assert root.name in ancestors(spans, tool)
    turn_ids = {s.attributes.get("otelmw.turn.id") for s in [*chats, tool]}
    assert len(turn_ids) == 1 and None not in turn_ids


def test_strands_behaves_as_without_otelmw(tmp_path: Path) -> None:
    runs = []
    for on in (False, True):
        with ScriptedLLMServer.calling_tools("Paris", ("get_weather",)) as srv, \
                OtlpReceiver() as rx:
            cwd = tmp_path / ("with" if on else "without")
            cwd.mkdir()
            out = drive({"otelmw": on}, srv, rx, cwd)
            runs.append((out, bodies(srv)))
    (plain, plain_bodies), (observed, observed_bodies) = runs
    assert observed_bodies == plain_bodies
    for key in ("answer", "tool_calls", "hooks", "middleware"):
        assert observed[key] == plain[key], key
    assert plain["hooks"][0] == ["before", "get_weather", {"city": "Paris"}]
    assert plain["middleware"][0] == ["model", 1]


@pytest.mark.parametrize("conventions", sorted(CONVENTIONS))
def test_strands_own_chat_attributes_are_as_without_otelmw(conventions: str,
                                                           tmp_path: Path) -> None:
    """The same turn with Strands' tracing alone (the SDK's tracer provider, no otelmw)
    and with otelmw: Strands' chat spans have the same names, kind, status and every
    attribute of Strands' the same value (the timing ones aside); otelmw only adds."""
    runs = []
    for on in (False, True):
        with ScriptedLLMServer.calling_tools("Paris", ("get_weather",)) as srv, \
                OtlpReceiver() as rx:
            cwd = tmp_path / ("with" if on else "without")
            cwd.mkdir()
            drive({"otelmw": on, "tracing": True}, srv, rx, cwd, **CONVENTIONS[conventions])
            runs.append(sorted((s for s in rx.spans() if s.name.startswith("chat")),
                               key=lambda s: s.start_ns))
    plain, observed = runs
    assert [s.name for s in plain] == [s.name for s in observed] == [CHAT_SPAN] * 2
    for alone, under in zip(plain, observed, strict=True):
        assert (under.kind, under.status_code) == (alone.kind, alone.status_code) == (
            INTERNAL, 1)
        strands_keys = set(alone.attributes) - STRANDS_TIMING_KEYS
        # what Strands sets (docs/telemetry.md)
        assert strands_keys == STRANDS_CHAT_KEYS[conventions]
        assert {k: under.attributes[k] for k in strands_keys} == {
            k: alone.attributes[k] for k in strands_keys}
        assert STRANDS_TIMING_KEYS & set(alone.attributes) <= set(under.attributes)
        assert len(under.events) == len(alone.events)  # Strands' message events
        added = set(under.attributes) - set(alone.attributes)
        assert {"gen_ai.response.id", "otelmw.turn.id", "server.port"} <= added
        if conventions == "default":  # (latest: Strands names its provider itself)
            assert under.attributes["gen_ai.provider.name"] == "openai"
        else:  # otelmw's capture adds what Strands does not record
            assert "gen_ai.tool.definitions" in added


def test_a_failed_model_request_is_strands_failed_chat_span_with_otelmw_s_error_type(
        tmp_path: Path) -> None:
    """The provider answers 400: Strands raises, as without otelmw; its one chat span
    ends failed with Strands' own status and exception event, otelmw's ``error.type``
    beside them."""
    runs = []
    for on in (False, True):
        with ScriptedLLMServer.calling_tools("Paris", ("get_weather",)) as srv, \
                OtlpReceiver() as rx:
            srv.push_error(400, "scripted refusal")
            cwd = tmp_path / ("with" if on else "without")
            cwd.mkdir()
            out = drive({"otelmw": on, "tracing": True}, srv, rx, cwd)
            runs.append((out, [s for s in rx.spans() if s.name.startswith("chat")]))
    (plain, (alone,)), (observed, (under,)) = runs
    assert observed["answer"] == plain["answer"] == "raised BadRequestError"
    assert under.name == CHAT_SPAN and under.kind == INTERNAL
    assert (under.status_code, under.status_message) == (alone.status_code,
                                                         alone.status_message)
    assert under.status_code == ERROR and "scripted refusal" in under.status_message
    assert [e.name for e in under.events] == [e.name for e in alone.events]
    assert under.attributes["error.type"] == "openai.BadRequestError"
    assert "error.type" not in alone.attributes
    assert under.attributes["gen_ai.provider.name"] == "openai"


def test_a_model_called_outside_an_agent_is_otelmw_s_own_chat_span(
        server: ScriptedLLMServer, tmp_path: Path) -> None:
    """``OpenAIModel.stream`` called directly: no span of Strands' is current, so the
    call has otelmw's own ``chat {model}`` CLIENT span (no host span to record it on)."""
    with OtlpReceiver() as rx:
        out = drive({"mode": "model"}, server, rx, tmp_path)
        spans = rx.spans()
    assert out["answer"] == "ok" and out["failures"] == {}  # (no tools offered)
    (post,) = chat_posts(server)
    (chat,) = [s for s in spans if s.name.startswith("chat")]
    assert chat.name == "chat scripted-model" and chat.kind == CLIENT
    assert chat.parent_span_id is None and "gen_ai.system" not in chat.attributes
    assert chat.attributes["gen_ai.response.id"] == post.response_id


def test_the_plugin_changes_what_the_model_and_the_tool_receive(
        server: ScriptedLLMServer, tmp_path: Path) -> None:
    spec = {"plugin": {"llm_request": True, "tool_request": True, "wrap": True}}
    with OtlpReceiver() as rx:
        out = drive(spec, server, rx, tmp_path)
        spans = rx.spans()
        logs = rx.logs()
    assert [p.body["max_tokens"] for p in chat_posts(server)] == [77, 77]
    assert out["tool_calls"] == [{"city": "Oslo"}] and out["wrapped"] == ["get_weather"]
    # the user's own hook and middleware run before otelmw's layer: they see the model's word
    assert ["before", "get_weather", {"city": "Paris"}] in out["hooks"]
    assert ["tool", "get_weather", {"city": "Paris"}] in out["middleware"]
    by_id = {s.span_id: s for s in spans}
    (tool,) = [s for s in spans if s.name == TOOL_SPAN]
    kinds = {s.attributes.get("otelmw.middleware.kind"): s for s in spans
             if by_id.get(s.parent_span_id or "") is tool or s.parent_span_id == tool.span_id}
    assert kinds["tool_request"].attributes["otelmw.middleware.outcome"] == "rewritten"
    wrappers = [s for s in spans if s.attributes.get("otelmw.middleware.kind") == "tool_execution"]
    assert len(wrappers) == 1 and wrappers[0].attributes["otelmw.middleware.outcome"] == "passed"
    assert tool.span_id in {wrappers[0].parent_span_id} | {
        s.parent_span_id for s in spans if s.span_id == wrappers[0].parent_span_id}
    chats = [s for s in spans if s.name == CHAT_SPAN]
    assert len(chats) == 2 and all(c.attributes["gen_ai.request.max_tokens"] == 77
                                   for c in chats)
    for chat in chats:  # the contract's layers are children of Strands' chat span
        (rewrite,) = [s for s in spans if s.parent_span_id == chat.span_id
                      and s.attributes.get("otelmw.middleware.kind") == "llm_request"]
        assert rewrite.attributes["otelmw.middleware.outcome"] == "rewritten"
    assert out["failures"] == {}
    assert logs is not None


def test_a_block_is_the_tool_result_the_model_gets(
        server: ScriptedLLMServer, tmp_path: Path) -> None:
    with OtlpReceiver() as rx:
        out = drive({"plugin": {"block": "get_weather"}}, server, rx, tmp_path)
        rx.wait_for(lambda: any(x.event_name == "otelmw.hook.pre_tool_call" for x in rx.logs()))
        spans, logs = rx.spans(), rx.logs()
    assert out["tool_calls"] == []
    tool_msgs = [m for m in chat_posts(server)[-1].body["messages"] if m["role"] == "tool"]
    assert "blocked by policy" in json.dumps(tool_msgs)
    # Strands' after-tool hook sees the block as the tool's error result
    after = [h for h in out["hooks"] if h[0] == "after"]
    assert after and after[0][2] == "error" and "blocked by policy" in json.dumps(after[0][3])
    (tool,) = [s for s in spans if s.name.startswith("execute_tool")]
    assert tool.attributes["otelmw.result.status"] == "blocked"
    records = [x for x in logs if x.event_name == "otelmw.hook.pre_tool_call"]
    assert [x.span_id for x in records] == [tool.span_id]


def test_a_transformed_result_is_what_the_model_gets(
        server: ScriptedLLMServer, tmp_path: Path) -> None:
    with OtlpReceiver() as rx:
        out = drive({"plugin": {"transform": True}}, server, rx, tmp_path)
    assert out["tool_calls"] == [{"city": "Paris"}]
    tool_msgs = [m for m in chat_posts(server)[-1].body["messages"] if m["role"] == "tool"]
    assert "transformed: sunny in Paris" in json.dumps(tool_msgs)


def test_a_streaming_tool_s_events_reach_strands_as_they_come(
        server: ScriptedLLMServer, tmp_path: Path) -> None:
    """The tool waits for the user's callback handler to see its progress event: handed
    on only after the tool ended, it would say ``late``."""
    with OtlpReceiver() as rx:
        out = drive({"tool": "stream", "plugin": {"wrap": True}}, server, rx, tmp_path)
        spans = rx.spans()
    assert out["streamed"][0] == "looking up Paris"
    assert "sunny in Paris (live progress)" in out["answer"]
    (tool,) = [s for s in spans if s.name.startswith("execute_tool")]
    assert tool.attributes["otelmw.result.status"] == "ok" and out["wrapped"] == ["get_weather"]


def test_a_raising_tool_is_a_failed_result_and_strands_answers_the_model_as_without_otelmw(
        tmp_path: Path) -> None:
    runs = []
    for on in (False, True):
        with ScriptedLLMServer.calling_tools("Paris", ("get_weather",)) as srv, \
                OtlpReceiver() as rx:
            cwd = tmp_path / ("with" if on else "without")
            cwd.mkdir()
            out = drive({"otelmw": on, "tool": "broken"}, srv, rx, cwd)
            runs.append((out, bodies(srv), rx.spans()))
    (plain, plain_bodies, _), (observed, observed_bodies, spans) = runs
    assert observed_bodies == plain_bodies and observed["hooks"] == plain["hooks"]
    assert "weather service down" in json.dumps(plain_bodies[-1]["messages"])
    (tool,) = [s for s in spans if s.name.startswith("execute_tool")]
    a = tool.attributes
    assert a["otelmw.result.success"] is False and a["otelmw.result.status"] == "error"
    assert "weather service down" in a["otelmw.result.error_message"]
    assert tool.status_code == ERROR


def test_otelmw_fails_open(tmp_path: Path) -> None:
    """An otelmw bug before each model request and tool call: counted, and Strands runs
    them as without otelmw (once each). Only otelmw_strands is on: the openai SDK layer
    does not fail open around its own pipeline call (the bug is the pipeline's)."""
    runs = []
    for on in (False, True):
        with ScriptedLLMServer.calling_tools("Paris", ("get_weather",)) as srv, \
                OtlpReceiver() as rx:
            cwd = tmp_path / ("with" if on else "without")
            cwd.mkdir()
            out = drive({"otelmw": on, "break": True, "layers": ["strands"]}, srv, rx, cwd)
            runs.append((out, bodies(srv)))
    (plain, plain_bodies), (observed, observed_bodies) = runs
    assert observed_bodies == plain_bodies and len(observed_bodies) == 2
    assert observed["answer"] == plain["answer"] == "done: sunny in Paris"
    assert observed["tool_calls"] == [{"city": "Paris"}]
    assert observed["failures"] == {"instrumentation:strands:chat": 2,
                                    "instrumentation:strands:execute_tool": 1}


PROMPT_TEXT = "What is the weather"
DETAILS = "gen_ai.client.inference.operation.details"


def test_content_only_under_capture_and_schema_valid(server: ScriptedLLMServer,
                                                     tmp_path: Path) -> None:
    """``SPAN_AND_EVENT``: otelmw's ``chat`` spans carry the conventions' message
    attributes (valid against the GenAI JSON schemas) and the tool span the arguments the
    tool got; the prompt text is on Strands' own spans by Strands' rules."""
    with OtlpReceiver() as rx:
        drive({}, server, rx, tmp_path,
              OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="SPAN_AND_EVENT")
        rx.wait_for(lambda: len([x for x in rx.logs() if x.event_name == DETAILS]) == 2)
        spans, logs = rx.spans(), rx.logs()
    chats = [s for s in spans if s.name == CHAT_SPAN]
    assert len(chats) == 2
    # otelmw's inference events are records of Strands' chat spans, in otelmw's terms
    details = [x for x in logs if x.event_name == DETAILS]
    assert sorted(x.span_id or "" for x in details) == sorted(c.span_id for c in chats)
    for record in details:
        assert record.attributes["gen_ai.provider.name"] == "openai"
        assert "gen_ai.system" not in record.attributes  # Strands' attribute, not otelmw's
    for chat, post in zip(chats, chat_posts(server), strict=True):
        got = {k: validate(k, chat.attributes[k]) for k in MESSAGE_KEYS
               if k in chat.attributes}
        assert {"gen_ai.input.messages", "gen_ai.output.messages"} <= set(got), sorted(got)
        assert [m["role"] for m in got["gen_ai.input.messages"]] == [
            m["role"] for m in post.body["messages"]]
    assert PROMPT_TEXT in chats[0].attributes["gen_ai.input.messages"]
    (tool,) = [s for s in spans if s.name == TOOL_SPAN]
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"city": "Paris"}


def test_without_capture_otelmw_exports_no_content(server: ScriptedLLMServer,
                                                   tmp_path: Path) -> None:
    """Default capture: no message attribute of otelmw's; Strands' own span events carry the
    prompt until Strands' own redaction switch is on, then nothing exported does."""
    with OtlpReceiver() as rx:
        drive({}, server, rx, tmp_path)
        spans = rx.spans()
    for span in spans:
        assert not set(MESSAGE_KEYS) & set(span.attributes), span.name
        assert "gen_ai.tool.call.arguments" not in span.attributes, span.name
    strands_events = [e for s in spans for e in s.events if s.name == "chat"]
    assert any(PROMPT_TEXT in json.dumps(e.attributes) for e in strands_events)
    with OtlpReceiver() as rx:
        drive({}, server, rx, tmp_path,
              OTEL_SEMCONV_STABILITY_OPT_IN="gen_ai_unredacted_attributes=")
        assert_no_canary(rx, (PROMPT_TEXT,))


def test_an_llm_execution_answer_that_is_no_stream_is_counted_and_the_request_sent(
        server: ScriptedLLMServer, tmp_path: Path) -> None:
    with OtlpReceiver() as rx:
        out = drive({"plugin": {"answer_llm": True}}, server, rx, tmp_path)
    assert out["answer"] == "done: sunny in Paris" and len(chat_posts(server)) == 2
    assert out["failures"] == {"instrumentation:strands:chat": 2}


def test_a_direct_tool_call_is_otelmw_s_own_span(server: ScriptedLLMServer,
                                                 tmp_path: Path) -> None:
    """``agent.tool.get_weather(...)``: Strands makes no span for it; otelmw's contract and
    its own ``execute_tool`` span."""
    with OtlpReceiver() as rx:
        out = drive({"mode": "direct", "plugin": {"tool_request": True}}, server, rx,
                    tmp_path)
        spans = rx.spans()
    assert out["tool_calls"] == [{"city": "Oslo"}] and "sunny in Oslo" in out["answer"]
    assert chat_posts(server) == []
    (tool,) = [s for s in spans if s.name.startswith("execute_tool")]
    assert tool.name == TOOL_SPAN and tool.parent_span_id is None
    assert "gen_ai.system" not in tool.attributes  # otelmw's span, not Strands'
    assert tool.attributes["otelmw.result.status"] == "ok"
    assert tool.attributes["otelmw.runtime.id"] == "strands"


UNMODIFIED = '''
import os
from strands import Agent, tool
from strands.models.openai import OpenAIModel

@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"

model = OpenAIModel(client_args={"base_url": os.environ["SCRIPTED_URL"], "api_key": "sk-x"},
                    model_id="scripted-model")
agent = Agent(model=model, tools=[get_weather], name="Weather", callback_handler=None)
print("ANSWER", agent("What is the weather in Paris?"))
'''


@pytest.mark.parametrize("launcher", ["otelmw run", "opentelemetry-instrument"])
def test_an_unmodified_program(launcher: str, server: ScriptedLLMServer,
                               tmp_path: Path) -> None:
    program = tmp_path / "agent.py"
    program.write_text(UNMODIFIED)
    with OtlpReceiver() as rx:
        env = scenario_env(tmp_path, rx, service="strands-unmodified",
                           SCRIPTED_URL=server.base_url)
        if launcher == "otelmw run":
            cmd = [*otelmw_cmd(), "run", "--", sys.executable, str(program)]
        else:
            beside = Path(sys.executable).with_name("opentelemetry-instrument")
            found = str(beside) if beside.exists() else shutil.which("opentelemetry-instrument")
            assert found, "opentelemetry-instrument comes with opentelemetry-instrumentation"
            cmd = [found, sys.executable, str(program)]
        proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=TIMEOUT)
        assert proc.returncode == 0, proc.stderr
        assert "ANSWER done: sunny in Paris" in proc.stdout
        rx.wait_for(lambda: any(s.name == AGENT_SPAN for s in rx.spans()))
        spans = rx.spans()
    assert len({s.trace_id for s in spans}) == 1
    assert sorted(s.name for s in spans if s.name.startswith(("chat", "execute_tool",
                                                              "invoke_agent"))) == [
        CHAT_SPAN, CHAT_SPAN, TOOL_SPAN, AGENT_SPAN]
    for chat in (s for s in spans if s.name == CHAT_SPAN):
        assert chat.attributes["gen_ai.provider.name"] == "openai"
    (tool,) = [s for s in spans if s.name == TOOL_SPAN]
    assert tool.attributes["otelmw.result.status"] == "ok"

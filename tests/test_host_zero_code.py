"""Hermes Agent and PraisonAI programs under ``opentelemetry-instrument``, fully offline.

The OpenTelemetry distro's zero-code path: ``opentelemetry-instrument python SCRIPT``
on a script that never imports otelmw. otelmw takes part only through its entry points
(the ``otelmw`` configurator, the ``otelmw_*`` instrumentors). The real host talks
through the real openai SDK to a ``ScriptedLLMServer``; the stock OTLP exporters send
to an ``OtlpReceiver``; assertions are on what the receiver (and the server) got.
``otelmw run`` on the same hosts is covered in test_host_hermes / test_host_praisonai.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _support.components import clean_env
from _support.host_scenarios import PROMPT_EXPORT, result_of, run_ok
from _support.otlp_receiver import OtlpReceiver, ReceivedLog, ReceivedRun, ReceivedSpan
from _support.scripted_llm import RecordedRequest, ScriptedLLMServer

TESTS = Path(__file__).resolve().parent
HERMES_PROGRAM = TESTS / "hermes_scripts" / "hermes_turns.py"
PRAISONAI_PROGRAM = TESTS / "praisonai_scripts" / "plain_agent.py"
TIMEOUT = 150
INTERNAL, CLIENT, STATUS_ERROR = 1, 3, 2
DURATION = "gen_ai.client.operation.duration"

HERMES = pytest.mark.host("hermes", "openai")
PRAISONAI = pytest.mark.host("praisonai", "openai")


def opentelemetry_instrument() -> str:
    """The launcher beside the interpreter running the tests (its venv has otelmw's
    entry points), else the one on PATH: either runs ``sys.executable``, the program's
    interpreter, so the entry points are the same."""
    beside = Path(sys.executable).with_name("opentelemetry-instrument")
    launcher = str(beside) if beside.exists() else shutil.which("opentelemetry-instrument")
    assert launcher, "opentelemetry-instrument comes with opentelemetry-instrumentation"
    return launcher


@dataclass(slots=True)
class ZeroCodeRun(ReceivedRun):
    """One program run under ``opentelemetry-instrument``: its output and what arrived."""

    stdout: str
    spans: list[ReceivedSpan]
    logs: list[ReceivedLog]
    posts: list[RecordedRequest]  # the chat requests the model server got, in order
    chat_durations: int  # gen_ai.client.operation.duration's count for chat operations

    def traces(self) -> list[list[ReceivedSpan]]:
        """The spans of each trace, by start time; traces in the order they started."""
        by_trace: dict[str, list[ReceivedSpan]] = {}
        for span in sorted(self.spans, key=lambda s: s.start_ns):
            by_trace.setdefault(span.trace_id, []).append(span)
        return list(by_trace.values())

    def sent_tool_call_ids(self) -> list[str]:
        """The ids of the tool calls the model made, as sent back to it."""
        return [call["id"] for post in self.posts for m in post.body["messages"]
                if m.get("role") == "assistant" for call in m.get("tool_calls") or ()]


def run_under_instrument(program: Path, tmp: Path, srv: ScriptedLLMServer,
                         **env_extra: str) -> ZeroCodeRun:
    """Run ``opentelemetry-instrument python PROGRAM`` as a new user would: the OTLP
    endpoint and service name in the environment (and a private ``OTELMW_HOME``),
    no other otelmw setting."""
    assert not re.search(r"^\s*(import|from)\s+otelmw", program.read_text(), re.MULTILINE)
    with OtlpReceiver() as rx:
        env = {k: v for k, v in clean_env(tmp).items()
               if not k.startswith(("OPENAI_", "HERMES_"))}
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint,
                   OTEL_SERVICE_NAME="zero-code-test", **PROMPT_EXPORT, **env_extra)
        proc = run_ok([opentelemetry_instrument(), sys.executable, str(program)], env, tmp,
                      TIMEOUT)
        rx.wait_for_metric(DURATION)  # the one metrics export, at the program's exit
        points = [p for m in rx.metrics(DURATION) for p in m.data_points
                  if p.attributes["gen_ai.operation.name"] == "chat"]
        return ZeroCodeRun(proc.stdout, rx.spans(), rx.logs(),
                           [r for r in srv.requests if r.api == "chat"],
                           sum(p.value["count"] for p in points))


def turn_tree(spans: list[ReceivedSpan], root_name: str) -> tuple[ReceivedSpan,
                                                                   list[ReceivedSpan]]:
    """A turn's trace: one root ``invoke_agent`` span, its children in start order;
    every chat and tool span a direct child of the root."""
    roots = [s for s in spans if s.parent_span_id is None]
    assert [r.name for r in roots] == [root_name], [(s.name, s.parent_span_id) for s in spans]
    root = roots[0]
    ids = {s.span_id for s in spans}
    assert all(s.parent_span_id in ids for s in spans if s is not root), "orphan span"
    children = [s for s in spans if s.parent_span_id == root.span_id]
    for s in spans:
        if s.name.startswith(("chat ", "execute_tool ")):
            assert s.parent_span_id == root.span_id, s.name
    assert root.kind == INTERNAL and root.attributes["gen_ai.operation.name"] == "invoke_agent"
    return root, children


def check_chat_spans(run: ZeroCodeRun, model: str, port: int) -> None:
    """One ``chat`` CLIENT span per model request, describing that request's response:
    the host's span, enriched by the SDK layer, never a second span of its own."""
    chats = run.named("chat ")
    assert len(chats) == len(run.posts) == run.chat_durations, (
        [s.name for s in chats], len(run.posts), run.chat_durations)
    by_id = {s.span_id: s for s in run.spans}
    parents = [by_id.get(s.parent_span_id or "") for s in chats]
    assert all(p is not None and p.name.startswith("invoke_agent ") for p in parents), (
        "a chat span outside its turn's invoke_agent span")
    for chat, post in zip(chats, run.posts, strict=True):
        a = chat.attributes
        assert chat.name == f"chat {model}" and chat.kind == CLIENT
        assert chat.status_code != STATUS_ERROR
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "openai"
        assert a["gen_ai.request.model"] == a["gen_ai.response.model"] == model
        assert a["gen_ai.response.id"] == post.response_id
        assert post.usage is not None
        assert a["gen_ai.usage.input_tokens"] == post.usage["input_tokens"]
        assert a["gen_ai.usage.output_tokens"] == post.usage["output_tokens"]
        assert list(a["gen_ai.response.finish_reasons"]) == (
            ["tool_calls"] if post.reply is not None and post.reply.tool_calls else ["stop"])
        assert (a["server.address"], a["server.port"]) == ("127.0.0.1", port)


def check_tool_spans(run: ZeroCodeRun, tool: str) -> None:
    tools = run.named("execute_tool ")
    assert [s.attributes["gen_ai.tool.call.id"] for s in tools] == run.sent_tool_call_ids()
    for span in tools:
        a = span.attributes
        assert span.name == f"execute_tool {tool}" and span.kind == INTERNAL
        assert a["gen_ai.operation.name"] == "execute_tool" and a["gen_ai.tool.name"] == tool
        assert a["gen_ai.tool.type"] == "function"
        assert a["otelmw.result.success"] is True and span.status_code != STATUS_ERROR


# ------------------------------------------------------------------------ Hermes
# Hermes fires these only when a callback is registered for them (its has_hook gate)
HERMES_GATED_HOOKS = ("pre_api_request", "post_api_request", "api_request_error",
                      "post_tool_call", "transform_tool_result")
HERMES_HOOKS_ON_TOOL = ("pre_tool_call",)
HERMES_HOOKS_ON_TURN = ("pre_llm_call", "post_llm_call", "on_session_start", "on_session_end")


@pytest.fixture(scope="module")
def hermes(tmp_path_factory: pytest.TempPathFactory) -> tuple[ZeroCodeRun, dict[str, Any]]:
    """Two Hermes turns, no plugin, no hook: a ``read_file`` call, then its answer;
    then a plain answer."""
    tmp = tmp_path_factory.mktemp("hermes-zero-code")
    home = tmp / "hermes-home"  # empty: no config, no plugins
    home.mkdir()
    notes = tmp / "notes.txt"
    notes.write_text("meeting notes\n")
    with ScriptedLLMServer() as srv:
        srv.push_tool_calls([("read_file", {"path": str(notes)})])
        cfg = {"base_url": srv.base_url, "system": "Be brief.",
               "prompts": ["Read my notes.", "And now?"]}
        run = run_under_instrument(HERMES_PROGRAM, tmp, srv, HERMES_HOME=str(home),
                                   HX_CONFIG=json.dumps(cfg))
        report = result_of(run.stdout)
        return run, report | {"port": srv.port}


@HERMES
def test_hermes_turns_are_one_trace_each_with_chat_and_tool_spans(
        hermes: tuple[ZeroCodeRun, dict[str, Any]]) -> None:
    run, report = hermes
    assert [t["completed"] for t in report["turns"]] == [True, True]
    turns = run.traces()
    assert len(turns) == 2, [[s.name for s in t] for t in turns]
    expected = [["chat scripted-model", "execute_tool read_file", "chat scripted-model"],
                ["chat scripted-model"]]
    for spans, names in zip(turns, expected, strict=True):
        root, children = turn_tree(spans, "invoke_agent hermes")
        assert root.attributes["otelmw.runtime.id"] == "hermes"
        assert root.attributes["gen_ai.conversation.id"] == report["session_id"]
        assert [c.name for c in children] == names
        assert root.resource["service.name"] == "zero-code-test"


@HERMES
def test_hermes_chat_span_per_provider_call_with_semconv(
        hermes: tuple[ZeroCodeRun, dict[str, Any]]) -> None:
    run, report = hermes
    assert len(run.posts) == 3
    check_chat_spans(run, "scripted-model", report["port"])
    for chat in run.named("chat "):
        assert chat.attributes["otelmw.api_mode"] == "chat_completions"


@HERMES
def test_hermes_tool_span_names_the_tool_and_its_call(
        hermes: tuple[ZeroCodeRun, dict[str, Any]]) -> None:
    run, _ = hermes
    (tool,) = run.named("execute_tool ")
    check_tool_spans(run, "read_file")
    assert tool.attributes["otelmw.runtime.id"] == "hermes"
    assert tool.attributes["otelmw.api_request.id"] == run.named("chat ")[0].attributes[
        "otelmw.api_request.id"]


@HERMES
def test_hermes_hook_points_are_log_records_where_hermes_fires_them(
        hermes: tuple[ZeroCodeRun, dict[str, Any]]) -> None:
    run, _ = hermes
    names = {x.event_name.removeprefix("otelmw.hook.") for x in run.logs}
    assert set(HERMES_HOOKS_ON_TOOL + HERMES_HOOKS_ON_TURN) <= names
    # no callback registered: Hermes does not fire its gated points, nothing to record
    assert not names & set(HERMES_GATED_HOOKS), names
    by_id = {s.span_id: s for s in run.spans}
    for rec in run.logs:  # every record correlated to a span of its turn
        assert rec.event_name.startswith("otelmw.hook.")
        assert rec.span_id in by_id and rec.trace_id == by_id[rec.span_id].trace_id
        assert rec.attributes["otelmw.schema.telemetry"] == "hermes.observer.v1"
        assert rec.attributes["otelmw.hook.failures"] == 0
    (tool,) = run.named("execute_tool ")
    for hook in HERMES_HOOKS_ON_TOOL:
        assert [x.span_id for x in run.hook_logs(hook)] == [tool.span_id], hook
    for rec in run.hook_logs("pre_tool_call"):
        assert rec.attributes["gen_ai.tool.name"] == "read_file"
    roots = {s.span_id for s in run.spans if s.name == "invoke_agent hermes"}
    assert all(x.span_id in roots for x in run.hook_logs("on_session_end"))


# --------------------------------------------------------------------- PraisonAI
PRAISONAI_HOOKS = ("before_agent", "before_llm", "before_tool", "after_tool", "after_llm",
                   "after_agent")


@pytest.fixture(scope="module")
def praisonai(tmp_path_factory: pytest.TempPathFactory) -> tuple[ZeroCodeRun, int]:
    """``plain_agent.py``: one ``chat()`` and one ``achat()`` turn, each calling
    ``get_weather`` then answering; no hook registered."""
    tmp = tmp_path_factory.mktemp("praisonai-zero-code")
    with ScriptedLLMServer(tool_first=True,
                           tool_args={"get_weather": {"city": "Paris"}}) as srv:
        run = run_under_instrument(PRAISONAI_PROGRAM, tmp, srv, OPENAI_BASE_URL=srv.base_url,
                                   OPENAI_API_KEY="dummy", OPENAI_MAX_RETRIES="0")
        return run, srv.port


@PRAISONAI
def test_praisonai_turns_are_one_trace_each_with_chat_and_tool_spans(
        praisonai: tuple[ZeroCodeRun, int]) -> None:
    run, _ = praisonai
    assert "SYNC done: " in run.stdout and "ASYNC done: " in run.stdout
    turns = run.traces()
    assert len(turns) == 2, [[s.name for s in t] for t in turns]
    for spans in turns:
        root, children = turn_tree(spans, "invoke_agent Plain")
        assert root.attributes["gen_ai.agent.name"] == "Plain"
        assert root.attributes["otelmw.runtime.id"] == "praisonai"
        assert [c.name for c in children] == ["chat gpt-4o-mini", "execute_tool get_weather",
                                              "chat gpt-4o-mini"]
        assert all(c.attributes["otelmw.turn.id"] == root.attributes["otelmw.turn.id"]
                   for c in children)
        assert root.resource["service.name"] == "zero-code-test"


@PRAISONAI
def test_praisonai_chat_span_per_provider_call_with_semconv(
        praisonai: tuple[ZeroCodeRun, int]) -> None:
    run, port = praisonai
    assert len(run.posts) == 4
    check_chat_spans(run, "gpt-4o-mini", port)


@PRAISONAI
def test_praisonai_tool_spans_name_the_tool_and_its_call(
        praisonai: tuple[ZeroCodeRun, int]) -> None:
    run, _ = praisonai
    assert len(run.named("execute_tool ")) == 2
    check_tool_spans(run, "get_weather")


@PRAISONAI
def test_praisonai_hook_points_are_not_fired_without_any_hook(
        praisonai: tuple[ZeroCodeRun, int]) -> None:
    # no hook registered: PraisonAI fires none of its hook points (its has_hooks gate,
    # which otelmw leaves alone), so there is nothing to record; the turns are traced
    run, _ = praisonai
    assert [x.event_name for x in run.logs] == []
    assert len(run.traces()) == 2

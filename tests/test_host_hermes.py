"""Hermes Agent instrumentor (``otelmw_hermes``) against real Hermes turns, fully offline.

Each scenario runs real ``AIAgent.run_conversation`` turns in a fresh interpreter
(``tests/hermes_scripts``) with ``HERMES_HOME`` a temp dir holding a user plugin
(``probe``: rewriting, wrapping and failing middleware plus hooks, loaded by Hermes' own
plugin discovery through ``PluginContext``), against a ``ScriptedLLMServer`` that calls the
``read_file`` tool and then answers. Telemetry goes through the stock OTLP exporter to an
``OtlpReceiver``; assertions are on what the receiver (and the scripted server) got.
Marked ``host("hermes")``: deselected in a matrix environment without Hermes; elsewhere
without ``hermes-agent`` the tests skip, except under ``CI=true`` where that fails.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from _support.host_scenarios import PROMPT_EXPORT, result_of, run_ok, scenario_env
from _support.otlp_receiver import OtlpReceiver, ReceivedRun, ReceivedSpan
from _support.scripted_llm import ScriptedLLMServer

from otelmw.telemetry.content.digests import digest

pytestmark = pytest.mark.host("hermes")

SCRIPTS = Path(__file__).resolve().parent / "hermes_scripts"
CANARIES = ("CANARY-PROMPT-4e1", "CANARY-SYSTEM-9b2", "CANARY-PATH-7c3", "CANARY-FILE-2d8")
MISSING = "/nonexistent/otelmw-missing.txt"
TIMEOUT = 150
INTERNAL, CLIENT, STATUS_ERROR = 1, 3, 2
HOOKS = ("pre_api_request", "post_api_request", "api_request_error", "pre_tool_call",
         "post_tool_call", "on_session_end")


class Run(ReceivedRun):
    """What one scenario produced: the script's report and everything the receiver got."""

    def __init__(self, report: dict[str, Any], rx: OtlpReceiver, srv: ScriptedLLMServer,
                 home: Path, notes: Path) -> None:
        self.report, self.home, self.notes = report, home, notes
        self.spans, self.logs = rx.spans(), rx.logs()
        self.metrics = {m.name: m for m in rx.metrics()}  # one export (at shutdown)
        self.posts = [r for r in srv.requests if r.api == "chat"]
        self.by_id = {s.span_id: s for s in self.spans}
        self.port = srv.port

    def subtree(self, span: ReceivedSpan) -> set[str]:
        out = {span.span_id}
        for child in self.children(span):
            out |= self.subtree(child)
        return out

    def tool_calls(self) -> list[tuple[str, dict[str, Any]]]:
        """(tool_call_id, arguments) of the first assistant message that called tools."""
        for post in self.posts:
            for m in post.body["messages"]:
                if m.get("role") == "assistant" and m.get("tool_calls"):
                    return [(t["id"], json.loads(t["function"]["arguments"]))
                            for t in m["tool_calls"]]
        raise AssertionError("no tool call reached the model")


def make_home(tmp: Path, plugin: str = "probe") -> tuple[Path, Path]:
    home = tmp / "hermes-home"
    shutil.copytree(SCRIPTS / f"{plugin}_plugin", home / "plugins" / plugin)
    (home / "config.yaml").write_text(f"plugins:\n  enabled:\n    - {plugin}\n")
    notes = tmp / CANARIES[2] / "notes.txt"
    notes.parent.mkdir(parents=True)
    notes.write_text(f"meeting notes {CANARIES[3]}\n")
    return home, notes


def child_env(home: Path, tmp: Path, rx: OtlpReceiver, cfg: dict[str, Any]) -> dict[str, str]:
    return scenario_env(tmp, rx, service="hermes-host-test", strip=("HERMES_",),
                        HERMES_HOME=str(home), HX_CONFIG=json.dumps(cfg), **PROMPT_EXPORT,
                        OTELMW_DATA_DIR=str(tmp / "otelmw-data"),
                        OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="otelmw_anthropic,otelmw_praisonai")


def scenario(tmp: Path, cmd: list[str], cfg: dict[str, Any], script: list[Any],
             env_extra: dict[str, str] | None = None, plugin: str = "probe") -> Run:
    """``script``: per model request in order, an int (that HTTP error), a str (that
    text) or a list of read_file paths (tool calls); then the server's default policy."""
    home, notes = make_home(tmp, plugin)
    with ScriptedLLMServer() as srv, OtlpReceiver() as rx:
        for reply in script:
            if isinstance(reply, int):
                srv.push_error(reply, "slow down", retry_after=0.1)
            elif isinstance(reply, str):
                srv.push_text(reply)
            else:
                srv.push_tool_calls([("read_file", {"path": p if p != "notes" else str(notes)})
                                     for p in reply])
        cfg = {"base_url": srv.base_url, "system": f"Be brief. {CANARIES[1]}", **cfg}
        env = {**child_env(home, tmp, rx, cfg), **(env_extra or {})}
        report = result_of(run_ok(cmd, env, tmp, TIMEOUT).stdout)
        rx.wait_for(lambda: any(s.name.startswith("invoke_agent") for s in rx.spans()))
        rx.wait_for_metric("gen_ai.client.operation.duration")
        return Run(report, rx, srv, home, notes)


# Main: API instrumentation, both layers (otelmw_hermes + otelmw_openai); turn 1 = two
# parallel read_file calls (one failing), then a 429 and its retry; turn 2 = plain answer.
@pytest.fixture(scope="module")
def main(tmp_path_factory: pytest.TempPathFactory) -> Run:
    cfg = {"openai": True, "prompts": [f"Read my notes. {CANARIES[0]}", "And now?"]}
    return scenario(tmp_path_factory.mktemp("main"),
                    [sys.executable, str(SCRIPTS / "hermes_api_driver.py")], cfg,
                    [["notes", MISSING], 429])


# `otelmw run` on a script that never imports otelmw; one read_file per step (Hermes'
# sequential path), the second blocked by the probe's pre_tool_call hook; every hook point.
@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Run:
    cmd = [sys.executable, "-m", "otelmw.cli", "run", "--", sys.executable,
           str(SCRIPTS / "hermes_turns.py")]
    return scenario(tmp_path_factory.mktemp("cli"), cmd, {"prompts": [f"Go. {CANARIES[0]}"]},
                    [["notes"], ["/tmp/blocked/x.txt"]], {"OTELMW_HOOK_EVENTS": "all"})


# Hermes layer alone (no SDK instrumentor) plus an otelmw plugin, then uninstrument() and
# one more turn.
@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory) -> Run:
    cfg = {"prompts": ["Read my notes."], "after_prompts": ["After uninstrument."],
           "otelmw_plugin": True}
    return scenario(tmp_path_factory.mktemp("alone"),
                    [sys.executable, str(SCRIPTS / "hermes_api_driver.py")], cfg, [["notes"]])


# `otelmw run`, defaults, a plugin with no hook: an llm_execution wrapper that asks a judge
# model before each request (judge, tool call; judge, default answer).
@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Run:
    cmd = [sys.executable, "-m", "otelmw.cli", "run", "--", sys.executable,
           str(SCRIPTS / "hermes_turns.py")]
    return scenario(tmp_path_factory.mktemp("judged"), cmd, {"prompts": ["Read my notes."]},
                    ["verdict: safe", ["notes"]], plugin="judge")


# The instrumentor's own helpers raise on every call (fail-open check).
@pytest.fixture(scope="module")
def sabotaged(tmp_path_factory: pytest.TempPathFactory) -> Run:
    cfg = {"openai": True, "sabotage": True, "prompts": ["Read my notes."]}
    return scenario(tmp_path_factory.mktemp("sabotaged"),
                    [sys.executable, str(SCRIPTS / "hermes_api_driver.py")], cfg,
                    [["notes", MISSING]])


def by_trace(run: Run) -> dict[str, list[ReceivedSpan]]:
    out: dict[str, list[ReceivedSpan]] = {}
    for s in run.spans:
        out.setdefault(s.trace_id, []).append(s)
    return out


def check_turn_trees(run: Run, turns: int) -> None:
    traces = by_trace(run)
    assert len(traces) == turns, {t: sorted(s.name for s in v) for t, v in traces.items()}
    for spans in traces.values():
        roots = [s for s in spans if s.parent_span_id is None]
        assert [r.name for r in roots] == ["invoke_agent hermes"]
        ids = {s.span_id for s in spans}
        assert all(s.parent_span_id in ids for s in spans if s is not roots[0]), "orphan span"
        root = roots[0]
        assert root.kind == INTERNAL and root.attributes["gen_ai.operation.name"] == "invoke_agent"
        assert root.attributes["otelmw.runtime.id"] == "hermes"
        assert root.attributes["gen_ai.conversation.id"] == run.report["session_id"]
        for s in spans:
            if s.name.startswith(("chat ", "execute_tool ")):
                assert s.parent_span_id == root.span_id, s.name


# ---------------------------------------------------------------- main scenario
def test_turns_complete_and_one_trace_per_turn(main: Run) -> None:
    assert [t["completed"] for t in main.report["turns"]] == [True, True]
    check_turn_trees(main, 2)
    assert len(main.named("chat ")) == 4 and len(main.named("execute_tool ")) == 2
    assert not any(k.startswith("instrumentation/") for k in main.report["failures"])


def test_chat_spans_semconv(main: Run) -> None:
    chats = main.named("chat ")
    ok = [s for s in chats if s.status_code != STATUS_ERROR]
    assert len(ok) == 3
    port = main.port
    for s in chats:
        a = s.attributes
        assert s.name == "chat scripted-model" and s.kind == CLIENT
        assert a["gen_ai.provider.name"] == "openai"  # Hermes' provider is "" here
        assert a["gen_ai.request.model"] == "scripted-model"
        assert (a["server.address"], a["server.port"]) == ("127.0.0.1", port)
        assert a["otelmw.api_mode"] == "chat_completions"
        assert a["gen_ai.request.temperature"] == 0.25  # the request sent (probe's rewrite)
        assert re.fullmatch(re.escape(main.report["session_id"]) + r":[^:]+:[0-9a-f]{8}:api:\d+",
                            a["otelmw.api_request.id"])
    for s, post in zip(ok, [p for p in main.posts if p.status == 200], strict=True):
        a = s.attributes
        assert a["gen_ai.response.model"] == "scripted-model"
        assert a["gen_ai.response.id"] == post.response_id  # from the SDK layer's stream
        assert a["gen_ai.usage.input_tokens"] == post.usage["input_tokens"]
        assert a["gen_ai.usage.output_tokens"] == post.usage["output_tokens"]
        assert a["gen_ai.response.finish_reasons"] == (
            ["tool_calls"] if post.reply.tool_calls else ["stop"])


def test_retry_attempts_are_spans_of_their_own(main: Run) -> None:
    turn1 = [s for s in main.named("chat ") if s.trace_id == main.named("chat ")[0].trace_id]
    failed, retried = turn1[1], turn1[2]
    assert failed.attributes["otelmw.api_request.id"] == retried.attributes[
        "otelmw.api_request.id"]
    assert failed.status_code == STATUS_ERROR
    assert failed.attributes["error.type"] == "openai.RateLimitError"
    assert retried.status_code != STATUS_ERROR
    # the Hermes wrapper around the failing attempt records the provider's exception,
    # not Hermes' private _DownstreamExecutionError
    wrap = [c for c in main.children(failed) if c.name == "llm_execution probe.time_llm"]
    assert wrap[0].attributes["otelmw.middleware.outcome"] == "error"
    assert wrap[0].attributes["error.type"] == "openai.RateLimitError"
    errors = main.hook_logs("api_request_error")
    assert len(errors) == 1 and errors[0].span_id == failed.span_id


def test_tool_spans_deduplicated_and_normalized(main: Run) -> None:
    tools = main.named("execute_tool ")
    call_ids = [c for c, _ in main.tool_calls()]
    assert sorted(s.attributes["gen_ai.tool.call.id"] for s in tools) == sorted(call_ids)
    by_call = {s.attributes["gen_ai.tool.call.id"]: s for s in tools}
    good, bad = by_call[call_ids[0]], by_call[call_ids[1]]
    for s in tools:
        a = s.attributes
        assert s.name == "execute_tool read_file" and a["gen_ai.tool.name"] == "read_file"
        assert a["otelmw.runtime.id"] == "hermes" and a["gen_ai.tool.type"] == "function"
        assert a["otelmw.result.raw.digest"].startswith("sha256-keyed:")
        assert a["otelmw.result.raw.type"] == "str" and a["otelmw.result.raw.size"] > 0
        assert a["otelmw.api_request.id"] == main.named("chat ")[0].attributes[
            "otelmw.api_request.id"]
    assert good.attributes["otelmw.result.success"] is True
    assert good.status_code != STATUS_ERROR
    assert bad.attributes["otelmw.result.success"] is False
    assert bad.attributes["otelmw.result.error_message"] == f"File not found: {MISSING}"
    assert bad.attributes["error.type"] == "tool_error" and bad.status_code == STATUS_ERROR
    # Hermes still gave the model its own JSON envelope (not "Tool Error: ..."), and the
    # digest is that of exactly what Hermes produced
    sent = {m["tool_call_id"]: m["content"] for p in main.posts for m in p.body["messages"]
            if m.get("role") == "tool"}
    assert json.loads(sent[call_ids[1]])["error"] == f"File not found: {MISSING}"
    for cid, span in by_call.items():
        assert span.attributes["otelmw.result.raw.digest"] == digest(sent[cid])[0]


def test_hermes_middleware_spans_and_outcomes(main: Run) -> None:
    chat = main.named("chat ")[0]
    kids = {c.name: c for c in main.children(chat)}
    outcome = {n: c.attributes["otelmw.middleware.outcome"] for n, c in kids.items()}
    assert outcome == {"llm_request probe.pin_temperature": "rewritten",
                       "llm_request probe.leave_request": "unchanged",
                       "llm_request probe.broken_rewrite": "failed",
                       "llm_execution probe.time_llm": "passed"}
    rw = kids["llm_request probe.pin_temperature"].attributes
    assert rw["otelmw.rewrite.changed_keys"] == ["temperature"]
    assert (rw["otelmw.rewrite.source"], rw["otelmw.rewrite.reason"]) == (
        "probe-policy", "pinned temperature")
    assert rw["otelmw.middleware.kind"] == "llm_request"
    assert (rw["otelmw.middleware.plugin"], rw["otelmw.middleware.position"]) == ("probe", 0)
    assert kids["llm_request probe.broken_rewrite"].attributes["error.type"] == (
        "builtins.ValueError")
    assert main.posts[0].body["temperature"] == 0.25  # the rewrite reached the provider
    inner = main.children(kids["llm_execution probe.time_llm"])
    assert [c.name for c in inner] == ["llm_execution probe.flaky_llm"]
    assert inner[0].attributes["otelmw.middleware.outcome"] == "failed_before_next"
    assert inner[0].attributes["error.type"] == "builtins.RuntimeError"
    for tool in main.named("execute_tool "):
        names = [c.name for c in main.children(tool)]
        assert names == ["tool_request probe.limit_reads", "tool_execution probe.guard_tool"]
        req = main.children(tool)[0].attributes
        assert (req["otelmw.middleware.outcome"], req["otelmw.rewrite.changed_keys"]) == (
            "rewritten", ["limit"])
        audit = main.children(main.children(tool)[1])[0]
        assert audit.name == "tool_execution probe.audit_after"
        assert audit.attributes["otelmw.middleware.outcome"] == "failed_after_next"
        assert audit.attributes["error.type"] == "builtins.KeyError"
    # Hermes' callbacks' failures are Hermes' own (it logs them): otelmw counts none
    assert not [k for k in main.report["failures"] if k.startswith("middleware/")], (
        main.report["failures"])


def test_hook_records_correlated_with_digests(main: Run) -> None:
    for name in HOOKS:
        assert main.hook_logs(name), name
    chat_ids = {s.span_id for s in main.named("chat ")}
    tool_trees = set().union(*(main.subtree(t) for t in main.named("execute_tool ")))
    for rec in main.logs:
        if rec.event_name == "gen_ai.client.operation.exception":  # the GenAI conventions'
            assert rec.span_id in chat_ids  # record of a failed model call, on its span
            continue
        assert rec.event_name.startswith("otelmw.hook.")
        assert rec.span_id in main.by_id and rec.trace_id == main.by_id[rec.span_id].trace_id
        assert rec.attributes["otelmw.schema.telemetry"] == "hermes.observer.v1"
        assert rec.attributes["otelmw.schema.middleware"] == "hermes.middleware.v1"
        assert rec.body in (None, {}, "")
    for name in ("pre_api_request", "post_api_request", "api_request_error"):
        assert all(r.span_id in chat_ids for r in main.hook_logs(name)), name
    for r in main.hook_logs("pre_api_request"):
        assert r.attributes["otelmw.request.digest"].startswith("sha256-keyed:")
    for name in ("pre_tool_call", "post_tool_call"):
        assert all(r.span_id in tool_trees for r in main.hook_logs(name)), name
    post = {r.attributes["gen_ai.tool.call.id"]: r for r in main.hook_logs("post_tool_call")}
    assert {r.attributes["otelmw.hook.failures"] for r in post.values()} == {1}
    ids = [c for c, _ in main.tool_calls()]
    assert post[ids[0]].attributes["otelmw.result.success"] is True
    assert post[ids[1]].attributes["otelmw.result.success"] is False
    assert post[ids[1]].attributes["otelmw.tool.args.digest"].startswith("sha256-keyed:")
    assert json.loads(post[ids[1]].attributes["otelmw.middleware_trace"]) == [
        {"source": "probe-policy", "reason": "bounded reads"}]
    end = main.hook_logs("on_session_end")
    assert all(main.by_id[r.span_id].name == "invoke_agent hermes" for r in end)


def test_no_canary_content_by_default(main: Run) -> None:
    assert any(c in json.dumps(p.body) for p in main.posts for c in CANARIES)  # they were sent
    exported = json.dumps([[s.name, s.attributes, s.status_message, s.resource,
                            [e.attributes for e in s.events]] for s in main.spans]
                          + [[x.body, x.attributes] for x in main.logs]
                          + [[p.attributes for p in m.data_points]
                             for m in main.metrics.values()], default=str)
    leaked = [c for c in CANARIES if c in exported]
    assert not leaked, leaked


def test_both_layers_one_chat_span_and_metric_point_per_request(main: Run) -> None:
    assert len(main.named("chat ")) == len(main.posts) == 4
    points = main.metrics["gen_ai.client.operation.duration"].data_points
    chat = [p for p in points if p.attributes["gen_ai.operation.name"] == "chat"]
    assert sum(p.value["count"] for p in chat) == len(main.posts)
    tokens = main.metrics["gen_ai.client.token.usage"].data_points
    assert sum(p.value["count"] for p in tokens) == 2 * 3  # input + output per answer
    assert {p.attributes["gen_ai.provider.name"] for p in chat} == {"openai"}
    tools = main.metrics["gen_ai.execute_tool.duration"].data_points
    assert sum(p.value["count"] for p in tools) == 2


# ------------------------------------------------------------------ otelmw run
def test_otelmw_run_instruments_a_plain_hermes_script(cli: Run) -> None:
    assert not re.search(r"^\s*(import|from)\s+otelmw", (SCRIPTS / "hermes_turns.py").read_text(),
                         re.MULTILINE)
    assert cli.report["turns"][0]["completed"] is True
    check_turn_trees(cli, 1)
    chats, tools = cli.named("chat "), cli.named("execute_tool ")
    assert len(chats) == len(cli.posts) == 3  # both entry points active: no duplicates
    assert all(s.attributes["gen_ai.usage.input_tokens"] > 0 for s in chats)
    assert [s.attributes["otelmw.result.status"] for s in tools] == ["ok", "blocked"]
    blocked = tools[1]
    assert blocked.attributes["otelmw.result.success"] is False
    assert blocked.attributes["otelmw.result.error_message"] == "probe policy: blocked path"
    assert [c.name for c in cli.children(blocked)] == ["tool_request probe.limit_reads"]
    assert {c.name for c in cli.children(chats[0])} >= {"llm_request probe.pin_temperature",
                                                        "llm_execution probe.time_llm"}
    # OTELMW_HOOK_EVENTS=all: hook points without callbacks fire too (Hermes' gated ones
    # included), each correlated to a span of the turn
    names = {x.event_name for x in cli.logs}
    assert {"otelmw.hook.pre_llm_call", "otelmw.hook.on_session_start",
            "otelmw.hook.transform_tool_result", "otelmw.hook.post_llm_call"} <= names
    assert all(x.span_id in cli.by_id for x in cli.logs)
    exported = json.dumps([s.attributes for s in cli.spans] + [x.attributes for x in cli.logs])
    assert not [c for c in CANARIES if c in exported]


# ----------------------------------------------------- Hermes alone + uninstrument
def test_hermes_layer_alone_records_response_facts(alone: Run) -> None:
    spans = [s for s in alone.spans if s.start_ns < alone.report["t_uninstrumented"]]
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == 2
    for s, post in zip(sorted(chats, key=lambda s: s.start_ns), alone.posts, strict=False):
        assert s.attributes["gen_ai.usage.input_tokens"] == post.usage["input_tokens"]
        assert s.attributes["gen_ai.usage.output_tokens"] == post.usage["output_tokens"]
        assert s.attributes["gen_ai.response.model"] == "scripted-model"
        assert s.attributes["gen_ai.response.finish_reasons"] in (["tool_calls"], ["stop"])
    check_turn_trees(alone, 1)


def test_otelmw_plugin_middleware_applies_inside_hermes_calls(alone: Run) -> None:
    before = alone.posts[:2]
    assert [p.body.get("max_tokens") for p in before] == [77, 77]  # otelmw's rewrite
    assert [p.body.get("temperature") for p in before] == [0.25, 0.25]  # and Hermes'
    for chat in alone.named("chat "):
        names = [c.name for c in alone.children(chat)]
        assert names[:3] == ["llm_request probe.pin_temperature",
                             "llm_request probe.leave_request",
                             "llm_request probe.broken_rewrite"]  # Hermes' stage first
        ours = alone.children(chat)[3]
        assert ours.name == "llm_request otelmw-probe.cap_tokens"
        assert ours.attributes["otelmw.middleware.outcome"] == "rewritten"
        assert ours.attributes["otelmw.rewrite.changed_keys"] == ["max_tokens"]
        assert names[4:] == ["llm_execution probe.time_llm"]
        # the span describes the request sent, after Hermes' and otelmw's rewrites
        assert chat.attributes["gen_ai.request.max_tokens"] == 77
        assert chat.attributes["gen_ai.request.temperature"] == 0.25
    tool = alone.named("execute_tool ")[0]
    wrapper = next(c for c in alone.children(tool) if c.name.startswith("tool_execution "))
    assert wrapper.name == "tool_execution otelmw-probe.count_tool"  # otelmw's, outermost
    assert [c.name for c in alone.children(wrapper)] == ["tool_execution probe.guard_tool"]


def test_uninstrument_restores_originals_and_stops_telemetry(alone: Run) -> None:
    rep = alone.report
    assert rep["wrapped_while_instrumented"] and all(rep["wrapped_while_instrumented"].values())
    assert rep["restored"] and all(rep["restored"].values()), rep["restored"]
    assert rep["after_turns"][0]["completed"] is True
    assert all(rep["rewrapped"].values()) and all(rep["restored_again"].values())
    assert len(alone.posts) == 3  # two before, one after
    after = alone.posts[2].body  # Hermes as it was: its own plugin only, no otelmw layer
    assert after["temperature"] == 0.25 and "max_tokens" not in after
    late = [s.name for s in alone.spans if s.start_ns >= rep["t_uninstrumented"]]
    assert late == []
    assert not [x for x in alone.logs if x.time_ns >= rep["t_uninstrumented"]]
    assert not [s for s in alone.spans
                if s.attributes.get("gen_ai.conversation.id") == rep["after_session_id"]]


def test_broken_instrumentation_fails_open(sabotaged: Run) -> None:
    rep = sabotaged.report
    assert rep["turns"][0]["completed"] is True and not rep["turns"][0]["failed"]
    assert len(sabotaged.posts) == 2
    sent = [m["content"] for p in sabotaged.posts for m in p.body["messages"]
            if m.get("role") == "tool"]
    assert len(sent) == 2 and json.loads(sent[1])["error"] == f"File not found: {MISSING}"
    assert CANARIES[3] in sent[0]  # Hermes' own results reached the model
    assert sabotaged.posts[0].body["temperature"] == 0.25  # Hermes' plugin still ran
    broken = {k: v for k, v in rep["failures"].items() if k.startswith("instrumentation/")}
    assert broken and all(v > 0 for v in broken.values()), rep["failures"]
    assert [s.name for s in sabotaged.spans if s.parent_span_id is None] == [
        "invoke_agent hermes"]  # the turn is still traced; no stray roots


# ------------------------------------------------ no hooks registered, a judge model
def test_hermes_hook_points_are_records_where_hermes_fires_them(judged: Run) -> None:
    assert judged.report["turns"][0]["completed"] is True
    names = {x.event_name.removeprefix("otelmw.hook.") for x in judged.logs}
    # Hermes fires its turn/session points and pre_tool_call with no callback
    # registered: each firing is a record
    assert {"pre_tool_call", "pre_llm_call", "post_llm_call", "on_session_start"} <= names, (
        names)
    # the points Hermes gates on its own has_hook (no callback: not fired) are not
    # recorded, and has_hook still answers False for them (it did not fire them)
    assert judged.report["has_hook"] == dict.fromkeys(
        ["pre_api_request", "post_api_request", "api_request_error", "post_tool_call",
         "transform_tool_result"], False)
    assert judged.report["has_middleware"] == {"llm_request": True, "llm_execution": True,
                                               "tool_request": False,
                                               "tool_execution": False}
    assert not names & {"pre_api_request", "post_api_request", "api_request_error",
                        "post_tool_call", "transform_tool_result"}, names
    (tool,) = judged.named("execute_tool ")
    assert [x.span_id for x in judged.hook_logs("pre_tool_call")] == [tool.span_id]
    for rec in judged.logs:
        assert rec.attributes["otelmw.hook.failures"] == 0
        assert rec.attributes["otelmw.schema.telemetry"] == "hermes.observer.v1"


def test_judge_model_call_inside_a_hermes_wrapper_is_its_own_chat_span(judged: Run) -> None:
    posts = {p.response_id: p for p in judged.posts}
    main = judged.named("chat routed-model")
    judges = judged.named("chat judge-model")
    assert len(main) == len(judges) == 2 and len(judged.posts) == 4
    for chat, judge in zip(main, judges, strict=True):
        (wrapper,) = [c for c in judged.children(chat)
                      if c.name == "llm_execution judge.ask_judge"]
        assert judge.parent_span_id == wrapper.span_id
        own = posts[chat.attributes["gen_ai.response.id"]]
        assert own.body["model"] == "routed-model"  # not the judge's response
        # the span describes the request sent (Hermes' own llm_request rewrite)
        assert chat.attributes["gen_ai.request.model"] == "routed-model"
        assert chat.attributes["otelmw.request.original_model"] == "scripted-model"
        assert chat.attributes["gen_ai.usage.input_tokens"] == own.usage["input_tokens"]
        assert posts[judge.attributes["gen_ai.response.id"]].body["model"] == "judge-model"
    points = judged.metrics["gen_ai.client.operation.duration"].data_points
    by_model = {p.attributes["gen_ai.request.model"]: p.value["count"] for p in points}
    assert by_model == {"routed-model": 2, "judge-model": 2}


def test_instrumentor_contract() -> None:
    from otelmw.instrumentation.hermes import HermesInstrumentor

    inst = HermesInstrumentor()
    assert tuple(inst.instrumentation_dependencies()) == ("hermes-agent >= 0.19, < 0.20",)
    targets = {(m, n) for m, n, _ in inst.targets()}
    assert ("run_agent", "AIAgent.run_conversation") in targets
    assert ("hermes_cli.plugins", "PluginManager.invoke_hook") in targets


"""Hermes plugins' own middleware under ``otelmw_hermes`` runs by otelmw's contract rules
(``run_rewrites``, ``run_execution``), not by Hermes' ``invoke_middleware`` and
``_run_execution_chain``: the differences a user upgrading meets, and the Hermes rules
kept, pinned on real Hermes turns, fully offline.

One Hermes run (a fresh interpreter: ``hermes_scripts/hermes_contract_driver.py``, otelmw's
API instrumenting Hermes and the OpenAI SDK) of six turns against a ``ScriptedLLMServer``.
The ``contract`` plugin (``hermes_scripts/contract_plugin``, loaded by Hermes' own plugin
discovery, registering through ``PluginContext``) acts by each turn's scenario tag and
notes what its callbacks were handed; spans and hook records go to an ``OtlpReceiver``;
the driver reports otelmw's failure counts and every WARNING logged.

Each assertion's comment says what Hermes' own chain shows instead (observed with the
same driver and ``"uninstrumented": true``) or, for a Hermes rule otelmw keeps, what
otelmw's plain rules (or a broken chain) would show.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _support.otlp_receiver import OtlpReceiver, ReceivedLog, ReceivedSpan
from _support.scripted_llm import ScriptedLLMServer

from otelmw import NextCallReusedError

pytestmark = pytest.mark.host("hermes", "openai")

SCRIPTS = Path(__file__).resolve().parent / "hermes_scripts"
TIMEOUT = 150
FILE_TEXT = "meeting notes CONTRACT-5f1"
NOTES = "notes"  # a reply: the model calls read_file on the notes file
# (scenario tag, the model's replies in order: text, an HTTP error status, or NOTES)
TURNS: list[tuple[str, list[Any]]] = [
    ("chain", ["ok-chain"]),
    ("shapes", [NOTES, "done-shapes"]),
    ("downstream", [429, "ok-downstream"]),
    ("warn", [NOTES, "done-warn"]),
    ("skip", [NOTES, "done-skip"]),
    ("twice", ["ok-twice"]),
]


def _user_text(body: dict[str, Any]) -> str:
    users = [m.get("content") for m in body.get("messages", []) if m.get("role") == "user"]
    return users[-1] if users and isinstance(users[-1], str) else ""


class ContractRun:
    """The Hermes run: its report, warnings and plugin notes, the requests the model got
    and the telemetry received, by scenario (one trace per turn)."""

    def __init__(self, report: dict[str, Any], warnings: list[dict[str, str]],
                 notes: list[dict[str, Any]], rx: OtlpReceiver,
                 srv: ScriptedLLMServer) -> None:
        self.report, self.warnings, self.notes = report, warnings, notes
        self.spans, self.logs = rx.spans(), rx.logs()
        roots = sorted((s for s in self.spans if s.name == "invoke_agent hermes"),
                       key=lambda s: s.start_ns)
        self.trace_of = {scenario: root.trace_id
                         for (scenario, _), root in zip(TURNS, roots, strict=True)}
        chats = [r for r in srv.requests if r.api == "chat"]
        self.posts = {scenario: [r for r in chats if _user_text(r.body).startswith(
            f"[{scenario}]")] for scenario, _ in TURNS}

    def noted(self, scenario: str, what: str) -> list[dict[str, Any]]:
        """What the plugin's callbacks noted in that turn, without the scenario/what keys."""
        return [{k: v for k, v in n.items() if k not in ("scenario", "what")}
                for n in self.notes if (n["scenario"], n["what"]) == (scenario, what)]

    def layer_spans(self, scenario: str, callback: str) -> list[ReceivedSpan]:
        return sorted((s for s in self.spans if s.trace_id == self.trace_of[scenario]
                       and s.name.endswith(f" contract.{callback}")), key=lambda s: s.start_ns)

    def outcomes(self, scenario: str, callback: str) -> list[str]:
        return [s.attributes["otelmw.middleware.outcome"]
                for s in self.layer_spans(scenario, callback)]

    def hook_records(self, scenario: str, hook: str) -> list[ReceivedLog]:
        return [x for x in self.logs if x.event_name == f"otelmw.hook.{hook}"
                and x.trace_id == self.trace_of[scenario]]

    def failures(self, kind: str, callback: str) -> int:
        return int(self.report["failures"].get(f"middleware/{kind}/contract.{callback}", 0))

    def warned(self, layer_name: str) -> list[dict[str, str]]:
        return [w for w in self.warnings
                if w["logger"] == "otelmw" and f"'{layer_name}'" in w["message"]]


@pytest.fixture(scope="module")
def contract(tmp_path_factory: pytest.TempPathFactory) -> ContractRun:
    tmp = tmp_path_factory.mktemp("contract")
    home = tmp / "hermes-home"
    shutil.copytree(SCRIPTS / "contract_plugin", home / "plugins" / "contract")
    (home / "config.yaml").write_text("plugins:\n  enabled:\n    - contract\n")
    notes_file, plugin_notes = tmp / "notes.txt", tmp / "plugin-notes.jsonl"
    notes_file.write_text(f"{FILE_TEXT}\n")
    with ScriptedLLMServer() as srv, OtlpReceiver() as rx:
        for _, replies in TURNS:
            for reply in replies:
                if reply == NOTES:
                    srv.push_tool_calls([("read_file", {"path": str(notes_file)})])
                elif isinstance(reply, int):
                    srv.push_error(reply, "slow down", retry_after=0.1)
                else:
                    srv.push_text(reply)
        cfg = {"base_url": srv.base_url, "openai": True,
               "prompts": [f"[{scenario}] Go on." for scenario, _ in TURNS]}
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OTEL_", "OTELMW_", "OPENAI_", "HERMES_", "HX_"))}
        env.update(HERMES_HOME=str(home), HX_CONFIG=json.dumps(cfg),
                   HX_CONTRACT_NOTES=str(plugin_notes), PYTHONUNBUFFERED="1",
                   OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint,
                   OTEL_SERVICE_NAME="hermes-contract-test",
                   OTEL_METRIC_EXPORT_INTERVAL="600000", OTEL_BSP_SCHEDULE_DELAY="100",
                   OTEL_BLRP_SCHEDULE_DELAY="100", OTELMW_HOME=str(tmp / "otelmw-home"),
                   OTELMW_DATA_DIR=str(tmp / "otelmw-data"),
                   OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="otelmw_anthropic,otelmw_praisonai")
        proc = subprocess.run([sys.executable, str(SCRIPTS / "hermes_contract_driver.py")],
                              env=env, cwd=tmp, capture_output=True, text=True,
                              timeout=TIMEOUT)
        assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        lines = proc.stdout.splitlines()
        report = json.loads([x for x in lines if x.startswith("RESULT ")][-1][7:])
        warnings = json.loads([x for x in lines if x.startswith("LOGS ")][-1][5:])
        rx.wait_for(lambda: sum(s.name == "invoke_agent hermes" for s in rx.spans())
                    == len(TURNS))
        notes = [json.loads(x) for x in plugin_notes.read_text().splitlines()]
        return ContractRun(report, warnings, notes, rx, srv)


def test_every_turn_completes_without_instrumentation_errors(contract: ContractRun) -> None:
    # fails if a rule below broke a turn (Hermes' own chain completes all six)
    assert [t["final"] for t in contract.report["turns"]] == [r[-1] for _, r in TURNS]
    assert not [k for k in contract.report["failures"] if k.startswith("instrumentation/")]


def test_outer_callback_catches_the_providers_own_exception(contract: ContractRun) -> None:
    # Hermes: hermes_cli.middleware._run_execution_chain.<locals>._DownstreamExecutionError,
    # the provider's exception on its .original
    assert contract.noted("downstream", "downstream_error") == [
        {"type": "openai.RateLimitError", "has_original": False}]
    # re-raised, it reached Hermes, which retried (as under Hermes); a chain that
    # swallowed that raise would leave Hermes nothing to retry: one request
    assert [p.status for p in contract.posts["downstream"]] == [429, 200]
    failing, retried = contract.layer_spans("downstream", "catch_downstream")
    assert (failing.attributes["otelmw.middleware.outcome"],
            failing.attributes["error.type"]) == ("error", "openai.RateLimitError")
    assert retried.attributes["otelmw.middleware.outcome"] == "passed"


def test_request_callbacks_see_earlier_rewrites_read_only(contract: ContractRun) -> None:
    (seen,) = contract.noted("chain", "request_seen")
    # see_chain is handed set_temperature's rewrite; Hermes hands every callback the
    # same copy of the request: temperature None there
    assert seen["temperature"] == 0.5 and seen["original_temperature"] is None
    # edit_in_place's in-place edit failed (read-only); under Hermes it lands in that
    # shared copy (max_tokens 33 here), and through set_temperature's {**request} in
    # the request sent
    assert seen["max_tokens"] is None
    (post,) = contract.posts["chain"]
    assert post.body["temperature"] == 0.5 and "max_tokens" not in post.body
    # failed open, reported and counted (Hermes: no error at all)
    (edit,) = contract.layer_spans("chain", "edit_in_place")
    assert (edit.attributes["otelmw.middleware.outcome"], edit.attributes["error.type"]) == (
        "failed", "builtins.TypeError")
    assert contract.failures("llm_request", "edit_in_place") == 1
    # bare_rewrite ({"request": dict(kwargs["request"])}) builds on hermes_shape's rewrite;
    # Hermes hands it the unrewritten copy and, the last rewrite, it wins: no temperature
    assert [p.body.get("temperature") for p in contract.posts["shapes"]] == [0.125, 0.125]


def test_a_failing_callback_is_warned_about_once(contract: ContractRun) -> None:
    # always_fails raised on both requests of its turn: each one counted and on its span
    assert contract.failures("llm_request", "always_fails") == 2
    assert contract.outcomes("warn", "always_fails") == ["failed", "failed"]
    # Hermes: a WARNING per failure ("Middleware 'llm_request' callback always_fails
    # raised: ..."), two here
    assert len(contract.warned("contract.always_fails")) == 1
    failed = {key.split("/", 2)[2]: n for key, n in contract.report["failures"].items()
              if key.startswith("middleware/")}
    assert sum(n > 1 for n in failed.values()) >= 4  # repeats to keep quiet about
    assert {name: len(contract.warned(name)) for name in failed} == dict.fromkeys(failed, 1)
    # Hermes' own loggers logged 8 middleware WARNINGs in this run
    assert not [w for w in contract.warnings if w["logger"].startswith("hermes_cli")]


def test_second_next_call_raises_next_call_reused_error(contract: ContractRun) -> None:
    reused = f"{NextCallReusedError.__module__}.{NextCallReusedError.__qualname__}"
    # otelmw's public otelmw.NextCallReusedError. Hermes: builtins.RuntimeError; this is
    # one too, so `except RuntimeError` in a plugin still catches it
    assert contract.noted("twice", "second_next_call") == [
        {"type": reused, "runtime_error": True}]
    # and it ran nothing (as under Hermes): one request sent, the chain below ran once
    assert len(contract.posts["twice"]) == 1
    assert len(contract.noted("twice", "llm_base")) == 1
    assert contract.outcomes("twice", "call_twice") == ["passed"]  # its first result went on


def test_hermes_rewrite_shapes_and_trace_format_kept(contract: ContractRun) -> None:
    # a return Hermes accepts is a rewrite, extra keys and all; by otelmw's plain rules
    # {"request": ..., "name": ..., "note": ...} fails ("unexpected keys") and no
    # temperature 0.125 is sent
    shaped = contract.layer_spans("shapes", "hermes_shape")
    assert [(s.attributes["otelmw.middleware.outcome"],
             s.attributes["otelmw.rewrite.changed_keys"]) for s in shaped] == [
        ("rewritten", ["temperature"])] * 2
    assert contract.outcomes("shapes", "bare_rewrite") == ["rewritten", "rewritten"]
    assert [p.body["temperature"] for p in contract.posts["shapes"]] == [0.125, 0.125]
    # a return Hermes ignores still changes nothing, and is reported failed (Hermes:
    # ignored without a word; a pass-through would report it "unchanged")
    ignored = contract.layer_spans("shapes", "ignored_return")
    assert [(s.attributes["otelmw.middleware.outcome"], s.attributes["error.type"])
            for s in ignored] == [("failed", "bad_return_shape")] * 2
    # Hermes' own trace (its format: source/reason/name, else {"source": "plugin"}) reaches
    # its hooks and its execution middleware (otelmw's own entries would name kind,
    # middleware and plugin)
    llm_trace = [{"name": "shape-probe"}, {"source": "plugin"}]
    tool_trace = [{"source": "contract", "reason": "bounded"}]
    for hook, trace in (("pre_api_request", llm_trace), ("execution_trace", llm_trace),
                        ("pre_tool_call", tool_trace), ("post_tool_call", tool_trace)):
        seen = contract.noted("shapes", hook)
        assert seen == [{"middleware_trace": trace}] * len(seen) and seen, hook
    records = contract.hook_records("shapes", "pre_api_request")
    assert [json.loads(r.attributes["otelmw.middleware_trace"]) for r in records] == [
        llm_trace, llm_trace]


def test_raise_before_next_call_skips_raise_after_keeps_the_result(
        contract: ContractRun) -> None:
    # Hermes' rules, kept: each failure is its own outcome (Hermes logs them alike)
    assert contract.outcomes("skip", "raise_before") == ["failed_before_next"] * 2
    assert contract.outcomes("skip", "raise_after") == ["failed_after_next"] * 2
    assert contract.outcomes("skip", "tool_raise_before") == ["failed_before_next"]
    assert contract.outcomes("skip", "tool_raise_after") == ["failed_after_next"]
    # the rest of the chain and the base call ran once per call: two requests sent (a
    # re-run after raise_after: four), the innermost layers ran twice and once
    assert len(contract.posts["skip"]) == 2
    assert len(contract.noted("skip", "llm_base")) == 2
    assert len(contract.noted("skip", "tool_base")) == 1
    # the kept results went on: the model got the file, Hermes the model's answer (a
    # dropped result would be None: no tool content, a failed or retried request)
    sent = [m["content"] for m in contract.posts["skip"][1].body["messages"]
            if m.get("role") == "tool"]
    assert len(sent) == 1 and FILE_TEXT in sent[0]
    skip = [scenario for scenario, _ in TURNS].index("skip")
    assert contract.report["turns"][skip]["final"] == "done-skip"

"""Hermes plugins' own middleware and hooks under ``otelmw_hermes`` run by Hermes' rules,
in Hermes' own engine (``PluginManager.invoke_middleware``, ``_run_execution_chain``,
``invoke_hook``, ``has_hook``): otelmw observes each callback run as a layer span with
the outcome Hermes gave it, and changes nothing Hermes does. Pinned on real Hermes
turns, fully offline.

The same six turns run twice (each in a fresh interpreter:
``hermes_scripts/hermes_contract_driver.py``) against a ``ScriptedLLMServer``: once with
Hermes alone (``"uninstrumented": true``), once with otelmw's API instrumenting Hermes
and the OpenAI SDK. The ``contract`` plugin (``hermes_scripts/contract_plugin``, loaded
by Hermes' own plugin discovery, registering through ``PluginContext``) acts by each
turn's scenario tag and notes what its callbacks were handed. Everything Hermes did —
the notes, the requests the model got, the answers, Hermes' own WARNINGs — must be the
same in both runs; the spans and hook records of the instrumented run must say what
Hermes' engine did with each callback.
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
from _support.otlp_receiver import OtlpReceiver, ReceivedLog, ReceivedSpan
from _support.scripted_llm import ScriptedLLMServer

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
        self.trace_of = {scenario: root.trace_id for (scenario, _), root in zip(
            TURNS, roots, strict=True)} if roots else {}
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

    def sent(self) -> dict[str, list[tuple[int, Any, Any, list[str]]]]:
        """Per scenario, each request the model got: its answer status, temperature,
        max_tokens and the tool results in it."""
        return {scenario: [(p.status, p.body.get("temperature"), p.body.get("max_tokens"),
                            [str(m.get("content")) for m in p.body.get("messages", [])
                             if m.get("role") == "tool"]) for p in posts]
                for scenario, posts in self.posts.items()}

    def hermes_warnings(self) -> list[tuple[str, str]]:
        """Hermes' own WARNINGs (logger, message without its numbers: thread ids, ports)."""
        return [(w["logger"], re.sub(r"\d+", "#", w["message"])) for w in self.warnings
                if not w["logger"].startswith("otelmw")]


def _run(tmp: Path, uninstrumented: bool) -> ContractRun:
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
        cfg = {"base_url": srv.base_url, "openai": True, "uninstrumented": uninstrumented,
               "prompts": [f"[{scenario}] Go on." for scenario, _ in TURNS]}
        env = scenario_env(tmp, rx, service="hermes-contract-test", strip=("HERMES_", "HX_"),
                           HERMES_HOME=str(home), HX_CONFIG=json.dumps(cfg),
                           HX_CONTRACT_NOTES=str(plugin_notes), **PROMPT_EXPORT,
                           OTELMW_DATA_DIR=str(tmp / "otelmw-data"),
                           OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="otelmw_anthropic,otelmw_praisonai")
        proc = run_ok([sys.executable, str(SCRIPTS / "hermes_contract_driver.py")], env, tmp,
                      TIMEOUT)
        report = result_of(proc.stdout)
        warnings = json.loads([x for x in proc.stdout.splitlines()
                               if x.startswith("LOGS ")][-1][5:])
        if not uninstrumented:
            rx.wait_for(lambda: sum(s.name == "invoke_agent hermes" for s in rx.spans())
                        == len(TURNS))
        notes = [json.loads(x) for x in plugin_notes.read_text().splitlines()]
        return ContractRun(report, warnings, notes, rx, srv)


@pytest.fixture(scope="module")
def hermes_alone(tmp_path_factory: pytest.TempPathFactory) -> ContractRun:
    return _run(tmp_path_factory.mktemp("hermes-alone"), uninstrumented=True)


@pytest.fixture(scope="module")
def contract(tmp_path_factory: pytest.TempPathFactory) -> ContractRun:
    return _run(tmp_path_factory.mktemp("contract"), uninstrumented=False)


def test_hermes_does_exactly_what_it_does_without_otelmw(
        hermes_alone: ContractRun, contract: ContractRun) -> None:
    # the same answers, the same requests sent (Hermes' rewrites, its in-place edit
    # through the shared copy, its retries), the same notes of every callback (what
    # Hermes handed it, what its next_call raised), the same WARNINGs of Hermes' own
    assert contract.report["turns"] == hermes_alone.report["turns"]
    assert [t["final"] for t in contract.report["turns"]] == [r[-1] for _, r in TURNS]
    assert contract.sent() == hermes_alone.sent()
    assert contract.notes == hermes_alone.notes
    assert contract.hermes_warnings() == hermes_alone.hermes_warnings()
    assert len(contract.hermes_warnings()) >= 8  # Hermes logs every failure itself
    # otelmw neither failed nor counted Hermes' callbacks' failures as its own
    assert not contract.report["failures"], contract.report["failures"]
    assert not [w for w in contract.warnings if w["logger"].startswith("otelmw")]


def test_hermes_rules_hold_under_otelmw(contract: ContractRun) -> None:
    # what the notes say is Hermes' behaviour, not otelmw's (fails if otelmw's own
    # engine ran these callbacks): the downstream failure arrives wrapped in Hermes'
    # private _DownstreamExecutionError; a second next_call is Hermes' RuntimeError
    (downstream,) = contract.noted("downstream", "downstream_error")
    assert downstream["type"].endswith("._DownstreamExecutionError")
    assert downstream["has_original"] is True
    assert contract.noted("twice", "second_next_call") == [
        {"type": "builtins.RuntimeError", "runtime_error": True}]
    # Hermes hands every request callback the same copy: see_chain sees edit_in_place's
    # in-place edit, not set_temperature's rewrite
    (seen,) = contract.noted("chain", "request_seen")
    assert (seen["temperature"], seen["max_tokens"]) == (None, 33)
    (post,) = contract.posts["chain"]
    assert post.body["temperature"] == 0.5 and post.body["max_tokens"] == 33
    # bare_rewrite, the last rewrite, wins with the unrewritten copy: no temperature
    assert [p.body.get("temperature") for p in contract.posts["shapes"]] == [None, None]


def test_each_hermes_callback_run_is_a_layer_span_with_hermes_outcome(
        contract: ContractRun) -> None:
    assert contract.outcomes("chain", "edit_in_place") == ["unchanged"]  # returned None
    assert contract.outcomes("chain", "set_temperature") == ["rewritten"]
    (rewrite,) = contract.layer_spans("chain", "set_temperature")
    assert rewrite.attributes["otelmw.rewrite.changed_keys"] == ["temperature"]
    shaped = contract.layer_spans("shapes", "hermes_shape")
    assert [s.attributes["otelmw.middleware.outcome"] for s in shaped] == ["rewritten"] * 2
    # a return Hermes ignores changes nothing
    assert contract.outcomes("shapes", "ignored_return") == ["unchanged"] * 2
    # a raise Hermes logs and skips: failed, with the callback's own error
    warn = contract.layer_spans("warn", "always_fails")
    assert [(s.attributes["otelmw.middleware.outcome"], s.attributes["error.type"])
            for s in warn] == [("failed", "builtins.ValueError")] * 2
    # execution callbacks: Hermes skipped one failing before next_call, kept the result
    # of one failing after it
    assert contract.outcomes("skip", "raise_before") == ["failed_before_next"] * 2
    assert contract.outcomes("skip", "raise_after") == ["failed_after_next"] * 2
    assert contract.outcomes("skip", "tool_raise_before") == ["failed_before_next"]
    assert contract.outcomes("skip", "tool_raise_after") == ["failed_after_next"]
    assert contract.outcomes("twice", "call_twice") == ["passed"]
    # the downstream failure propagated through catch_downstream: the span names the
    # provider's own exception, not Hermes' wrapper of it
    failing, retried = contract.layer_spans("downstream", "catch_downstream")
    assert (failing.attributes["otelmw.middleware.outcome"],
            failing.attributes["error.type"]) == ("error", "openai.RateLimitError")
    assert retried.attributes["otelmw.middleware.outcome"] == "passed"
    # every layer span is a child of its call's span, in its turn's trace
    by_id = {s.span_id: s for s in contract.spans}
    for scenario, _ in TURNS:
        for span in contract.spans:
            if span.trace_id == contract.trace_of[scenario] and " contract." in span.name:
                parent = by_id[span.parent_span_id]
                assert parent.name.startswith(("chat ", "execute_tool ", "llm_execution",
                                               "tool_execution")), (span.name, parent.name)


def test_hermes_trace_reaches_its_hooks_and_the_records(contract: ContractRun) -> None:
    llm_trace = [{"name": "shape-probe"}, {"source": "plugin"}]
    tool_trace = [{"source": "contract", "reason": "bounded"}]
    for hook, trace in (("pre_api_request", llm_trace), ("execution_trace", llm_trace),
                        ("pre_tool_call", tool_trace), ("post_tool_call", tool_trace)):
        seen = contract.noted("shapes", hook)
        assert seen == [{"middleware_trace": trace}] * len(seen) and seen, hook
    records = contract.hook_records("shapes", "pre_api_request")
    assert [json.loads(r.attributes["otelmw.middleware_trace"]) for r in records] == [
        llm_trace, llm_trace]
    # a firing's failures are the callbacks of Hermes' that raised in it (none here)
    assert all(r.attributes["otelmw.hook.failures"] == 0 for r in records)

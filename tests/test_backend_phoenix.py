"""A round trip through a real Arize Phoenix: what otelmw exports is what Phoenix shows.

One Phoenix per module (``_support.phoenix``: 127.0.0.1, free port, temporary
working directory, gRPC receiver off) takes three programs' traces over OTLP/HTTP
from the stock exporters, each program in its own Phoenix project
(``openinference.project.name``), once with content capture off (the default) and
once on:

* ``otelmw demo`` (capture on: ``SPAN_ONLY``): two turns of the in-process demo
  agent, with rewrites, wrappers, a short-circuit and failing tools;
* ``backend_scripts/openai_tool_agent.py`` under ``otelmw run`` (capture on:
  ``SPAN_AND_EVENT``): the real openai SDK against a ``ScriptedLLMServer``, two
  turns, one tool that answers and one that raises;
* ``praisonai_scripts/plain_agent.py`` under ``otelmw run`` (``SPAN_AND_EVENT``):
  a PraisonAI agent's sync and async turn, each calling a tool.

Everything is read back through Phoenix's REST API (``/v1/projects/{name}/spans``),
where each span carries otelmw's attributes and the OpenInference attributes
Phoenix derived from them, and its ``span_kind`` is Phoenix's classification. The
assertions, one test each: one trace per turn; span kinds AGENT / LLM / TOOL and
CHAIN (GUARDRAIL for a wrapper that short-circuited) with none UNKNOWN; model and
token counts on every LLM span; tool names and status on every TOOL span; with
capture on, non-empty input and output messages on every LLM span; with capture
off, no content anywhere.

Phoenix is a component (``components.phoenix_python()``, built by
scripts/test-all.sh from scripts/components/phoenix.txt): missing, these tests fail
under ``CI`` and skip elsewhere. Marked for the openai and praisonai hosts, so they
run in the ``current`` matrix environment.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from _support.cli import otelmw_cmd
from _support.components import clean_env, phoenix_python
from _support.phoenix import PhoenixServer, PhoenixSpan
from _support.scripted_llm import ScriptedLLMServer, ScriptedReply

pytestmark = [pytest.mark.host("openai", "praisonai"), pytest.mark.timeout(600)]

TESTS = Path(__file__).resolve().parent
OPENAI_PROGRAM = TESTS / "backend_scripts" / "openai_tool_agent.py"
PRAISONAI_PROGRAM = TESTS / "praisonai_scripts" / "plain_agent.py"
RUN_TIMEOUT = 180
OFF = "off"  # capture unset: otelmw's default, no content

# Content that must reach Phoenix only under capture: a question and a tool argument
# of each program (never part of an error message, which otelmw exports either way).
CITY = "CANARY-CITY-3f2a"
QUESTIONS = ("Weather in CANARY-Q1-77b1?", "Price of CANARY-Q2-c0de?")

# Attributes that hold content, as otelmw sends them and as Phoenix derives them.
CONTENT_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages",
                "gen_ai.system_instructions", "gen_ai.tool.call.arguments",
                "gen_ai.tool.call.result", "input.value", "tool.parameters")
CONTENT_PREFIXES = ("llm.input_messages.", "llm.output_messages.", "tool.parameters.")
OTELMW_KINDS = frozenset({"AGENT", "LLM", "TOOL", "CHAIN", "GUARDRAIL"})
MIDDLEWARE_PREFIXES = ("llm_request ", "llm_execution ", "tool_request ", "tool_execution ")


@dataclass(frozen=True, slots=True)
class Program:
    """One program this module sends to Phoenix, and what its run must look like."""

    name: str
    capture: str  # the capture mode used for its capture-on run
    model: str
    span_count: int  # of all its turns together
    tools_per_turn: tuple[tuple[str, ...], ...]  # tool names of each turn, in order
    failing_tools: frozenset[str]
    canaries: tuple[str, ...]  # content strings that appear only under capture
    middleware: bool  # whether its turns have middleware (rewrite/wrapper) spans


DEMO = Program("demo", "SPAN_ONLY", "demo-model-1", 44,
               (("get_weather", "get_stock", "calculate"),) * 2,
               frozenset({"get_stock", "calculate"}), ("Lisbon",), middleware=True)
OPENAI = Program("openai", "SPAN_AND_EVENT", "gpt-4o-mini", 8,
                 (("get_weather",), ("get_stock",)), frozenset({"get_stock"}),
                 (CITY, *QUESTIONS), middleware=False)
PRAISONAI = Program("praisonai", "SPAN_AND_EVENT", "gpt-4o-mini", 8,
                    (("get_weather",), ("get_weather",)), frozenset(),
                    (CITY, "Paris", "Rome"), middleware=False)
PROGRAMS = (DEMO, OPENAI, PRAISONAI)


@dataclass(slots=True)
class PhoenixRun:
    """One program run, as Phoenix shows it."""

    program: Program
    capture: str
    spans: list[PhoenixSpan]
    token_usage: list[tuple[int, int]] | None = None  # (input, output) per model request
    traces: dict[str, list[PhoenixSpan]] = field(default_factory=dict)  # by start time

    def __post_init__(self) -> None:
        for span in sorted(self.spans, key=lambda s: s.start_time):
            self.traces.setdefault(span.trace_id, []).append(span)

    def kind(self, kind: str) -> list[PhoenixSpan]:
        return [s for s in self.spans if s.span_kind == kind]


# -------------------------------------------------------------------------- running
@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoenixServer]:
    python = phoenix_python()
    with PhoenixServer(python, tmp_path_factory.mktemp("phoenix")) as server:
        print(f"\nPhoenix started in {server.started_in_s:.1f}s", file=sys.stderr)
        yield server


def child_env(tmp: Path, phoenix: PhoenixServer, project: str, capture: str,
              **extra: str) -> dict[str, str]:
    """The docs/backends.md recipe: traces by OTLP/HTTP to Phoenix's UI port, metrics
    and logs nowhere (Phoenix refuses them), the project as a resource attribute."""
    env = {k: v for k, v in clean_env(tmp).items() if not k.startswith("OPENAI_")}
    env.update(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=phoenix.traces_endpoint,
               OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
               OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none",
               OTEL_RESOURCE_ATTRIBUTES=f"openinference.project.name={project}",
               OTEL_BSP_SCHEDULE_DELAY="100", **extra)
    if capture != OFF:
        env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = capture
    return env


def run_ok(argv: list[str], env: dict[str, str], cwd: Path) -> str:
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def run_demo(tmp: Path, phoenix: PhoenixServer, project: str, capture: str
             ) -> list[tuple[int, int]] | None:
    out = run_ok([*otelmw_cmd(), "demo", "--quiet"],
                 child_env(tmp, phoenix, project, capture), tmp)
    assert "ran 2 turns" in out, out
    return None  # the demo's model is in-process: no request log to compare with


def run_host(program: Path, args: list[str], scripted: list[ScriptedReply | str]
             ) -> Callable[[Path, PhoenixServer, str, str], list[tuple[int, int]]]:
    def run(tmp: Path, phoenix: PhoenixServer, project: str, capture: str
            ) -> list[tuple[int, int]]:
        with ScriptedLLMServer(tool_first=True,
                               tool_args={"get_weather": {"city": CITY}}) as llm:
            llm.push(*scripted)
            env = child_env(tmp, phoenix, project, capture, OPENAI_BASE_URL=llm.base_url,
                            OPENAI_API_KEY="dummy", OPENAI_MAX_RETRIES="0")
            run_ok([*otelmw_cmd(), "run", "--", sys.executable, str(program), *args],
                   env, tmp)
            chats = [r for r in llm.requests if r.api == "chat"]
            assert all(r.usage is not None for r in chats)
            return [(r.usage["input_tokens"], r.usage["output_tokens"])
                    for r in chats if r.usage is not None]
    return run


RUNNERS: dict[str, Callable[[Path, PhoenixServer, str, str], list[tuple[int, int]] | None]] = {
    "demo": run_demo,
    # Every reply scripted: turn 1 calls get_weather, turn 2 get_stock (which raises).
    "openai": run_host(OPENAI_PROGRAM, list(QUESTIONS),
                       [ScriptedReply(tool_calls=[("get_weather", {"city": CITY})]),
                        "done: sunny",
                        ScriptedReply(tool_calls=[("get_stock", {"ticker": "ZZZZ"})]),
                        "done: no price"]),
    # The server's policy: call the first tool offered, then answer from its result.
    "praisonai": run_host(PRAISONAI_PROGRAM, [], []),
}


@pytest.fixture(scope="module")
def runs(phoenix: PhoenixServer, tmp_path_factory: pytest.TempPathFactory
         ) -> Callable[[Program, str], PhoenixRun]:
    """Each (program, capture) run once for the whole module, on first use; a run that
    failed fails every test of it with its first error, without running again."""
    done: dict[tuple[str, str], PhoenixRun | str] = {}

    def get(program: Program, capture: str) -> PhoenixRun:
        key = (program.name, capture)
        if key not in done:
            project = f"{program.name}-{capture.lower()}"
            began = time.monotonic()
            try:
                usage = RUNNERS[program.name](tmp_path_factory.mktemp(project), phoenix,
                                              project, capture)
                spans = phoenix.wait_for_spans(project, program.span_count)
            except (AssertionError, OSError, subprocess.SubprocessError) as exc:
                done[key] = f"{type(exc).__name__}: {exc}"
                raise
            done[key] = PhoenixRun(program, capture, spans, usage)
            print(f"\n{project}: {len(spans)} spans in Phoenix after "
                  f"{time.monotonic() - began:.1f}s", file=sys.stderr)
        run = done[key]
        if isinstance(run, str):
            pytest.fail(f"the {key} run failed earlier: {run}", pytrace=False)
        return run

    return get


def each_run(*, captures: tuple[str, ...] = (OFF, "on")) -> pytest.MarkDecorator:
    """Parametrize over (program, capture): ``"on"`` stands for the program's mode."""
    cases = [pytest.param(p, c, id=f"{p.name}-{c if c == OFF else p.capture}")
             for p in PROGRAMS for c in captures]
    return pytest.mark.parametrize(("program", "capture"), cases)


def the_run(runs: Callable[[Program, str], PhoenixRun], program: Program,
            capture: str) -> PhoenixRun:
    return runs(program, program.capture if capture == "on" else capture)


# -------------------------------------------------------------------------- the tests
def test_phoenix_takes_otlp_http_only_on_its_ui_port(phoenix: PhoenixServer) -> None:
    assert "default" in phoenix.projects()
    assert not phoenix.grpc_listening(), "Phoenix's [::] gRPC receiver must stay off"


@each_run()
def test_one_trace_per_turn(runs: Callable[[Program, str], PhoenixRun], program: Program,
                            capture: str) -> None:
    run = the_run(runs, program, capture)
    assert len(run.spans) == program.span_count, sorted((s.trace_id[:8], s.name) for s in run.spans)
    assert len(run.traces) == len(program.tools_per_turn), sorted(
        (s.trace_id[:8], s.name) for s in run.spans)
    for spans in run.traces.values():
        ids = {s.span_id for s in spans}
        roots = [s for s in spans if s.parent_id is None]
        assert [r.span_kind for r in roots] == ["AGENT"], [(s.name, s.parent_id) for s in spans]
        assert roots[0].name.startswith("invoke_agent ")
        assert all(s.parent_id in ids for s in spans if s is not roots[0]), "orphan span"
        assert [s.span_kind for s in spans].count("AGENT") == 1


@each_run()
def test_span_kinds_are_agent_llm_tool_chain_and_none_unknown(
        runs: Callable[[Program, str], PhoenixRun], program: Program, capture: str) -> None:
    run = the_run(runs, program, capture)
    unknown = sorted({s.name for s in run.spans if s.span_kind not in OTELMW_KINDS})
    assert not unknown, f"spans Phoenix shows as {sorted({s.span_kind for s in run.spans})}" \
                        f" that are none of {sorted(OTELMW_KINDS)}: {unknown}"
    for span in run.spans:
        expected = ("AGENT" if span.name.startswith("invoke_agent ") else
                    "LLM" if span.name.startswith("chat ") else
                    "TOOL" if span.name.startswith("execute_tool ") else
                    # otelmw's middleware layers: a wrapper that answered without calling
                    # next_call guarded the call (GUARDRAIL); every other layer is a CHAIN.
                    "GUARDRAIL" if span.attributes.get("otelmw.middleware.outcome")
                    == "short_circuit" else "CHAIN")
        assert span.span_kind == expected, (span.name, span.span_kind, expected)
    middleware = [s for s in run.spans if s.name.startswith(MIDDLEWARE_PREFIXES)]
    assert bool(middleware) == program.middleware


@each_run()
def test_llm_spans_show_model_and_token_counts(
        runs: Callable[[Program, str], PhoenixRun], program: Program, capture: str) -> None:
    run = the_run(runs, program, capture)
    llms = run.kind("LLM")
    assert llms
    for span in llms:
        a = span.attributes
        assert a.get("llm.model_name") == program.model, (span.name, a)
        prompt, completion = a.get("llm.token_count.prompt"), a.get("llm.token_count.completion")
        assert isinstance(prompt, int) and prompt > 0, (span.name, a)
        assert isinstance(completion, int) and completion > 0, (span.name, a)
        assert a.get("llm.token_count.total") == prompt + completion
        assert span.status_code != "ERROR"
    if run.token_usage is not None:  # the model server's own count, request by request
        shown = sorted((s.attributes["llm.token_count.prompt"],
                        s.attributes["llm.token_count.completion"]) for s in llms)
        assert shown == sorted(run.token_usage)


@each_run()
def test_tool_spans_show_tool_names_and_status(
        runs: Callable[[Program, str], PhoenixRun], program: Program, capture: str) -> None:
    run = the_run(runs, program, capture)
    shown = tuple(tuple(s.attributes.get("tool.name") for s in spans if s.span_kind == "TOOL")
                  for spans in run.traces.values())
    assert shown == program.tools_per_turn
    for span in run.kind("TOOL"):
        name = span.attributes["tool.name"]
        assert span.name == f"execute_tool {name}"
        assert span.attributes.get("tool.id"), span.attributes  # the call id
        if name in program.failing_tools:
            assert span.status_code == "ERROR" and span.status_message, span
        else:
            assert span.status_code != "ERROR", span
    for span in run.kind("AGENT"):
        assert span.status_code != "ERROR", span


@each_run(captures=("on",))
def test_capture_on_shows_input_and_output_messages_on_every_llm_span(
        runs: Callable[[Program, str], PhoenixRun], program: Program, capture: str) -> None:
    run = the_run(runs, program, capture)
    missing = []
    for span in run.kind("LLM"):
        inputs, outputs = span.messages("input"), span.messages("output")
        if not (inputs and all(m.get("role") and shows_something(m) for m in inputs)
                and outputs and all(m.get("role") and shows_something(m) for m in outputs)):
            missing.append((span.name, span.span_id, inputs, outputs,
                            {k: v for k, v in span.attributes.items()
                             if k.startswith("gen_ai.") and "messages" in k}))
    assert not missing, f"{len(missing)} of {len(run.kind('LLM'))} LLM spans show no " \
                        f"input or output messages in Phoenix; first: {missing[0]}"
    shown = json.dumps([s.attributes for s in run.spans])
    assert any(c in shown for c in program.canaries), "capture on, yet no content sent"


@each_run(captures=("on",))
def test_capture_on_shows_tool_arguments_and_results(
        runs: Callable[[Program, str], PhoenixRun], program: Program, capture: str) -> None:
    run = the_run(runs, program, capture)
    for span in run.kind("TOOL"):
        a = span.attributes
        assert any(k == "tool.parameters" or k.startswith("tool.parameters.") for k in a), a
        if a["tool.name"] not in program.failing_tools:
            assert a.get("output.value"), a


def shows_something(message: dict[str, object]) -> bool:
    """A message Phoenix has something to show for: text or a tool call/answer."""
    return any(value not in ("", None) for key, value in message.items()
               if key in ("content", "tool_call_id") or key.startswith(("contents.",
                                                                          "tool_calls.")))


@each_run(captures=(OFF,))
def test_capture_off_sends_no_content(runs: Callable[[Program, str], PhoenixRun],
                                      program: Program, capture: str) -> None:
    run = the_run(runs, program, capture)
    for span in run.spans:
        a = span.attributes
        content = sorted(k for k in a if k in CONTENT_KEYS or k.startswith(CONTENT_PREFIXES))
        # Phoenix fills an LLM span's output.value with the response's id and model.
        if "output.value" in a and not (span.span_kind == "LLM" and set(
                json.loads(a["output.value"])) <= {"id", "model"}):
            content.append("output.value")
        assert not content, (span.name, {k: a[k] for k in content})
        values = json.dumps(a)
        leaked = [c for c in program.canaries if c in values]
        assert not leaked, (span.name, leaked, a)

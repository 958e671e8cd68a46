"""One plugin, every host: the same user plugin has the same effects and the same spans
on every host otelmw instruments.

The plugin (``_support/one_plugin_hosts/weather_policy.py``) is written once, as a user
writes one: a ``register(ctx)`` module installed as a distribution with an
``otelmw.plugins`` entry point and turned on with ``otelmw plugins enable``. It registers
an ``llm_request`` rewrite (an answer budget, ``max_tokens``), a ``tool_request`` rewrite of the
weather tool's arguments (``paris`` -> ``Paris, FR``), a pass-through ``tool_execution``
wrapper that notes what the tool is given, a ``pre_tool_call`` block of ``delete_file``
and a ``post_tool_call`` observer; the wrapper and the observer write what they saw to an
audit file.

Each host has one small driver (``_support/one_plugin_hosts/<host>.py``, a
``run_turn(server_url)`` that runs one real tool-using turn of that host, written as the
host's users write one) and runs under ``otelmw run`` against the scripted model server,
telemetry through the stock OTLP exporter to the suite's receiver. The scripted model asks
for ``get_weather(city="paris")`` and ``delete_file(path=...)`` in its first answer; its
second answer ends the turn. On every host:

* effects: every model request reached the server with the rewritten ``max_tokens``; the
  weather tool received ``Paris, FR``; ``delete_file`` never ran and the model's next
  request carries the block message as that call's result; the wrapper saw the rewritten
  arguments of the one call that ran; the observer saw both results (one ok, one blocked);
* spans: one trace for the turn, its root ``invoke_agent``; one ``chat`` span per model
  request and one ``execute_tool`` span per tool call (its ``gen_ai.tool.call.id`` the id
  the model gave it), each a child of the root; under each ``chat`` span the rewrite's
  span (``rewritten``); under each ``execute_tool`` span the argument rewrite's span
  (``rewritten`` for the weather tool, ``unchanged`` for the other) and, for the call that
  ran, the wrapper's (``passed``); the blocked call's span says ``blocked``;
* hook records: one ``pre_tool_call`` and one ``post_tool_call`` record of the plugin's
  hooks (schema ``otelmw.observer.v1``) per tool call, on that call's ``execute_tool``
  span, the blocked call's ``post_tool_call`` saying ``blocked``/``plugin_block``. A
  host's own hook points are records too, under the host's schema (Hermes fires its own
  ``pre_tool_call``: ``hermes.observer.v1``); they are the host's, not the plugin's, and
  not counted here.

A host where something does not apply says so here, and only its own expectation
changes; the assertion stays for every other host:

* the answer budget reaches the server under the name the host's provider client sends
  it by: ``max_tokens``, or ``max_completion_tokens`` (OpenAI's newer name, which
  pydantic-ai's OpenAI chat model sends instead), or the Gemini API's
  ``generationConfig.maxOutputTokens`` (google-genai: a Gemini request has no
  ``max_tokens``; the plugin puts its budget in the request's ``config``, the key its
  rewrite changes);
* a host with no model call of its own (MCP: a tool protocol; its driver reaches the tool
  without a model, ``Driver.api`` is ``None``) has no ``chat`` span and no request to
  check; its tool-side expectations are the same;
* a host whose turn is not an agent run (MCP: a protocol, its driver an openai tool
  loop of the user's) has the driver's own ``@agent_turn`` as its root;
* a host whose own tracing records its steps (Strands: under ``otelmw run`` its tracer
  records; its root is Strands' ``invoke_agent`` span, its ``execute_event_loop_cycle``
  spans hold the calls; ``Driver.host_steps``) has its ``chat`` and ``execute_tool``
  spans under the root, not as its direct children;
* a host whose own tracing makes each model request's span (Strands' ``chat``,
  ``Driver.chat_on_host_span``) has otelmw's call recorded on it: the request's one
  ``chat`` span is the host's, named ``chat`` and INTERNAL, not otelmw's CLIENT span;
* MCP: a ``tools/call`` carries no id of a model's, so the tool call's
  ``gen_ai.tool.call.id`` follows the MCP rule (docs/telemetry.md, ``otelmw_mcp``;
  ``Driver.tool_call_ids``): the client's ``execute_tool`` span, which serves no tool
  call in flight, has none (the plugin's hooks get ``tool_call_id=None``); the server's
  ``tools/call`` span, in the same trace under the client's, has the JSON-RPC request id
  (its ``jsonrpc.request.id``); the blocked call reaches no server.

* a host whose own tracing opens spans of its own (Google ADK, ``Driver.host_tracing``):
  otelmw does not double them (docs/telemetry.md, ``otelmw_google_adk``), so the run's
  root is the host's ``invoke_workflow``, the turn is the host's ``invoke_agent`` span
  under it, each ``chat`` span's parent is the host's ``generate_content`` span under the
  turn, each tool call's span is the host's own ``execute_tool`` (otelmw's record on it)
  under the turn, and the host's ``execute_tool (merged)`` span over the calls it ran
  together is not a tool call.

A driver is parametrized with ``pytest.mark.host(...)`` naming its host (and the SDK it
reaches the model through), so each matrix environment runs the drivers of the hosts it
provides: Hermes runs in the ``hermes`` environment, the others in ``current``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _support.cli import otelmw_cmd
from _support.components import clean_env
from _support.distributions import PLUGINS, install_distribution, on_pythonpath
from _support.host_scenarios import PROMPT_EXPORT, result_of, run_ok
from _support.one_plugin_hosts import DRIVERS, MODEL_TOOL_CALLS, PROMPT
from _support.one_plugin_hosts import weather_policy as policy
from _support.otlp_receiver import OtlpReceiver, ReceivedLog, ReceivedRun, ReceivedSpan
from _support.scripted_llm import RecordedRequest, ScriptedLLMServer

pytestmark = pytest.mark.timeout(300)

TESTS = Path(__file__).resolve().parent
HOSTS_DIR = TESTS / "_support" / "one_plugin_hosts"
PLUGIN = "weather_policy"
TIMEOUT = 180
INTERNAL, CLIENT, STATUS_ERROR = 1, 3, 2
OTELMW_SCHEMA = "otelmw.observer.v1"


@dataclass(slots=True)
class HostRun(ReceivedRun):
    """One driver's turn under ``otelmw run``: its report, what the model server and the
    receiver got, and the plugin's audit lines."""

    driver: str
    report: dict[str, Any]
    spans: list[ReceivedSpan]
    logs: list[ReceivedLog]
    posts: list[RecordedRequest]  # the model requests, in order
    audit: list[dict[str, Any]]
    stderr: str

    def tool_calls(self) -> list[ReceivedSpan]:
        """The turn's ``execute_tool`` spans; an MCP server's tool call (it carries the
        inbound request's ``jsonrpc.request.id``; on ``mcp`` 1.x a span named
        ``execute_tool`` too) is the server's, checked apart."""
        return [s for s in self.named("execute_tool ")
                if "jsonrpc.request.id" not in s.attributes
                and s.name != "execute_tool (merged)"]  # Google ADK's span over calls

    def chat_calls(self) -> list[ReceivedSpan]:
        """The turn's model requests' spans: otelmw's ``chat {model}``, or the host's
        own ``chat`` span where otelmw records the call on it."""
        if DRIVERS[self.driver].chat_on_host_span:
            return sorted((s for s in self.spans if s.name == "chat"),
                          key=lambda s: s.start_ns)
        return self.named("chat ")

    def tool_span(self, tool: str) -> ReceivedSpan:
        (span,) = [s for s in self.tool_calls() if s.name == f"execute_tool {tool}"]
        return span

    def plugin_hook_records(self, hook: str) -> list[ReceivedLog]:
        """The records of the plugin's hook firings (the otelmw pipeline's schema); a
        host's own hook points (Hermes fires its own ``pre_tool_call``) are records of
        the host's schema beside them."""
        return [x for x in self.logs if x.event_name == f"otelmw.hook.{hook}"
                and x.attributes["otelmw.schema.telemetry"] == OTELMW_SCHEMA]

    def audited(self, event: str) -> list[dict[str, Any]]:
        return [x for x in self.audit if x["event"] == event]


def install_plugin(root: Path, env: dict[str, str]) -> Path:
    """Install the plugin as a user's distribution would be (a dist-info with its entry
    point beside the module, in a directory on ``PYTHONPATH``) and enable it with
    ``otelmw plugins enable``; the site directory."""
    module = HOSTS_DIR / "weather_policy.py"
    site = install_distribution(root / "site", "weather-policy",
                                {PLUGINS: {PLUGIN: "weather_policy:register"}},
                                {module.name: module.read_text()})
    on_pythonpath(on_pythonpath(env, TESTS), site)
    enabled = subprocess.run([*otelmw_cmd(), "plugins", "enable", PLUGIN], env=env, cwd=root,
                             capture_output=True, text=True, timeout=TIMEOUT)
    assert enabled.returncode == 0, enabled.stderr
    return site


def run_driver(driver: str, root: Path) -> HostRun:
    env = {k: v for k, v in clean_env(root).items()
           if not k.startswith(("OPENAI_", "ANTHROPIC_", "HERMES_"))}
    install_plugin(root, env)
    audit = root / "audit.jsonl"
    with ScriptedLLMServer() as srv, OtlpReceiver() as rx:
        srv.push_tool_calls(MODEL_TOOL_CALLS)
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint,
                   OTEL_SERVICE_NAME=f"one-plugin-{driver}", **PROMPT_EXPORT,
                   WEATHER_POLICY_AUDIT=str(audit))
        cmd = [*otelmw_cmd(), "run", "--", sys.executable, "-m", "_support.one_plugin_hosts",
               driver, srv.root_url]
        proc = run_ok(cmd, env, root, TIMEOUT)
        rx.wait_for(lambda: any(s.name.startswith("invoke_agent") for s in rx.spans()))
        rx.wait_for(lambda: len(rx.logs()) >= 2 * len(MODEL_TOOL_CALLS))
        api = DRIVERS[driver].api
        lines = audit.read_text().splitlines() if audit.exists() else []
        return HostRun(driver, result_of(proc.stdout), rx.spans(), rx.logs(),
                       [r for r in srv.requests if r.api == api],
                       [json.loads(x) for x in lines], proc.stderr)


@pytest.fixture(scope="module", params=[pytest.param(name, marks=pytest.mark.host(*d.hosts))
                                        for name, d in DRIVERS.items()])
def turn(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> HostRun:
    return run_driver(request.param, tmp_path_factory.mktemp(request.param))


# ---------------------------------------------------------------------------- effects
def test_every_model_request_is_sent_as_the_plugin_rewrote_it(turn: HostRun) -> None:
    if DRIVERS[turn.driver].api is None:
        return  # no model call (see the module's docstring)
    assert len(turn.posts) == 2, [p.body for p in turn.posts]
    assert [sent_budget(p.body) for p in turn.posts] == [policy.MAX_TOKENS] * 2
    body = turn.posts[0].body
    first = json.dumps(body["contents"] if "contents" in body else body["messages"])
    assert PROMPT in first


def test_the_tool_receives_the_rewritten_arguments_and_the_blocked_tool_never_runs(
        turn: HostRun) -> None:
    assert turn.report["received"] == [{"tool": "get_weather", "args": {"city": "Paris, FR"}}]


def test_the_model_sees_the_block_and_the_rewritten_call_result(turn: HostRun) -> None:
    if DRIVERS[turn.driver].api is None:
        return
    sent = tool_results_sent(turn.posts[1])
    ids = model_call_ids(turn)
    assert set(sent) == set(ids.values()), (sent, ids)
    assert "Paris, FR" in sent[ids["get_weather"]]
    assert policy.BLOCK_MESSAGE in sent[ids["delete_file"]]
    assert "deleted" not in sent[ids["delete_file"]]


def test_the_wrapper_and_the_observer_see_each_call(turn: HostRun) -> None:
    wrapped = turn.audited("tool_execution")
    assert [(x["tool"], x["args"]) for x in wrapped] == [("get_weather", {"city": "Paris, FR"})]
    observed = sorted(turn.audited("post_tool_call"), key=lambda x: x["tool"])
    assert [(x["tool"], x["status"], x["success"]) for x in observed] == [
        ("delete_file", "blocked", False), ("get_weather", "ok", True)]
    assert observed[0]["content"] == policy.BLOCK_MESSAGE
    assert "Paris, FR" in observed[1]["content"]
    assert {x["tool"]: x["tool_call_id"] for x in observed} == span_call_ids(turn)


# ------------------------------------------------------------------------------ spans
def test_one_trace_per_turn_with_chat_and_tool_spans_under_the_agent(turn: HostRun) -> None:
    assert len({s.trace_id for s in turn.spans}) == 1, sorted(s.name for s in turn.spans)
    roots = [s for s in turn.spans if s.parent_span_id is None]
    host_tracing = DRIVERS[turn.driver].host_tracing
    root_name = "invoke_workflow " if host_tracing else "invoke_agent "
    assert len(roots) == 1 and roots[0].name.startswith(root_name), [
        (s.name, s.parent_span_id) for s in turn.spans]
    root = agent = roots[0]
    if host_tracing:  # the host's own turn span under its root (see the docstring)
        (agent,) = [s for s in turn.children(root) if s.name.startswith("invoke_agent ")]
    assert agent.kind == INTERNAL and agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    ids = {s.span_id for s in turn.spans}
    assert all(s.parent_span_id in ids for s in turn.spans if s is not root), "orphan span"
    chats, tools = turn.chat_calls(), turn.tool_calls()
    assert [s for s in turn.named("chat") if s not in chats] == []  # no second chat span
    expected_chats = 0 if DRIVERS[turn.driver].api is None else len(turn.posts)
    assert len(chats) == expected_chats, [s.name for s in chats]
    assert sorted(s.name for s in tools) == ["execute_tool delete_file",
                                             "execute_tool get_weather"]
    by_id = {s.span_id: s for s in turn.spans}
    for span in chats + tools:
        if DRIVERS[turn.driver].host_steps:
            assert agent in ancestors(turn, span), span.name
        elif host_tracing and span in chats:
            above = by_id[span.parent_span_id or ""]
            assert above.name.startswith("generate_content "), above.name
            assert above.parent_span_id == agent.span_id, span.name
        else:
            assert span.parent_span_id == agent.span_id, span.name
    kind = INTERNAL if DRIVERS[turn.driver].chat_on_host_span else CLIENT
    for chat in chats:
        assert chat.kind == kind and chat.status_code != STATUS_ERROR
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert "otelmw.api_request.id" in chat.attributes  # otelmw's record
    ids_by_tool = span_call_ids(turn)
    for span in tools:
        a = span.attributes
        assert a["gen_ai.operation.name"] == "execute_tool" and span.kind == INTERNAL
        assert a.get("gen_ai.tool.call.id") == ids_by_tool[a["gen_ai.tool.name"]]


def test_an_mcp_tool_call_is_identified_by_its_json_rpc_request_id_on_the_server(
        turn: HostRun) -> None:
    if DRIVERS[turn.driver].tool_call_ids != "mcp":
        return  # the MCP rule (see the module's docstring)
    client = turn.tool_span("get_weather")
    servers = [s for s in turn.spans if s.attributes.get("gen_ai.operation.name")
               == "execute_tool" and "jsonrpc.request.id" in s.attributes]
    # one server-side tool call: the blocked one was never sent
    assert [s.attributes["gen_ai.tool.name"] for s in servers] == ["get_weather"], [
        (s.name, s.attributes) for s in turn.spans]
    (server,) = servers
    a = server.attributes
    assert a["gen_ai.tool.call.id"] == a["jsonrpc.request.id"]
    assert a["mcp.method.name"] == "tools/call" and a["otelmw.result.status"] == "ok"
    assert server.trace_id == client.trace_id
    assert client.span_id in {s.span_id for s in ancestors(turn, server)}, (
        "the server's tool call under the client's")
    assert client.attributes["mcp.method.name"] == "tools/call"
    assert "mcp.method.name" not in turn.tool_span("delete_file").attributes  # not sent


def test_rewrite_spans_under_each_chat_and_tool_call(turn: HostRun) -> None:
    for chat in turn.chat_calls():
        (rewrite,) = middleware_children(turn, chat, "llm_request")
        assert rewrite.name == f"llm_request {PLUGIN}.cap_tokens"
        assert rewrite.attributes["otelmw.middleware.outcome"] == "rewritten"
        assert budget_key(turn) in rewrite.attributes["otelmw.rewrite.changed_keys"]
    for tool, outcome in (("get_weather", "rewritten"), ("delete_file", "unchanged")):
        (rewrite,) = middleware_children(turn, turn.tool_span(tool), "tool_request")
        assert rewrite.name == f"tool_request {PLUGIN}.canonical_city"
        assert rewrite.attributes["otelmw.middleware.outcome"] == outcome


def test_the_wrapper_span_is_on_the_call_that_ran_and_the_block_on_the_other(
        turn: HostRun) -> None:
    ran, blocked = turn.tool_span("get_weather"), turn.tool_span("delete_file")
    (wrapper,) = middleware_children(turn, ran, "tool_execution")
    assert wrapper.name == f"tool_execution {PLUGIN}.audit_tool"
    assert wrapper.attributes["otelmw.middleware.outcome"] == "passed"
    assert ran.attributes["otelmw.result.status"] == "ok"
    assert ran.attributes["otelmw.result.success"] is True
    assert middleware_children(turn, blocked, "tool_execution") == []
    assert blocked.attributes["otelmw.result.status"] == "blocked"
    assert blocked.attributes["otelmw.result.success"] is False


def test_hook_records_on_each_tool_call(turn: HostRun) -> None:
    for hook in ("pre_tool_call", "post_tool_call"):
        records = turn.plugin_hook_records(hook)
        on = sorted(x.span_id or "" for x in records)
        assert on == sorted(s.span_id for s in turn.tool_calls()), hook
    post = {x.attributes["gen_ai.tool.name"]: x.attributes
            for x in turn.plugin_hook_records("post_tool_call")}
    assert (post["delete_file"]["otelmw.result.status"],
            post["delete_file"]["error.type"]) == ("blocked", "plugin_block")
    assert post["get_weather"]["otelmw.result.status"] == "ok"
    assert "error.type" not in post["get_weather"]


# ---------------------------------------------------------------------------- helpers
def budget_key(turn: HostRun) -> str:
    """The request key the plugin's budget rewrite changes: ``max_tokens``, or the
    ``config`` of a Gemini request (its budget is ``config.max_output_tokens``)."""
    return "config" if DRIVERS[turn.driver].api == "gemini" else "max_tokens"


def sent_budget(body: dict[str, Any]) -> Any:
    """The answer budget a request was sent with: ``max_tokens``, or OpenAI's newer name
    for it where the host sends that one instead (pydantic-ai's OpenAI chat model), or
    the Gemini API's ``generationConfig.maxOutputTokens``."""
    if "contents" in body:
        return (body.get("generationConfig") or {}).get("maxOutputTokens")
    return body["max_completion_tokens"] if "max_completion_tokens" in body else body.get(
        "max_tokens")


def middleware_children(turn: HostRun, span: ReceivedSpan, kind: str) -> list[ReceivedSpan]:
    """The spans of the plugin's middleware of ``kind`` under ``span`` (any depth: an
    execution wrapper nests inside the rewrite stage's siblings)."""
    found, todo = [], [span]
    while todo:
        for child in turn.children(todo.pop()):
            if child.attributes.get("otelmw.middleware.kind") == kind and (
                    child.attributes.get("otelmw.middleware.plugin") == PLUGIN):
                found.append(child)
            elif not child.name.startswith(("chat ", "execute_tool ")):
                todo.append(child)
    return found


def ancestors(turn: HostRun, span: ReceivedSpan) -> list[ReceivedSpan]:
    by_id = {s.span_id: s for s in turn.spans}
    out, parent = [], by_id.get(span.parent_span_id or "")
    while parent is not None:
        out.append(parent)
        parent = by_id.get(parent.parent_span_id or "")
    return out


def span_call_ids(turn: HostRun) -> dict[str, str | None]:
    """Tool name -> the ``gen_ai.tool.call.id`` its ``execute_tool`` span (and its hooks'
    ``tool_call_id``) carries: the model's id; none on an MCP client's tool call."""
    if DRIVERS[turn.driver].tool_call_ids == "mcp":
        return {name: None for name, _ in MODEL_TOOL_CALLS}
    return dict(model_call_ids(turn))


def model_call_ids(turn: HostRun) -> dict[str, str]:
    """Tool name -> the call id the model gave it (from the model's next request);
    empty for a host with no model call."""
    if DRIVERS[turn.driver].api is None:
        return {}
    body = turn.posts[1].body
    out: dict[str, str] = {}
    for content in body.get("contents") or ():  # the Gemini API: the model's turns
        if content.get("role") == "model":
            for part in content.get("parts") or ():
                if "functionCall" in part:
                    out[part["functionCall"]["name"]] = part["functionCall"]["id"]
    for m in body.get("messages") or ():
        if m.get("role") != "assistant":
            continue
        for call in m.get("tool_calls") or ():  # chat completions
            out[call["function"]["name"]] = call["id"]
        for block in m.get("content") or ():  # anthropic messages
            if isinstance(block, dict) and block.get("type") == "tool_use":
                out[block["name"]] = block["id"]
    return out


def tool_results_sent(post: RecordedRequest) -> dict[str, str]:
    """Call id -> the tool result text a model request carries (the Gemini API's function
    responses carry no id: each answers the call at its place in the model's turn before)."""
    out: dict[str, str] = {}
    calls: list[str] = []
    for content in post.body.get("contents") or ():
        parts = content.get("parts") or ()
        if content.get("role") == "model":
            calls = [p["functionCall"]["id"] for p in parts if "functionCall" in p]
            continue
        answers = [p["functionResponse"] for p in parts if "functionResponse" in p]
        for call_id, answer in zip(calls, answers, strict=False):
            out[call_id] = json.dumps(answer.get("response"))
    for m in post.body.get("messages") or ():
        if m.get("role") == "tool":
            out[m["tool_call_id"]] = text_of(m.get("content"))
        elif m.get("role") == "user" and isinstance(m.get("content"), list):
            for block in m["content"]:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    out[block["tool_use_id"]] = text_of(block.get("content"))
    return out


def text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else str(content)

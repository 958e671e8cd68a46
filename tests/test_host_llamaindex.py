"""The LlamaIndex instrumentor (``otelmw_llamaindex``) against real LlamaIndex agents and
workflows (``FunctionAgent``, ``ReActAgent``, ``AgentWorkflow`` with a handoff, a
program's own loop over ``llm.chat_with_tools``), their model the real
``llama-index-llms-openai`` ``OpenAI`` LLM and openai SDK talking to the scripted
server, spans on in-memory exporters (``SdkTelemetry``); the zero-code paths
(``otelmw run`` with a plugin installed as a user installs one, ``opentelemetry-instrument``)
run an unmodified program in a subprocess whose telemetry goes to a real OTLP receiver.
The same run without otelmw is the reference for "LlamaIndex behaves as without
otelmw": what the provider received, what the agent answered and streamed, and what
LlamaIndex's own ``instrumentation`` dispatcher (event and span handlers) reported."""

from __future__ import annotations

import asyncio
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
from _support.host_scenarios import PROMPT_EXPORT, installed_plugin, run_ok
from _support.one_plugin_hosts import (
    MODEL_TOOL_CALLS,
    PROMPT,
    RECEIVED,
    SYSTEM,
    delete_file,
    get_weather,
)
from _support.one_plugin_hosts import weather_policy as policy
from _support.otlp_receiver import OtlpReceiver
from _support.scripted_llm import RecordedRequest, ScriptedLLMServer
from _support.semconv_schemas import validate
from _support.telemetry import SdkTelemetry, observing
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

try:
    from llama_index.core.agent.workflow import (
        AgentWorkflow,
        FunctionAgent,
        ReActAgent,
        ToolCallResult,
    )
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler
    from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler
    from llama_index.core.tools import FunctionTool, calling
    from llama_index.llms.openai import OpenAI
except ImportError:  # an environment without the host: conftest deselects these tests
    OpenAI = BaseEventHandler = object  # type: ignore[assignment,misc]
pytestmark = pytest.mark.host("llamaindex")

from otelmw import PluginManager, get_pipeline  # noqa: E402
from otelmw.instrumentation.llamaindex import LlamaIndexInstrumentor  # noqa: E402
from otelmw.instrumentation.openai import OpenAIInstrumentor  # noqa: E402
from otelmw.telemetry.content.policy import NO_CONTENT, SPAN_ONLY  # noqa: E402

MODEL = "gpt-4o-mini"
CHAT = f"chat {MODEL}"
AGENT = "weather-agent"
CONTENT_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages")


def broken(city: str) -> str:
    """The weather of a city, from a service that is down."""
    raise RuntimeError(f"weather service down for {city}")


@pytest.fixture()
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as srv:
        yield srv


@pytest.fixture()
def tel() -> Iterator[SdkTelemetry]:
    with observing(SdkTelemetry(), LlamaIndexInstrumentor(), OpenAIInstrumentor()) as t:
        yield t


@pytest.fixture()
def plugin(tmp_path: Path) -> Iterator[None]:
    """The one user plugin of every host (``weather_policy``), loaded from code."""
    manager = PluginManager(home=tmp_path / "home")
    manager.add_plugin(policy.__name__.rsplit(".", 1)[-1], policy.register)
    RECEIVED.clear()
    try:
        yield
    finally:
        manager.remove_plugin("weather_policy")
        RECEIVED.clear()


def llm(server: ScriptedLLMServer, **kw: Any) -> Any:
    return OpenAI(model=MODEL, api_base=server.base_url, api_key="x", max_retries=0, **kw)


def weather_agent(server: ScriptedLLMServer, *, streaming: bool = True,
                  tools: tuple[Any, ...] = (get_weather, delete_file)) -> Any:
    return FunctionAgent(name=AGENT, tools=list(tools), llm=llm(server),
                         system_prompt=SYSTEM, streaming=streaming)


def run(workflow: Any, prompt: str) -> tuple[str, list[Any]]:
    """One ``await workflow.run(prompt)``, its events streamed: (answer, events)."""
    async def main() -> tuple[str, list[Any]]:
        handler = workflow.run(user_msg=prompt)
        events = [ev async for ev in handler.stream_events()]
        return str(await handler), events

    return asyncio.run(main())


def chat_posts(server: ScriptedLLMServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.api == "chat"]


def tool_results_sent(post: RecordedRequest) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in post.body["messages"]
            if m["role"] == "tool"}


def model_call_ids(post: RecordedRequest) -> dict[str, str]:
    """The model's tool call ids by tool, as sent back to it in ``post``."""
    return {c["function"]["name"]: c["id"] for m in post.body["messages"]
            for c in m.get("tool_calls") or ()}


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def tree(tel: SdkTelemetry) -> tuple[ReadableSpan, list[ReadableSpan]]:
    """The one trace's root ``invoke_agent`` and its direct children (start order)."""
    spans = tel.finished()
    assert len({s.context.trace_id for s in spans}) == 1, [s.name for s in spans]
    roots = [s for s in spans if s.parent is None]
    assert len(roots) == 1, [s.name for s in roots]
    (root,) = roots
    ids = {s.context.span_id for s in spans}
    assert all(parent_of(s) in ids for s in spans if s is not root), "orphan span"
    return root, [s for s in spans if parent_of(s) == root.context.span_id]


def children(tel: SdkTelemetry, span: ReadableSpan) -> list[ReadableSpan]:
    return [s for s in tel.finished() if parent_of(s) == span.context.span_id]


def bodies(server: ScriptedLLMServer) -> Any:
    """What the provider received, with the server's own ids made comparable across
    two servers' runs."""
    return json.loads(re.sub(r'"call_\d+"', '"call_N"', json.dumps(
        [p.body for p in chat_posts(server)])))


# ----------------------------------------------------------------- FunctionAgent turns
@pytest.mark.parametrize("streaming", [False, True], ids=["achat", "astream_chat"])
def test_a_function_agent_turn_runs_the_plugin_and_is_one_trace(
        server: ScriptedLLMServer, tel: SdkTelemetry, plugin: None, streaming: bool) -> None:
    server.push_tool_calls(MODEL_TOOL_CALLS)
    server.push_text("done")
    answer, events = run(weather_agent(server, streaming=streaming), PROMPT)
    assert answer == "done"
    # effects: what the model and the tools received
    posts = chat_posts(server)
    assert len(posts) == 2 and [p.body["max_tokens"] for p in posts] == [policy.MAX_TOKENS] * 2
    assert all(p.stream is streaming for p in posts)
    assert RECEIVED == [{"tool": "get_weather", "args": {"city": "Paris, FR"}}]
    ids = model_call_ids(posts[1])
    # llama-index-core 0.14.5 with llama-index-llms-openai 0.8.0 (llamaindex-oldest) acts
    # on the first tool call of a non-streamed answer only, with or without otelmw
    assert set(ids) == {"get_weather", "delete_file"} or (
        not streaming and set(ids) == {"get_weather"}), ids
    sent = tool_results_sent(posts[1])
    assert "Paris, FR" in sent[ids["get_weather"]]
    results = {e.tool_name: e.tool_output for e in events if isinstance(e, ToolCallResult)}
    assert not results["get_weather"].is_error
    if "delete_file" in ids:  # the agent's own record of the blocked call: an error
        assert sent[ids["delete_file"]] == policy.BLOCK_MESSAGE
        assert results["delete_file"].is_error
        assert results["delete_file"].content == policy.BLOCK_MESSAGE
    # spans: invoke_agent over chat, the tool calls, chat
    root, under = tree(tel)
    assert root.name == f"invoke_agent {AGENT}"
    assert root.attributes["gen_ai.agent.name"] == AGENT
    assert root.attributes["otelmw.runtime.id"] == "llamaindex"
    names = [s.name for s in under]
    assert names[0] == names[-1] == CHAT and len(names) == 2 + len(ids)
    assert sorted(names[1:-1]) == sorted(f"execute_tool {tool}" for tool in ids)
    chats = tel.named("chat ")
    assert len(chats) == len(posts)
    for chat, post in zip(chats, posts, strict=True):
        a = chat.attributes
        assert a["gen_ai.provider.name"] == "openai" and a["server.address"] == "127.0.0.1"
        assert a["gen_ai.request.max_tokens"] == policy.MAX_TOKENS
        assert a["gen_ai.response.id"] == post.response_id  # enriched by the SDK below
        assert a.get("gen_ai.request.stream", False) is streaming
        (rewrite,) = children(tel, chat)
        assert rewrite.name == "llm_request weather_policy.cap_tokens"
        assert rewrite.attributes["otelmw.middleware.outcome"] == "rewritten"
    weather, = tel.named("execute_tool get_weather")
    assert weather.attributes["gen_ai.tool.call.id"] == ids["get_weather"]
    assert weather.attributes["otelmw.result.status"] == "ok"
    assert sorted(s.name for s in children(tel, weather)) == [
        "tool_execution weather_policy.audit_tool", "tool_request weather_policy.canonical_city"]
    if "delete_file" in ids:
        blocked, = tel.named("execute_tool delete_file")
        assert blocked.attributes["gen_ai.tool.call.id"] == ids["delete_file"]
        assert blocked.attributes["otelmw.result.status"] == "blocked"
        assert [s.name for s in children(tel, blocked)] == [
            "tool_request weather_policy.canonical_city"]
    assert get_pipeline().failures.total() == 0


def test_a_failing_tool_is_a_failed_call_and_the_agent_sees_what_it_sees_without_otelmw(
        server: ScriptedLLMServer) -> None:
    def turn() -> tuple[str, list[Any]]:
        server.clear()
        server.push_tool_calls([("broken", {"city": "Oslo"})])
        server.push_text("sorry")
        return run(weather_agent(server, streaming=False, tools=(broken,)), "weather?")

    bare_answer, _ = turn()
    bare = bodies(server)
    with observing(SdkTelemetry(), LlamaIndexInstrumentor(), OpenAIInstrumentor()) as t:
        answer, events = turn()
    assert answer == bare_answer == "sorry"
    assert bodies(server) == bare
    assert "weather service down for Oslo" in json.dumps(bare[1]["messages"][-1])
    (result,) = [e for e in events if isinstance(e, ToolCallResult)]
    assert result.tool_output.is_error
    (span,) = t.named("execute_tool broken")
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes["otelmw.result.status"] == "error"
    assert span.attributes["gen_ai.tool.call.id"] == result.tool_id


# -------------------------------------------------------- the host as without otelmw
class _Events(BaseEventHandler):  # type: ignore[misc]
    """LlamaIndex's own event handler API: the class names of every event."""

    seen: list[str] = []

    @classmethod
    def class_name(cls) -> str:
        return "OtelmwTestEvents"

    def handle(self, event: Any, **kwargs: Any) -> None:
        self.seen.append(type(event).__name__)


def _observed_by_llamaindex(server: ScriptedLLMServer) -> dict[str, Any]:
    """One streamed FunctionAgent turn with LlamaIndex's own event and span handlers
    on the root dispatcher: what the provider, the caller and the handlers got."""
    dispatcher = get_dispatcher()
    events, spans = _Events(seen=[]), SimpleSpanHandler()
    dispatcher.add_event_handler(events)
    dispatcher.add_span_handler(spans)
    try:
        server.clear()
        server.push_tool_calls([("get_weather", {"city": "paris"})])
        server.push_text("done")
        answer, streamed = run(weather_agent(server), PROMPT)
    finally:
        dispatcher.event_handlers.remove(events)
        dispatcher.span_handlers.remove(spans)
    span_names = sorted(re.sub(r"-[0-9a-f-]{36}$", "", s.id_) for s in spans.completed_spans)
    return {"answer": answer, "bodies": bodies(server),
            "streamed": [type(e).__name__ for e in streamed], "events": events.seen,
            "spans": span_names}


def test_llamaindex_behaves_and_reports_as_without_otelmw(server: ScriptedLLMServer) -> None:
    bare = _observed_by_llamaindex(server)
    with observing(SdkTelemetry(), LlamaIndexInstrumentor(), OpenAIInstrumentor()) as t:
        observed = _observed_by_llamaindex(server)
    assert observed == bare
    assert "LLMChatStartEvent" in bare["events"] and "AgentStream" in bare["streamed"]
    assert any(name.startswith("OpenAI.astream_chat") for name in bare["spans"])
    assert len(t.named("chat ")) == 2 and len(t.named("execute_tool ")) == 1


def test_uninstrument_restores_llamaindex(server: ScriptedLLMServer) -> None:
    from llama_index.core.agent.workflow.base_agent import BaseWorkflowAgent
    from llama_index.core.tools import calling as tool_calling
    from workflows.workflow import Workflow

    from otelmw.instrumentation.llamaindex.models import is_ours

    tel = SdkTelemetry()
    with observing(tel, LlamaIndexInstrumentor()):
        class Late(OpenAI):  # defined while instrumented: wrapped on definition
            async def achat(self, messages: Any, **kwargs: Any) -> Any:
                return await super().achat(messages, **kwargs)

        assert is_ours(OpenAI.__dict__["achat"]) and is_ours(Late.__dict__["achat"])
        assert hasattr(Workflow.__dict__["run"], "__wrapped__")
    for cls in (OpenAI, Late):
        assert not any(is_ours(cls.__dict__[name]) for name in ("chat", "achat")
                       if name in cls.__dict__), cls
    assert not hasattr(Workflow.__dict__["run"], "__wrapped__")
    assert not hasattr(BaseWorkflowAgent.__dict__["_call_tool"], "__wrapped__")
    assert not hasattr(tool_calling.call_tool, "__wrapped__")
    server.push_text("hi")
    answer = asyncio.run(Late(model=MODEL, api_base=server.base_url, api_key="x").achat(
        [ChatMessage(role="user", content="hi")]))
    assert answer.message.content == "hi"
    assert tel.finished() == []


# ------------------------------------------------------------------------ handoffs
def test_an_agent_workflow_handoff_makes_each_agent_a_sub_agent(
        server: ScriptedLLMServer, tel: SdkTelemetry) -> None:
    server.push_tool_calls([("handoff", {"to_agent": "weather", "reason": "weather"})])
    server.push_tool_calls([("get_weather", {"city": "paris"})])
    server.push_text("sunny")
    triage = FunctionAgent(name="triage", description="routes questions", llm=llm(server),
                           tools=[], can_handoff_to=["weather"], streaming=False)
    weather = FunctionAgent(name="weather", description="knows the weather",
                            llm=llm(server), tools=[get_weather])
    workflow = AgentWorkflow(agents=[triage, weather], root_agent="triage")
    answer, _ = run(workflow, "weather in paris?")
    assert answer == "sunny"
    root, under = tree(tel)
    assert root.name == "invoke_agent AgentWorkflow"
    assert [s.name for s in under] == ["invoke_agent triage", "invoke_agent weather"]
    first, second = under
    assert [s.name for s in children(tel, first)] == [CHAT, "execute_tool handoff"]
    assert [s.name for s in children(tel, second)] == [CHAT, "execute_tool get_weather", CHAT]
    assert first.end_time is not None and second.start_time is not None
    assert first.end_time <= second.start_time  # the handoff ended the first stretch
    posts = chat_posts(server)
    (handoff,) = tel.named("execute_tool handoff")
    assert handoff.attributes["gen_ai.tool.call.id"] == model_call_ids(posts[1])["handoff"]
    assert len(tel.named("chat ")) == len(posts) == 3


def test_an_agent_run_from_a_tool_is_a_sub_agent_of_the_tool_call(
        server: ScriptedLLMServer, tel: SdkTelemetry) -> None:
    inner = weather_agent(server, streaming=False, tools=(get_weather,))

    async def ask_weather_agent(question: str) -> str:
        """Ask the weather agent."""
        return str(await inner.run(question))

    server.push_tool_calls([("ask_weather_agent", {"question": "paris?"})])  # outer
    server.push_tool_calls([("get_weather", {"city": "paris"})])  # inner
    server.push_text("sunny")  # inner
    server.push_text("it is sunny")  # outer
    outer = FunctionAgent(name="concierge", tools=[ask_weather_agent], llm=llm(server),
                          streaming=False)
    answer, _ = run(outer, "weather?")
    assert answer == "it is sunny"
    root, under = tree(tel)
    assert root.name == "invoke_agent concierge"
    assert [s.name for s in under] == [CHAT, "execute_tool ask_weather_agent", CHAT]
    (sub,) = children(tel, under[1])
    assert sub.name == f"invoke_agent {AGENT}"
    assert [s.name for s in children(tel, sub)] == [CHAT, "execute_tool get_weather", CHAT]


# ---------------------------------------------------------------------- ReActAgent
def test_a_react_agent_turn(server: ScriptedLLMServer, tel: SdkTelemetry, plugin: None) -> None:
    server.push_text('Thought: I need the weather.\nAction: get_weather\n'
                     'Action Input: {"city": "paris"}')
    server.push_text("Thought: I can answer without using any more tools.\nAnswer: sunny")
    agent = ReActAgent(name="reactor", tools=[get_weather], llm=llm(server))
    answer, events = run(agent, "weather in paris?")
    assert answer == "sunny"
    assert RECEIVED == [{"tool": "get_weather", "args": {"city": "Paris, FR"}}]
    (result,) = [e for e in events if isinstance(e, ToolCallResult)]
    root, under = tree(tel)
    assert root.name == "invoke_agent reactor"
    assert [s.name for s in under] == [CHAT, "execute_tool get_weather", CHAT]
    assert under[1].attributes["gen_ai.tool.call.id"] == result.tool_id
    assert [p.body["max_tokens"] for p in chat_posts(server)] == [policy.MAX_TOKENS] * 2
    assert "Paris, FR" in json.dumps(chat_posts(server)[1].body["messages"])


# ------------------------------------------------------- rewrites and execution layers
@pytest.fixture()
def plugins(tmp_path: Path) -> Iterator[PluginManager]:
    manager = PluginManager(home=tmp_path / "home")
    yield manager
    for name in list(manager.status):
        manager.remove_plugin(name)


def test_a_message_and_model_rewrite_reach_the_provider_and_leave_the_memory_alone(
        server: ScriptedLLMServer, tel: SdkTelemetry, plugins: PluginManager) -> None:
    def rewrite(**kw: Any) -> Any:
        request = dict(kw["request"])
        request["messages"] = [{"role": "system", "content": "answer in French"},
                               *request["messages"][1:]]
        request["model"] = "gpt-4o"
        request["temperature"] = 0.7
        return {"request": request}

    plugins.add_plugin("style", lambda ctx: ctx.register_middleware("llm_request", rewrite))
    server.push_text("oui")
    agent = weather_agent(server, streaming=False, tools=())

    async def main() -> Any:
        from llama_index.core.workflow import Context

        ctx = Context(agent)
        answer = await agent.run("hello", ctx=ctx)
        memory = await ctx.store.get("memory")
        return answer, await memory.aget()

    answer, history = asyncio.run(main())
    assert str(answer) == "oui"
    (post,) = chat_posts(server)
    assert post.body["model"] == "gpt-4o" and post.body["temperature"] == 0.7
    assert post.body["messages"] == [{"role": "system", "content": "answer in French"},
                                     {"role": "user", "content": "hello"}]
    assert [(m.role.value, m.content) for m in history] == [("user", "hello"),
                                                             ("assistant", "oui")]
    assert agent.llm.model == MODEL and agent.llm.temperature != 0.7  # the LLM untouched
    (chat,) = tel.named("chat ")
    assert chat.name == "chat gpt-4o"


def test_an_execution_layer_may_answer_a_chat_response_but_nothing_else(
        server: ScriptedLLMServer, tel: SdkTelemetry, plugins: PluginManager) -> None:
    from llama_index.core.base.llms.types import ChatResponse

    answers: list[Any] = [ChatResponse(message=ChatMessage(role="assistant", content="cached")),
                          {"not": "a ChatResponse"}]

    def cache(**kw: Any) -> Any:
        return answers.pop(0)

    plugins.add_plugin("cache", lambda ctx: ctx.register_middleware("llm_execution", cache))
    model = llm(server)
    before = get_pipeline().failures.counts[("instrumentation", "llamaindex", "chat")]
    first = model.chat([ChatMessage(role="user", content="hi")])
    assert first.message.content == "cached" and chat_posts(server) == []
    server.push_text("from the model")
    second = model.chat([ChatMessage(role="user", content="hi")])
    assert second.message.content == "from the model" and len(chat_posts(server)) == 1
    assert get_pipeline().failures.counts[("instrumentation", "llamaindex", "chat")] == (
        before + 1)


@pytest.mark.parametrize("layer", ["transform", "answer"])
def test_a_tool_layer_s_answer_is_the_tool_output_the_agent_records(
        server: ScriptedLLMServer, tel: SdkTelemetry, plugins: PluginManager,
        layer: str) -> None:
    def transform(**kw: Any) -> Any:
        return f"transformed: {kw['result']}"

    def answer(**kw: Any) -> Any:  # a tool_execution layer that never calls the tool
        return "from the cache"

    def register(ctx: Any) -> None:
        if layer == "transform":
            ctx.register_hook("transform_tool_result", transform)
        else:
            ctx.register_middleware("tool_execution", answer)

    plugins.add_plugin("layer", register)
    failures = get_pipeline().failures.total()
    RECEIVED.clear()
    server.push_tool_calls([("get_weather", {"city": "paris"})])
    server.push_text("done")
    _, events = run(weather_agent(server, streaming=False), "weather?")
    (result,) = [e for e in events if isinstance(e, ToolCallResult)]
    expected = ("transformed: sunny and 21C in paris" if layer == "transform"
                else "from the cache")
    assert result.tool_output.content == expected and not result.tool_output.is_error
    assert tool_results_sent(chat_posts(server)[1]) == {result.tool_id: expected}
    ran = [{"tool": "get_weather", "args": {"city": "paris"}}] if layer == "transform" else []
    assert ran == RECEIVED
    (span,) = tel.named("execute_tool get_weather")
    assert span.attributes["otelmw.result.status"] == "ok"
    assert get_pipeline().failures.total() == failures
    RECEIVED.clear()


# --------------------------------------------------------- a program's own loop (sync)
def test_the_sync_route_chat_with_tools_and_call_tool_with_selection(
        server: ScriptedLLMServer, tel: SdkTelemetry, plugin: None) -> None:
    server.push_tool_calls([("get_weather", {"city": "paris"})])
    model = llm(server)
    tool = FunctionTool.from_defaults(get_weather)
    response = model.chat_with_tools([tool], user_msg="weather in paris?")
    (selection,) = model.get_tool_calls_from_response(response)
    output = calling.call_tool_with_selection(selection, [tool])  # as instrumented
    assert output.content == "sunny and 21C in Paris, FR" and not output.is_error
    (chat,) = tel.named("chat ")
    (call,) = tel.named("execute_tool get_weather")
    assert chat.attributes["gen_ai.request.max_tokens"] == policy.MAX_TOKENS
    assert call.attributes["gen_ai.tool.call.id"] == selection.tool_id
    assert call.attributes["otelmw.result.status"] == "ok"
    assert chat_posts(server)[0].body["max_tokens"] == policy.MAX_TOKENS


def test_a_sync_stream_is_one_chat_span_that_ends_with_the_stream(
        server: ScriptedLLMServer, tel: SdkTelemetry) -> None:
    server.push_text("a streamed answer")
    chunks = list(llm(server).stream_chat([ChatMessage(role="user", content="hi")]))
    assert chunks[-1].message.content == "a streamed answer"
    (chat,) = tel.named("chat ")
    assert chat.attributes["gen_ai.request.stream"] is True
    assert chat.attributes["otelmw.stream.ended_by"] == "exhausted"
    assert chat.attributes["gen_ai.response.id"] == chat_posts(server)[0].response_id
    assert len(tel.finished()) == 1  # the SDK request under it enriched it


def test_a_program_s_own_llm_subclass_is_the_seam_too(
        server: ScriptedLLMServer, tel: SdkTelemetry) -> None:
    class Cautious(OpenAI):  # defined after instrumentation; its achat calls OpenAI's
        async def achat(self, messages: Any, **kwargs: Any) -> Any:
            return await super().achat(messages, **kwargs)

    server.push_text("careful")
    answer = asyncio.run(Cautious(model=MODEL, api_base=server.base_url, api_key="x").achat(
        [ChatMessage(role="user", content="hi")]))
    assert answer.message.content == "careful"
    (chat,) = tel.named("chat ")  # one call: OpenAI.achat inside it is that call
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert len(tel.finished()) == 1


# ---------------------------------------------------------------------- fail open
def test_otelmw_s_own_errors_fail_open(server: ScriptedLLMServer, tel: SdkTelemetry,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from otelmw.instrumentation.llamaindex import models, tools

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("otelmw bug")

    monkeypatch.setattr(models, "request_view", boom)
    monkeypatch.setattr(tools, "ToolCallRun", boom)
    before = dict(get_pipeline().failures.counts)
    server.push_tool_calls([("get_weather", {"city": "paris"})])
    server.push_text("done")
    RECEIVED.clear()
    answer, _ = run(weather_agent(server, streaming=False), "weather?")
    assert answer == "done"
    assert RECEIVED == [{"tool": "get_weather", "args": {"city": "paris"}}]
    counts = get_pipeline().failures.counts
    assert counts[("instrumentation", "llamaindex", "achat")] - before.get(
        ("instrumentation", "llamaindex", "achat"), 0) == 2
    assert counts[("instrumentation", "llamaindex", "agent_call_tool")] - before.get(
        ("instrumentation", "llamaindex", "agent_call_tool"), 0) == 1
    RECEIVED.clear()


# ------------------------------------------------------------------------ content
def test_content_is_captured_only_when_asked_and_is_schema_valid(
        server: ScriptedLLMServer) -> None:
    def turn(mode: str) -> list[ReadableSpan]:
        with observing(SdkTelemetry(mode), LlamaIndexInstrumentor(),
                       OpenAIInstrumentor()) as t:
            server.push_tool_calls([("get_weather", {"city": "paris"})])
            server.push_text("done")
            run(weather_agent(server, streaming=False), "weather in paris?")
            return t.named("chat ")

    assert all(k not in s.attributes for s in turn(NO_CONTENT) for k in CONTENT_KEYS)
    first, second = turn(SPAN_ONLY)
    inputs = validate("gen_ai.input.messages", first.attributes["gen_ai.input.messages"])
    assert inputs[-1] == {"role": "user",
                          "parts": [{"type": "text", "content": "weather in paris?"}]}
    later = validate("gen_ai.input.messages", second.attributes["gen_ai.input.messages"])
    assert [m["role"] for m in later][-2:] == ["assistant", "tool"]
    assert later[-1]["parts"][0]["type"] == "tool_call_response"
    outputs = validate("gen_ai.output.messages", second.attributes["gen_ai.output.messages"])
    assert outputs[0]["parts"] == [{"type": "text", "content": "done"}]


# ------------------------------------------------------------------ zero-code paths
PROGRAM = """
import asyncio

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.llms.openai import OpenAI


def get_weather(city: str) -> str:
    \"\"\"Current weather for a city.\"\"\"
    return f"sunny in {{city}}"


agent = FunctionAgent(name="weather-agent", tools=[get_weather], system_prompt="be brief",
                      llm=OpenAI(model="gpt-4o-mini", api_base={base!r}, api_key="x"))


async def main() -> None:
    for _ in range(2):
        handler = agent.run("weather in paris?")
        async for _event in handler.stream_events():
            pass
        print("ANSWER", await handler)


asyncio.run(main())
"""


def _program(tmp_path: Path, server: ScriptedLLMServer) -> Path:
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(PROGRAM.format(base=server.base_url)))
    assert "otelmw" not in script.read_text()
    for _ in range(2):
        server.push_tool_calls([("get_weather", {"city": "paris"})])
        server.push_text("sunny")
    return script


def test_otelmw_run_instruments_an_unmodified_program_with_a_plugin(
        tmp_path: Path, server: ScriptedLLMServer) -> None:
    script = _program(tmp_path, server)
    with OtlpReceiver() as rx:
        env = clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint,
                        OTEL_SERVICE_NAME="llamaindex-app", **PROMPT_EXPORT)
        env = {k: v for k, v in env.items() if not k.startswith("OPENAI_")}
        installed_plugin(tmp_path, Path(policy.__file__), "weather_policy = "
                         "weather_policy:register", env)
        run_ok([*otelmw_cmd(), "plugins", "enable", "weather_policy"], env, tmp_path)
        proc = run_ok([*otelmw_cmd(), "run", "--", sys.executable, str(script)], env, tmp_path)
        assert proc.stdout.count("ANSWER sunny") == 2
        rx.wait_for(lambda: len([s for s in rx.spans() if s.parent_span_id is None]) >= 2
                    and len(rx.logs()) >= 4, timeout=30)
        spans, logs = rx.spans(), rx.logs()
    posts = chat_posts(server)
    assert len(posts) == 4 and all(p.body["max_tokens"] == policy.MAX_TOKENS for p in posts)
    assert all("Paris, FR" in json.dumps(p.body["messages"]) for p in posts[1::2])
    by_trace: dict[str, list[Any]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    assert len(by_trace) == 2  # one trace per run
    for trace in by_trace.values():
        (root,) = [s for s in trace if s.parent_span_id is None]
        assert root.name == "invoke_agent weather-agent"
        under = sorted(s.name for s in trace if s.parent_span_id == root.span_id)
        assert under == [CHAT, CHAT, "execute_tool get_weather"]
    hooks = sorted(x.event_name for x in logs if x.event_name.startswith("otelmw.hook."))
    assert hooks == ["otelmw.hook.post_tool_call"] * 2 + ["otelmw.hook.pre_tool_call"] * 2


@pytest.mark.parametrize("capture", ["SPAN_ONLY", None], ids=["capture", "no-capture"])
def test_opentelemetry_instrument_lights_up_an_unmodified_program(
        tmp_path: Path, server: ScriptedLLMServer, capture: str | None) -> None:
    beside = Path(sys.executable).parent / "opentelemetry-instrument"
    launcher = str(beside) if beside.exists() else shutil.which("opentelemetry-instrument")
    assert launcher, "opentelemetry-instrument comes with opentelemetry-instrumentation"
    script = _program(tmp_path, server)
    with OtlpReceiver() as rx:
        env = clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint,
                        OTEL_SERVICE_NAME="llamaindex-app", **PROMPT_EXPORT)
        if capture is not None:
            env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = capture
        proc = subprocess.run([launcher, sys.executable, str(script)], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.count("ANSWER sunny") == 2
        rx.wait_for(lambda: len([s for s in rx.spans() if s.parent_span_id is None]) >= 2,
                    timeout=30)
        spans = rx.spans()
    roots = [s for s in spans if s.parent_span_id is None]
    assert [s.name for s in roots] == ["invoke_agent weather-agent"] * 2
    chats = [s for s in spans if s.name == CHAT]
    assert len(chats) == len(chat_posts(server)) == 4
    for span in chats:
        present = [key for key in CONTENT_KEYS if key in span.attributes]
        assert present == ([] if capture is None else list(CONTENT_KEYS))
        for key in present:
            validate(key, span.attributes[key])


def test_dependencies_are_declared_honestly() -> None:
    from opentelemetry.instrumentation.dependencies import get_dependency_conflicts

    deps = LlamaIndexInstrumentor().instrumentation_dependencies()
    assert tuple(deps) == ("llama-index-core >= 0.14.5, < 0.15",)
    assert get_dependency_conflicts(deps) is None

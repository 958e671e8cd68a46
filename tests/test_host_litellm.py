"""LiteLLM instrumentor (``otelmw_litellm``) against real LiteLLM calls, fully offline.

LiteLLM talks to a ``ScriptedLLMServer`` (``model="openai/…"`` with ``api_base`` at its
OpenAI routes, ``anthropic/…`` at its ``/messages`` route); ``LITELLM_LOCAL_MODEL_COST_MAP``
keeps LiteLLM's import off the network. The telemetry goes to in-memory exporters in this
process (the SDK tests' way); ``test_otelmw_run_…`` runs an unmodified LiteLLM program
under ``otelmw run`` with a plugin enabled, exporting to the real OTLP receiver.
``otelmw_openai`` is instrumented too: LiteLLM must never get a second ``chat`` span from it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support.distributions import PLUGINS, install_distribution

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before LiteLLM's import

from _support.otlp_receiver import OtlpReceiver, ReceivedSpan
from _support.scripted_llm import ScriptedLLMServer
from _support.sdk_releases import lacks_behaviour, litellm_lacks
from _support.telemetry import SdkTelemetry, observing
from opentelemetry.sdk.trace import ReadableSpan

try:
    import litellm
except ImportError:  # an environment without the host: conftest deselects these tests
    litellm = None
pytestmark = pytest.mark.host("litellm", "openai")

from otelmw import get_pipeline  # noqa: E402
from otelmw.instrumentation.litellm import LiteLLMInstrumentor  # noqa: E402
from otelmw.instrumentation.openai import OpenAIInstrumentor  # noqa: E402

MSGS = [{"role": "user", "content": "hello"}]
CITY = "Paris"
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
TIMEOUT = 150


@pytest.fixture()
def tel() -> Iterator[SdkTelemetry]:
    pipe = get_pipeline()
    with observing(SdkTelemetry(), LiteLLMInstrumentor(), OpenAIInstrumentor()) as t:
        failures_before = sum(pipe.failures.counts.values())
        yield t
        # otelmw's own code never failed on these real calls
        assert sum(pipe.failures.counts.values()) == failures_before, pipe.failures.counts


@pytest.fixture()
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer.calling_tools(CITY) as srv:
        yield srv


def openai_kw(srv: ScriptedLLMServer, model: str = "openai/scripted-model") -> dict[str, Any]:
    return {"model": model, "api_base": srv.base_url, "api_key": "x"}


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def one_trace(spans: list[ReadableSpan]) -> None:
    assert len({s.context.trace_id for s in spans}) == 1, [s.name for s in spans]


def assert_chat_matches(span: ReadableSpan, srv: ScriptedLLMServer, index: int = -1,
                        model: str = "openai/scripted-model") -> None:
    """The chat span says what the server got and answered (its request index)."""
    rec = srv.requests[index]
    a = span.attributes or {}
    assert span.kind.name == "CLIENT"
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.request.model"] == model
    assert a["gen_ai.response.model"] == rec.body["model"]
    assert a["server.address"] == "127.0.0.1" and a["server.port"] == srv.port
    assert rec.usage is not None
    assert a["gen_ai.usage.input_tokens"] == rec.usage["input_tokens"]
    assert a["gen_ai.usage.output_tokens"] == rec.usage["output_tokens"]


# ------------------------------------------------------------------ chat calls
def test_completion_is_one_chat_span_with_the_provider_litellm_routed_to(
        tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    resp = litellm.completion(messages=MSGS, temperature=0.25, max_tokens=50,
                              **openai_kw(server))
    (span,) = tel.finished()  # no second span from otelmw_openai
    assert span.name == "chat openai/scripted-model"
    assert_chat_matches(span, server)
    a = span.attributes or {}
    assert a["gen_ai.provider.name"] == "openai"  # from litellm.get_llm_provider
    assert a["gen_ai.response.id"] == resp.id == server.requests[-1].response_id
    assert list(a["gen_ai.response.finish_reasons"]) == [resp.choices[0].finish_reason]
    assert a["gen_ai.request.temperature"] == 0.25 and a["gen_ai.request.max_tokens"] == 50
    assert a["otelmw.api_mode"] == "chat_completions"
    assert server.requests[-1].path.endswith("/chat/completions")
    assert len(tel.metric_points("gen_ai.client.operation.duration")) == 1


@lacks_behaviour(litellm_lacks(async_flag=True))
def test_acompletion_and_the_async_flag_of_completion(
        tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    async def run() -> list[Any]:
        first = await litellm.acompletion(messages=MSGS, **openai_kw(server))
        second = await litellm.completion(messages=MSGS, acompletion=True, **openai_kw(server))
        return [first, second]

    answers = asyncio.run(run())
    spans = tel.finished()
    assert [s.name for s in spans] == ["chat openai/scripted-model"] * 2
    for i, (span, resp) in enumerate(zip(spans, answers, strict=True)):
        assert_chat_matches(span, server, i)
        assert (span.attributes or {})["gen_ai.response.id"] == resp.id


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stream_ends_its_span_once_when_exhausted(
        mode: str, tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    server.push_text("one two three four five")
    kw = {**openai_kw(server), "messages": MSGS, "stream": True,
          "stream_options": {"include_usage": True}}
    if mode == "sync":
        stream = litellm.completion(**kw)
        assert tel.finished() == []  # open while the stream is
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    else:
        async def run() -> str:
            s = await litellm.acompletion(**kw)
            assert tel.finished() == []
            return "".join([c.choices[0].delta.content or "" async for c in s if c.choices])

        text = asyncio.run(run())
    assert text == "one two three four five"
    (span,) = tel.finished()
    a = span.attributes or {}
    assert_chat_matches(span, server)
    assert a["otelmw.stream.ended_by"] == "exhausted"
    assert a["gen_ai.request.stream"] is True and a["gen_ai.response.time_to_first_chunk"] >= 0
    assert a["gen_ai.response.id"] == server.requests[-1].response_id
    assert list(a["gen_ai.response.finish_reasons"]) == ["stop"]


def test_a_stream_closed_early_ends_its_span_once(tel: SdkTelemetry,
                                                  server: ScriptedLLMServer) -> None:
    server.push_text("one two three four five six seven eight")
    stream = litellm.completion(messages=MSGS, stream=True, **openai_kw(server))
    next(iter(stream))
    stream.close()
    (span,) = tel.finished()
    assert (span.attributes or {})["otelmw.stream.ended_by"] == "closed"
    stream.close()
    assert len(tel.finished()) == 1


def test_provider_error_fails_the_span_and_reaches_the_caller_unchanged(
        tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    server.push_error(400, "bad request")
    with pytest.raises(litellm.BadRequestError) as info:
        litellm.completion(messages=MSGS, num_retries=0, **openai_kw(server))
    (span,) = tel.finished()
    assert span.status.status_code.name == "ERROR"
    t = type(info.value)
    assert (span.attributes or {})["error.type"] == f"{t.__module__}.{t.__qualname__}"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_responses_api(mode: str, tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    kw = {**openai_kw(server), "input": "hello"}
    resp = litellm.responses(**kw) if mode == "sync" else asyncio.run(litellm.aresponses(**kw))
    (span,) = tel.finished()
    a = span.attributes or {}
    assert server.requests[-1].path.endswith("/responses")
    assert_chat_matches(span, server)
    assert a["otelmw.api_mode"] == "responses" and a["openai.api.type"] == "responses"
    assert a["gen_ai.response.id"] == resp.id  # the id LiteLLM hands back
    assert list(a["gen_ai.response.finish_reasons"]) == ["completed"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_embedding_is_one_embeddings_span(mode: str, tel: SdkTelemetry,
                                          server: ScriptedLLMServer) -> None:
    kw = {**openai_kw(server, "openai/scripted-embed"), "input": ["alpha", "beta"]}
    resp = litellm.embedding(**kw) if mode == "sync" else asyncio.run(litellm.aembedding(**kw))
    (span,) = tel.finished()  # none from otelmw_openai either
    a = span.attributes or {}
    assert span.name == "embeddings openai/scripted-embed"
    assert a["gen_ai.operation.name"] == "embeddings" and a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.embeddings.dimension.count"] == len(resp.data[0]["embedding"]) == 8
    assert a["gen_ai.usage.input_tokens"] == resp.usage.prompt_tokens
    assert a["server.port"] == server.port


def test_anthropic_model_through_completion_and_the_messages_interface(
        tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    from litellm.anthropic_interface import messages

    kw = {"model": "anthropic/claude-scripted", "api_base": server.root_url, "api_key": "x"}
    resp = litellm.completion(messages=MSGS, **kw)
    native = asyncio.run(messages.acreate(messages=MSGS, max_tokens=64, **kw))
    first, second = tel.finished()
    assert [r.path.endswith("/messages") for r in server.requests] == [True, True]
    for span, mode in ((first, "chat_completions"), (second, "anthropic_messages")):
        a = span.attributes or {}
        assert span.name == "chat anthropic/claude-scripted"
        assert a["gen_ai.provider.name"] == "anthropic" and a["otelmw.api_mode"] == mode
        assert a["server.address"] == "127.0.0.1" and a["server.port"] == server.port
        assert "openai.api.type" not in a
    assert (first.attributes or {})["gen_ai.response.id"] == resp.id
    b = second.attributes or {}
    assert b["gen_ai.response.id"] == native["id"] == server.requests[-1].response_id
    assert native["stop_reason"] == "end_turn" and list(b["gen_ai.response.finish_reasons"]) \
        == ["stop"]
    assert b["gen_ai.usage.input_tokens"] == native["usage"]["input_tokens"]
    assert b["gen_ai.request.max_tokens"] == 64


def test_the_messages_interface_sync_create(tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    """``anthropic_interface.messages.create`` (sync): to an OpenAI model LiteLLM adapts
    the call onto the Responses API: one ``chat`` span, the nested ``otelmw_openai``
    only enriches it. To an Anthropic model LiteLLM 1.110 has no sync handler: its own
    ``ValueError`` reaches the caller unchanged and the span ends once, failed."""
    from litellm.anthropic_interface import messages

    answer = messages.create(messages=MSGS, max_tokens=64, temperature=0.5,
                             **openai_kw(server))
    (span,) = tel.finished()
    a = span.attributes or {}
    assert server.requests[-1].path.endswith("/responses")
    assert span.name == "chat openai/scripted-model"
    assert a["otelmw.api_mode"] == "anthropic_messages" and a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.response.id"] == answer["id"]  # the id LiteLLM hands back
    assert a["gen_ai.usage.input_tokens"] == answer["usage"]["input_tokens"]
    assert a["gen_ai.usage.output_tokens"] == answer["usage"]["output_tokens"]
    assert a["gen_ai.request.max_tokens"] == 64 and a["gen_ai.request.temperature"] == 0.5
    assert server.requests[-1].body["temperature"] == 0.5
    assert answer["content"][0]["text"] and answer["stop_reason"] == "end_turn"

    kw = {"model": "anthropic/claude-scripted", "api_base": server.root_url, "api_key": "x"}
    sent = len(server.requests)
    with pytest.raises(ValueError, match="not implemented for sync calls"):
        messages.create(messages=MSGS, max_tokens=64, **kw)
    _, failed = tel.finished()
    assert len(server.requests) == sent  # LiteLLM sent nothing, as without otelmw
    assert failed.name == "chat anthropic/claude-scripted"
    assert failed.status.status_code.name == "ERROR"
    assert (failed.attributes or {})["error.type"] == "builtins.ValueError"


def test_a_streamed_messages_acreate_ends_its_span_once(
        tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    """``anthropic_interface.messages.acreate(stream=True)``: the span stays open while
    the stream is, and ends once with it. LiteLLM 1.110 streams this interface through
    its proxy package (``fastapi`` and more, the ``litellm[proxy]`` extra): without it
    a read raises LiteLLM's own ``ModuleNotFoundError`` (after the events it got), which
    reaches the caller unchanged and ends the span failed."""
    from litellm.anthropic_interface import messages

    server.push_text("one two three four")
    events: list[Any] = []

    async def run() -> BaseException | None:
        stream = await messages.acreate(messages=MSGS, max_tokens=64, stream=True,
                                        **openai_kw(server))
        assert tel.finished() == []  # open while the stream is
        try:
            async for event in stream:
                events.append(event)
        except ModuleNotFoundError as exc:
            return exc
        return None

    raised = asyncio.run(run())
    (span,) = tel.finished()
    a = span.attributes or {}
    assert span.name == "chat openai/scripted-model"
    assert a["otelmw.api_mode"] == "anthropic_messages" and a["gen_ai.request.stream"] is True
    assert all(isinstance(e, bytes) and e.startswith(b"event: ") for e in events)  # SSE
    if raised is not None:
        assert (raised.name or "").split(".")[0] in {"fastapi", "soundfile", "annotated_doc"}
        assert span.status.status_code.name == "ERROR"
        assert a["error.type"] == "builtins.ModuleNotFoundError"
        assert a["otelmw.stream.ended_by"] == "error"
    else:
        assert events and a["otelmw.stream.ended_by"] == "exhausted"
        assert span.status.status_code.name == "UNSET"
    time.sleep(0.05)
    assert len(tel.finished()) == 1  # ended once


@pytest.mark.parametrize("stream", [False, pytest.param(True, marks=lacks_behaviour(
    litellm_lacks(stream_cost=True)))])
def test_the_cost_litellm_computes_goes_on_the_span(stream: bool, tel: SdkTelemetry,
                                                    server: ScriptedLLMServer) -> None:
    kw = {**openai_kw(server, "openai/gpt-4o-mini"), "messages": MSGS}
    if stream:
        chunks = list(litellm.completion(stream=True, stream_options={"include_usage": True},
                                         **kw))
        cost = chunks[-1]._hidden_params["response_cost"]
    else:
        cost = litellm.completion(**kw)._hidden_params["response_cost"]
    assert cost and cost > 0  # a priced model (LiteLLM's local cost map)
    (span,) = tel.finished()
    assert (span.attributes or {})["litellm.response_cost"] == cost


def test_an_unpriced_model_has_no_cost_attribute(tel: SdkTelemetry,
                                                 server: ScriptedLLMServer) -> None:
    resp = litellm.completion(messages=MSGS, **openai_kw(server))
    assert resp._hidden_params.get("response_cost") is None
    (span,) = tel.finished()
    assert "litellm.response_cost" not in (span.attributes or {})


@pytest.mark.parametrize(("model", "provider"), [
    ("openai/gpt-4o", "openai"), ("gpt-4o-mini", "openai"), ("azure/my-deployment",
                                                              "azure.ai.openai"),
    ("anthropic/claude-x", "anthropic"), ("bedrock/anthropic.claude-v2", "aws.bedrock"),
    ("vertex_ai/gemini-pro", "gcp.vertex_ai"), ("gemini/gemini-pro", "gcp.gemini"),
    ("groq/llama3", "groq"), ("mistral/mistral-large", "mistral_ai"), ("xai/grok-2", "x_ai"),
    ("deepseek/deepseek-chat", "deepseek"), ("ollama/llama3", "ollama")])
def test_provider_names_follow_the_conventions_well_known_values(model: str,
                                                                 provider: str) -> None:
    from otelmw.instrumentation.litellm.providers import endpoint_of

    assert endpoint_of({"model": model}).provider == provider


# ------------------------------------------------------------------ router
def _router(server: ScriptedLLMServer) -> Any:
    return litellm.Router(model_list=[
        {"model_name": "primary", "litellm_params": openai_kw(server, "openai/scripted-a")},
        {"model_name": "backup", "litellm_params": openai_kw(server, "openai/scripted-b")},
    ], fallbacks=[{"primary": ["backup"]}], num_retries=0)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_router_failure_then_fallback_is_two_chat_spans_under_one_router_span(
        mode: str, tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    router = _router(server)
    server.push_error(500, "primary down")
    kw = {"model": "primary", "messages": MSGS}
    resp = router.completion(**kw) if mode == "sync" else asyncio.run(router.acompletion(**kw))
    assert resp.model == "scripted-b"
    assert [(r.status, r.body["model"]) for r in server.requests] == [
        (500, "scripted-a"), (200, "scripted-b")]
    spans = tel.finished()
    one_trace(spans)
    (step,) = [s for s in spans if s.name == "router primary"]
    failed, answered = [s for s in spans if s.name.startswith("chat ")]
    assert step.parent is None and step.kind.name == "INTERNAL"
    assert (step.attributes or {})["litellm.router.attempts"] == 2
    assert (step.attributes or {})["litellm.router.model_group"] == "primary"
    assert parent_of(failed) == parent_of(answered) == step.context.span_id
    assert failed.name == "chat openai/scripted-a" and failed.status.status_code.name == "ERROR"
    assert answered.name == "chat openai/scripted-b"
    assert answered.status.status_code.name == "UNSET"
    assert_chat_matches(answered, server, 1, "openai/scripted-b")
    assert step.end_time >= answered.end_time  # the step ends after its attempts


def test_router_stream_ends_the_router_span_with_the_stream(
        tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    stream = _router(server).completion(model="primary", messages=MSGS, stream=True)
    assert tel.finished() == []
    list(stream)
    chat, step = sorted(tel.finished(), key=lambda s: s.end_time or 0)
    assert chat.name == "chat openai/scripted-a" and step.name == "router primary"
    assert parent_of(chat) == step.context.span_id
    assert (step.attributes or {})["otelmw.stream.ended_by"] == "exhausted"
    assert (chat.attributes or {})["otelmw.stream.ended_by"] == "exhausted"


def test_router_embedding(tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    router = litellm.Router(model_list=[{"model_name": "vectors", "litellm_params": openai_kw(
        server, "openai/scripted-embed")}])
    router.embedding(model="vectors", input=["x"])
    emb, step = sorted(tel.finished(), key=lambda s: s.end_time or 0)
    assert emb.name == "embeddings openai/scripted-embed" and step.name == "router vectors"
    assert parent_of(emb) == step.context.span_id
    assert (step.attributes or {})["litellm.router.endpoint"] == "embedding"


# ------------------------------------------------------------------ tool loop + plugins
class Plugin:
    """A user's plugin: an llm_request rewrite, a tool_request rewrite, a pass-through
    tool_execution wrapper, and (``block``) a pre_tool_call block."""

    def __init__(self, block: bool = False) -> None:
        self.block = block
        self.wrapped: list[str] = []

    def add(self) -> None:
        reg = get_pipeline().registry

        def add_system_note(**kw: Any) -> Any:
            request = dict(kw["request"])
            request["messages"] = [{"role": "system", "content": "be brief (plugin)"},
                                   *request["messages"]]
            return {"request": request, "source": "user-plugin", "reason": "house style"}

        def pin_city(**kw: Any) -> Any:
            return {"args": {**kw["args"], "city": "Lyon"}}

        def watch_tool(**kw: Any) -> Any:
            self.wrapped.append(kw["tool_name"])
            return kw["next_call"](kw["args"])

        def refuse(**kw: Any) -> Any:
            return {"action": "block", "message": "weather is off today"}

        reg.add_middleware("llm_request", add_system_note, plugin="user")
        reg.add_middleware("tool_request", pin_city, plugin="user")
        reg.add_middleware("tool_execution", watch_tool, plugin="user")
        if self.block:
            reg.add_hook("pre_tool_call", refuse, plugin="user")

    @staticmethod
    def remove() -> None:
        get_pipeline().registry.remove_plugin("user")


@pytest.fixture()
def plugin() -> Iterator[Plugin]:
    p = Plugin()
    p.add()
    try:
        yield p
    finally:
        p.remove()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_run_tool_loop_is_one_turn_with_the_plugin_applied(
        mode: str, tel: SdkTelemetry, server: ScriptedLLMServer, plugin: Plugin) -> None:
    executed: list[dict[str, Any]] = []

    def get_weather(call: Any) -> dict[str, Any]:
        args = json.loads(call.function.arguments)
        executed.append(args)
        return {"role": "tool", "tool_call_id": call.id, "content": f"sunny in {args['city']}"}

    async def aget_weather(call: Any) -> dict[str, Any]:
        return get_weather(call)

    kw = {**openai_kw(server), "messages": [{"role": "user", "content": "weather?"}],
          "tools": TOOLS}
    answer = (litellm.run_tool_loop(execute_tool=get_weather, **kw) if mode == "sync" else
              asyncio.run(litellm.arun_tool_loop(execute_tool=aget_weather, **kw)))
    assert answer == "done: sunny in Lyon"  # the model saw the tool result of the rewrite
    assert executed == [{"city": "Lyon"}] and plugin.wrapped == ["get_weather"]
    # the llm_request rewrite reached the server on both requests
    assert [r.body["messages"][0] for r in server.requests] == [
        {"role": "system", "content": "be brief (plugin)"}] * 2
    tool_call_id = server.requests[1].body["messages"][-2]["tool_calls"][0]["id"]
    spans = tel.finished()
    one_trace(spans)
    (turn,) = [s for s in spans if s.parent is None]
    assert turn.name == "invoke_agent run_tool_loop"
    assert (turn.attributes or {})["otelmw.runtime.id"] == "litellm"
    children = [s for s in spans if parent_of(s) == turn.context.span_id]
    assert [s.name for s in children] == ["chat openai/scripted-model",
                                          "execute_tool get_weather",
                                          "chat openai/scripted-model"]
    tool = children[1]
    t = tool.attributes or {}
    assert t["gen_ai.tool.call.id"] == tool_call_id
    assert t["otelmw.result.status"] == "ok" and t["otelmw.result.success"] is True
    assert t["otelmw.result.raw.digest"].startswith("sha256")
    assert t["otelmw.api_request.id"] == (children[0].attributes or {})["otelmw.api_request.id"]
    layers = {s.name: s for s in spans if s not in children and s is not turn}
    assert {"tool_request user.pin_city", "tool_execution user.watch_tool"} <= set(layers)
    assert all(parent_of(layers[n]) == tool.context.span_id
               for n in ("tool_request user.pin_city", "tool_execution user.watch_tool"))
    rewrites = [s for s in spans if s.name == "llm_request user.add_system_note"]
    assert len(rewrites) == 2 and {parent_of(s) for s in rewrites} == {
        children[0].context.span_id, children[2].context.span_id}


def test_a_blocked_tool_answers_the_model_without_running(
        tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    p = Plugin(block=True)
    p.add()
    ran: list[Any] = []
    try:
        answer = litellm.run_tool_loop(
            execute_tool=lambda call: ran.append(call), messages=[
                {"role": "user", "content": "weather?"}], tools=TOOLS, **openai_kw(server))
    finally:
        p.remove()
    assert ran == []
    assert answer == "done: weather is off today"
    sent = server.requests[1].body["messages"][-1]
    assert sent["role"] == "tool" and sent["content"] == "weather is off today"
    (tool,) = tel.named("execute_tool")
    assert (tool.attributes or {})["otelmw.result.status"] == "blocked"


def test_a_raising_tool_reaches_the_loop_as_without_otelmw(
        tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    def broken(call: Any) -> Any:
        raise ValueError("tool exploded")

    with pytest.raises(ValueError, match="tool exploded"):
        litellm.run_tool_loop(execute_tool=broken, messages=MSGS, tools=TOOLS,
                              **openai_kw(server))
    (tool,) = tel.named("execute_tool")
    assert tool.status.status_code.name == "ERROR"
    assert (tool.attributes or {})["error.type"] == "builtins.ValueError"
    (turn,) = tel.named("invoke_agent")
    assert turn.status.status_code.name == "ERROR"


def test_a_loop_inside_a_users_turn_joins_it(tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    with get_pipeline().turn("my-agent"):
        litellm.run_tool_loop(execute_tool=lambda c: {"role": "tool", "tool_call_id": c.id,
                                                      "content": "ok"},
                              messages=MSGS, tools=TOOLS, **openai_kw(server))
    spans = tel.finished()
    one_trace(spans)
    assert [s.name for s in spans if s.name.startswith("invoke_agent")] == [
        "invoke_agent my-agent"]


# ------------------------------------------------------------------ host unchanged
def _session(server: ScriptedLLMServer) -> dict[str, Any]:
    """One of each LiteLLM call; what LiteLLM answered, without per-call ids/times."""
    def stable(obj: Any) -> Any:
        data = obj.model_dump() if hasattr(obj, "model_dump") else obj
        return {k: v for k, v in data.items() if k not in ("id", "created", "created_at")}

    def tool(call: Any) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": call.id, "content": call.function.arguments}

    text = litellm.completion(messages=MSGS, **openai_kw(server))
    streamed = "".join(c.choices[0].delta.content or "" for c in litellm.completion(
        messages=MSGS, stream=True, **openai_kw(server)) if c.choices)
    looped = litellm.run_tool_loop(execute_tool=tool, messages=MSGS, tools=TOOLS,
                                   **openai_kw(server))
    vectors = litellm.embedding(input=["alpha"], **openai_kw(server, "openai/scripted-embed"))
    responses = litellm.responses(input="hi", **openai_kw(server))
    return {"completion": stable(text), "stream": streamed, "loop": looped,
            "embedding": stable(vectors)["data"],
            "responses": stable(responses)["output"][0]["content"],
            "sent": [(r.path, r.body) for r in server.requests]}


def _fresh_session() -> dict[str, Any]:
    with ScriptedLLMServer.calling_tools(CITY) as srv:
        out, port = _session(srv), srv.port
    return {**out, "sent": [(path, json.loads(json.dumps(body).replace(
        f":{port}", ":PORT"))) for path, body in out["sent"]]}


def test_litellm_answers_and_sends_the_same_with_and_without_otelmw() -> None:
    bare = _fresh_session()
    pipe = get_pipeline()
    saved, t = pipe.observer, SdkTelemetry()
    pipe.observer = t.observer
    li = LiteLLMInstrumentor()
    li.instrument()
    try:
        observed = _fresh_session()
    finally:
        li.uninstrument()
        pipe.observer = saved
    assert observed == bare
    assert len(t.named("chat ")) == 5 and len(t.named("execute_tool")) == 1


def test_uninstrument_restores_every_entry(server: ScriptedLLMServer) -> None:
    from litellm.anthropic_interface import messages

    try:
        from litellm.router_rust.core import RustCore as router_core
    except ImportError:  # LiteLLM before 1.110: the Python Router's own methods
        router_core = litellm.Router
    before = [litellm.completion, litellm.acompletion, litellm.responses, litellm.aresponses,
              litellm.embedding, litellm.aembedding, litellm.run_tool_loop,
              litellm.arun_tool_loop, messages.create, messages.acreate,
              router_core.__dict__["completion"], router_core.__dict__["acompletion"]]
    li = LiteLLMInstrumentor()
    li.instrument()
    assert litellm.completion is not before[0]
    li.uninstrument()
    after = [litellm.completion, litellm.acompletion, litellm.responses, litellm.aresponses,
             litellm.embedding, litellm.aembedding, litellm.run_tool_loop,
             litellm.arun_tool_loop, messages.create, messages.acreate,
             router_core.__dict__["completion"], router_core.__dict__["acompletion"]]
    assert all(a is b for a, b in zip(after, before, strict=True))


# ------------------------------------------------------------------ LiteLLM's own OTel
def test_litellm_own_otel_callback_leaves_otelmw_spans_as_they_are(
        tel: SdkTelemetry, server: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """``callbacks=["otel"]`` beside otelmw: LiteLLM writes its attributes onto the span
    active during the call — otelmw's chat span, already ended when its success handler
    runs, so nothing of it lands there — and adds its ``raw_gen_ai_request`` span under
    otelmw's. otelmw's span is the one it would be without the callback."""
    from opentelemetry import trace

    plain = litellm.completion(messages=MSGS, **openai_kw(server, "openai/gpt-4o-mini"))
    (alone,) = tel.finished()
    tel.spans.clear()
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", tel.tracer_provider)  # LiteLLM's exporter
    # LiteLLM files "otel" into its process-wide callback lists: each is put back after
    for name in dir(litellm):
        if name.endswith(("callback", "callbacks")) and isinstance(getattr(litellm, name), list):
            monkeypatch.setattr(litellm, name, list(getattr(litellm, name)))
    litellm.callbacks = ["otel"]
    beside = litellm.completion(messages=MSGS, **openai_kw(server, "openai/gpt-4o-mini"))
    deadline = time.monotonic() + 10  # LiteLLM's sync success handler runs on a pool thread
    while not any(s.name == "raw_gen_ai_request" for s in tel.finished()) and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    assert beside.choices[0].message.content == plain.choices[0].message.content
    ours = [s for s in tel.finished() if s.instrumentation_scope.name == "otelmw"]
    (chat,) = ours
    assert set(chat.attributes or {}) == set(alone.attributes or {})
    assert chat.status.status_code.name == alone.status.status_code.name == "UNSET"
    theirs = [s for s in tel.finished() if s.instrumentation_scope.name != "otelmw"]
    assert [s.name for s in theirs] == ["raw_gen_ai_request"]  # no litellm_request double
    assert parent_of(theirs[0]) == chat.context.span_id
    one_trace(tel.finished())


# ------------------------------------------------------------------ zero code
PROGRAM = """
import asyncio, json, litellm

BASE = {base!r}
TOOLS = {tools!r}

def get_weather(call):
    return {{"role": "tool", "tool_call_id": call.id,
             "content": "sunny in " + json.loads(call.function.arguments)["city"]}}

print("ANSWER", litellm.run_tool_loop(model="openai/scripted-model", api_base=BASE,
      api_key="x", messages=[{{"role": "user", "content": "weather?"}}], tools=TOOLS,
      execute_tool=get_weather))

async def main():
    stream = await litellm.acompletion(model="openai/scripted-model", api_base=BASE,
                                       api_key="x", stream=True,
                                       messages=[{{"role": "user", "content": "hi"}}])
    print("STREAMED", "".join([c.choices[0].delta.content or "" async for c in stream
                               if c.choices]))

asyncio.run(main())
"""

PLUGIN = """
def register(ctx):
    def pin_city(**kw):
        return {"args": {**kw["args"], "city": "Lyon"}}

    def tag_request(**kw):
        request = dict(kw["request"])
        request["temperature"] = 0.125
        return {"request": request}

    ctx.register_middleware("tool_request", pin_city)
    ctx.register_middleware("llm_request", tag_request)
"""


def _plugin_site(root: Path) -> Path:
    return install_distribution(root / "site", "litellm-test-plugin",
                                {PLUGINS: {"house_rules": "litellm_test_plugin:register"}},
                                {"litellm_test_plugin.py": PLUGIN})


def test_otelmw_run_instruments_an_unmodified_litellm_program(
        tmp_path: Path, server: ScriptedLLMServer) -> None:
    program = tmp_path / "app.py"
    program.write_text(textwrap.dedent(PROGRAM.format(base=server.base_url, tools=TOOLS)))
    assert "otelmw" not in program.read_text()
    site = _plugin_site(tmp_path)
    with OtlpReceiver() as rx:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OTEL_", "OTELMW_", "OPENAI_"))}
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint, OTEL_SERVICE_NAME="app",
                   OTELMW_HOME=str(tmp_path / "home"), LITELLM_LOCAL_MODEL_COST_MAP="True",
                   OTEL_METRIC_EXPORT_INTERVAL="60000", PYTHONPATH=os.pathsep.join(
                       x for x in (str(site), os.environ.get("PYTHONPATH")) if x))
        cli = [sys.executable, "-m", "otelmw.cli"]
        enabled = subprocess.run([*cli, "plugins", "enable", "house_rules"], env=env,
                                 cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
        assert enabled.returncode == 0, enabled.stderr
        proc = subprocess.run([*cli, "run", "--", sys.executable, str(program)], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
        assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
        assert "ANSWER done: sunny in Lyon" in proc.stdout  # the plugin's tool rewrite
        assert f"STREAMED {server.default_text}" in proc.stdout
        assert [r.body.get("temperature") for r in server.requests] == [0.125] * 3
        rx.wait_for(lambda: len([s for s in rx.spans() if s.name.startswith("chat")]) >= 3,
                    timeout=30)
        spans: list[ReceivedSpan] = rx.spans()
    by_trace: dict[str, list[ReceivedSpan]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    loop = next(t for t in by_trace.values() if any(
        s.name == "invoke_agent run_tool_loop" for s in t))
    assert sorted(s.name for s in loop if s.name.split()[0] in (
        "chat", "execute_tool", "invoke_agent")) == [
        "chat openai/scripted-model", "chat openai/scripted-model",
        "execute_tool get_weather", "invoke_agent run_tool_loop"]
    (tool,) = [s for s in loop if s.name == "execute_tool get_weather"]
    assert tool.attributes["gen_ai.tool.call.id"] == server.requests[1].body["messages"][-2][
        "tool_calls"][0]["id"]
    (streamed,) = [s for t in by_trace.values() if t is not loop for s in t
                   if s.name.startswith("chat")]
    assert streamed.attributes["otelmw.stream.ended_by"] == "exhausted"
    assert streamed.attributes["gen_ai.request.temperature"] == 0.125
    assert streamed.resource["service.name"] == "app"


def test_the_server_of_a_call_without_api_base_is_where_litellm_sends_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from otelmw.instrumentation.litellm import providers

    monkeypatch.setattr(providers, "_endpoints", {})
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    monkeypatch.setattr(litellm, "api_base", None)
    assert providers.endpoint_of({"model": "openai/gpt-4o"})[1:] == ("api.openai.com", 443)
    providers._endpoints.clear()
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert providers.endpoint_of({"model": "gpt-4o"})[1:] == ("127.0.0.1", 9)
    assert providers.endpoint_of({"model": "groq/llama3"})[1:] == ("api.groq.com", 443)

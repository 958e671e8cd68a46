"""The Google Gen AI SDK instrumentor (``otelmw_google_genai``): the real ``google-genai``
client against the scripted server's Gemini API (``:generateContent``,
``:streamGenerateContent``, ``:batchEmbedContents``), spans on in-memory exporters.

No ``from __future__ import annotations`` here: google-genai 1.x converts a function's
arguments by its annotations as objects, and a string annotation fails its call there
(``isinstance() arg 2 must be a type``), with or without otelmw."""

import asyncio
import json
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support.components import clean_env
from _support.host_scenarios import PROMPT_EXPORT
from _support.otlp_receiver import OtlpReceiver
from _support.scripted_llm import ScriptedLLMServer, ScriptedReply
from _support.semconv_schemas import validate
from _support.telemetry import SdkTelemetry, observing
from opentelemetry.sdk.trace import ReadableSpan

try:
    from google import genai
    from google.genai import types
except ImportError:  # an environment without the host: conftest deselects these tests
    genai = types = None
pytestmark = pytest.mark.host("google-genai")

from otelmw import get_pipeline  # noqa: E402
from otelmw.instrumentation.google_genai import GoogleGenAIInstrumentor  # noqa: E402
from otelmw.telemetry.content.policy import NO_CONTENT, SPAN_ONLY  # noqa: E402

MODEL = "gemini-test"
CONTENT_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages",
                "gen_ai.system_instructions", "gen_ai.tool.definitions")


def get_weather(city: str) -> str:
    """The weather of a city."""
    return f"sunny in {city}"


@pytest.fixture()
def tel() -> Iterator[SdkTelemetry]:
    with observing(SdkTelemetry(), GoogleGenAIInstrumentor()) as t:
        yield t


# The clients a test made: a ``genai.Client`` closes its HTTP client when it is collected,
# and ``client(server).models.generate_content(...)`` holds only the ``Models``.
_clients: list[Any] = []


@pytest.fixture()
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(tool_first=True, tool_args={"get_weather": {"city": "Paris"}}) as srv:
        yield srv
    _clients.clear()


def client(server: ScriptedLLMServer, **kw: Any) -> Any:
    made = genai.Client(api_key="x", http_options=types.HttpOptions(base_url=server.root_url),
                        **kw)
    _clients.append(made)
    return made


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


# ------------------------------------------------------------------ model requests
def test_generate_content_is_one_chat_span_with_the_conventions_attributes(
        tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    server.push("hello there")
    config = types.GenerateContentConfig(temperature=0.4, top_p=0.9, top_k=20,
                                         max_output_tokens=64, stop_sequences=["END"],
                                         seed=7, candidate_count=1,
                                         response_mime_type="text/plain")
    response = client(server).models.generate_content(model=MODEL, contents="hi",
                                                      config=config)
    assert response.text == "hello there"
    (span,) = tel.chat_spans()
    (rec,) = server.requests
    assert rec.path.endswith(f"/models/{MODEL}:generateContent") and rec.api == "gemini"
    assert span.name == f"chat {MODEL}" and span.kind.name == "CLIENT"
    a = attrs(span)
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.provider.name"] == "gcp.gemini"
    assert a["gen_ai.request.model"] == MODEL
    assert (a["gen_ai.request.temperature"], a["gen_ai.request.top_p"],
            a["gen_ai.request.top_k"], a["gen_ai.request.max_tokens"],
            a["gen_ai.request.seed"]) == (0.4, 0.9, 20, 64, 7)
    assert list(a["gen_ai.request.stop_sequences"]) == ["END"]
    assert "gen_ai.request.choice.count" not in a  # the default, 1
    assert a["gen_ai.output.type"] == "text"
    assert a["gen_ai.response.id"] == response.response_id == rec.response_id
    assert a["gen_ai.response.model"] == response.model_version == MODEL
    assert list(a["gen_ai.response.finish_reasons"]) == ["stop"]
    usage = response.usage_metadata
    assert a["gen_ai.usage.input_tokens"] == usage.prompt_token_count == rec.usage["input_tokens"]
    assert a["gen_ai.usage.output_tokens"] == usage.candidates_token_count
    assert a["server.address"] == "127.0.0.1" and a["server.port"] == server.port
    assert a["otelmw.api_mode"] == "generate_content"
    assert not any(key in a for key in CONTENT_KEYS)  # content is not captured by default
    (point,) = tel.metric_points("gen_ai.client.operation.duration")
    assert point.attributes["gen_ai.provider.name"] == "gcp.gemini"
    (tokens_in, tokens_out) = sorted(
        tel.metric_points("gen_ai.client.token.usage"),
        key=lambda p: p.attributes["gen_ai.token.type"])
    assert (tokens_in.sum, tokens_out.sum) == (usage.prompt_token_count,
                                               usage.candidates_token_count)


def test_a_dict_config_is_read_the_same(tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    client(server).models.generate_content(
        model=MODEL, contents="hi",
        config={"temperature": 0.2, "candidate_count": 2, "response_mime_type": "application/json"})
    a = attrs(tel.chat())
    assert a["gen_ai.request.temperature"] == 0.2
    assert a["gen_ai.request.choice.count"] == 2
    assert a["gen_ai.output.type"] == "json"


def test_an_api_error_marks_the_chat_span(tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    server.push_error(400, "bad request")
    with pytest.raises(genai.errors.ClientError):
        client(server).models.generate_content(model=MODEL, contents="hi")
    span = tel.chat()
    assert span.status.status_code.name == "ERROR"
    assert attrs(span)["error.type"] == "google.genai.errors.ClientError"


def test_streaming_span_ends_when_exhausted(tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    server.push("one two three four five six")
    stream = client(server).models.generate_content_stream(model=MODEL, contents="hi")
    chunks = list(stream)
    assert "".join(c.text for c in chunks) == "one two three four five six"
    span = tel.chat()
    a = attrs(span)
    assert a["otelmw.stream.ended_by"] == "exhausted"
    assert a["gen_ai.request.stream"] is True
    assert a["gen_ai.response.time_to_first_chunk"] >= 0
    assert server.requests[-1].path.endswith(":streamGenerateContent?alt=sse")
    assert a["gen_ai.usage.output_tokens"] == chunks[-1].usage_metadata.candidates_token_count
    assert list(a["gen_ai.response.finish_reasons"]) == ["stop"]
    assert a["gen_ai.response.id"] == chunks[0].response_id


def test_streaming_span_ends_when_the_caller_breaks(tel: SdkTelemetry,
                                                    server: ScriptedLLMServer) -> None:
    server.push("one two three four five six")
    stream = client(server).models.generate_content_stream(model=MODEL, contents="hi")
    for _ in stream:
        break
    assert tel.chat_spans() == []  # still open: the caller holds the stream
    stream.close()
    span = tel.chat()
    assert attrs(span)["otelmw.stream.ended_by"] in ("closed", "abandoned")
    assert len(tel.metric_points("gen_ai.client.operation.duration")) == 1


def test_async_generate_content_and_stream(tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    async def run() -> list[str]:
        aio = client(server).aio
        first = await aio.models.generate_content(model="gemini-a1", contents="hi")
        texts = [first.text]
        stream = await aio.models.generate_content_stream(model="gemini-a2", contents="hi")
        texts += [chunk.text async for chunk in stream]
        return texts

    server.push("async answer", "streamed answer here")
    texts = asyncio.run(run())
    assert texts[0] == "async answer" and "".join(texts[1:]) == "streamed answer here"
    spans = {s.name: s for s in tel.chat_spans()}
    assert set(spans) == {"chat gemini-a1", "chat gemini-a2"}
    assert attrs(spans["chat gemini-a2"])["otelmw.stream.ended_by"] == "exhausted"
    assert attrs(spans["chat gemini-a1"])["gen_ai.usage.input_tokens"] >= 1


def test_vertex_ai_client_names_its_provider(tel: SdkTelemetry,
                                             server: ScriptedLLMServer) -> None:
    client(server, vertexai=True).models.generate_content(model=MODEL, contents="hi")
    assert attrs(tel.chat())["gen_ai.provider.name"] == "gcp.vertex_ai"


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_embed_content_is_an_embeddings_span(tel: SdkTelemetry, server: ScriptedLLMServer,
                                             is_async: bool) -> None:
    models = client(server).models
    kw: dict[str, Any] = {"model": "text-embedding-004", "contents": ["a", "b"],
                          "config": {"output_dimensionality": 4}}
    response = (asyncio.run(client(server).aio.models.embed_content(**kw)) if is_async
                else models.embed_content(**kw))
    assert [len(e.values) for e in response.embeddings] == [4, 4]
    (span,) = tel.named("embeddings")
    assert span.name == "embeddings text-embedding-004"
    a = attrs(span)
    assert a["gen_ai.operation.name"] == "embeddings"
    assert a["gen_ai.provider.name"] == "gcp.gemini"
    assert a["gen_ai.embeddings.dimension.count"] == 4
    assert server.requests[-1].path.endswith(":batchEmbedContents")
    assert tel.chat_spans() == []


# ------------------------------------------------------------------ the contract
@pytest.fixture()
def plugin() -> Iterator[Any]:
    reg = get_pipeline().registry
    try:
        yield lambda kind, fn: reg.add_middleware(kind, fn, plugin="genai-test")
    finally:
        reg.remove_plugin("genai-test")


def test_llm_request_rewrite_changes_what_the_server_receives(
        tel: SdkTelemetry, server: ScriptedLLMServer, plugin: Any) -> None:
    def pin(**kw: Any) -> Any:
        request = {**kw["request"], "model": "gemini-pinned", "contents": "rewritten question"}
        return {"request": request, "source": "router", "reason": "pin"}

    plugin("llm_request", pin)
    client(server).models.generate_content(model=MODEL, contents="asked question")
    (rec,) = server.requests
    assert rec.path.endswith("/models/gemini-pinned:generateContent")
    assert rec.body["contents"] == [{"role": "user", "parts": [{"text": "rewritten question"}]}]
    span = tel.chat()
    assert span.name == "chat gemini-pinned"
    assert attrs(span)["otelmw.request.original_model"] == MODEL
    (layer,) = tel.named("llm_request")
    assert attrs(layer)["otelmw.middleware.outcome"] == "rewritten"
    assert parent_of(layer) == span.context.span_id


def test_llm_execution_wrapper_wraps_the_request(tel: SdkTelemetry, server: ScriptedLLMServer,
                                                 plugin: Any) -> None:
    seen: list[Any] = []

    def watch(**kw: Any) -> Any:
        result = kw["next_call"](kw["request"])
        seen.append(result.text)
        return result

    server.push("wrapped answer")
    plugin("llm_execution", watch)
    response = client(server).models.generate_content(model=MODEL, contents="hi")
    assert seen == ["wrapped answer"] == [response.text]
    (layer,) = tel.named("llm_execution")
    assert parent_of(layer) == tel.chat().context.span_id


# ------------------------------------------------------------------ automatic function calling
def _afc_spans(tel: SdkTelemetry) -> tuple[ReadableSpan, list[ReadableSpan]]:
    spans = tel.finished()
    assert len({s.context.trace_id for s in spans}) == 1, [s.name for s in spans]
    (turn,) = [s for s in spans if s.parent is None]
    assert turn.name == "invoke_agent automatic_function_calling"
    assert attrs(turn)["otelmw.runtime.id"] == "google-genai"
    return turn, [s for s in spans if parent_of(s) == turn.context.span_id]


def _function_call_ids(server: ScriptedLLMServer) -> list[str]:
    """The ids of the function calls the server's answers made (the next requests
    carry them in the model's turn)."""
    model_turns = [c for c in server.requests[-1].body["contents"] if c.get("role") == "model"]
    return [p["functionCall"]["id"] for c in model_turns for p in c["parts"]
            if "functionCall" in p]


@pytest.mark.parametrize("mode", ["sync", "async", "stream"])
def test_afc_is_one_turn_of_chat_and_execute_tool_spans_with_the_plugin_applied(
        tel: SdkTelemetry, server: ScriptedLLMServer, plugin: Any, mode: str) -> None:
    received: list[str] = []

    def weather(city: str) -> str:
        """The weather of a city."""
        received.append(city)
        return f"sunny in {city}"

    weather.__name__ = "get_weather"

    def pin_model(**kw: Any) -> Any:
        return {"request": {**kw["request"], "model": "gemini-pinned"}}

    def pin_city(**kw: Any) -> Any:
        return {"args": {**kw["args"], "city": "Lyon"}}

    wrapped: list[str] = []

    def watch_tool(**kw: Any) -> Any:
        wrapped.append(kw["tool_name"])
        return kw["next_call"](kw["args"])

    plugin("llm_request", pin_model)
    plugin("tool_request", pin_city)
    plugin("tool_execution", watch_tool)
    config = types.GenerateContentConfig(tools=[weather])
    models = client(server).models
    if mode == "sync":
        text = models.generate_content(model=MODEL, contents="weather?", config=config).text
    elif mode == "stream":
        text = "".join(c.text or "" for c in models.generate_content_stream(
            model=MODEL, contents="weather?", config=config))
    else:
        async def run() -> str:
            response = await client(server).aio.models.generate_content(
                model=MODEL, contents="weather?", config=config)
            return str(response.text)
        text = asyncio.run(run())
    assert received == ["Lyon"] and wrapped == ["get_weather"]
    assert text == 'done: {"result": "sunny in Lyon"}'  # the model saw the rewritten call's result
    assert [r.path.split("/")[-1].split(":")[0] for r in server.requests] == ["gemini-pinned"] * 2
    _, children = _afc_spans(tel)
    assert [s.name for s in children] == ["chat gemini-pinned", "execute_tool get_weather",
                                          "chat gemini-pinned"]
    tool = children[1]
    t = attrs(tool)
    assert t["gen_ai.tool.call.id"] == _function_call_ids(server)[0] == "fc_1"
    assert t["otelmw.result.status"] == "ok" and t["otelmw.result.success"] is True
    assert t["otelmw.api_request.id"] == attrs(children[0])["otelmw.api_request.id"]
    layers = [s for s in tel.finished() if parent_of(s) == tool.context.span_id]
    assert {s.name for s in layers} == {"tool_request genai-test.pin_city",
                                        "tool_execution genai-test.watch_tool"}
    rewrites = [s for s in tel.finished() if s.name == "llm_request genai-test.pin_model"]
    assert {parent_of(s) for s in rewrites} == {children[0].context.span_id,
                                                children[2].context.span_id}


def test_afc_parallel_calls_of_one_function_keep_their_ids(
        tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    server.push(ScriptedReply(tool_calls=[("get_weather", {"city": "Paris"}),
                                          ("get_weather", {"city": "Rome"})]))
    client(server).models.generate_content(
        model=MODEL, contents="weather?", config=types.GenerateContentConfig(tools=[get_weather]))
    tools = tel.named("execute_tool")
    assert [attrs(s)["gen_ai.tool.call.id"] for s in tools] == _function_call_ids(server) == [
        "fc_1", "fc_2"]
    sent = [p["functionResponse"] for p in server.requests[-1].body["contents"][-1]["parts"]]
    assert [s["response"] for s in sent] == [{"result": "sunny in Paris"},
                                             {"result": "sunny in Rome"}]


def test_afc_async_function_runs_through_the_contract(tel: SdkTelemetry,
                                                      server: ScriptedLLMServer,
                                                      plugin: Any) -> None:
    async def get_weather(city: str) -> str:
        """The weather of a city."""
        return f"rainy in {city}"

    plugin("tool_request", lambda **kw: {"args": {"city": "Oslo"}})

    async def run() -> str:
        response = await client(server).aio.models.generate_content(
            model=MODEL, contents="weather?",
            config=types.GenerateContentConfig(tools=[get_weather]))
        return str(response.text)

    assert asyncio.run(run()) == 'done: {"result": "rainy in Oslo"}'
    _, children = _afc_spans(tel)
    assert [s.name for s in children] == [f"chat {MODEL}", "execute_tool get_weather",
                                          f"chat {MODEL}"]


def test_afc_async_stream_is_one_turn(tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    async def run() -> str:
        stream = await client(server).aio.models.generate_content_stream(
            model=MODEL, contents="weather?",
            config=types.GenerateContentConfig(tools=[get_weather]))
        return "".join([c.text or "" async for c in stream])

    assert asyncio.run(run()) == 'done: {"result": "sunny in Paris"}'
    _, children = _afc_spans(tel)
    assert [s.name for s in children] == [f"chat {MODEL}", "execute_tool get_weather",
                                          f"chat {MODEL}"]
    assert all(attrs(s).get("otelmw.stream.ended_by") == "exhausted"
               for s in children if s.name.startswith("chat"))


def test_afc_stream_left_early_ends_its_turn_and_chat_span(
        tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    server.push(ScriptedReply(text="calling the weather tool now",
                              tool_calls=[("get_weather", {"city": "Paris"})]))
    stream = client(server).models.generate_content_stream(
        model=MODEL, contents="weather?", config=types.GenerateContentConfig(tools=[get_weather]))
    next(stream)
    assert tel.finished() == []  # the turn and its first request are open
    stream.close()
    (turn,) = tel.named("invoke_agent")
    (chat,) = tel.chat_spans()
    assert parent_of(chat) == turn.context.span_id
    assert attrs(chat)["otelmw.stream.ended_by"] in ("closed", "abandoned")
    assert tel.named("execute_tool") == [] and len(server.requests) == 1


def test_a_raising_function_answers_the_model_as_without_otelmw(
        tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    def get_weather(city: str) -> str:
        raise ValueError("no weather today")

    client(server).models.generate_content(
        model=MODEL, contents="weather?", config=types.GenerateContentConfig(tools=[get_weather]))
    (answer,) = server.requests[-1].body["contents"][-1]["parts"]
    assert "no weather today" in answer["functionResponse"]["response"]["error"]
    tool = tel.named("execute_tool")[0]
    assert tool.status.status_code.name == "ERROR"
    assert attrs(tool)["error.type"] == "google.genai.errors.FunctionInvocationError"


def test_a_blocked_function_never_runs(tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    ran: list[str] = []

    def get_weather(city: str) -> str:
        ran.append(city)
        return "sunny"

    reg = get_pipeline().registry
    reg.add_hook("pre_tool_call", lambda **kw: {"action": "block", "message": "weather is off"},
                 plugin="genai-block")
    try:
        client(server).models.generate_content(
            model=MODEL, contents="weather?",
            config=types.GenerateContentConfig(tools=[get_weather]))
    finally:
        reg.remove_plugin("genai-block")
    assert ran == []
    (answer,) = server.requests[-1].body["contents"][-1]["parts"]
    assert answer["functionResponse"]["response"] == {"result": "weather is off"}
    assert attrs(tel.named("execute_tool")[0])["otelmw.result.status"] == "blocked"


def test_no_afc_turn_without_python_functions_or_with_afc_off(
        tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    declared = types.Tool(function_declarations=[types.FunctionDeclaration(
        name="get_weather", description="The weather.",
        parameters_json_schema={"type": "object", "properties": {"city": {"type": "string"}}})])
    models = client(server).models
    models.generate_content(model=MODEL, contents="weather?",
                            config=types.GenerateContentConfig(tools=[declared]))
    models.generate_content(model=MODEL, contents="weather?", config=types.GenerateContentConfig(
        tools=[get_weather],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True)))
    assert [s.name for s in tel.finished()] == [f"chat {MODEL}"] * 2
    assert len(server.requests) == 2  # the model's calls came back to the caller


def test_a_users_turn_holds_the_afc_calls(tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    with get_pipeline().turn("my-agent"):
        client(server).models.generate_content(
            model=MODEL, contents="weather?",
            config=types.GenerateContentConfig(tools=[get_weather]))
    (turn,) = tel.named("invoke_agent")
    assert turn.name == "invoke_agent my-agent"
    assert len([s for s in tel.finished() if parent_of(s) == turn.context.span_id]) == 3


@pytest.mark.parametrize("mode", ["sync", "stream", "async", "async-stream"])
def test_a_chats_message_is_one_afc_turn(tel: SdkTelemetry, server: ScriptedLLMServer,
                                         mode: str) -> None:
    config = types.GenerateContentConfig(tools=[get_weather])
    if mode == "sync":
        chat = client(server).chats.create(model=MODEL, config=config)
        text = chat.send_message("weather?").text
    elif mode == "stream":
        chat = client(server).chats.create(model=MODEL, config=config)
        text = "".join(c.text or "" for c in chat.send_message_stream("weather?"))
    else:
        async def run() -> str:
            achat = client(server).aio.chats.create(model=MODEL, config=config)
            if mode == "async":
                return str((await achat.send_message("weather?")).text)
            stream = await achat.send_message_stream("weather?")
            return "".join([c.text or "" async for c in stream])
        text = asyncio.run(run())
    assert text == 'done: {"result": "sunny in Paris"}'
    _, children = _afc_spans(tel)
    assert [s.name for s in children] == [f"chat {MODEL}", "execute_tool get_weather",
                                          f"chat {MODEL}"]


# ------------------------------------------------------------------ content
def test_content_is_captured_only_when_asked_and_is_schema_valid(
        server: ScriptedLLMServer) -> None:
    def run(mode: str) -> list[ReadableSpan]:
        with observing(SdkTelemetry(mode), GoogleGenAIInstrumentor()) as t:
            config = types.GenerateContentConfig(
                tools=[get_weather], system_instruction="answer briefly", temperature=0.1)
            client(server).models.generate_content(
                model=MODEL, config=config,
                contents=[types.Content(role="user", parts=[
                    types.Part.from_text(text="weather?"),
                    types.Part.from_bytes(data=b"\x89PNG", mime_type="image/png")])])
            return t.chat_spans()

    assert not any(key in attrs(s) for s in run(NO_CONTENT) for key in CONTENT_KEYS)
    first, second = run(SPAN_ONLY)
    a = attrs(first)
    inputs = validate("gen_ai.input.messages", a["gen_ai.input.messages"])
    assert inputs == [{"role": "user", "parts": [
        {"type": "text", "content": "weather?"},
        {"type": "blob", "modality": "image", "mime_type": "image/png", "content": "iVBORw=="}]}]
    outputs = validate("gen_ai.output.messages", a["gen_ai.output.messages"])
    (call,) = outputs[0]["parts"]
    assert call == {"type": "tool_call", "id": _function_call_ids(server)[0],
                    "name": "get_weather", "arguments": {"city": "Paris"}}
    assert outputs[0]["finish_reason"] == "tool_call"
    assert validate("gen_ai.system_instructions", a["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "answer briefly"}]
    assert validate("gen_ai.tool.definitions", a["gen_ai.tool.definitions"]) == [
        {"type": "function", "name": "get_weather", "description": "The weather of a city."}]
    b = attrs(second)
    later = validate("gen_ai.input.messages", b["gen_ai.input.messages"])
    assert [m["role"] for m in later] == ["user", "assistant", "tool"]
    assert later[2]["parts"] == [{"type": "tool_call_response", "id": None,
                                  "response": {"result": "sunny in Paris"}}] or later[2][
        "parts"][0]["response"] == {"result": "sunny in Paris"}
    assert validate("gen_ai.output.messages", b["gen_ai.output.messages"])[0] == {
        "role": "assistant", "finish_reason": "stop",
        "parts": [{"type": "text", "content": 'done: {"result": "sunny in Paris"}'}]}


def test_streamed_content_is_assembled(server: ScriptedLLMServer) -> None:
    server.push("one two three four five six")
    with observing(SdkTelemetry(SPAN_ONLY), GoogleGenAIInstrumentor()) as t:
        list(client(server).models.generate_content_stream(model=MODEL, contents="hi"))
        span = t.chat()
    outputs = validate("gen_ai.output.messages", attrs(span)["gen_ai.output.messages"])
    assert outputs == [{"role": "assistant", "finish_reason": "stop", "parts": [
        {"type": "text", "content": "one two three four five six"}]}]
    assert json.loads(attrs(span)["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "hi"}]}]


def test_uninstrument_restores_the_sdk(server: ScriptedLLMServer) -> None:
    tel = SdkTelemetry()
    with observing(tel, GoogleGenAIInstrumentor()):
        pass
    client(server).models.generate_content(model=MODEL, contents="hi")
    assert tel.finished() == []
    assert not hasattr(genai.models.Models._generate_content, "__wrapped__")


PROGRAM = """
from google import genai
from google.genai import types


def get_weather(city: str) -> str:
    \"\"\"The weather of a city.\"\"\"
    return f"sunny in {{city}}"


client = genai.Client(api_key="x", http_options=types.HttpOptions(base_url={base!r}))
response = client.models.generate_content(
    model="gemini-zero", contents="weather?",
    config=types.GenerateContentConfig(tools=[get_weather], system_instruction="be brief"))
print("ANSWER", response.text)
"""


@pytest.mark.parametrize("capture", ["SPAN_ONLY", None], ids=["capture", "no-capture"])
def test_opentelemetry_instrument_lights_up_an_unmodified_program(
        tmp_path: Path, server: ScriptedLLMServer, capture: str | None) -> None:
    """The zero-code path (``otelmw_google_genai`` by its entry point) with the stock OTLP
    exporter; content only under ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``."""
    beside = Path(sys.executable).parent / "opentelemetry-instrument"
    launcher = str(beside) if beside.exists() else shutil.which("opentelemetry-instrument")
    assert launcher, "opentelemetry-instrument comes with opentelemetry-instrumentation"
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(PROGRAM.format(base=server.root_url)))
    with OtlpReceiver() as rx:
        env = clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint,
                        OTEL_SERVICE_NAME="genai-app", **PROMPT_EXPORT)
        if capture is not None:
            env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = capture
        proc = subprocess.run([launcher, sys.executable, str(script)], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert 'ANSWER done: {"result": "sunny in Paris"}' in proc.stdout
        rx.wait_for(lambda: any(s.name.startswith("invoke_agent") for s in rx.spans()),
                    timeout=30)
        spans = rx.spans()
    (turn,) = [s for s in spans if s.parent_span_id is None]
    assert turn.name == "invoke_agent automatic_function_calling"
    under = sorted(s.name for s in spans if s.parent_span_id == turn.span_id)
    assert under == ["chat gemini-zero", "chat gemini-zero", "execute_tool get_weather"]
    chats = [s for s in spans if s.name == "chat gemini-zero"]
    assert all(s.attributes["gen_ai.provider.name"] == "gcp.gemini" for s in chats)
    for span in chats:
        present = [key for key in CONTENT_KEYS if key in span.attributes]
        if capture is None:
            assert present == []
            continue
        assert set(present) == set(CONTENT_KEYS)
        for key in present:
            validate(key, span.attributes[key])

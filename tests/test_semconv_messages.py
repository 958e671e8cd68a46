"""Every GenAI message attribute otelmw can emit validates against the conventions' schemas.

``gen_ai.input.messages``, ``gen_ai.output.messages``, ``gen_ai.system_instructions`` and
``gen_ai.tool.definitions`` are checked with ``jsonschema`` against the copies under
``tests/data/semconv-genai/`` (``_support.semconv_schemas``: each part also against the
definition of its own type). Over every host (the OpenAI and Anthropic SDKs against
the scripted server on 127.0.0.1, chat completions, Responses and messages, whole and
streamed; Hermes and PraisonAI turns in a subprocess) and every content mode:
``NO_CONTENT`` and ``EVENT_ONLY`` put none of them on spans, ``SPAN_ONLY`` and
``SPAN_AND_EVENT`` put them there, valid — also cut to ``OTELMW_CONTENT_MAX_LENGTH``
(long conversations), redacted, with images, audio and documents, tool calls and
results, and reasoning. The Hermes and PraisonAI turns run under every mode, exported
over OTLP to a real receiver: the spans' JSON text under the span modes, each request's
inference event (structured values, the span's own under ``SPAN_AND_EVENT``) under the
event modes, and no message attribute on any span or log record under ``NO_CONTENT``.
"""

from __future__ import annotations

import base64
import copy
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support.components import require_module
from _support.otlp_receiver import OtlpReceiver
from _support.scripted_llm import ScriptedLLMServer, ScriptedReply
from _support.sdk_releases import needs, openai_lacks
from _support.semconv_schemas import MESSAGE_KEYS, validate, validate_value
from _support.telemetry import SdkTelemetry, TelemetryHarness
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from otelmw import get_pipeline
from otelmw.telemetry import set_redactor
from otelmw.telemetry.content.policy import (
    EVENT_ONLY,
    NO_CONTENT,
    SPAN_AND_EVENT,
    SPAN_ONLY,
    ContentPolicy,
)
from otelmw.telemetry.setup.observer import TelemetryObserver
from otelmw.telemetry.shapes.messages import (
    OutputCollector,
    newest_input_messages,
    output_messages,
    request_content,
    tool_definitions,
)

jsonschema = require_module("jsonschema")

pytestmark = pytest.mark.timeout(120)

KEYS = MESSAGE_KEYS
CAPTURING = (SPAN_ONLY, SPAN_AND_EVENT)
ALL_MODES = (NO_CONTENT, SPAN_ONLY, EVENT_ONLY, SPAN_AND_EVENT)
SCRIPTS = Path(__file__).resolve().parent
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(64))).decode()
SECRET = "sk-proj-AbCdEf0123456789xyz"


# ---------------------------------------------------------------- validation
def check_span(span: Any, mode: str, expected: tuple[str, ...]) -> dict[str, Any]:
    """The content attributes a span carries under ``mode``: none unless content goes on
    spans; then ``expected`` (at least), each valid."""
    attrs = span.attributes
    if mode not in CAPTURING:
        assert not [k for k in KEYS if k in attrs], (mode, dict(attrs))
        return {}
    missing = [k for k in expected if k not in attrs]
    assert not missing, (missing, dict(attrs))
    return {k: validate(k, attrs[k]) for k in KEYS if k in attrs}


def parts_of(messages: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [p for m in messages for p in m["parts"] if p["type"] == kind]


# ---------------------------------------------------------------- SDK hosts
@pytest.fixture()
def observed() -> Iterator[Any]:
    """``observed(mode, max_length)``: the SDK instrumentors on, reporting to a fresh
    in-memory ``SdkTelemetry`` with that content policy."""
    from otelmw.instrumentation.anthropic import AnthropicInstrumentor
    from otelmw.instrumentation.openai import OpenAIInstrumentor

    pipe = get_pipeline()
    saved = pipe.observer
    made: list[SdkTelemetry] = []

    def make(mode: str, max_length: int = 4096) -> SdkTelemetry:
        t = SdkTelemetry(mode, max_length)
        pipe.observer = t.observer
        made.append(t)
        return t

    instrumentors = [OpenAIInstrumentor(), AnthropicInstrumentor()]
    for inst in instrumentors:
        inst.instrument()
    try:
        yield make
    finally:
        for inst in instrumentors:
            inst.uninstrument()
        for t in made:
            t.observer.close()
        pipe.observer = saved
    assert not [k for k in pipe.failures.counts if k[0] == "instrumentation"], \
        pipe.failures.counts


@pytest.fixture()
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as srv:
        yield srv


OPENAI_TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]
RESPONSES_TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather",
                    "parameters": OPENAI_TOOLS[0]["function"]["parameters"]},
                   {"type": "web_search_preview"}]
ANTHROPIC_TOOLS = [{"name": "get_weather", "description": "Weather of a city",
                    "input_schema": OPENAI_TOOLS[0]["function"]["parameters"]}]

CHAT_MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": [
        {"type": "text", "text": "What is in this picture, and the weather?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        {"type": "input_audio", "input_audio": {"data": "UklGRgAAAAA=", "format": "wav"}},
        {"type": "file", "file": {"file_id": "file-abc", "filename": "notes.pdf"}}]},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'},
]
RESPONSES_INPUT: list[dict[str, Any]] = [
    {"role": "user", "content": [
        {"type": "input_text", "text": "Weather in Paris?"},
        {"type": "input_image", "image_url": "https://example.com/cat.png"},
        {"type": "input_file", "file_id": "file-abc"}]},
    {"type": "function_call", "call_id": "call_1", "name": "get_weather",
     "arguments": '{"city": "Paris"}'},
    {"type": "function_call_output", "call_id": "call_1", "output": "21 C"},
]
ANTHROPIC_MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": [
        {"type": "text", "text": "Describe this and the doc."},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                        "data": "plain notes"}}]},
    {"role": "assistant", "content": [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
         "input": {"city": "Paris"}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "21 C"}]},
]


def _openai(server: ScriptedLLMServer) -> Any:
    import openai

    return openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)


def _anthropic(server: ScriptedLLMServer) -> Any:
    import anthropic

    return anthropic.Anthropic(base_url=server.root_url, api_key="x", max_retries=0)


def call_chat(server: ScriptedLLMServer, stream: bool) -> None:
    server.push_tool_calls([("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})])
    kw: dict[str, Any] = {"model": "gpt-test", "messages": CHAT_MESSAGES, "tools": OPENAI_TOOLS}
    if stream:
        for _ in _openai(server).chat.completions.create(**kw, stream=True):
            pass
    else:
        _openai(server).chat.completions.create(**kw)


def call_responses(server: ScriptedLLMServer, stream: bool) -> None:
    server.push(ScriptedReply(text="It is 21 C.", tool_calls=[("get_weather", {"city": "Rome"})]))
    kw: dict[str, Any] = {"model": "gpt-test", "input": RESPONSES_INPUT,
                          "instructions": "Answer in one line.", "tools": RESPONSES_TOOLS}
    if stream:
        for _ in _openai(server).responses.create(**kw, stream=True):
            pass
    else:
        _openai(server).responses.create(**kw)


def call_anthropic(server: ScriptedLLMServer, stream: bool) -> None:
    server.push(ScriptedReply(text="Sunny.", tool_calls=[("get_weather", {"city": "Rome"})]))
    kw: dict[str, Any] = {"model": "claude-test", "max_tokens": 64, "messages": ANTHROPIC_MESSAGES,
                          "system": [{"type": "text", "text": "You are terse."}],
                          "tools": ANTHROPIC_TOOLS}
    if stream:
        for _ in _anthropic(server).messages.create(**kw, stream=True):
            pass
    else:
        _anthropic(server).messages.create(**kw)


SDK_CALLS = {"openai_chat": call_chat, "openai_responses": call_responses,
             "anthropic_messages": call_anthropic}
EXPECTED = {"openai_chat": ("gen_ai.input.messages", "gen_ai.output.messages",
                            "gen_ai.tool.definitions"),
            "openai_responses": KEYS, "anthropic_messages": KEYS}


@pytest.mark.host("openai", "anthropic")
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("api", [
    pytest.param(api, marks=needs(openai_lacks(responses=True))) if api == "openai_responses"
    else api for api in SDK_CALLS])
@pytest.mark.parametrize("mode", ALL_MODES)
def test_sdk_content_attributes_follow_the_schemas(observed: Any, server: ScriptedLLMServer,
                                                   mode: str, api: str, stream: bool) -> None:
    tel = observed(mode)
    SDK_CALLS[api](server, stream)
    got = check_span(tel.chat(), mode, EXPECTED[api])
    if not got:
        return
    inputs, outputs = got["gen_ai.input.messages"], got["gen_ai.output.messages"]
    assert {p["type"] for p in parts_of(inputs, "tool_call")} == {"tool_call"}
    (result,) = parts_of(inputs, "tool_call_response")
    assert result["id"] in ("call_1", "toolu_1")
    assert parts_of(inputs, "tool_call")[0]["arguments"] == {"city": "Paris"}  # an object
    media = {p["type"] for m in inputs for p in m["parts"]} - {"text", "tool_call",
                                                              "tool_call_response"}
    assert media, inputs  # images / audio / documents kept as blob, file or uri parts
    assert all("modality" in p for m in inputs for p in m["parts"] if p["type"] in media)
    (answer,) = outputs
    assert answer["role"] == "assistant" and answer["finish_reason"] == "tool_call"
    calls = parts_of(outputs, "tool_call")
    assert calls and all(isinstance(c["arguments"], dict) for c in calls)
    assert calls[-1]["arguments"] == {"city": "Rome"} and calls[-1]["id"]
    tools = got["gen_ai.tool.definitions"]
    assert tools[0] == {"type": "function", "name": "get_weather",
                        "description": tools[0]["description"],
                        "parameters": OPENAI_TOOLS[0]["function"]["parameters"]}
    if api == "openai_chat":  # a system message in the history stays in it
        assert inputs[0] == {"role": "system",
                             "parts": [{"type": "text", "content": "You are terse."}]}
        assert "gen_ai.system_instructions" not in tel.chat().attributes
    else:  # instructions given apart from the history
        (instructions,) = got["gen_ai.system_instructions"]
        assert instructions["type"] == "text" and instructions["content"]
        assert all(m["role"] != "system" for m in inputs)


@pytest.mark.host("openai")
@pytest.mark.parametrize("mode", CAPTURING)
def test_a_long_conversation_is_cut_inside_its_parts_and_stays_valid(
        observed: Any, server: ScriptedLLMServer, mode: str) -> None:
    limit = 2048
    tel = observed(mode, limit)
    history: list[dict[str, Any]] = []
    for i in range(60):
        history.append({"role": "user", "content": f"question {i} " + "q" * 400})
        history.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{i}", "type": "function",
             "function": {"name": "lookup", "arguments": json.dumps({"q": "x" * 300})}}]})
        history.append({"role": "tool", "tool_call_id": f"call_{i}", "content": "r" * 500})
    history.append({"role": "user", "content": "the last question " + "z" * 3000})
    server.push_text("an answer " * 400)
    _openai(server).chat.completions.create(model="gpt-test", messages=history,
                                            tools=OPENAI_TOOLS)
    attrs = tel.chat().attributes
    for key in ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.definitions"):
        assert len(attrs[key]) <= limit, (key, len(attrs[key]))
        validate(key, attrs[key])
    inputs = json.loads(attrs["gen_ai.input.messages"])
    assert 1 < len(inputs) < len(history)  # the oldest messages left out, in order
    last = inputs[-1]["parts"][0]["content"]
    assert last.startswith("the last question zzz") and last.endswith("…")
    cut_args = [p["arguments"] for p in parts_of(inputs, "tool_call")]
    assert all(isinstance(a, str | dict) for a in cut_args)
    (output,) = json.loads(attrs["gen_ai.output.messages"])
    assert output["parts"][0]["content"].startswith("an answer") and \
        output["parts"][0]["content"].endswith("…")
    assert output["finish_reason"] == "stop"
    for text in (attrs["gen_ai.input.messages"], attrs["gen_ai.output.messages"]):
        assert not text.endswith("]…") and "[truncated]" not in text  # no marker on the JSON


# ---------------------------------------------------------------- reasoning
def _mock_client(sdk: str, payload: dict[str, Any]) -> Any:
    """A real SDK client whose transport answers ``payload`` (what the scripted server
    cannot send: reasoning)."""
    module = importlib.import_module(sdk)
    base = importlib.import_module(f"{sdk}._base_client")
    # The SDK's own HTTP library: httpx2 in the newest releases, httpx before.
    http = getattr(base, "httpx2", None) or importlib.import_module("httpx")
    transport = http.MockTransport(lambda request: http.Response(200, json=payload))
    client = module.Anthropic if sdk == "anthropic" else module.OpenAI
    return client(api_key="x", base_url="http://127.0.0.1:9" + ("" if sdk == "anthropic" else
                                                                "/v1"),
                  http_client=http.Client(transport=transport))


ANTHROPIC_THINKING = {
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
    "content": [{"type": "thinking", "thinking": "The user wants weather.", "signature": "s"},
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_9", "name": "get_weather",
                 "input": {"city": "Oslo"}}],
    "stop_reason": "tool_use", "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 5}}
RESPONSES_REASONING = {
    "id": "resp_1", "object": "response", "created_at": 1, "status": "completed",
    "model": "o-test", "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
    "output": [{"type": "reasoning", "id": "rs_1", "summary": [
        {"type": "summary_text", "text": "Think about Oslo."}]},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Cold.", "annotations": []}]}],
    "usage": {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7,
              "input_tokens_details": {"cached_tokens": 0},
              "output_tokens_details": {"reasoning_tokens": 2}}}
CHAT_REASONING = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "deepseek-test",
    "choices": [{"index": 0, "finish_reason": "length", "message": {
        "role": "assistant", "content": "Cold.", "reasoning_content": "Oslo in winter."}}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}


@pytest.mark.host("openai", "anthropic")
@pytest.mark.parametrize("mode", ALL_MODES)
def test_reasoning_is_a_reasoning_part(observed: Any, mode: str) -> None:
    tel = observed(mode)
    _mock_client("anthropic", ANTHROPIC_THINKING).messages.create(
        model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "Oslo?"}],
        thinking={"type": "enabled", "budget_tokens": 1024})
    got = check_span(tel.chat(), mode, ("gen_ai.input.messages", "gen_ai.output.messages"))
    if got:
        (out,) = got["gen_ai.output.messages"]
        assert [p["type"] for p in out["parts"]] == ["reasoning", "reasoning", "text",
                                                     "tool_call"]
        assert out["parts"][0]["content"] == "The user wants weather."
        assert out["finish_reason"] == "tool_call"
    no_responses = openai_lacks(responses=True)
    if no_responses:  # the floor's openai (1.26): the anthropic half above ran
        pytest.skip("; ".join(no_responses))
    tel = observed(mode)
    _mock_client("openai", RESPONSES_REASONING).responses.create(model="o-test", input="Oslo?")
    got = check_span(tel.chat(), mode, ("gen_ai.input.messages", "gen_ai.output.messages"))
    if got:
        assert got["gen_ai.input.messages"] == [
            {"role": "user", "parts": [{"type": "text", "content": "Oslo?"}]}]
        (out,) = got["gen_ai.output.messages"]
        assert out == {"role": "assistant", "finish_reason": "stop", "parts": [
            {"type": "reasoning", "content": "Think about Oslo."},
            {"type": "text", "content": "Cold."}]}
    tel = observed(mode)
    _mock_client("openai", CHAT_REASONING).chat.completions.create(
        model="deepseek-test", messages=[{"role": "user", "content": "Oslo?"}])
    got = check_span(tel.chat(), mode, ("gen_ai.input.messages", "gen_ai.output.messages"))
    if got:
        (out,) = got["gen_ai.output.messages"]
        assert out["finish_reason"] == "length"
        assert out["parts"] == [{"type": "reasoning", "content": "Oslo in winter."},
                                {"type": "text", "content": "Cold."}]


def test_streamed_chat_deltas_become_one_message_per_choice() -> None:
    """Through the pipeline (any host's stream of OpenAI chat chunks, as dicts)."""
    h = TelemetryHarness(SPAN_ONLY)
    chunks = [
        {"id": "c", "model": "m", "choices": [
            {"index": 0, "delta": {"role": "assistant", "reasoning_content": "hm"}},
            {"index": 1, "delta": {"role": "assistant", "content": "B"}}]},
        {"id": "c", "choices": [{"index": 0, "delta": {"content": "A1"}}]},
        {"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": '{"a"'}}]}}]},
        {"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": ": 1}"}}]}, "finish_reason": "tool_calls"},
            {"index": 1, "delta": {}, "finish_reason": "stop"}]},
    ]
    try:
        stream = h.pipeline.run_llm({"model": "m", "messages": [{"role": "user", "content": "q"}],
                                     "stream": True}, lambda r: iter(chunks))
        assert list(stream) == chunks
        (span,) = [s for s in h.spans() if s.name.startswith("chat")]
        out = validate("gen_ai.output.messages", span.attributes["gen_ai.output.messages"])
    finally:
        h.close()
    assert out == [
        {"role": "assistant", "finish_reason": "tool_call", "parts": [
            {"type": "reasoning", "content": "hm"}, {"type": "text", "content": "A1"},
            {"type": "tool_call", "id": "call_1", "name": "f", "arguments": {"a": 1}}]},
        {"role": "assistant", "finish_reason": "stop",
         "parts": [{"type": "text", "content": "B"}]}]


# ---------------------------------------------------------------- cutting, redaction
def _conversation(size: int) -> dict[str, Any]:
    return {"model": "m", "system": "sys " * size, "tools": OPENAI_TOOLS + ANTHROPIC_TOOLS,
            "messages": ANTHROPIC_MESSAGES + CHAT_MESSAGES + [
                {"role": "user", "content": "é\"\n\\" * size},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n",
                                                    "input": {"deep": ["\u2028" * size]}}]}]}


@pytest.mark.parametrize("size", [1, 40, 2000])
def test_every_limit_gives_valid_json_within_it_or_nothing(size: int) -> None:
    content = request_content(_conversation(size))
    response = {"type": "message", "role": "assistant", "stop_reason": "max_tokens",
                "content": [{"type": "text", "text": "a\"b" * size},
                            {"type": "tool_use", "id": "t", "name": "n", "input": {"k": "v"}}]}
    attributes = {"gen_ai.input.messages": (content.input_messages, True),
                  "gen_ai.system_instructions": (content.system_instructions, False),
                  "gen_ai.tool.definitions": (content.tool_definitions, False),
                  "gen_ai.output.messages": (output_messages(response), False)}
    for limit in [*range(30, 400, 13), 1000, 4096]:
        policy = ContentPolicy(SPAN_ONLY, limit)
        for key, (items, keep_last) in attributes.items():
            text = policy.render_messages(copy.deepcopy(items), keep_last=keep_last)
            if text is not None:
                assert len(text) <= limit, (key, limit, len(text))
                validate(key, text)
        whole = ContentPolicy(SPAN_ONLY, 10**6)
        for key, (items, keep_last) in attributes.items():  # nothing lost when it fits
            text = whole.render_messages(copy.deepcopy(items), keep_last=keep_last)
            assert json.loads(text or "") == json.loads(json.dumps(items)), key


def _cut_fit(policy: ContentPolicy, items: list[dict[str, Any]], keep_last: bool) -> Any:
    """The general fit alone (items taken, redacted, cut), without the whole-fit shortcut."""
    fitted = policy._fit_cut(reversed(items) if keep_last else items, keep_last)
    return None if fitted is None else json.loads(json.dumps(fitted))


@pytest.mark.parametrize("size", [1, 40, 2000])
@pytest.mark.parametrize("secret", [False, True])
def test_a_value_that_fits_whole_is_what_the_general_fit_gives(size: int, secret: bool) -> None:
    """``message_value`` skips the skeletons and shares when everything fits and the
    redactor changes nothing: the result must be the general fit's, at every limit,
    for every attribute kind (binary, tool-call arguments, optional schema fields)."""
    content = request_content(_conversation(size))
    extra = {"role": "user", "parts": [
        {"type": "blob", "modality": "image", "mime_type": "image/png", "content": PNG},
        {"type": "text", "content": f"key {SECRET}" if secret else "no key here"}]}
    attributes = [([*content.input_messages, extra], True),
                  (content.system_instructions, False), (content.tool_definitions, False)]
    for limit in [*range(30, 600, 29), 1000, 4096, 10**6]:
        policy = ContentPolicy(SPAN_ONLY, limit)
        for items, keep_last in attributes:
            value = policy.message_value(copy.deepcopy(items), keep_last=keep_last)
            expected = _cut_fit(policy, copy.deepcopy(items), keep_last)
            assert (None if value is None else json.loads(value.text)) == expected
            assert value is None or json.loads(value.text) == json.loads(
                json.dumps(value.value))
            assert value is None or SECRET not in value.text


def test_a_short_conversation_skips_the_general_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shortcut is taken when it applies (and only then): a short conversation with
    no credential is never cut or shared out; one with a credential goes the general way."""
    policy = ContentPolicy(SPAN_ONLY, 4096)
    general: list[int] = []
    real = ContentPolicy._fit_cut
    monkeypatch.setattr(ContentPolicy, "_fit_cut",
                        lambda self, *args: general.append(1) or real(self, *args))
    plain = [{"role": "user", "parts": [{"type": "text", "content": "hello"}]}]
    value = policy.message_value(plain)
    assert value is not None and json.loads(value.text) == plain and general == []
    leaked = [{"role": "user", "parts": [{"type": "text", "content": f"key {SECRET}"}]}]
    value = policy.message_value(leaked)
    assert value is not None and SECRET not in value.text and general == [1]


@pytest.mark.host("openai")
def test_redaction_applies_to_part_contents_and_keeps_the_json_valid(
        observed: Any, server: ScriptedLLMServer) -> None:
    tel = observed(SPAN_ONLY)
    messages = [
        {"role": "user", "content": f"my key is {SECRET}"},
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {
            "name": "login", "arguments": json.dumps({"api_key": "hunter2hunter2"})}}]},
        {"role": "tool", "tool_call_id": "c", "content": f"token={SECRET}"}]
    server.push_text(f"here: {SECRET}")
    _openai(server).chat.completions.create(model="gpt-test", messages=messages)
    attrs = tel.chat().attributes
    inputs = validate("gen_ai.input.messages", attrs["gen_ai.input.messages"])
    outputs = validate("gen_ai.output.messages", attrs["gen_ai.output.messages"])
    text = attrs["gen_ai.input.messages"] + attrs["gen_ai.output.messages"]
    assert SECRET not in text and "hunter2" not in text and "[REDACTED]" in text
    assert inputs[0]["parts"][0]["content"] == "my key is [REDACTED]"
    assert parts_of(inputs, "tool_call")[0]["arguments"] == {"api_key": "[REDACTED]"}
    assert outputs[0]["parts"][0]["content"] == "here: [REDACTED]"

    # A redactor of the program's own: over every part content; one that breaks JSON
    # syntax still leaves the attribute valid.
    set_redactor(lambda s: s.replace("Paris", '"}]'))
    try:
        tel = observed(SPAN_ONLY)
        call_chat(server, stream=False)
    finally:
        set_redactor(None)
    attrs = tel.chat().attributes
    inputs = validate("gen_ai.input.messages", attrs["gen_ai.input.messages"])
    assert "Paris" not in attrs["gen_ai.input.messages"]
    assert parts_of(inputs, "tool_call")[0]["arguments"] == '{"city":""}]"}'


def test_nothing_is_rendered_for_a_span_that_does_not_record(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The message shapes cost nothing when the span is not sampled."""
    rendered: list[Any] = []
    real = ContentPolicy.render_messages

    def render(self: ContentPolicy, items: Any, **kw: Any) -> Any:
        rendered.append(items)
        return real(self, items, **kw)

    monkeypatch.setattr(ContentPolicy, "render_messages", render)
    pipe = get_pipeline().__class__()
    obs = TelemetryObserver(TracerProvider(sampler=ALWAYS_OFF),
                            content=ContentPolicy(SPAN_AND_EVENT), failures=pipe.failures,
                            hook_events="none")
    pipe.observer = obs
    try:
        request = {"model": "m", "messages": CHAT_MESSAGES, "tools": OPENAI_TOOLS}
        pipe.run_llm(request, lambda r: CHAT_REASONING)
        list(pipe.run_llm({**request, "stream": True}, lambda r: iter([{"choices": []}])))
    finally:
        obs.close()
    assert rendered == []


def test_the_collector_keeps_a_bounded_prefix_of_a_long_stream() -> None:
    collector = OutputCollector(cap=100)
    for _ in range(1000):
        collector.add_chunk({"choices": [{"index": 0, "delta": {"content": "abcdefghij"}}]})
    (message,) = collector.messages()
    assert message["parts"] == [{"type": "text", "content": "abcdefghij" * 10}]
    assert message["finish_reason"] == "error"  # the stream never said why it ended


# ---------------------------------------------------------------- Hermes, PraisonAI
DETAILS = "gen_ai.client.inference.operation.details"
ON_EVENTS = (EVENT_ONLY, SPAN_AND_EVENT)


def _received_chats(rx: OtlpReceiver, mode: str) -> list[Any]:
    rx.wait_for(lambda: any(s.name.startswith("invoke_agent") for s in rx.spans()))
    chats = sorted((s for s in rx.spans() if s.name.startswith("chat ")),
                   key=lambda s: s.start_ns)
    if mode in ON_EVENTS:  # each request's event, from the same batch processor's peer
        rx.wait_for(lambda: len(rx.logs(DETAILS)) >= len(chats))
    return chats


def _child_env(rx: OtlpReceiver, tmp: Path, mode: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "OTELMW_", "OPENAI_", "HERMES_"))}
    env.update(OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint, OTEL_BSP_SCHEDULE_DELAY="100",
               OTEL_BLRP_SCHEDULE_DELAY="100", OTEL_METRIC_EXPORT_INTERVAL="600000",
               OTELMW_HOME=str(tmp / "otelmw-home"),
               OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=mode,
               PYTHONUNBUFFERED="1", **extra)
    return env


def _run(cmd: list[str], env: dict[str, str], tmp: Path) -> None:
    proc = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"


def _host_content(rx: OtlpReceiver, chats: list[Any], mode: str) -> list[dict[str, Any]]:
    """The content of each of a turn's provider requests, in request order, from where
    ``mode`` puts it (each value valid against its schema): the chat span's JSON text,
    the request's inference event (structured values, and under SPAN_AND_EVENT the same
    values as the span's), or, under NO_CONTENT, nowhere: no span and no log record of
    the turn carries a message attribute."""
    spans = [check_span(c, mode, ("gen_ai.input.messages", "gen_ai.output.messages"))
             for c in chats]
    events = {e.span_id: e for e in rx.logs(DETAILS)}
    if mode not in ON_EVENTS:
        assert not events, f"{mode}: {len(events)} inference events"
        if mode == NO_CONTENT:
            leaks = [(s.name, k) for s in rx.spans() for k in KEYS if k in s.attributes]
            leaks += [(r.event_name, k) for r in rx.logs() for k in KEYS if k in r.attributes]
            assert not leaks, leaks
            return []
        return spans
    assert set(events) == {c.span_id for c in chats}  # one event per request, on its span
    got = []
    for chat, on_span in zip(chats, spans, strict=True):
        attrs = events[chat.span_id].attributes
        assert "gen_ai.input.messages" in attrs and "gen_ai.output.messages" in attrs
        values = {k: validate_value(k, attrs[k]) for k in KEYS if k in attrs}
        if mode == SPAN_AND_EVENT:
            assert values == on_span, chat.name
        got.append(values)
    return got


def _check_host_turn(rx: OtlpReceiver, mode: str, tool: str) -> list[dict[str, Any]]:
    """A tool-calling turn: one chat span per provider request; under capture, the first
    request's answer calls ``tool`` and the last request carries its call and result."""
    chats = _received_chats(rx, mode)
    assert len(chats) >= 2, [c.name for c in chats]
    content = _host_content(rx, chats, mode)
    if mode == NO_CONTENT:
        return content
    offered = [t["name"] for c in content for t in c.get("gen_ai.tool.definitions", [])]
    assert tool in offered  # (PraisonAI's streamed follow-up request offers no tools)
    calls = [parts_of(c["gen_ai.output.messages"], "tool_call") for c in content]
    assert any(c and c[0]["name"] == tool and isinstance(c[0]["arguments"], dict)
               for c in calls)
    last_inputs = content[-1]["gen_ai.input.messages"]
    assert parts_of(last_inputs, "tool_call") and parts_of(last_inputs, "tool_call_response")
    return content


@pytest.mark.host("hermes")
@pytest.mark.parametrize("mode", ALL_MODES)
def test_hermes_turn_messages_follow_the_schemas(tmp_path: Path, mode: str) -> None:
    home = tmp_path / "hermes-home"
    home.mkdir()
    notes = tmp_path / "notes.txt"
    notes.write_text("meeting at noon\n")
    with ScriptedLLMServer() as srv, OtlpReceiver() as rx:
        srv.push_tool_calls([("read_file", {"path": str(notes)})])
        cfg = {"base_url": srv.base_url, "system": "Be brief.", "prompts": ["Read my notes."]}
        env = _child_env(rx, tmp_path, mode, HERMES_HOME=str(home), HX_CONFIG=json.dumps(cfg),
                         OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="otelmw_anthropic,otelmw_praisonai")
        _run([sys.executable, "-m", "otelmw.cli", "run", "--", sys.executable,
              str(SCRIPTS / "hermes_scripts" / "hermes_turns.py")], env, tmp_path)
        content = _check_host_turn(rx, mode, "read_file")
    if mode != NO_CONTENT:
        first = content[0]["gen_ai.input.messages"]
        assert first[0]["role"] == "system"  # Hermes speaks OpenAI chat: the system message
        assert any(p["content"] == "Read my notes." for p in parts_of(first, "text"))


@pytest.mark.host("praisonai")
@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("call", ["start", "start_stream"])
def test_praisonai_turn_messages_follow_the_schemas(tmp_path: Path, call: str,
                                                    mode: str) -> None:
    with ScriptedLLMServer(tool_first=True, tool_args={"get_weather": {"city": "Paris"}}) as srv, \
            OtlpReceiver() as rx:
        env = _child_env(rx, tmp_path, mode, OPENAI_BASE_URL=srv.base_url,
                         OPENAI_API_KEY="dummy", OPENAI_MAX_RETRIES="0")
        spec = {"prompt": "What is the weather in Paris?", "mode": call, "turns": 1}
        _run([sys.executable, str(SCRIPTS / "praisonai_scripts" / "driver.py"),
              json.dumps(spec)], env, tmp_path)
        content = _check_host_turn(rx, mode, "get_weather")
    if mode != NO_CONTENT:
        first = content[0]["gen_ai.input.messages"]
        assert any("Paris" in p["content"] for p in parts_of(first, "text"))


def test_tool_definitions_of_every_provider_shape() -> None:
    schema = OPENAI_TOOLS[0]["function"]["parameters"]
    got = tool_definitions(OPENAI_TOOLS + RESPONSES_TOOLS + ANTHROPIC_TOOLS + [
        {"type": "custom", "custom": {"name": "grammar"}},
        {"type": "web_search_20250305", "name": "web_search"}])
    assert got == [
        {"type": "function", "name": "get_weather", "description": "Weather of a city",
         "parameters": schema},
        {"type": "function", "name": "get_weather", "description": "Weather",
         "parameters": schema},
        {"type": "web_search_preview", "name": "web_search_preview"},
        {"type": "function", "name": "get_weather", "description": "Weather of a city",
         "parameters": schema},
        {"type": "custom", "name": "grammar"},
        {"type": "web_search_20250305", "name": "web_search"}]
    validate("gen_ai.tool.definitions", json.dumps(got))


def test_a_shape_that_cannot_be_read_costs_its_content_never_the_span(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from otelmw.telemetry.shapes import events

    def unreadable(*args: Any) -> Any:
        raise RuntimeError("unreadable")

    monkeypatch.setattr(events, "newest_input_messages", unreadable)
    monkeypatch.setattr(OutputCollector, "messages", unreadable)
    h = TelemetryHarness(SPAN_ONLY)
    try:
        assert h.pipeline.run_llm({"model": "m", "messages": CHAT_MESSAGES},
                                  lambda r: CHAT_REASONING) is CHAT_REASONING
        (span,) = [s for s in h.spans() if s.name.startswith("chat")]
        assert not [k for k in KEYS if k in span.attributes]
        assert span.attributes["gen_ai.response.id"] == "chatcmpl-1"  # the span is whole
        assert h.internal_failures() == {("telemetry", "input_messages"): 1,
                                         ("telemetry", "output_messages"): 1}
    finally:
        h.close()


def test_messages_sent_again_are_rendered_from_what_they_hold_now() -> None:
    """An agent sends the same message objects on every call: a message edited in place
    between two calls (a credential added, then its text replaced) is captured as it is
    at each call, on the span and on the event, redacted each time."""
    messages = [{"role": "user", "content": "first question"},
                {"role": "assistant", "content": "first answer"},
                {"role": "user", "content": "second question"}]
    h = TelemetryHarness(SPAN_AND_EVENT)
    seen = []
    try:
        for edit in (None, f"use the key {SECRET} please", "a new question"):
            if edit is not None:
                messages[-1]["content"] = edit
            h.clear()
            h.pipeline.run_llm({"model": "m", "messages": messages},
                               lambda r: CHAT_REASONING)
            (span,) = [s for s in h.spans() if s.name.startswith("chat")]
            (event,) = h.logs_named("gen_ai.client.inference.operation.details")
            text = span.attributes["gen_ai.input.messages"]
            assert json.loads(text) == json.loads(json.dumps(
                event.attributes["gen_ai.input.messages"]))
            seen.append(validate("gen_ai.input.messages", text)[-1]["parts"][0]["content"])
    finally:
        h.close()
    assert seen == ["second question", "use the key [REDACTED] please", "a new question"]


def test_a_long_conversation_keeps_its_newest_messages_and_reads_no_older_ones() -> None:
    """The input messages attribute keeps the newest messages that fit; the messages
    older than those are never read (an agent's conversation only grows, and each call
    would pay for all of it)."""

    class Untouchable(dict):  # a message that fails the moment it is read
        def get(self, key: str, default: Any = None) -> Any:
            raise AssertionError("an old message was read")

    messages: list[dict[str, Any]] = [Untouchable(role="user", content="old")]
    messages += [{"role": ("user", "assistant")[i % 2], "content": f"message {i} " + "x" * 290}
                 for i in range(200)]
    policy = ContentPolicy(SPAN_AND_EVENT, 4096)
    text = policy.render_messages(request_content({"messages": messages[1:]}).input_messages,
                                  keep_last=True)
    fitted = policy.newest_messages_value(newest_input_messages({"messages": messages}))
    assert fitted is not None and fitted.text == text
    kept = validate("gen_ai.input.messages", fitted.text)
    assert 10 < len(kept) < 200 and len(fitted.text) <= 4096
    assert kept[-1]["parts"][0]["content"].startswith("message 199 ")

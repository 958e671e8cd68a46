"""The GenAI conventions' events of a chat call: gen_ai.client.inference.operation.details
under content capture on events (EVENT_ONLY, SPAN_AND_EVENT), gen_ai.client.operation.exception
on every failure, both log records in the chat span's context, redacted, with nothing
that can hold content under NO_CONTENT. The event's message attributes are structured
values in the conventions' shapes (role + parts, finish_reason), valid against their
JSON schemas (``_support.semconv_schemas``), whole or cut to the content limit."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from _support.calls import MODEL, MODES, run_call
from _support.semconv_schemas import MESSAGE_KEYS, validate, validate_value
from _support.telemetry import TelemetryHarness, all_exported_text
from opentelemetry._logs import SeverityNumber

from otelmw.telemetry.content.policy import EVENT_ONLY, NO_CONTENT, SPAN_AND_EVENT, SPAN_ONLY

DETAILS = "gen_ai.client.inference.operation.details"
EXCEPTION = "gen_ai.client.operation.exception"
CAPTURE_MODES = [NO_CONTENT, SPAN_ONLY, EVENT_ONLY, SPAN_AND_EVENT]
ON_EVENTS = {EVENT_ONLY, SPAN_AND_EVENT}
SECRET = "sk-" + "A1b2C3d4E5f6G7h8I9j0"  # an OpenAI-style key: the redactor masks it

REQUEST = {"model": MODEL, "temperature": 0.5,
           "messages": [{"role": "user", "content": "the prompt"}]}
RESPONSE = {"id": "chatcmpl-9", "model": "gpt-test-0613",
            "choices": [{"message": {"role": "assistant", "content": "the answer"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3}}
# The conventions' shapes of REQUEST's messages and RESPONSE's choice.
PROMPT = [{"role": "user", "parts": [{"type": "text", "content": "the prompt"}]}]
ANSWER = [{"role": "assistant", "parts": [{"type": "text", "content": "the answer"}],
           "finish_reason": "stop"}]


class ProviderError(Exception):
    """Made from a provider's HTTP error response, as the SDKs' APIStatusError."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.status_code = 400
        self.body = {"error": {"type": "invalid_request_error", "message": message}}


@pytest.fixture(params=CAPTURE_MODES)
def h(request: pytest.FixtureRequest) -> Iterator[TelemetryHarness]:
    harness = TelemetryHarness(request.param, hook_events="none")
    yield harness
    harness.close()
    harness.assert_clean()


def _mode(h: TelemetryHarness) -> str:
    return h.observer.content.mode


def _in_span_context(record: Any, span: Any) -> None:
    assert record.trace_id == span.context.trace_id
    assert record.span_id == span.context.span_id


@pytest.mark.parametrize("mode", MODES)
def test_a_chat_call_has_its_inference_event_under_event_capture_only(
        h: TelemetryHarness, mode: str) -> None:
    with h.pipeline.turn("agent", session_id="conv-1"):
        run_call(h.pipeline, mode, "llm", REQUEST, lambda r: RESPONSE)
    chat = h.one(f"chat {MODEL}")
    assert h.logs_named(EXCEPTION) == []
    details = h.logs_named(DETAILS)
    if _mode(h) not in ON_EVENTS:  # opt-in: the event exists to carry content
        assert details == []
        return
    (event,) = details
    _in_span_context(event, chat)
    assert event.severity_number == SeverityNumber.DEBUG
    attrs = dict(event.attributes)
    # the chat span's attributes; the content keys (JSON text on the span) the event
    # carries structured, as the conventions require of events
    for key, value in chat.attributes.items():
        if key not in MESSAGE_KEYS:
            assert attrs[key] == value, key
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == "openai"
    assert attrs["gen_ai.request.model"] == MODEL
    assert attrs["gen_ai.response.model"] == "gpt-test-0613"
    assert attrs["gen_ai.response.id"] == "chatcmpl-9"
    assert attrs["gen_ai.usage.input_tokens"] == 7
    assert attrs["gen_ai.conversation.id"] == "conv-1"
    assert _plain(attrs["gen_ai.input.messages"]) == PROMPT
    assert _plain(attrs["gen_ai.output.messages"]) == ANSWER
    assert "gen_ai.system_instructions" not in attrs
    if _mode(h) == SPAN_AND_EVENT:  # the same shapes as the span's JSON text
        for key in ("gen_ai.input.messages", "gen_ai.output.messages"):
            assert _plain(attrs[key]) == validate(key, chat.attributes[key])


def _plain(value: Any) -> Any:
    """A structured log attribute as plain lists and dicts (the SDK keeps tuples)."""
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def test_separate_system_instructions_are_their_own_attribute(h: TelemetryHarness) -> None:
    request = {"model": MODEL, "system": "be brief",
               "messages": [{"role": "user", "content": "hi"}]}
    run_call(h.pipeline, "sync", "llm", request, lambda r: {
        "type": "message", "role": "assistant", "content": [{"type": "text", "text": "hello"}],
        "stop_reason": "end_turn"}, provider="anthropic")
    if _mode(h) not in ON_EVENTS:
        assert h.logs_named(DETAILS) == []
        return
    attrs = h.logs_named(DETAILS)[0].attributes
    # Anthropic's separate ``system``: a list of parts, apart from the chat history
    assert _plain(attrs["gen_ai.system_instructions"]) == [{"type": "text",
                                                            "content": "be brief"}]
    assert _plain(attrs["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
    # end_turn is the conventions' "stop"
    assert _plain(attrs["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "hello"}],
         "finish_reason": "stop"}]


@pytest.mark.parametrize("mode", MODES)
def test_a_failed_chat_call_has_the_exception_event_in_every_mode(
        h: TelemetryHarness, mode: str) -> None:
    def fail(request: Any) -> Any:
        raise RuntimeError(f"provider down, key {SECRET}")

    with pytest.raises(RuntimeError):
        run_call(h.pipeline, mode, "llm", REQUEST, fail)
    chat = h.one(f"chat {MODEL}")
    (event,) = h.logs_named(EXCEPTION)
    _in_span_context(event, chat)
    assert event.severity_number == SeverityNumber.WARN
    attrs = dict(event.attributes)
    assert attrs["exception.type"] == "builtins.RuntimeError" == attrs["error.type"]
    assert attrs["exception.message"] == chat.status.description
    assert "provider down" in attrs["exception.message"]
    assert SECRET not in attrs["exception.message"] and "[REDACTED]" in attrs[
        "exception.message"]
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == "openai"
    assert attrs["gen_ai.request.model"] == MODEL
    if _mode(h) in ON_EVENTS:
        trace_text = attrs["exception.stacktrace"]
        assert "Traceback" in trace_text and "RuntimeError" in trace_text
        assert SECRET not in trace_text
        (details,) = h.logs_named(DETAILS)  # the failed call's details too, no output
        assert details.attributes["error.type"] == "builtins.RuntimeError"
        assert "gen_ai.output.messages" not in details.attributes
        assert _plain(details.attributes["gen_ai.input.messages"]) == PROMPT
    else:
        assert "exception.stacktrace" not in attrs
        assert h.logs_named(DETAILS) == []
    assert not any(SECRET in text for text in all_exported_text(h))


@pytest.mark.parametrize("mode", MODES)
def test_a_provider_error_response_is_summarized_unless_content_goes_on_events(
        h: TelemetryHarness, mode: str) -> None:
    def fail(request: Any) -> Any:
        raise ProviderError("Invalid content: the prompt")

    with pytest.raises(ProviderError):
        run_call(h.pipeline, mode, "llm", REQUEST, fail)
    message = h.logs_named(EXCEPTION)[0].attributes["exception.message"]
    if _mode(h) in ON_EVENTS:
        assert "the prompt" in message
    else:
        assert "the prompt" not in message
        assert message == "ProviderError: HTTP 400, invalid_request_error"
    if _mode(h) == NO_CONTENT:  # nothing that can hold content, anywhere
        assert not any("the prompt" in text for text in all_exported_text(h))


def test_nothing_holds_content_under_no_content() -> None:
    h = TelemetryHarness(NO_CONTENT, hook_events="none")
    run_call(h.pipeline, "sync", "llm", REQUEST, lambda r: RESPONSE)
    with pytest.raises(RuntimeError):
        run_call(h.pipeline, "sync", "llm", REQUEST, _raiser("boom"))
    assert [r.event_name for r in h.logs()] == [EXCEPTION]
    text = all_exported_text(h)
    h.close()
    h.assert_clean()
    assert not any("the prompt" in t or "the answer" in t or "Traceback" in t for t in text)


def _raiser(message: str) -> Any:
    def fail(request: Any) -> Any:
        raise RuntimeError(message)
    return fail


def test_content_in_events_is_redacted(h: TelemetryHarness) -> None:
    request = {"model": MODEL, "messages": [{"role": "user", "content": f"use {SECRET}"}]}
    run_call(h.pipeline, "sync", "llm", request, lambda r: RESPONSE)
    assert not any(SECRET in t for t in all_exported_text(h))
    if _mode(h) in ON_EVENTS:
        attrs = h.logs_named(DETAILS)[0].attributes
        assert _plain(attrs["gen_ai.input.messages"]) == [
            {"role": "user", "parts": [{"type": "text", "content": "use [REDACTED]"}]}]


def test_a_streamed_call_has_its_event_when_the_stream_ends(h: TelemetryHarness) -> None:
    chunks = [{"id": "c1", "model": MODEL, "choices": [
                  {"index": 0, "delta": {"role": "assistant", "content": "the "}}]},
              {"id": "c1", "model": MODEL, "choices": [{"index": 0,
                                                        "delta": {"content": "answer"}}]},
              {"id": "c1", "model": MODEL, "choices": [{"index": 0, "delta": {},
                                                        "finish_reason": "stop"}]}]

    def stream(request: Any) -> Any:
        yield from chunks

    result = run_call(h.pipeline, "sync", "llm", {**REQUEST, "stream": True}, stream)
    assert h.logs_named(DETAILS) == []  # the span is still open
    assert list(result) == chunks
    chat = h.one(f"chat {MODEL}")
    if _mode(h) in ON_EVENTS:
        (event,) = h.logs_named(DETAILS)
        _in_span_context(event, chat)
        assert event.attributes["otelmw.stream.ended_by"] == "exhausted"
        # assembled from the chunks, under EVENT_ONLY too (the span collects for the event)
        assert _plain(event.attributes["gen_ai.output.messages"]) == ANSWER
    else:
        assert h.logs_named(DETAILS) == []


def test_a_stream_that_fails_has_the_exception_event(h: TelemetryHarness) -> None:
    def stream(request: Any) -> Any:
        yield {"id": "c1", "model": MODEL, "choices": []}
        raise ConnectionError("reset mid-stream")

    result = run_call(h.pipeline, "sync", "llm", {**REQUEST, "stream": True}, stream)
    with pytest.raises(ConnectionError):
        list(result)
    (event,) = h.logs_named(EXCEPTION)
    _in_span_context(event, h.one(f"chat {MODEL}"))
    assert event.attributes["exception.type"] == "builtins.ConnectionError"


def test_no_event_is_built_when_no_log_processor_listens(
        h: TelemetryHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    events = h.observer.chat.events
    monkeypatch.setattr(events, "_enabled", lambda event_name: False)
    monkeypatch.setattr(events, "_details", _must_not_run)
    monkeypatch.setattr(events, "_exception", _must_not_run)
    run_call(h.pipeline, "sync", "llm", REQUEST, lambda r: RESPONSE)
    with pytest.raises(RuntimeError):
        asyncio.run(h.pipeline.arun_llm(REQUEST, _raiser("x"), provider="openai", model=MODEL))
    assert h.logs() == []


def _must_not_run(*args: Any) -> None:
    raise AssertionError("an event built with no listener")


# ---------------------------------------------------------------- the schemas
PNG_URL = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNg"
WEATHER_TOOL = {"name": "get_weather", "description": "The weather in a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                               "required": ["city"]}}
# (provider, request, response) of each API shape the event is built from.
CALLS = {
    "openai_chat": ("openai", {
        "model": MODEL, "tools": [{"type": "function", "function": WEATHER_TOOL}],
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "weather here?"},
                                         {"type": "image_url", "image_url": {"url": PNG_URL}}]},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "rainy"}]},
        {"id": "chatcmpl-1", "model": MODEL, "choices": [
            {"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_2", "type": "function",
                     "function": {"name": "get_weather", "arguments": '{"city": "Lyon"}'}}]}}]}),
    "openai_responses": ("openai", {
        "model": MODEL, "instructions": "be brief", "input": "weather in Paris?",
        "tools": [{"type": "function", **WEATHER_TOOL}]},
        {"id": "resp_1", "object": "response", "model": MODEL, "status": "completed",
         "output": [{"type": "message", "role": "assistant",
                     "content": [{"type": "output_text", "text": "rainy"}]}]}),
    "anthropic_messages": ("anthropic", {
        "model": MODEL, "system": "be brief", "max_tokens": 64,
        "tools": [{"name": "get_weather", "description": "The weather in a city",
                   "input_schema": WEATHER_TOOL["parameters"]}],
        "messages": [{"role": "user", "content": "weather in Paris?"}]},
        {"id": "msg_1", "type": "message", "role": "assistant", "model": MODEL,
         "stop_reason": "tool_use", "content": [
             {"type": "text", "text": "looking"},
             {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
              "input": {"city": "Paris"}}]}),
}


def _check_event(attrs: Any, expected: tuple[str, ...]) -> dict[str, Any]:
    """Every message attribute of the event is a structured value (not JSON text) valid
    against its schema, each part against its own type; ``expected`` are there."""
    got = {k: _plain(attrs[k]) for k in MESSAGE_KEYS if k in attrs}
    assert set(expected) <= set(got), (expected, sorted(got))
    for key, value in got.items():
        assert not isinstance(value, str), key
        validate_value(key, value)
    return got


@pytest.mark.parametrize("mode", [EVENT_ONLY, SPAN_AND_EVENT])
@pytest.mark.parametrize("api", CALLS)
def test_the_events_messages_are_valid_against_the_conventions_schemas(
        mode: str, api: str) -> None:
    provider, request, response = CALLS[api]
    h = TelemetryHarness(mode, hook_events="none")
    run_call(h.pipeline, "sync", "llm", request, lambda r: response, provider=provider)
    (event,) = h.logs_named(DETAILS)
    # OpenAI chat has no system instructions apart from the history
    expected = tuple(k for k in MESSAGE_KEYS
                     if api != "openai_chat" or k != "gen_ai.system_instructions")
    got = _check_event(event.attributes, expected)
    chat = h.one(f"chat {MODEL}")
    h.close()
    h.assert_clean()
    (tool,) = got["gen_ai.tool.definitions"]
    assert tool["type"] == "function" and tool["name"] == "get_weather"
    (output,) = got["gen_ai.output.messages"]
    if api == "openai_responses":
        assert output["finish_reason"] == "stop"
    else:  # tool_calls / tool_use: the conventions' tool_call
        assert output["finish_reason"] == "tool_call"
        assert any(p["type"] == "tool_call" for p in output["parts"])
    if api == "openai_chat":  # a system message in the history keeps its role there
        inputs = got["gen_ai.input.messages"]
        assert [m["role"] for m in inputs] == ["system", "user", "assistant", "tool"]
        assert {p["type"] for p in inputs[1]["parts"]} == {"text", "blob"}
        assert inputs[2]["parts"][0]["arguments"] == {"city": "Paris"}
    if mode == SPAN_AND_EVENT:  # the span's JSON text holds the same values
        for key in expected:
            assert got[key] == validate(key, chat.attributes[key]), key
    else:
        assert not [k for k in MESSAGE_KEYS if k in chat.attributes]


@pytest.mark.parametrize("mode", [EVENT_ONLY, SPAN_AND_EVENT])
def test_a_streamed_calls_event_messages_are_valid(mode: str) -> None:
    chunks = [{"type": "message_start", "message": {"role": "assistant", "model": MODEL}},
              {"type": "content_block_start", "index": 0,
               "content_block": {"type": "text", "text": ""}},
              {"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": "rainy"}},
              {"type": "content_block_start", "index": 1, "content_block": {
                  "type": "tool_use", "id": "toolu_1", "name": "get_weather"}},
              {"type": "content_block_delta", "index": 1, "delta": {
                  "type": "input_json_delta", "partial_json": '{"city": "Paris"}'}},
              {"type": "message_delta", "delta": {"stop_reason": "tool_use"}}]

    def stream(request: Any) -> Any:
        yield from chunks

    h = TelemetryHarness(mode, hook_events="none")
    _, request, _ = CALLS["anthropic_messages"]
    result = run_call(h.pipeline, "sync", "llm", {**request, "stream": True}, stream,
                      provider="anthropic")
    assert list(result) == chunks
    (event,) = h.logs_named(DETAILS)
    h.close()
    h.assert_clean()
    got = _check_event(event.attributes, MESSAGE_KEYS)
    assert got["gen_ai.output.messages"] == [{"role": "assistant", "finish_reason": "tool_call",
                                              "parts": [
        {"type": "text", "content": "rainy"},
        {"type": "tool_call", "id": "toolu_1", "name": "get_weather",
         "arguments": {"city": "Paris"}}]}]


@pytest.mark.parametrize("mode", [EVENT_ONLY, SPAN_AND_EVENT])
def test_a_long_conversation_on_the_event_is_cut_inside_its_parts_and_stays_valid(
        mode: str) -> None:
    limit = 400
    history = [{"role": "user" if i % 2 == 0 else "assistant",
                "content": f"turn {i}: " + "word " * 200} for i in range(12)]
    request = {"model": MODEL, "messages": history}
    answer = {"choices": [{"message": {"role": "assistant", "content": "x" * 5000},
                           "finish_reason": "length"}]}
    h = TelemetryHarness(mode, limit, hook_events="none")
    run_call(h.pipeline, "sync", "llm", request, lambda r: answer)
    (event,) = h.logs_named(DETAILS)
    h.close()
    h.assert_clean()
    got = _check_event(event.attributes, ("gen_ai.input.messages", "gen_ai.output.messages"))
    inputs, (output,) = got["gen_ai.input.messages"], got["gen_ai.output.messages"]
    for key, value in got.items():
        assert len(json.dumps(value, ensure_ascii=False, separators=(",", ":"))) <= limit, key
    # the most recent messages are kept, each content cut inside with "…"
    assert 0 < len(inputs) < len(history)
    assert inputs[-1]["parts"][0]["content"].startswith("turn 11: ")
    assert inputs[-1]["parts"][0]["content"].endswith("…")
    assert output["finish_reason"] == "length"
    assert output["parts"][0]["content"].endswith("…")


def test_a_lone_surrogate_in_content_cannot_break_the_event() -> None:
    # A lone surrogate would make the OTLP export of the whole batch fail.
    h = TelemetryHarness(EVENT_ONLY, hook_events="none")
    request = {"model": MODEL, "messages": [{"role": "user", "content": "a\ud800b"}]}
    run_call(h.pipeline, "sync", "llm", request, lambda r: RESPONSE)
    (event,) = h.logs_named(DETAILS)
    h.close()
    h.assert_clean()
    got = _check_event(event.attributes, ("gen_ai.input.messages",))
    text = got["gen_ai.input.messages"][0]["parts"][0]["content"]
    assert text == "a?b"
    text.encode("utf-8")


@pytest.mark.parametrize("mode", [SPAN_ONLY, SPAN_AND_EVENT])
def test_a_chat_calls_content_is_rendered_once_for_its_span_event_and_turn(
        monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """The chat span's messages are the ones its inference event and its turn's agent
    span carry: rendered once per call (one ``message_value`` per attribute), not once
    per place they go."""
    from otelmw.telemetry.content.policy import ContentPolicy

    rendered: list[int] = []
    real, real_newest = ContentPolicy.message_value, ContentPolicy.newest_messages_value

    def counting(self: ContentPolicy, items: list[dict[str, Any]], **kw: Any) -> Any:
        rendered.append(len(items))
        return real(self, items, **kw)

    def counting_newest(self: ContentPolicy, items: Any) -> Any:  # the input messages
        rendered.append(-1)
        return real_newest(self, items)

    monkeypatch.setattr(ContentPolicy, "message_value", counting)
    monkeypatch.setattr(ContentPolicy, "newest_messages_value", counting_newest)
    provider, request, response = CALLS["anthropic_messages"]  # system, tools, messages
    h = TelemetryHarness(mode, hook_events="none")
    try:
        with h.pipeline.turn("agent", session_id="s-1"):
            run_call(h.pipeline, "sync", "llm", request, lambda r: response, provider=provider)
        chat, agent = h.one(f"chat {MODEL}"), h.one("invoke_agent agent")
        events = h.logs_named(DETAILS)
    finally:
        h.close()
    assert len(rendered) == 4  # input, system instructions, tool definitions, output
    assert agent.attributes["input.value"] == chat.attributes["gen_ai.input.messages"]
    assert agent.attributes["output.value"] == chat.attributes["gen_ai.output.messages"]
    if mode == SPAN_AND_EVENT:
        (event,) = events
        for key in MESSAGE_KEYS:
            assert _plain(event.attributes[key]) == json.loads(chat.attributes[key]), key
    else:
        assert events == []

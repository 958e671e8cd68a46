"""The GenAI conventions' events of a chat call: gen_ai.client.inference.operation.details
under content capture on events (EVENT_ONLY, SPAN_AND_EVENT), gen_ai.client.operation.exception
on every failure, both log records in the chat span's context, redacted, with nothing
that can hold content under NO_CONTENT."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from _support.calls import MODEL, MODES, run_call
from _support.telemetry import TelemetryHarness, all_exported_text
from opentelemetry._logs import SeverityNumber

from otelmw.telemetry.content import EVENT_ONLY, NO_CONTENT, SPAN_AND_EVENT, SPAN_ONLY

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
    # the chat span's attributes, content keys in the event's own (structured) form
    for key, value in chat.attributes.items():
        if key != "gen_ai.input.messages":
            assert attrs[key] == value, key
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == "openai"
    assert attrs["gen_ai.request.model"] == MODEL
    assert attrs["gen_ai.response.model"] == "gpt-test-0613"
    assert attrs["gen_ai.response.id"] == "chatcmpl-9"
    assert attrs["gen_ai.usage.input_tokens"] == 7
    assert attrs["gen_ai.conversation.id"] == "conv-1"
    assert _plain(attrs["gen_ai.input.messages"]) == REQUEST["messages"]
    assert _plain(attrs["gen_ai.output.messages"]) == [RESPONSE["choices"][0]["message"]]
    assert "gen_ai.system_instructions" not in attrs


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
    run_call(h.pipeline, "sync", "llm", request, lambda r: {"content": [
        {"type": "text", "text": "hello"}], "stop_reason": "end_turn"}, provider="anthropic")
    if _mode(h) not in ON_EVENTS:
        assert h.logs_named(DETAILS) == []
        return
    attrs = h.logs_named(DETAILS)[0].attributes
    assert attrs["gen_ai.system_instructions"] == "be brief"  # a string renders as itself
    assert _plain(attrs["gen_ai.output.messages"]) == [{"type": "text", "text": "hello"}]


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
        assert _plain(details.attributes["gen_ai.input.messages"]) == REQUEST["messages"]
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
            {"role": "user", "content": "use [REDACTED]"}]


def test_a_streamed_call_has_its_event_when_the_stream_ends(h: TelemetryHarness) -> None:
    chunks = [{"id": "c1", "model": MODEL, "choices": [{"delta": {"content": "a"}}]},
              {"id": "c1", "model": MODEL, "choices": [{"delta": {}, "finish_reason": "stop"}]}]

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
        assert "gen_ai.output.messages" not in event.attributes  # not from chunks (yet)
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

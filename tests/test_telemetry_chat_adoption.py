"""A model call recorded on the host's own ``chat`` span (``run_llm``/``arun_llm``
with ``on_host_span=True``, as the Strands adapter calls them inside Strands' model
span): one span, the host's, carrying otelmw's chat attributes; the host's own
attributes, name, kind and end stay the host's; the contract's layers are its children;
with no recording span current, otelmw's own ``chat`` span as without the flag.

Every assertion reads what the in-memory exporters received.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from _support.calls import MODEL, MODES, AsyncItems
from _support.telemetry import (
    TelemetryHarness,
    add_rewriters,
    add_wrappers,
    is_child,
    payload_for,
    response_for,
)
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

from otelmw.telemetry.content.policy import SPAN_AND_EVENT

pytestmark = pytest.mark.timeout(60)

HOST_SPAN = "chat"  # a host's model-invocation span, as Strands names it
# What the host's tracer set on its span before the call (Strands' own, at its start)
HOST_ATTRS = {"gen_ai.operation.name": "chat", "gen_ai.system": "strands-agents",
              "gen_ai.request.model": MODEL, "gen_ai.conversation.id": "the-host-s"}
OWN_SPAN = f"chat {MODEL}"
DETAILS = "gen_ai.client.inference.operation.details"


def chunks() -> list[dict[str, Any]]:
    base = {"id": "chatcmpl-s1", "object": "chat.completion.chunk", "model": "gpt-test-0613"}
    return [
        {**base, "choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {**base, "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4,
                                          "total_tokens": 13}},
    ]


def run_chat(h: TelemetryHarness, mode: str, execute: Any, **kw: Any) -> Any:
    """One chat call through the pipeline, recorded on the host's span if one is current."""
    if mode == MODES[0]:
        return h.pipeline.run_llm(payload_for("llm"), execute, provider="openai",
                                  on_host_span=True, **kw)

    async def call() -> Any:
        async def run(request: Any) -> Any:
            return execute(request)
        return await h.pipeline.arun_llm(payload_for("llm"), run, provider="openai",
                                         on_host_span=True, **kw)

    return asyncio.run(call())


@pytest.mark.parametrize("mode", MODES)
def test_a_chat_call_on_the_hosts_span_adds_no_span(h: TelemetryHarness, mode: str) -> None:
    add_rewriters(h, mode, "llm", ["rewrite"])
    add_wrappers(h, mode, "llm", ["pass"])
    with h.tracer.start_as_current_span(HOST_SPAN, attributes=HOST_ATTRS) as host_span:
        out = run_chat(h, mode, lambda request: response_for("llm"))
        assert out == response_for("llm")
        assert host_span.is_recording()  # otelmw did not end the host's span
    spans = h.spans()
    assert [s.name for s in spans if s.name.startswith("chat")] == [HOST_SPAN]
    host = h.one(HOST_SPAN)
    a = host.attributes
    assert host.kind is SpanKind.INTERNAL  # the host's kind
    # otelmw's chat attributes ...
    assert a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.response.id"] == "chatcmpl-1"
    assert a["gen_ai.response.finish_reasons"] == ("stop",)
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (3, 2)
    assert a["otelmw.api_request.id"]
    # ... beside the host's own, unchanged (its conversation id, not otelmw's)
    assert {k: a[k] for k in HOST_ATTRS} == HOST_ATTRS
    layers = [s for s in spans if s.name != HOST_SPAN]
    assert len(layers) == 2 and all(is_child(s, host) for s in layers)
    assert sorted(s.attributes["otelmw.middleware.kind"] for s in layers) == [
        "llm_execution", "llm_request"]
    assert sum(p.count for p in h.points("gen_ai.client.operation.duration")) == 1
    h.assert_clean()


def test_a_streamed_call_is_recorded_when_its_stream_ends_and_the_host_writes_last(
        h: TelemetryHarness) -> None:
    with h.tracer.start_as_current_span(HOST_SPAN, attributes=HOST_ATTRS) as host_span:
        stream = run_chat(h, MODES[0], lambda request: iter(chunks()))
        assert "otelmw.stream.ended_by" not in host_span.attributes  # type: ignore[attr-defined]
        assert [c["id"] for c in stream] == ["chatcmpl-s1"] * 3
        recorded = dict(host_span.attributes)  # type: ignore[attr-defined]
        assert recorded["otelmw.stream.ended_by"] == "exhausted"  # before the host's end
        assert recorded["gen_ai.usage.input_tokens"] == 9
        # the host's own end attributes (Strands' usage): set after otelmw's, they stand
        host_span.set_attribute("gen_ai.usage.input_tokens", 99)
    host = h.one(HOST_SPAN)
    assert host.attributes["gen_ai.usage.input_tokens"] == 99
    assert host.attributes["gen_ai.request.stream"] is True
    assert host.attributes["gen_ai.response.time_to_first_chunk"] >= 0
    assert len(h.spans()) == 1
    h.assert_clean()


def test_an_async_stream_ends_the_record_not_the_span(h: TelemetryHarness) -> None:
    async def turn() -> list[Any]:
        with h.tracer.start_as_current_span(HOST_SPAN, attributes=HOST_ATTRS) as host_span:
            async def execute(request: Any) -> Any:
                return AsyncItems(chunks())
            stream = await h.pipeline.arun_llm(payload_for("llm"), execute, provider="openai",
                                               on_host_span=True)
            got = [c async for c in stream]
            assert host_span.is_recording()
            return got

    assert len(asyncio.run(turn())) == 3
    host = h.one(HOST_SPAN)
    assert host.attributes["otelmw.stream.ended_by"] == "exhausted"
    assert host.attributes["gen_ai.response.id"] == "chatcmpl-s1"
    h.assert_clean()


def test_a_record_after_the_host_ended_its_span_is_left_out_quietly(
        h: TelemetryHarness) -> None:
    with h.tracer.start_as_current_span(HOST_SPAN, attributes=HOST_ATTRS):
        stream = run_chat(h, MODES[0], lambda request: iter(chunks()))
    assert len(list(stream)) == 3  # the host ended its span first: nothing to write on
    (host,) = h.spans()
    assert "otelmw.stream.ended_by" not in host.attributes
    assert sum(p.count for p in h.points("gen_ai.client.operation.duration")) == 1
    h.assert_clean()  # no "setting attribute on ended span" of the SDK's


def test_a_failed_call_marks_the_hosts_span_without_ending_it(h: TelemetryHarness) -> None:
    def down(request: Any) -> Any:
        raise ConnectionError("provider down")

    with h.tracer.start_as_current_span(HOST_SPAN, attributes=HOST_ATTRS,
                                        record_exception=False,
                                        set_status_on_exception=False) as host_span:
        with pytest.raises(ConnectionError):
            run_chat(h, MODES[0], down)
        assert host_span.is_recording()
    host = h.one(HOST_SPAN)
    assert host.attributes["error.type"] == "builtins.ConnectionError"
    assert host.status.status_code is StatusCode.ERROR
    h.assert_clean()


def test_a_rewritten_model_is_told_on_the_hosts_span_which_keeps_its_name(
        h: TelemetryHarness) -> None:
    def other_model(**kw: Any) -> Any:
        return {"request": {**kw["request"], "model": "gpt-other"}}

    h.pipeline.registry.add_middleware("llm_request", other_model, plugin="p")
    with h.tracer.start_as_current_span(HOST_SPAN, attributes=HOST_ATTRS):
        run_chat(h, MODES[0], lambda request: response_for("llm"))
    host = h.one(HOST_SPAN)
    # only otelmw knows the request sent asks another model: that one wins
    assert host.attributes["gen_ai.request.model"] == "gpt-other"
    assert host.attributes["otelmw.request.original_model"] == MODEL
    assert [s.name for s in h.spans() if s.name.startswith("chat")] == [HOST_SPAN]
    h.assert_clean()


@pytest.fixture()
def captured() -> Iterator[TelemetryHarness]:
    harness = TelemetryHarness(SPAN_AND_EVENT)
    yield harness
    harness.close()
    harness.assert_clean()


def test_content_and_events_are_otelmws_on_the_hosts_span(captured: TelemetryHarness) -> None:
    h = captured
    with h.tracer.start_as_current_span(HOST_SPAN, attributes=HOST_ATTRS) as host_span:
        run_chat(h, MODES[0], lambda request: response_for("llm"))
        span_id = host_span.get_span_context().span_id
    host = h.one(HOST_SPAN)
    assert '"hi"' in host.attributes["gen_ai.input.messages"]
    (details,) = h.logs_named(DETAILS)
    assert details.span_id == span_id  # the record of the host's span
    assert details.attributes["gen_ai.provider.name"] == "openai"
    assert "gen_ai.system" not in details.attributes  # the host's attribute, not otelmw's


@pytest.mark.parametrize("current", ["none", "not recording"])
def test_without_a_recording_host_span_the_call_has_otelmws_own(
        h: TelemetryHarness, current: str) -> None:
    def call() -> Any:
        return run_chat(h, MODES[0], lambda request: response_for("llm"))

    if current == "none":
        call()
    else:
        # a sampled parent that does not record here (a remote caller's): not adoptable
        with trace.use_span(trace.NonRecordingSpan(trace.SpanContext(
                trace_id=0x1F, span_id=0x2F, is_remote=True,
                trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))), end_on_exit=False):
            call()
    own = h.one(OWN_SPAN)
    assert own.kind is SpanKind.CLIENT
    assert (own.parent is None) == (current == "none")
    assert own.attributes["gen_ai.response.id"] == "chatcmpl-1"
    assert len(h.spans()) == 1
    h.assert_clean()


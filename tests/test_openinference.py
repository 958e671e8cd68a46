"""The OpenInference compatibility layer: middleware spans say what they are
(``openinference.span.kind`` CHAIN, GUARDRAIL for a short-circuiting wrapper), carry
their ``otelmw.*`` facts as ``metadata`` and, under content capture on spans only,
the payload before and after as ``input.value``/``output.value``; the agent span
carries the turn's input and final answer (JSON text of the GenAI conventions' messages,
a streamed answer too)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from _support.calls import (
    EXEC_KIND,
    MODEL,
    MODES,
    OPS,
    PAYLOAD_KEY,
    PLUGIN,
    REQUEST_KIND,
    named,
    run_call,
)
from _support.telemetry import (
    TelemetryHarness,
    add_rewriters,
    add_wrappers,
    all_exported_text,
    host_base,
    payload_for,
    response_for,
    rw_name,
    short_result,
    w_name,
)

from otelmw.telemetry.content.policy import EVENT_ONLY, NO_CONTENT, SPAN_AND_EVENT, SPAN_ONLY

CAPTURE_MODES = [NO_CONTENT, SPAN_ONLY, EVENT_ONLY, SPAN_AND_EVENT]
ON_SPANS = {SPAN_ONLY, SPAN_AND_EVENT}
OI_KEYS = ("input.value", "input.mime_type", "output.value", "output.mime_type")


@pytest.fixture(params=CAPTURE_MODES)
def h(request: pytest.FixtureRequest) -> Iterator[TelemetryHarness]:
    harness = TelemetryHarness(request.param)
    yield harness
    harness.close()
    harness.assert_clean()


def _on_spans(h: TelemetryHarness) -> bool:
    return h.observer.content.mode in ON_SPANS


def _metadata(span: Any) -> dict[str, Any]:
    meta = json.loads(span.attributes["metadata"])
    assert isinstance(meta, dict)
    return meta


def _values(span: Any) -> dict[str, Any]:
    return {k: span.attributes[k] for k in OI_KEYS if k in span.attributes}


def _shown(span: Any, key: str) -> Any:
    """``input``/``output``'s value, parsed by its mime type."""
    text, mime = span.attributes[f"{key}.value"], span.attributes[f"{key}.mime_type"]
    assert mime in ("application/json", "text/plain")
    return json.loads(text) if mime == "application/json" else text


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("mode", MODES)
def test_rewrite_spans_are_chains_with_the_payload_before_and_after(
        h: TelemetryHarness, mode: str, op: str) -> None:
    add_rewriters(h, mode, op, ["rewrite", "none", "bad"])
    run_call(h.pipeline, mode, op, payload_for(op), host_base(h, op, span=False).in_mode(mode))
    rewrote, unchanged, failed = (h.one(rw_name(op, i)) for i in range(3))
    for span, outcome in ((rewrote, "rewritten"), (unchanged, "unchanged"), (failed, "failed")):
        assert span.attributes["openinference.span.kind"] == "CHAIN"
        meta = _metadata(span)
        assert meta["otelmw.middleware.outcome"] == outcome
        assert meta["otelmw.middleware.kind"] == REQUEST_KIND[op]
        assert meta["otelmw.middleware.plugin"] == PLUGIN
        assert meta["otelmw.middleware.name"] == span.attributes["otelmw.middleware.name"]
        assert meta["otelmw.middleware.position"] == span.attributes[
            "otelmw.middleware.position"]
    meta = _metadata(rewrote)
    assert meta["otelmw.rewrite.source"] == "src0" and meta["otelmw.rewrite.reason"] == "why0"
    assert meta["otelmw.rewrite.changed_keys"] == ["k0"]
    assert "otelmw.rewrite.source" not in _metadata(unchanged)

    if not _on_spans(h):  # nothing that holds content without capture on spans
        assert [_values(s) for s in (rewrote, unchanged, failed)] == [{}, {}, {}]
        return
    before, after = payload_for(op), {**payload_for(op), "k0": 0}
    assert _shown(rewrote, "input") == before
    assert _shown(rewrote, "output") == after
    for span in (unchanged, failed):  # each gets the payload so far and hands it on
        assert _shown(span, "input") == after
        assert span.attributes["output.value"] == span.attributes["input.value"]
    for span in (rewrote, unchanged, failed):
        assert span.attributes["input.mime_type"] == "application/json"
        assert span.attributes["output.mime_type"] == "application/json"


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("mode", MODES)
def test_wrapper_spans_are_chains_and_a_short_circuit_a_guardrail(
        h: TelemetryHarness, mode: str, op: str) -> None:
    add_wrappers(h, mode, op, ["pass", "before", "short"])
    base = host_base(h, op, span=False).in_mode(mode)
    result = run_call(h.pipeline, mode, op, payload_for(op), base)
    assert result == short_result(op)
    passed, failed, short = (h.one(w_name(op, i)) for i in range(3))
    assert passed.attributes["openinference.span.kind"] == "CHAIN"
    assert failed.attributes["openinference.span.kind"] == "CHAIN"
    assert short.attributes["openinference.span.kind"] == "GUARDRAIL"
    for span, outcome in ((passed, "passed"), (failed, "failed_before_next"),
                          (short, "short_circuit")):
        meta = _metadata(span)
        assert meta["otelmw.middleware.outcome"] == outcome
        assert meta["otelmw.middleware.kind"] == EXEC_KIND[op]

    if not _on_spans(h):
        assert [_values(s) for s in (passed, failed, short)] == [{}, {}, {}]
        return
    for span in (passed, failed, short):
        assert _shown(span, "input") == payload_for(op)
    # What each handed back: the short circuit's answer, through the passing wrapper.
    assert _shown(short, "output") == short_result(op)
    assert _shown(passed, "output") == short_result(op)
    assert "output.value" not in failed.attributes  # it raised: nothing handed back


@pytest.mark.parametrize("mode", MODES)
def test_a_wrapper_sees_the_payload_the_outer_one_passed_on(
        h: TelemetryHarness, mode: str) -> None:
    key = PAYLOAD_KEY["tool"]

    def outer(**kw: Any) -> Any:
        return kw["next_call"]({**kw[key], "outer": True})

    async def aouter(**kw: Any) -> Any:
        return await kw["next_call"]({**kw[key], "outer": True})

    reg = h.pipeline.registry
    reg.add_middleware("tool_execution", named(outer if mode == "sync" else aouter, "w0"),
                       plugin=PLUGIN)
    reg.add_middleware("tool_execution", named(_passing(mode), "w1"), plugin=PLUGIN)
    base = host_base(h, "tool", span=False).in_mode(mode)
    run_call(h.pipeline, mode, "tool", payload_for("tool"), base)
    inner = h.one(w_name("tool", 1))
    if _on_spans(h):
        assert _shown(inner, "input") == {**payload_for("tool"),
                                                               "outer": True}
        assert _shown(inner, "output") == response_for("tool")
    else:
        assert _values(inner) == {}


def _passing(mode: str) -> Any:
    if mode == "sync":
        def cb(**kw: Any) -> Any:
            return kw["next_call"]()
        return cb

    async def acb(**kw: Any) -> Any:
        return await kw["next_call"]()
    return acb


ANSWER = {"id": "chatcmpl-2", "model": MODEL,
          "choices": [{"message": {"role": "assistant", "content": "final answer"},
                       "finish_reason": "stop"}]}
# The agent span shows the GenAI conventions' message shapes (those of the chat spans'
# gen_ai.input.messages / gen_ai.output.messages), not the provider's.
FINAL_ANSWER = [{"role": "assistant", "parts": [{"type": "text", "content": "final answer"}],
                 "finish_reason": "stop"}]


def _user_says(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "parts": [{"type": "text", "content": text}]}]


@pytest.mark.parametrize("mode", MODES)
def test_agent_span_carries_the_turns_input_and_final_answer(
        h: TelemetryHarness, mode: str) -> None:
    first = {"model": MODEL, "messages": [{"role": "user", "content": "what now?"}]}
    second = {"model": MODEL, "messages": [{"role": "user", "content": "what now?"},
                                           {"role": "tool", "content": "tool said"}]}
    with h.pipeline.turn("agent"):
        run_call(h.pipeline, mode, "llm", first, lambda r: response_for("llm"))
        run_call(h.pipeline, mode, "tool", {"q": 1}, lambda a: "tool said")
        run_call(h.pipeline, mode, "llm", second, lambda r: ANSWER)
    agent = h.one("invoke_agent agent")
    assert "openinference.span.kind" not in agent.attributes  # Phoenix maps invoke_agent
    if not _on_spans(h):
        assert _values(agent) == {}
        if h.observer.content.mode == NO_CONTENT:  # (EVENT_ONLY: the inference event has it)
            assert not any("final answer" in t for t in all_exported_text(h))
        return
    assert _shown(agent, "input") == _user_says("what now?")  # the first call's input
    assert _shown(agent, "output") == FINAL_ANSWER  # the last call's output
    assert agent.attributes["input.mime_type"] == "application/json"
    assert agent.attributes["output.mime_type"] == "application/json"


@pytest.mark.parametrize("mode", MODES)
def test_a_judge_model_called_by_a_wrapper_is_not_the_turns_input_or_answer(
        h: TelemetryHarness, mode: str) -> None:
    judge = {"model": "judge", "messages": [{"role": "user", "content": "judge this"}]}
    pipeline = h.pipeline

    def guard(**kw: Any) -> Any:
        result = kw["next_call"]()
        if kw["request"]["model"] == "judge":  # the wrapper wraps the judge's call too
            return result
        run_call(pipeline, "sync", "llm", judge, lambda r: {"choices": [
            {"message": {"role": "assistant", "content": "fine"}}]}, model="judge")
        return result

    async def aguard(**kw: Any) -> Any:
        result = await kw["next_call"]()
        if kw["request"]["model"] == "judge":
            return result
        await pipeline.arun_llm(judge, lambda r: {"choices": [
            {"message": {"role": "assistant", "content": "fine"}}]}, model="judge")
        return result

    pipeline.registry.add_middleware("llm_execution",
                                     named(guard if mode == "sync" else aguard, "judge"),
                                     plugin=PLUGIN)
    asked = {"model": MODEL, "messages": [{"role": "user", "content": "the question"}]}
    with pipeline.turn("agent"):
        run_call(pipeline, mode, "llm", asked, lambda r: ANSWER)
    assert len(h.named("chat judge")) == 1
    agent = h.one("invoke_agent agent")
    if _on_spans(h):
        assert _shown(agent, "input") == _user_says("the question")
        assert _shown(agent, "output") == FINAL_ANSWER
    else:
        assert _values(agent) == {}


def test_a_streamed_final_answer_is_the_agent_spans_output(h: TelemetryHarness) -> None:
    chunks = [{"id": "c1", "model": MODEL, "choices": [
                  {"index": 0, "delta": {"role": "assistant", "content": "final "}}]},
              {"id": "c1", "model": MODEL, "choices": [
                  {"index": 0, "delta": {"content": "answer"}, "finish_reason": "stop"}]}]

    def stream(request: Any) -> Any:
        yield from chunks

    asked = {"model": MODEL, "stream": True,
             "messages": [{"role": "user", "content": "the question"}]}
    with h.pipeline.turn("agent"):
        assert list(run_call(h.pipeline, "sync", "llm", asked, stream)) == chunks
    agent = h.one("invoke_agent agent")
    if _on_spans(h):
        assert _shown(agent, "input") == _user_says("the question")
        assert _shown(agent, "output") == FINAL_ANSWER  # assembled from the chunks
    else:
        assert _values(agent) == {}


class Interrupt(BaseException):
    """Not a middleware failure: it propagates (as KeyboardInterrupt would)."""


def test_an_interrupted_rewrite_hands_nothing_on(h: TelemetryHarness) -> None:
    def stop(**kw: Any) -> Any:
        raise Interrupt

    h.pipeline.registry.add_middleware("llm_request", named(stop, "rw0"), plugin=PLUGIN)
    with pytest.raises(Interrupt):
        run_call(h.pipeline, "sync", "llm", payload_for("llm"), lambda r: ANSWER)
    span = h.one(rw_name("llm", 0))
    assert span.attributes["openinference.span.kind"] == "CHAIN"
    assert _metadata(span)["otelmw.middleware.outcome"] == "error"
    assert "output.value" not in span.attributes
    assert ("input.value" in span.attributes) == _on_spans(h)

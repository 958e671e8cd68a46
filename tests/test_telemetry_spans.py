"""Span tree, span attributes, metrics and hook log events of ``TelemetryObserver``.

Every assertion reads what the in-memory exporters received: span names,
kinds, parent links, attributes and statuses; metric data points; log records.
Middleware-shape tests run for LLM and tool calls on the sync and async paths.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from types import SimpleNamespace
from typing import Any

import pytest
from _support.calls import (
    EXEC_KIND,
    MODEL,
    MODES,
    OPS,
    PLUGIN,
    REQUEST_KIND,
    TOOL,
    each_mode_and_op,
    named,
    run_call,
)
from _support.digest_key import keyed_hex
from _support.garbage import cyclic_garbage
from _support.telemetry import (
    TelemetryHarness,
    add_rewriters,
    add_wrappers,
    host_base,
    is_child,
    is_error,
    is_unset,
    json_attr,
    op_span_name,
    parent_id,
    payload_for,
    response_for,
    rw_name,
    short_result,
    w_name,
)
from opentelemetry.trace import SpanKind

from otelmw import NormalizedToolResult
from otelmw.telemetry import digest

pytestmark = pytest.mark.timeout(60)

EACH_MODE_AND_OP = each_mode_and_op("op")


class ProviderDownError(Exception):
    """A host-defined error: error.type must be its fully qualified name."""


PROVIDER_DOWN = f"{ProviderDownError.__module__}.ProviderDownError"


def assert_layer_attrs(span: Any, kind: str, i: int, prefix: str, outcome: str) -> None:
    attrs = span.attributes
    assert span.kind is SpanKind.INTERNAL
    assert attrs["otelmw.middleware.kind"] == kind
    assert attrs["otelmw.middleware.name"] == f"{PLUGIN}.{prefix}{i}"
    assert attrs["otelmw.middleware.plugin"] == PLUGIN
    assert attrs["otelmw.middleware.position"] == i
    assert attrs["otelmw.middleware.outcome"] == outcome


# ------------------------------------------------------------------ no middleware
@EACH_MODE_AND_OP
def test_no_middleware_yields_exactly_one_span(h: TelemetryHarness, mode: str, op: str) -> None:
    base = host_base(h, op, span=False)
    result = run_call(h.pipeline, mode, op, payload_for(op), base.in_mode(mode))
    assert result == response_for(op)
    spans = h.spans()
    assert [s.name for s in spans] == [op_span_name(op)]
    span = spans[0]
    assert span.parent is None
    assert is_unset(span)
    if op == "llm":
        assert span.kind is SpanKind.CLIENT
        assert span.attributes["gen_ai.operation.name"] == "chat"
        assert span.attributes["gen_ai.request.model"] == MODEL
        assert span.attributes["gen_ai.provider.name"] == "openai"
    else:
        assert span.kind is SpanKind.INTERNAL
        assert span.attributes["gen_ai.operation.name"] == "execute_tool"
        assert span.attributes["gen_ai.tool.name"] == TOOL
        assert span.attributes["gen_ai.tool.call.id"] == "call-1"
        assert span.attributes["gen_ai.tool.type"] == "function"
    assert "error.type" not in span.attributes


@EACH_MODE_AND_OP
def test_base_call_span_is_child_of_operation_without_middleware(
        h: TelemetryHarness, mode: str, op: str) -> None:
    run_call(h.pipeline, mode, op, payload_for(op), host_base(h, op).in_mode(mode))
    assert is_child(h.one("base"), h.one(op_span_name(op)))


# ------------------------------------------------------------------ request rewrites
@pytest.mark.parametrize("n", [1, 3])
@EACH_MODE_AND_OP
def test_rewrite_spans_are_children_of_operation_span(
        h: TelemetryHarness, mode: str, op: str, n: int) -> None:
    add_rewriters(h, mode, op, ["rewrite"] * n)
    base = host_base(h, op, span=False)
    run_call(h.pipeline, mode, op, payload_for(op), base.in_mode(mode))
    spans = h.spans()
    assert len(spans) == n + 1
    top = h.one(op_span_name(op))
    assert top.parent is None
    rewrites = [h.one(rw_name(op, i)) for i in range(n)]
    for i, span in enumerate(rewrites):
        assert is_child(span, top)
        assert_layer_attrs(span, REQUEST_KIND[op], i, "rw", "rewritten")
        assert span.attributes["otelmw.rewrite.source"] == f"src{i}"
        assert span.attributes["otelmw.rewrite.reason"] == f"why{i}"
        assert span.attributes["otelmw.rewrite.changed_keys"] == (f"k{i}",)
        assert is_unset(span)
    # Sequential siblings, in registration order.
    for earlier, later in itertools.pairwise(rewrites):
        assert earlier.end_time <= later.start_time
    expected = {**payload_for(op), **{f"k{i}": i for i in range(n)}}
    assert base.calls == [expected]


@EACH_MODE_AND_OP
def test_rewrite_outcomes_rewritten_unchanged_failed(
        h: TelemetryHarness, mode: str, op: str) -> None:
    add_rewriters(h, mode, op, ["none", "rewrite", "raise", "bad"])
    base = host_base(h, op, span=False)
    run_call(h.pipeline, mode, op, payload_for(op), base.in_mode(mode))
    top = h.one(op_span_name(op))
    unchanged, rewritten, raised, bad = (h.one(rw_name(op, i)) for i in range(4))
    for span in (unchanged, rewritten, raised, bad):
        assert is_child(span, top)

    assert_layer_attrs(unchanged, REQUEST_KIND[op], 0, "rw", "unchanged")
    assert is_unset(unchanged)
    for key in ("otelmw.rewrite.source", "otelmw.rewrite.changed_keys", "error.type"):
        assert key not in unchanged.attributes

    assert_layer_attrs(rewritten, REQUEST_KIND[op], 1, "rw", "rewritten")
    assert rewritten.attributes["otelmw.rewrite.source"] == "src1"
    assert rewritten.attributes["otelmw.rewrite.reason"] == "why1"
    assert rewritten.attributes["otelmw.rewrite.changed_keys"] == ("k1",)

    assert_layer_attrs(raised, REQUEST_KIND[op], 2, "rw", "failed")
    assert raised.attributes["error.type"] == "builtins.ValueError"
    assert is_error(raised)
    assert "otelmw.rewrite.source" not in raised.attributes

    assert_layer_attrs(bad, REQUEST_KIND[op], 3, "rw", "failed")
    assert bad.attributes["error.type"] == "bad_return_shape"

    # Fail-open: only the valid rewrite reached the base call; the call succeeded.
    assert base.calls == [{**payload_for(op), "k1": 1}]
    assert is_unset(top)


# ------------------------------------------------------------------ execution wrappers
@pytest.mark.parametrize("n", [1, 3])
@EACH_MODE_AND_OP
def test_execution_wrapper_spans_nest_outermost_first(
        h: TelemetryHarness, mode: str, op: str, n: int) -> None:
    add_wrappers(h, mode, op, ["pass"] * n)
    result = run_call(h.pipeline, mode, op, payload_for(op), host_base(h, op).in_mode(mode))
    assert result == response_for(op)
    spans = h.spans()
    assert len(spans) == n + 2  # operation + n wrappers + base
    top = h.one(op_span_name(op))
    chain = [top] + [h.one(w_name(op, i)) for i in range(n)] + [h.one("base")]
    for parent, child in itertools.pairwise(chain):
        assert is_child(child, parent), (child.name, parent.name)
    for i in range(n):
        span = h.one(w_name(op, i))
        assert_layer_attrs(span, EXEC_KIND[op], i, "w", "passed")
        assert is_unset(span)
    assert len({s.context.trace_id for s in spans}) == 1


@EACH_MODE_AND_OP
def test_rewrites_and_wrappers_together_three_each(
        h: TelemetryHarness, mode: str, op: str) -> None:
    add_rewriters(h, mode, op, ["rewrite"] * 3)
    add_wrappers(h, mode, op, ["pass"] * 3)
    run_call(h.pipeline, mode, op, payload_for(op), host_base(h, op).in_mode(mode))
    top = h.one(op_span_name(op))
    assert len(h.spans()) == 8
    for i in range(3):
        assert is_child(h.one(rw_name(op, i)), top)
    assert is_child(h.one(w_name(op, 0)), top)
    assert is_child(h.one(w_name(op, 1)), h.one(w_name(op, 0)))
    assert is_child(h.one(w_name(op, 2)), h.one(w_name(op, 1)))
    assert is_child(h.one("base"), h.one(w_name(op, 2)))
    # Rewrites finish before the first wrapper starts.
    assert h.one(rw_name(op, 2)).end_time <= h.one(w_name(op, 0)).start_time


@EACH_MODE_AND_OP
def test_wrapper_short_circuit(h: TelemetryHarness, mode: str, op: str) -> None:
    add_wrappers(h, mode, op, ["pass", "short", "pass"])
    base = host_base(h, op)
    result = run_call(h.pipeline, mode, op, payload_for(op), base.in_mode(mode))
    assert result == short_result(op)
    assert base.calls == []
    assert h.named("base") == [] and h.named(w_name(op, 2)) == []
    top, w0, w1 = h.one(op_span_name(op)), h.one(w_name(op, 0)), h.one(w_name(op, 1))
    assert len(h.spans()) == 3
    assert is_child(w0, top) and is_child(w1, w0)
    assert_layer_attrs(w0, EXEC_KIND[op], 0, "w", "passed")
    assert_layer_attrs(w1, EXEC_KIND[op], 1, "w", "short_circuit")
    assert is_unset(w1) and is_unset(top)


@EACH_MODE_AND_OP
def test_wrapper_failed_before_next_makes_next_a_sibling(
        h: TelemetryHarness, mode: str, op: str) -> None:
    add_wrappers(h, mode, op, ["pass", "before", "pass"])
    result = run_call(h.pipeline, mode, op, payload_for(op), host_base(h, op).in_mode(mode))
    assert result == response_for(op)
    top = h.one(op_span_name(op))
    w0, w1, w2 = (h.one(w_name(op, i)) for i in range(3))
    assert is_child(w0, top)
    assert is_child(w1, w0)
    assert is_child(w2, w0)  # sibling of the failed wrapper, not its child
    assert not is_child(w2, w1)
    assert is_child(h.one("base"), w2)
    assert w1.end_time <= w2.start_time
    assert_layer_attrs(w1, EXEC_KIND[op], 1, "w", "failed_before_next")
    assert w1.attributes["error.type"] == "builtins.ValueError"
    assert is_error(w1)
    assert_layer_attrs(w2, EXEC_KIND[op], 2, "w", "passed")
    assert_layer_attrs(w0, EXEC_KIND[op], 0, "w", "passed")
    assert is_unset(top)


@EACH_MODE_AND_OP
def test_outermost_wrapper_failed_before_next_sibling_under_operation(
        h: TelemetryHarness, mode: str, op: str) -> None:
    add_wrappers(h, mode, op, ["before", "pass"])
    run_call(h.pipeline, mode, op, payload_for(op), host_base(h, op).in_mode(mode))
    top = h.one(op_span_name(op))
    w0, w1 = h.one(w_name(op, 0)), h.one(w_name(op, 1))
    assert is_child(w0, top) and is_child(w1, top)
    assert is_child(h.one("base"), w1)


@EACH_MODE_AND_OP
def test_wrapper_failed_after_next_keeps_result(
        h: TelemetryHarness, mode: str, op: str) -> None:
    add_wrappers(h, mode, op, ["pass", "after"])
    result = run_call(h.pipeline, mode, op, payload_for(op), host_base(h, op).in_mode(mode))
    assert result == response_for(op)
    top, w0, w1 = h.one(op_span_name(op)), h.one(w_name(op, 0)), h.one(w_name(op, 1))
    assert is_child(w1, w0) and is_child(h.one("base"), w1)
    assert_layer_attrs(w1, EXEC_KIND[op], 1, "w", "failed_after_next")
    assert w1.attributes["error.type"] == "builtins.KeyError"
    assert is_error(w1)
    assert_layer_attrs(w0, EXEC_KIND[op], 0, "w", "passed")
    assert is_unset(top)


@EACH_MODE_AND_OP
def test_wrapper_error_outcome_when_downstream_raises(
        h: TelemetryHarness, mode: str, op: str) -> None:
    add_wrappers(h, mode, op, ["pass", "pass"])
    base = host_base(h, op, raises=ProviderDownError("provider down"))
    if op == "llm":
        with pytest.raises(ProviderDownError):
            run_call(h.pipeline, mode, op, payload_for(op), base.in_mode(mode))
    else:
        assert run_call(h.pipeline, mode, op, payload_for(op), base.in_mode(mode)) == (
            "Tool Error: provider down")
    top, w0, w1 = h.one(op_span_name(op)), h.one(w_name(op, 0)), h.one(w_name(op, 1))
    for i, span in enumerate((w0, w1)):
        assert_layer_attrs(span, EXEC_KIND[op], i, "w", "error")
        assert span.attributes["error.type"] == PROVIDER_DOWN
        assert is_error(span)
    assert is_child(h.one("base"), w1)
    assert is_error(top)
    assert top.attributes["error.type"] == PROVIDER_DOWN
    if op == "tool":
        assert top.attributes["otelmw.result.success"] is False
        assert top.attributes["otelmw.result.error_message"] == "provider down"


@EACH_MODE_AND_OP
def test_base_error_without_middleware_sets_error_type(
        h: TelemetryHarness, mode: str, op: str) -> None:
    base = host_base(h, op, span=False, raises=ValueError("nope"))
    if op == "llm":
        with pytest.raises(ValueError):
            run_call(h.pipeline, mode, op, payload_for(op), base.in_mode(mode))
    else:
        with pytest.raises(ValueError):
            run_call(h.pipeline, mode, op, payload_for(op), base.in_mode(mode), raise_errors=True)
    [span] = h.spans()
    assert is_error(span)
    assert span.attributes["error.type"] == "builtins.ValueError"
    assert span.status.description == "nope"


# ------------------------------------------------------------------ turns
def _turn_body_sync(h: TelemetryHarness) -> None:
    for op in OPS:
        run_call(h.pipeline, "sync", op, payload_for(op), host_base(h, op))


async def _turn_body_async(h: TelemetryHarness) -> None:
    p = h.pipeline
    await p.arun_llm(payload_for("llm"), host_base(h, "llm").in_mode("async"), model=MODEL)
    await p.arun_tool(TOOL, payload_for("tool"), host_base(h, "tool").in_mode("async"))


@pytest.mark.parametrize("mode", MODES)
def test_turn_is_parent_of_everything_one_trace(h: TelemetryHarness, mode: str) -> None:
    for op in OPS:
        add_rewriters(h, mode, op, ["rewrite"])
        add_wrappers(h, mode, op, ["pass"])
    if mode == "sync":
        with h.pipeline.turn("agent", session_id="sess-1") as turn:
            _turn_body_sync(h)
    else:
        async def main() -> Any:
            async with h.pipeline.turn("agent", session_id="sess-1") as t:
                await _turn_body_async(h)
            return t
        turn = asyncio.run(main())
    spans = h.spans()
    assert len(spans) == 1 + 2 * 4  # turn + (op, rewrite, wrapper, base) x 2
    agent = h.one("invoke_agent agent")
    assert agent.parent is None
    assert agent.kind is SpanKind.INTERNAL
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.agent.name"] == "agent"
    assert agent.attributes["gen_ai.conversation.id"] == "sess-1"
    assert agent.attributes["otelmw.turn.id"] == turn.fields["turn_id"]
    assert is_unset(agent)
    assert {s.context.trace_id for s in spans} == {agent.context.trace_id}
    chat, tool = h.one(f"chat {MODEL}"), h.one(f"execute_tool {TOOL}")
    assert is_child(chat, agent) and is_child(tool, agent)
    for op, top in (("llm", chat), ("tool", tool)):
        assert is_child(h.one(rw_name(op, 0)), top)
        assert is_child(h.one(w_name(op, 0)), top)
        assert top.attributes["otelmw.turn.id"] == turn.fields["turn_id"]
        assert top.attributes["gen_ai.conversation.id"] == "sess-1"
    # Everything but the turn has a parent inside the exported set: no orphans.
    ids = {s.context.span_id for s in spans}
    assert all(parent_id(s) in ids for s in spans if s is not agent)
    # The tool call knows the API request that produced it.
    assert tool.attributes["otelmw.api_request.id"] == chat.attributes["otelmw.api_request.id"]


@pytest.mark.parametrize("mode", MODES)
def test_turn_mark_failed_is_error(h: TelemetryHarness, mode: str) -> None:
    if mode == "sync":
        with h.pipeline.turn("agent") as turn:
            turn.mark_failed()
    else:
        async def main() -> None:
            async with h.pipeline.turn("agent") as t:
                t.mark_failed()
        asyncio.run(main())
    agent = h.one("invoke_agent agent")
    assert is_error(agent)
    assert agent.attributes["error.type"] == "turn_failed"
    [point] = h.points("gen_ai.invoke_agent.duration")
    assert point.count == 1
    assert point.attributes == {"gen_ai.operation.name": "invoke_agent",
                                "gen_ai.agent.name": "agent", "error.type": "turn_failed"}


def test_turn_exception_is_error_with_type(h: TelemetryHarness) -> None:
    with pytest.raises(ProviderDownError), h.pipeline.turn("agent"):
        raise ProviderDownError("x")
    agent = h.one("invoke_agent agent")
    assert is_error(agent)
    assert agent.attributes["error.type"] == PROVIDER_DOWN


def test_turn_success_metric(h: TelemetryHarness) -> None:
    with h.pipeline.turn("agent"):
        pass
    [point] = h.points("gen_ai.invoke_agent.duration")
    assert point.count == 1
    assert point.attributes == {"gen_ai.operation.name": "invoke_agent",
                                "gen_ai.agent.name": "agent"}


# ------------------------------------------------------------------ chat attributes
OPENAI_RESPONSE = {
    "id": "chatcmpl-abc", "object": "chat.completion", "model": "gpt-test-2024-08-06",
    "choices": [{"index": 0, "finish_reason": "stop"}, {"index": 1, "finish_reason": "length"}],
    "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
}
ANTHROPIC_RESPONSE = {
    "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test-1",
    "stop_reason": "end_turn", "content": [{"type": "text", "text": "hello"}],
    "usage": {"input_tokens": 20, "output_tokens": 5},
}


def _chat(h: TelemetryHarness, mode: str, response: Any, provider: str) -> Any:
    request = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
               "temperature": 0.5, "max_tokens": 64}

    def execute(req: Any) -> Any:
        return response

    return run_call(h.pipeline, mode, "llm", request, execute, provider=provider,
                    server_address="api.example.com", server_port=8443,
                    api_mode="chat_completions", api_request_id="req-fixed")


@pytest.mark.parametrize("mode", MODES)
def test_chat_attributes_from_openai_dict(h: TelemetryHarness, mode: str) -> None:
    assert _chat(h, mode, OPENAI_RESPONSE, "openai") is OPENAI_RESPONSE
    span = h.one(f"chat {MODEL}")
    assert span.kind is SpanKind.CLIENT
    assert dict(span.attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": MODEL,
        "gen_ai.request.temperature": 0.5,
        "gen_ai.request.max_tokens": 64,
        "gen_ai.response.id": "chatcmpl-abc",
        "gen_ai.response.model": "gpt-test-2024-08-06",
        "gen_ai.response.finish_reasons": ("stop", "length"),
        "gen_ai.usage.input_tokens": 11,
        "gen_ai.usage.output_tokens": 7,
        "server.address": "api.example.com",
        "server.port": 8443,
        "otelmw.api_request.id": "req-fixed",
        "otelmw.api_mode": "chat_completions",
        "openai.api.type": "chat_completions",  # the conventions' name for the API called
    }
    assert is_unset(span)


@pytest.mark.parametrize("mode", MODES)
def test_chat_attributes_from_anthropic_dict(h: TelemetryHarness, mode: str) -> None:
    _chat(h, mode, ANTHROPIC_RESPONSE, "anthropic")
    attrs = h.one(f"chat {MODEL}").attributes
    assert attrs["gen_ai.provider.name"] == "anthropic"
    assert attrs["gen_ai.response.id"] == "msg_01"
    assert attrs["gen_ai.response.model"] == "claude-test-1"
    # Anthropic's stop_reason in the conventions' values (end_turn is "stop"), as the
    # official Anthropic instrumentation maps it.
    assert attrs["gen_ai.response.finish_reasons"] == ("stop",)
    assert attrs["gen_ai.usage.input_tokens"] == 20
    assert attrs["gen_ai.usage.output_tokens"] == 5
    assert attrs["server.address"] == "api.example.com"
    assert attrs["server.port"] == 8443


def test_chat_attributes_from_sdk_object_and_cache_tokens(h: TelemetryHarness) -> None:
    usage = SimpleNamespace(input_tokens=20, output_tokens=5, cache_read_input_tokens=30,
                            cache_creation_input_tokens=2)
    response = SimpleNamespace(id="msg_02", model="claude-test-2", stop_reason="tool_use",
                               usage=usage)
    _chat(h, "sync", response, "anthropic")
    attrs = h.one(f"chat {MODEL}").attributes
    assert attrs["gen_ai.response.id"] == "msg_02"
    assert attrs["gen_ai.response.finish_reasons"] == ("tool_call",)  # tool_use, mapped
    assert attrs["gen_ai.usage.input_tokens"] == 52  # input + cache read + cache write
    assert attrs["gen_ai.usage.output_tokens"] == 5
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 30
    assert attrs["gen_ai.usage.cache_creation.input_tokens"] == 2


@pytest.mark.parametrize("mode", MODES)
def test_chat_metrics_recorded_once_per_call(h: TelemetryHarness, mode: str) -> None:
    _chat(h, mode, OPENAI_RESPONSE, "openai")
    base_attrs = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                  "gen_ai.request.model": MODEL, "gen_ai.response.model": "gpt-test-2024-08-06",
                  "server.address": "api.example.com", "server.port": 8443}
    [duration] = h.points("gen_ai.client.operation.duration")
    assert duration.count == 1
    assert dict(duration.attributes) == base_attrs
    assert duration.sum >= 0
    usage = {p.attributes["gen_ai.token.type"]: p for p in h.points("gen_ai.client.token.usage")}
    assert set(usage) == {"input", "output"}
    assert usage["input"].count == 1 and usage["input"].sum == 11
    assert usage["output"].count == 1 and usage["output"].sum == 7
    assert dict(usage["input"].attributes) == {**base_attrs, "gen_ai.token.type": "input"}


def test_chat_error_metric_has_error_type_and_no_tokens(h: TelemetryHarness) -> None:
    def execute(req: Any) -> Any:
        raise ProviderDownError("503")

    with pytest.raises(ProviderDownError):
        h.pipeline.run_llm({"model": MODEL}, execute, provider="openai")
    [duration] = h.points("gen_ai.client.operation.duration")
    assert duration.attributes["error.type"] == PROVIDER_DOWN
    assert h.points("gen_ai.client.token.usage") == []


# ------------------------------------------------------------------ other metrics
def _by(points: list[Any], *keys: str) -> dict[tuple[Any, ...], Any]:
    return {tuple(p.attributes.get(k) for k in keys): p for p in points}


@EACH_MODE_AND_OP
def test_middleware_metrics(h: TelemetryHarness, mode: str, op: str) -> None:
    add_rewriters(h, mode, op, ["rewrite", "raise"])
    add_wrappers(h, mode, op, ["before", "pass"])
    run_call(h.pipeline, mode, op, payload_for(op), host_base(h, op).in_mode(mode))
    durations = _by(h.points("otelmw.middleware.duration"), "otelmw.middleware.name",
                    "otelmw.middleware.outcome")
    assert set(durations) == {("x.rw0", "rewritten"), ("x.rw1", "failed"),
                              ("x.w0", "failed_before_next"), ("x.w1", "passed")}
    assert all(p.count == 1 for p in durations.values())
    assert durations[("x.w1", "passed")].attributes["otelmw.middleware.kind"] == EXEC_KIND[op]
    [rewrites] = h.points("otelmw.rewrites")
    assert rewrites.value == 1
    assert dict(rewrites.attributes) == {"otelmw.rewrite.source": "src0",
                                         "otelmw.middleware.kind": REQUEST_KIND[op]}
    failures = _by(h.points("otelmw.middleware.failures"), "otelmw.middleware.kind",
                   "otelmw.middleware.name")
    assert set(failures) == {(REQUEST_KIND[op], "x.rw1"), (EXEC_KIND[op], "x.w0")}
    assert all(p.value == 1 for p in failures.values())


def test_no_middleware_metric_points_without_middleware(h: TelemetryHarness) -> None:
    run_call(h.pipeline, "sync", "llm", payload_for("llm"), host_base(h, "llm"))
    names = set(h.metrics())
    assert "otelmw.middleware.duration" not in names
    assert "otelmw.rewrites" not in names
    assert "otelmw.middleware.failures" not in names


@pytest.mark.parametrize("mode", MODES)
def test_tool_metrics_results_and_duration(h: TelemetryHarness, mode: str) -> None:
    run_call(h.pipeline, mode, "tool", {"q": 1}, lambda args: "ok")

    def boom(args: Any) -> Any:
        raise ValueError("bad tool")

    assert run_call(h.pipeline, mode, "tool", {"q": 2}, boom) == "Tool Error: bad tool"
    results = _by(h.points("otelmw.tool.results"), "otelmw.result.success")
    assert set(results) == {(True,), (False,)}
    assert results[(True,)].value == 1 and results[(False,)].value == 1
    assert results[(True,)].attributes["gen_ai.tool.name"] == TOOL
    assert results[(True,)].attributes["otelmw.runtime.id"] == "native"
    durations = _by(h.points("gen_ai.execute_tool.duration"), "error.type")
    assert set(durations) == {(None,), ("builtins.ValueError",)}
    assert all(p.count == 1 for p in durations.values())
    assert durations[(None,)].attributes["gen_ai.tool.name"] == TOOL


class _RaisingNormalizer:
    runtime_id = "rt"

    def normalize(self, result: Any, tool_name: str, ctx: Any) -> Any:
        raise RuntimeError("normalizer broke")


def test_normalize_failure_metric(h: TelemetryHarness) -> None:
    h.pipeline.normalizers.register("rt", _RaisingNormalizer())
    assert h.pipeline.run_tool(TOOL, {"a": 1}, lambda a: "raw", runtime_id="rt") == "raw"
    [point] = h.points("otelmw.normalize.failures")
    assert point.value == 1
    assert dict(point.attributes) == {"otelmw.runtime.id": "rt"}
    assert h.one(f"execute_tool {TOOL}").attributes["otelmw.runtime.id"] == "rt"


@pytest.mark.parametrize("mode", MODES)
def test_hook_failure_metric_and_log_count(h: TelemetryHarness, mode: str) -> None:
    def bad_hook(**kw: Any) -> None:
        raise RuntimeError("hook broke")

    h.pipeline.registry.add_hook("pre_api_request", named(bad_hook, "bad_hook"), plugin=PLUGIN)
    run_call(h.pipeline, mode, "llm", payload_for("llm"),
             host_base(h, "llm", span=False).in_mode(mode))
    [point] = h.points("otelmw.hook.failures")
    assert point.value == 1
    assert dict(point.attributes) == {"otelmw.hook.name": "pre_api_request",
                                      "otelmw.middleware.name": "x.bad_hook"}
    [log] = h.logs_named("otelmw.hook.pre_api_request")
    assert log.attributes["otelmw.hook.failures"] == 1
    assert is_unset(h.one(f"chat {MODEL}"))


# ------------------------------------------------------------------ tool span
def canonical_json_digest(value: Any) -> tuple[str, int]:
    data = json.dumps(value, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")
    return "sha256-keyed:" + keyed_hex(data), len(data)


@pytest.mark.parametrize("mode", MODES)
def test_tool_span_result_attributes_for_dict_result(h: TelemetryHarness, mode: str) -> None:
    raw = {"temp": 21.5, "city": "Zürich", "tags": ["a", "b"], "ok": True}
    assert run_call(h.pipeline, mode, "tool", {"q": "x"}, lambda a: raw) is raw
    attrs = h.one(f"execute_tool {TOOL}").attributes
    expected_digest, expected_size = canonical_json_digest(raw)
    assert attrs["otelmw.result.raw.digest"] == expected_digest == digest(raw)[0]
    assert attrs["otelmw.result.raw.size"] == expected_size
    assert attrs["otelmw.result.raw.type"] == "dict"
    assert attrs["otelmw.result.content.digest"] == expected_digest
    assert attrs["otelmw.result.success"] is True
    assert attrs["otelmw.result.status"] == "ok"
    assert isinstance(attrs["otelmw.result.execution_time_ms"], float)
    assert attrs["otelmw.result.execution_time_ms"] >= 0.0
    assert "otelmw.result.error_message" not in attrs
    assert "error.type" not in attrs


class _MetaNormalizer:
    runtime_id = "meta_rt"

    def normalize(self, result: Any, tool_name: str, ctx: Any) -> NormalizedToolResult:
        metadata: dict[str, Any] = {
            "k" * 100: "long key", "int": 3, "flag": True, "ratio": 0.25, "text": "t" * 1000,
            "nested": {"a": 1}, "listed": [1, 2], "none": None,
        }
        metadata.update({f"m{i:02d}": i for i in range(40)})
        return NormalizedToolResult(content="normalized text", success=True,
                                    metadata=metadata, execution_time_ms=12.5,
                                    raw_result=result)


def test_tool_span_metadata_primitive_bounded(h: TelemetryHarness) -> None:
    raw = b"\x00\xffbinary payload"
    h.pipeline.normalizers.register("meta_rt", _MetaNormalizer())
    out = h.pipeline.run_tool(TOOL, {}, lambda a: raw, runtime_id="meta_rt")
    assert out == "normalized text"
    attrs = h.one(f"execute_tool {TOOL}").attributes
    prefix = "otelmw.result.metadata."
    meta = {k[len(prefix):]: v for k, v in attrs.items() if k.startswith(prefix)}
    assert len(meta) == 32
    assert meta["k" * 64] == "long key"
    assert meta["int"] == 3 and meta["flag"] is True and meta["ratio"] == 0.25
    assert meta["text"] == "t" * 256
    for dropped in ("nested", "listed", "none"):
        assert dropped not in meta
    assert "m00" in meta and "m26" in meta and "m27" not in meta  # 5 + 27 = 32 keys kept
    assert attrs["otelmw.result.execution_time_ms"] == 12.5
    assert attrs["otelmw.result.raw.digest"] == (
        "sha256-keyed:" + keyed_hex(raw)) == digest(raw)[0]
    assert attrs["otelmw.result.raw.size"] == len(raw)
    assert attrs["otelmw.result.raw.type"] == "bytes"
    assert attrs["otelmw.result.content.digest"] == (
        "sha256-keyed:" + keyed_hex(b"normalized text"))


@pytest.mark.parametrize("mode", MODES)
def test_tool_span_failure_attributes(h: TelemetryHarness, mode: str) -> None:
    exc = ProviderDownError("disk on fire")

    def boom(args: Any) -> Any:
        raise exc

    assert run_call(h.pipeline, mode, "tool", {"q": 1}, boom) == "Tool Error: disk on fire"
    span = h.one(f"execute_tool {TOOL}")
    attrs = span.attributes
    assert is_error(span)
    assert attrs["error.type"] == PROVIDER_DOWN
    assert attrs["otelmw.result.success"] is False
    assert attrs["otelmw.result.status"] == "error"
    assert attrs["otelmw.result.error_message"] == "disk on fire"
    assert attrs["otelmw.result.raw.type"] == PROVIDER_DOWN
    expected = "sha256-keyed:" + keyed_hex(f"{PROVIDER_DOWN}: disk on fire".encode())
    assert attrs["otelmw.result.raw.digest"] == expected == digest(exc)[0]
    assert attrs["otelmw.result.metadata.error.type"] == PROVIDER_DOWN


def test_tool_span_blocked_is_not_an_error(h: TelemetryHarness) -> None:
    h.pipeline.registry.add_hook(
        "pre_tool_call", lambda **kw: {"action": "block", "message": "no"}, plugin=PLUGIN)
    assert h.pipeline.run_tool(TOOL, {}, lambda a: "never") == "no"
    span = h.one(f"execute_tool {TOOL}")
    assert is_unset(span)
    assert span.attributes["otelmw.result.status"] == "blocked"
    assert span.attributes["otelmw.result.success"] is False


# ------------------------------------------------------------------ hook log events
def _common_log_checks(log: Any, span: Any, hook: str) -> None:
    assert log.event_name == f"otelmw.hook.{hook}"
    assert log.trace_id == span.context.trace_id
    assert log.span_id == span.context.span_id
    attrs = log.attributes
    assert attrs["otelmw.hook.name"] == hook
    assert attrs["otelmw.schema.telemetry"] == "otelmw.observer.v1"
    assert attrs["otelmw.schema.middleware"] == "otelmw.middleware.v1"
    assert attrs["otelmw.hook.failures"] == 0
    assert attrs["gen_ai.conversation.id"] == "sess-9"
    assert attrs["otelmw.turn.id"] == span.attributes["otelmw.turn.id"]
    assert log.body is None  # NO_CONTENT: digests only


@pytest.mark.parametrize("mode", MODES)
def test_hook_log_events_llm(h: TelemetryHarness, mode: str) -> None:
    add_rewriters(h, mode, "llm", ["rewrite"])
    seen: list[str] = []
    for hook in ("pre_api_request", "post_api_request"):
        h.pipeline.registry.add_hook(hook, lambda hook=hook, **kw: seen.append(hook),
                                     plugin=PLUGIN)
    with h.pipeline.turn("agent", session_id="sess-9"):
        run_call(h.pipeline, mode, "llm", payload_for("llm"),
                 host_base(h, "llm", span=False).in_mode(mode))
    assert seen == ["pre_api_request", "post_api_request"]
    chat = h.one(f"chat {MODEL}")
    logs = h.logs()
    assert [r.event_name for r in logs] == ["otelmw.hook.pre_api_request",
                                            "otelmw.hook.post_api_request"]
    effective = {**payload_for("llm"), "k0": 0}
    for log, hook in zip(logs, ("pre_api_request", "post_api_request"), strict=True):
        _common_log_checks(log, chat, hook)
        attrs = log.attributes
        assert attrs["otelmw.api_request.id"] == chat.attributes["otelmw.api_request.id"]
        assert attrs["gen_ai.request.model"] == MODEL
        assert attrs["otelmw.request.digest"] == digest(effective)[0]
        assert attrs["otelmw.request.digest"] == canonical_json_digest(effective)[0]
        assert json_attr(attrs["otelmw.middleware_trace"]) == [
            {"kind": "llm_request", "middleware": "x.rw0", "plugin": "x", "source": "src0",
             "reason": "why0"}]


def noop_hooks(h: TelemetryHarness, *hooks: str) -> None:
    for hook in hooks:
        h.pipeline.registry.add_hook(hook, lambda **kw: None, plugin=PLUGIN)


@pytest.mark.parametrize("mode", MODES)
def test_hook_log_event_api_request_error(h: TelemetryHarness, mode: str) -> None:
    noop_hooks(h, "pre_api_request", "api_request_error")
    with pytest.raises(ProviderDownError), h.pipeline.turn("agent", session_id="sess-9"):
        run_call(h.pipeline, mode, "llm", payload_for("llm"),
                 host_base(h, "llm", span=False, raises=ProviderDownError("x")).in_mode(mode))
    chat = h.one(f"chat {MODEL}")
    # The GenAI conventions record a failed client operation as the
    # gen_ai.client.operation.exception event (recommended: every mode), after the hooks.
    assert [r.event_name for r in h.logs()] == ["otelmw.hook.pre_api_request",
                                                "otelmw.hook.api_request_error",
                                                "gen_ai.client.operation.exception"]
    log = h.logs_named("otelmw.hook.api_request_error")[0]
    _common_log_checks(log, chat, "api_request_error")
    assert log.attributes["error.type"] == PROVIDER_DOWN
    assert "otelmw.middleware_trace" not in log.attributes  # no rewrite happened


@pytest.mark.parametrize("mode", MODES)
def test_hook_log_events_tool(h: TelemetryHarness, mode: str) -> None:
    args = {"city": "Oslo"}
    noop_hooks(h, "pre_tool_call", "post_tool_call", "transform_tool_result")
    with h.pipeline.turn("agent", session_id="sess-9"):
        run_call(h.pipeline, mode, "tool", args, lambda a: {"temp": 3})
    tool = h.one(f"execute_tool {TOOL}")
    hooks = ("pre_tool_call", "post_tool_call", "transform_tool_result")
    logs = h.logs()
    assert [r.event_name for r in logs] == [f"otelmw.hook.{x}" for x in hooks]
    for log, hook in zip(logs, hooks, strict=True):
        _common_log_checks(log, tool, hook)
        attrs = log.attributes
        assert attrs["gen_ai.tool.name"] == TOOL
        assert attrs["gen_ai.tool.call.id"] == "call-1"
        assert attrs["otelmw.tool.args.digest"] == canonical_json_digest(args)[0]
        if hook != "pre_tool_call":
            assert attrs["otelmw.result.success"] is True
            assert attrs["otelmw.result.status"] == "ok"
            assert attrs["otelmw.result.raw.digest"] == canonical_json_digest({"temp": 3})[0]


def test_hook_log_for_blocked_tool_call(h: TelemetryHarness) -> None:
    h.pipeline.registry.add_hook(
        "pre_tool_call", lambda **kw: {"action": "block", "message": "denied"}, plugin=PLUGIN)
    noop_hooks(h, "post_tool_call")
    h.pipeline.run_tool(TOOL, {}, lambda a: "never")
    [post] = h.logs_named("otelmw.hook.post_tool_call")
    assert post.attributes["otelmw.result.status"] == "blocked"
    assert post.attributes["error.type"] == "plugin_block"


def test_hook_events_registered_by_default_only_for_hook_points_with_callbacks(
        h: TelemetryHarness) -> None:
    assert h.observer.hook_events == "registered"
    noop_hooks(h, "post_tool_call")
    h.pipeline.run_tool(TOOL, {}, lambda a: "ok")
    h.pipeline.run_llm({"model": MODEL}, lambda r: {"id": "r"})
    assert [r.event_name for r in h.logs()] == ["otelmw.hook.post_tool_call"]


@pytest.mark.parametrize("mode", MODES)
def test_hook_events_all_every_hook_point(h: TelemetryHarness, mode: str) -> None:
    h.observer.hook_events = "all"
    run_call(h.pipeline, mode, "llm", payload_for("llm"), lambda r: {"id": "r"})
    run_call(h.pipeline, mode, "tool", {}, lambda a: "ok")
    chat, tool = h.one(f"chat {MODEL}"), h.one(f"execute_tool {TOOL}")
    logs = h.logs()
    assert [r.event_name for r in logs] == [
        "otelmw.hook.pre_api_request", "otelmw.hook.post_api_request",
        "otelmw.hook.pre_tool_call", "otelmw.hook.post_tool_call",
        "otelmw.hook.transform_tool_result"]
    for rec in logs:
        span = chat if "api_request" in rec.event_name else tool
        assert (rec.trace_id, rec.span_id) == (span.context.trace_id, span.context.span_id)


def test_hook_events_none(h: TelemetryHarness) -> None:
    h.observer.hook_events = "none"
    noop_hooks(h, "pre_api_request", "pre_tool_call")
    h.pipeline.run_llm({"model": MODEL}, lambda r: {"id": "r"})
    h.pipeline.run_tool(TOOL, {}, lambda a: "ok")
    assert h.logs() == []


def test_hook_events_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    from otelmw.telemetry.setup.observer import TelemetryObserver

    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    monkeypatch.delenv("OTELMW_CONTENT_MAX_LENGTH", raising=False)
    monkeypatch.setenv("OTELMW_HOOK_EVENTS", "ALL")
    harness = TelemetryHarness()
    try:
        obs = TelemetryObserver(harness.tracer_provider, harness.meter_provider,
                                harness.logger_provider, content=None)
        assert obs.hook_events == "all"
        monkeypatch.setenv("OTELMW_HOOK_EVENTS", "registred")
        with pytest.raises(ValueError, match="OTELMW_HOOK_EVENTS"):
            TelemetryObserver(harness.tracer_provider, harness.meter_provider,
                              harness.logger_provider, content=None)
    finally:
        harness.close()


@pytest.mark.parametrize("mode", MODES)
def test_chat_attributes_do_not_leak_between_calls_to_the_same_endpoint(
        h: TelemetryHarness, mode: str) -> None:
    """Span name/attributes are built once per provider+model+endpoint+mode; what
    one call adds (its error, request parameters, response model, ids) must not
    reach the next call's span or metric points."""
    common = {"provider": "openai", "server_address": "api.example.com",
              "server_port": 8443, "api_mode": "chat_completions"}

    def fail(req: Any) -> Any:
        raise TimeoutError("slow")

    with pytest.raises(TimeoutError):
        run_call(h.pipeline, mode, "llm", {"model": MODEL, "temperature": 0.9}, fail,
                 api_request_id="req-1", **common)
    assert run_call(h.pipeline, mode, "llm", {"model": MODEL}, lambda r: OPENAI_RESPONSE,
                    api_request_id="req-2", **common) is OPENAI_RESPONSE
    run_call(h.pipeline, mode, "llm", {"model": MODEL}, lambda r: {"choices": []},
             api_request_id="req-3", **common)
    first, second, third = h.named(f"chat {MODEL}")
    assert is_error(first) and first.attributes["gen_ai.request.temperature"] == 0.9
    assert is_unset(second) and is_unset(third)
    for span, rid in ((second, "req-2"), (third, "req-3")):
        assert span.attributes["otelmw.api_request.id"] == rid
        assert "error.type" not in span.attributes
        assert "gen_ai.request.temperature" not in span.attributes
        assert span.attributes["server.address"] == "api.example.com"
    assert "gen_ai.response.model" not in third.attributes
    by_attrs = {tuple(sorted(p.attributes.items())): p.count
                for p in h.points("gen_ai.client.operation.duration")}
    assert sorted(by_attrs.values()) == [1, 1, 1]
    errors = [dict(k) for k in by_attrs if dict(k).get("error.type")]
    assert len(errors) == 1 and "gen_ai.response.model" not in errors[0]
    plain = [dict(k) for k in by_attrs if not dict(k).get("error.type")]
    assert sorted("gen_ai.response.model" in k for k in plain) == [False, True]


def test_chat_attribute_cache_stays_bounded(h: TelemetryHarness) -> None:
    for i in range(1100):
        h.pipeline.run_llm({"model": f"m-{i}"}, lambda r: {"choices": []}, provider="openai")
    names = {s.name for s in h.spans()}
    assert {"chat m-0", "chat m-1099"} <= names and len(names) == 1100
    assert len(h.observer.chat._endpoints) <= 1025  # one entry per distinct endpoint, cleared


@pytest.mark.parametrize("how", ["argument", "env"])
@pytest.mark.parametrize("mode", MODES)
def test_middleware_duration_metric_can_be_switched_off(
        monkeypatch: pytest.MonkeyPatch, how: str, mode: str) -> None:
    """``OTELMW_MIDDLEWARE_METRICS=off``: no per-layer histogram record, while the
    layer spans (with their outcomes and durations) and the other metrics stay."""
    kw: dict[str, Any] = {"middleware_metrics": False}
    if how == "env":
        monkeypatch.setenv("OTELMW_MIDDLEWARE_METRICS", " OFF ")
        kw = {}
    else:
        monkeypatch.delenv("OTELMW_MIDDLEWARE_METRICS", raising=False)
    harness = TelemetryHarness(**kw)
    try:
        reg = harness.pipeline.registry
        reg.add_middleware("llm_request", lambda **k: {"request": {**k["request"], "n": 1}},
                           PLUGIN)
        reg.add_middleware("llm_execution", lambda **k: k["next_call"](), PLUGIN)
        run_call(harness.pipeline, mode, "llm", {"model": MODEL}, lambda r: {"id": "r"})
        layers = [s for s in harness.spans() if s.name.startswith("llm_")]
        assert sorted(s.attributes["otelmw.middleware.outcome"] for s in layers) == [
            "passed", "rewritten"]
        assert all(s.end_time > s.start_time for s in layers)
        assert harness.points("otelmw.middleware.duration") == []
        assert harness.points("gen_ai.client.operation.duration")
        assert harness.points("otelmw.rewrites")
    finally:
        harness.close()
    harness.assert_clean()


def test_middleware_metrics_switch_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    from otelmw.telemetry.setup.observer import TelemetryObserver

    monkeypatch.delenv("OTELMW_MIDDLEWARE_METRICS", raising=False)
    assert TelemetryObserver().layer_metrics is True  # on by default: the contract metric
    monkeypatch.setenv("OTELMW_MIDDLEWARE_METRICS", "off")
    assert TelemetryObserver().layer_metrics is False
    # an explicit argument wins over the environment
    assert TelemetryObserver(middleware_metrics=True).layer_metrics is True
    monkeypatch.setenv("OTELMW_MIDDLEWARE_METRICS", "of")
    with pytest.raises(ValueError, match="OTELMW_MIDDLEWARE_METRICS='of'"):
        TelemetryObserver()


@EACH_MODE_AND_OP
def test_traced_calls_with_every_layer_kind_and_hook_events_leave_no_cyclic_garbage(
        mode: str, op: str) -> None:
    """A traced call (rewrite + wrapper spans, hook events as log records, metrics)
    frees everything it made when it returns: cyclic garbage would hold the
    call's payloads until a GC pass and make every later collection dearer."""
    harness = TelemetryHarness(hook_events="all")
    loop = asyncio.new_event_loop()
    try:
        add_rewriters(harness, mode, op, ["rewrite", "none"])
        add_wrappers(harness, mode, op, ["pass", "pass"])
        base = host_base(harness, op, span=False)

        def one_call() -> Any:
            return run_call(harness.pipeline, mode, op, payload_for(op), base.in_mode(mode),
                            loop=loop)

        unreachable = cyclic_garbage(one_call, 50)
        layer_spans = [s for s in harness.spans() if s.name.startswith((
            REQUEST_KIND[op], EXEC_KIND[op]))]
        assert len(layer_spans) == 4 * 55  # the calls really ran traced
        assert len(base.calls) == 55
        assert harness.logs(), "hook events were emitted"
        assert unreachable < 20, f"{unreachable} unreachable objects after 50 traced calls"
    finally:
        loop.close()
        harness.close()
    harness.assert_clean()


def test_a_nested_tool_protocol_enriches_the_open_tool_span(h: TelemetryHarness) -> None:
    from otelmw.core import current_tool_call, enrich_tool_call

    def tool(args: Any) -> str:
        running = current_tool_call()
        assert running is not None
        enrich_tool_call(running, {"mcp.method.name": "tools/call", "mcp.session.id": "s1",
                                   "jsonrpc.request.id": "7", "bad": object(),  # type: ignore[dict-item]
                                   "network.transport": "pipe"})
        return "ok"

    assert h.pipeline.run_tool(TOOL, {"q": 1}, tool, tool_call_id="c1") == "ok"
    span = h.one(f"execute_tool {TOOL}")  # one span: the nested protocol opened none
    assert len(h.spans()) == 1
    assert {k: span.attributes[k] for k in (
        "mcp.method.name", "mcp.session.id", "jsonrpc.request.id", "network.transport")} == {
        "mcp.method.name": "tools/call", "mcp.session.id": "s1", "jsonrpc.request.id": "7",
        "network.transport": "pipe"}
    assert "bad" not in span.attributes  # a value OpenTelemetry cannot take is left out
    h.assert_clean()


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_call_on_the_hosts_own_span_adds_no_span(h: TelemetryHarness, mode: str) -> None:
    # the MCP SDK's server span is current: otelmw's tool call is recorded on it, its
    # layers are its children, and the host (not otelmw) ends it
    from otelmw.core import CallInfo, open_call

    add_wrappers(h, mode, "tool", ["pass"])
    with h.tracer.start_as_current_span("tools/call lookup") as host_span:
        call = CallInfo(operation="execute_tool", tool_name=TOOL, runtime_id="mcp")
        opened = open_call(call, {"q": 1}, h.pipeline, on_host_span=True)
        if mode == MODES[0]:
            out = h.pipeline.run_tool(TOOL, {"q": 1}, lambda a: "ok", call=opened.call)
        else:
            async def tool(a: Any) -> str:
                return "ok"
            out = asyncio.run(h.pipeline.arun_tool(TOOL, {"q": 1}, tool, call=opened.call))
        assert out == "ok"
        assert host_span.is_recording()  # otelmw did not end the host's span
    spans = h.spans()
    assert [s.name for s in spans if s.name.startswith("execute_tool")] == []
    host = h.one("tools/call lookup")
    assert host.attributes["gen_ai.operation.name"] == "execute_tool"
    assert host.attributes["otelmw.result.status"] == "ok"
    assert host.attributes["otelmw.runtime.id"] == "mcp"
    wrapper = [s for s in spans if s.name != "tools/call lookup"]
    assert len(wrapper) == 1 and is_child(wrapper[0], host)
    assert sum(p.count for p in h.points("gen_ai.execute_tool.duration")) == 1
    h.assert_clean()

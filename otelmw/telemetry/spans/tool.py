"""``execute_tool`` spans: born with the tool's name (its ids and arguments only
when recording), decorated with the normalized result (``result``), failed by a
raised error, a failed result or an exception as result, ended when the call
returns (``finish``) with the ``gen_ai.execute_tool.duration`` point."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.trace import SpanKind, get_current_span

from ...core.contract import CallInfo
from ...core.results import NormalizedToolResult
from ..attributes import (
    GEN_AI_OPERATION_NAME,
    GEN_AI_TOOL_CALL_ARGUMENTS,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_CALL_RESULT,
    GEN_AI_TOOL_NAME,
    GEN_AI_TOOL_TYPE,
    OP_EXECUTE_TOOL,
    OTELMW_RESULT_CONTENT_DIGEST,
    OTELMW_RESULT_ERROR_MESSAGE,
    OTELMW_RESULT_EXECUTION_TIME_MS,
    OTELMW_RESULT_RAW_DIGEST,
    OTELMW_RESULT_RAW_SIZE,
    OTELMW_RESULT_RAW_TYPE,
    OTELMW_RESULT_STATUS,
    OTELMW_RESULT_SUCCESS,
    OTELMW_RUNTIME_ID,
)
from ..content.digests import type_name
from ..content.values import clean_str as _c
from ..content.values import flatten_metadata, put_present, short_text
from .operation import (
    HostSpan,
    OpState,
    Signals,
    attach,
    call_ids,
    digest_once,
    mark_error,
    mark_exception,
    perf_counter,
    set_span_in_context,
)

_INTERNAL = SpanKind.INTERNAL


class ToolSpans:
    """The ``execute_tool`` span of a tool call."""

    def __init__(self, signals: Signals) -> None:
        self.signals = signals
        self.tracer, self.inst, self.content = signals.tracer, signals.inst, signals.content

    def start(self, call: CallInfo, args: Any) -> OpState:
        tool = _c(call.tool_name) or "unknown"
        attrs: dict[str, Any] = {GEN_AI_OPERATION_NAME: OP_EXECUTE_TOOL,
                                 GEN_AI_TOOL_NAME: tool}
        span = self.tracer.start_span(f"execute_tool {tool}", kind=_INTERNAL, attributes=attrs)
        self._decorate(span, call, args)
        token = attach(set_span_in_context(span))
        metric_attrs = {GEN_AI_TOOL_NAME: tool}
        return OpState(span, token, perf_counter(), metric_attrs, None)

    def adopt(self, call: CallInfo, args: Any) -> OpState:
        """The call's span is the host's own, current here (the MCP SDK's server span,
        ADK's and Strands' ``execute_tool``): decorated as ``start`` would, through
        ``HostSpan`` (the host's own attributes, name and end stay its own)."""
        current = get_current_span()
        if not current.is_recording():  # nothing to adopt: a span of otelmw's own
            return self.start(call, args)
        span = HostSpan(current)
        tool = _c(call.tool_name) or "unknown"
        span.set_attributes({GEN_AI_OPERATION_NAME: OP_EXECUTE_TOOL,
                             GEN_AI_TOOL_NAME: tool})
        self._decorate(span, call, args)
        return OpState(span, None, perf_counter(), {GEN_AI_TOOL_NAME: tool}, None)

    def _decorate(self, span: Any, call: CallInfo, args: Any) -> None:
        if span.is_recording():
            extra = call_ids(call, {GEN_AI_TOOL_TYPE: "function"})
            put_present(extra, ((GEN_AI_TOOL_CALL_ID, call.tool_call_id),
                                (OTELMW_RUNTIME_ID, call.runtime_id)))
            if self.content.on_spans:
                extra[GEN_AI_TOOL_CALL_ARGUMENTS] = self.content.render(args)
            span.set_attributes(extra)

    def arguments_rewritten(self, call: CallInfo, args: Any) -> None:
        """The tool gets other arguments than it was called with (a ``tool_request``
        rewrite, a wrapper): under capture the span shows the ones it got."""
        op = call.observation
        if not isinstance(op, OpState) or not self.content.on_spans:
            return
        try:
            if op.span.is_recording():
                op.span.set_attribute(GEN_AI_TOOL_CALL_ARGUMENTS, self.content.render(args))
        except Exception as exc:
            self.signals.internal_failure("tool_arguments", exc)

    def result(self, call: CallInfo, normalized: NormalizedToolResult, status: str) -> None:
        """The normalized result: ``status`` ``ok``, ``error`` or ``blocked``."""
        op = call.observation
        if not isinstance(op, OpState):
            return
        try:
            self._result(call, op, normalized, status)
        except Exception as exc:
            self.signals.internal_failure("tool_result", exc)

    def _result(self, call: CallInfo, op: OpState, normalized: NormalizedToolResult,
                status: str) -> None:
        span = op.span
        success = bool(normalized.success)
        blocked = status == "blocked"
        raw = normalized.raw_result
        if span.is_recording():
            attrs: dict[str, Any] = {
                OTELMW_RESULT_SUCCESS: success,
                OTELMW_RESULT_STATUS: status,
                OTELMW_RESULT_EXECUTION_TIME_MS: float(normalized.execution_time_ms or 0.0),
            }
            if normalized.error_message:
                attrs[OTELMW_RESULT_ERROR_MESSAGE] = short_text(normalized.error_message)
            attrs.update(flatten_metadata(normalized.metadata))
            cap = self.signals.digest_max_bytes
            raw_digest, raw_size = digest_once(call, raw, cap)
            attrs[OTELMW_RESULT_RAW_DIGEST] = raw_digest
            attrs[OTELMW_RESULT_RAW_SIZE] = raw_size
            attrs[OTELMW_RESULT_RAW_TYPE] = type_name(raw)
            content = normalized.content
            if content is raw:
                attrs[OTELMW_RESULT_CONTENT_DIGEST] = raw_digest
            else:
                attrs[OTELMW_RESULT_CONTENT_DIGEST], _ = digest_once(call, content, cap)
            if self.content.on_spans:
                attrs[GEN_AI_TOOL_CALL_RESULT] = self.content.render(normalized.model_text())
            span.set_attributes(attrs)
        if isinstance(raw, BaseException):
            mark_exception(span, raw, op.attrs, with_content=self.content.on_spans)
        elif not success and not blocked:
            mark_error(span, "tool_error", short_text(normalized.error_message, 256), op.attrs)
        self.inst.tool_results.add(1, {OTELMW_RESULT_SUCCESS: success,
                                       OTELMW_RUNTIME_ID: _c(call.runtime_id) or "native",
                                       GEN_AI_TOOL_NAME: _c(call.tool_name) or "unknown"})

    def enriched(self, call: CallInfo, attributes: Mapping[str, Any]) -> None:
        """A nested tool protocol's attributes (MCP's under a framework's tool call) on
        the call's span; values OpenTelemetry cannot take are left out."""
        op = call.observation
        if not isinstance(op, OpState) or not op.span.is_recording():
            return
        try:
            op.span.set_attributes({k: v for k, v in attributes.items()
                                    if isinstance(k, str) and _attribute_value(v)})
        except Exception as exc:
            self.signals.internal_failure("tool_enriched", exc)

    def finish(self, call: CallInfo, op: OpState, result: Any,
               error: BaseException | None) -> Any:
        op.leave_context()
        span = op.span
        if error is not None:
            mark_exception(span, error, op.attrs, with_content=self.content.on_spans)
        span.end()  # an adopted span's end is the host's (``HostSpan.end`` does nothing)
        if op.measured:
            self.inst.tool_duration.record(perf_counter() - op.start, op.attrs)
        return result


def _attribute_value(value: Any) -> bool:
    if isinstance(value, str | bool | int | float):
        return True
    return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)

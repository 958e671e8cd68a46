"""``TelemetryObserver``: the pipeline made visible as spans, metrics and log events.

Implements ``otelmw.core.seam.PipelineObserver``; assembled from the operation
spans here, ``layer_spans.LayerSpans`` (rewrites, wrappers) and
``hook_events.HookEvents`` (hook log records). Hot-path rules: ``start_span`` +
attach/detach (no generator context managers), a concrete tracer fetched once,
attributes beyond the sampler-relevant ones built only when the span records,
digests computed once per value. Every method is guarded: telemetry never
raises into the agent (failures are counted under ``instrumentation``).
"""

from __future__ import annotations

import time
from typing import Any

from opentelemetry import _logs, metrics, trace
from opentelemetry.trace import SpanKind

from .. import __version__
from ..core.contract import CallInfo, RuntimeContext
from ..core.failures import HOOK, MIDDLEWARE, NORMALIZE, FailureLog
from ..core.results import NormalizedToolResult
from . import attributes as a
from .content import ContentPolicy
from .context import end_current, restore_context, safe_detach
from .digests import type_name
from .hook_events import ENV_HOOK_EVENTS, HOOK_EVENT_MODES, HookEvents, hook_events_mode
from .layer_spans import ENV_MIDDLEWARE_METRICS, LayerSpans, middleware_metrics_on
from .metrics import Instruments
from .observer_core import (
    OpState,
    _attach,
    _perf_counter,
    _set_span_in_context,
    digest_once,
    mark_error,
    mark_exception,
)
from .responses import EmbeddingsFacts, ResponseFacts, is_stream
from .streams import wrap_stream
from .values import clean_str as _c
from .values import (
    error_type,
    flatten_metadata,
    otlp_number,
    port_number,
    put_present,
    short_text,
)

__all__ = ["ENV_HOOK_EVENTS", "ENV_MIDDLEWARE_METRICS", "HOOK_EVENT_MODES", "TelemetryObserver",
           "error_type", "hook_events_mode", "middleware_metrics_on"]

_CLIENT, _INTERNAL = SpanKind.CLIENT, SpanKind.INTERNAL
_REQUEST_PARAMS = (("temperature", a.GEN_AI_REQUEST_TEMPERATURE),
                   ("max_tokens", a.GEN_AI_REQUEST_MAX_TOKENS),
                   ("stream", a.GEN_AI_REQUEST_STREAM))


class _EnrichStream:
    """Feeds a nested layer's stream chunks into the outer call's facts."""

    __slots__ = ("facts",)

    def __init__(self, facts: ResponseFacts) -> None:
        self.facts = facts

    def chunk(self, chunk: Any) -> None:
        try:
            self.facts.absorb_chunk(chunk)
        except Exception:
            pass

    def end(self, ended_by: str, error: BaseException | None = None) -> None:
        pass


class _ChatStream(_EnrichStream):
    """Finisher for a streamed chat response: absorbs chunks, ends the span."""

    __slots__ = ("call", "obs", "op")

    def __init__(self, obs: TelemetryObserver, call: CallInfo, op: OpState) -> None:
        super().__init__(ResponseFacts())
        self.obs, self.call, self.op = obs, call, op

    def end(self, ended_by: str, error: BaseException | None = None) -> None:
        try:
            self.obs._end_chat(self.call, self.op, self.facts, error, ended_by)
        except Exception as exc:
            self.obs._internal_failure("stream_end", exc)


class TelemetryObserver(LayerSpans, HookEvents):
    """Spans for calls, rewrites and wrappers; hook log events; contract metrics."""

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None,
                 logger_provider: Any = None, content: ContentPolicy | None = None,
                 failures: FailureLog | None = None, hook_events: str | None = None,
                 middleware_metrics: bool | None = None) -> None:
        self.tracer = trace.get_tracer("otelmw", __version__, tracer_provider)
        self.meter = metrics.get_meter("otelmw", __version__, meter_provider)
        self.logger = _logs.get_logger("otelmw", __version__, logger_provider=logger_provider)
        self.inst = Instruments(self.meter)
        self.content = content if content is not None else ContentPolicy.from_env()
        # Which hook firings become log records (read by ``otelmw.core.hooks``).
        self.hook_events = hook_events_mode(hook_events)
        self.layer_metrics = middleware_metrics_on(middleware_metrics)
        self._layers = {}
        self._chat_bases: dict[tuple[Any, ...], tuple[str, dict[str, Any], dict[str, Any]]] = {}
        self.failures = failures
        if failures is not None:
            failures.add_listener(self.on_failure)

    def close(self) -> None:
        if self.failures is not None:
            self.failures.remove_listener(self.on_failure)

    # ---------------------------------------------------------------- failures
    def on_failure(self, category: str, kind: str, name: str, exc: BaseException | None
                   ) -> None:
        attrs = {a.OTELMW_MIDDLEWARE_KIND: kind, a.OTELMW_MIDDLEWARE_NAME: name}
        if category == MIDDLEWARE:
            self.inst.middleware_failures.add(1, attrs)
        elif category == HOOK:
            self.inst.hook_failures.add(1, {a.OTELMW_HOOK_NAME: kind,
                                            a.OTELMW_MIDDLEWARE_NAME: name})
        elif category == NORMALIZE:
            self.inst.normalize_failures.add(1, {a.OTELMW_RUNTIME_ID: kind})

    # ------------------------------------------------------------ operations
    def call_started(self, call: CallInfo, payload: Any) -> None:
        try:
            operation = call.operation
            if operation == "chat" or operation == "embeddings":
                self._start_model_call(call, payload)
            else:
                self._start_tool(call, payload)
        except Exception as exc:
            call.observer_state = None
            self._internal_failure("call_started", exc)

    def _model_call_base(self, key: tuple[Any, ...]
                         ) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """(span name, span attributes, metric attributes) shared by every chat (or
        embeddings) call to one provider/model/server/mode; built (and sanitized)
        once per key."""
        operation, provider, model, address, port, api_mode = key
        attrs: dict[str, Any] = {a.GEN_AI_OPERATION_NAME: operation,
                                 a.GEN_AI_PROVIDER_NAME: _c(provider) or "unknown"}
        model = _c(model)
        if model:
            attrs[a.GEN_AI_REQUEST_MODEL] = model
        # server.address/port are metric attributes too (GenAI conventions),
        # whether or not the span is sampled.
        if address:
            attrs[a.SERVER_ADDRESS] = _c(address)
            port = port_number(port)
            if port:
                attrs[a.SERVER_PORT] = port
        metric_attrs = dict(attrs)
        if api_mode:
            attrs[a.OTELMW_API_MODE] = _c(api_mode)
        if len(self._chat_bases) > 1024:  # one entry per distinct model/endpoint: bounded
            self._chat_bases.clear()
        base = self._chat_bases[key] = (f"{operation} {model}" if model else operation, attrs,
                                        metric_attrs)
        return base

    def _start_model_call(self, call: CallInfo, request: Any) -> None:
        base_key = (call.operation, call.provider, call.model, call.server_address,
                    call.server_port, call.api_mode)
        base = self._chat_bases.get(base_key)
        if base is None:
            base = self._model_call_base(base_key)
        name, attrs, metric_attrs = base[0], dict(base[1]), dict(base[2])
        # The cheap ids go in with start_span (one attribute set instead of two);
        # request parameters wait for the span's end (a rewrite may change them),
        # content, the costly part, for is_recording().
        self._ids(call, attrs)
        span = self.tracer.start_span(name, kind=_CLIENT, attributes=attrs)
        if self.content.on_spans and call.operation == "chat" and span.is_recording():
            self._input_messages(span, request)
        call.observer_state = OpState(span, _attach(_set_span_in_context(span)), _perf_counter(),
                                      metric_attrs, request)

    def _input_messages(self, span: Any, request: Any) -> None:
        if isinstance(request, dict):
            msgs = request.get("messages", request.get("input"))
            if msgs is not None:
                span.set_attribute(a.GEN_AI_INPUT_MESSAGES, self.content.render(msgs))

    def request_rewritten(self, call: CallInfo, request: Any) -> None:
        """The chat span describes the request that is sent: model, span name and
        parameters follow the effective request (the original model is kept)."""
        op = call.observer_state
        if not isinstance(op, OpState) or op.request is request or call.operation != "chat":
            return
        try:
            op.request = request
            model = request.get("model") if isinstance(request, dict) else None
            if isinstance(model, str) and model and model != call.model:
                self._model_changed(call, op, model)
            if self.content.on_spans and op.span.is_recording():
                self._input_messages(op.span, request)
        except Exception as exc:
            self._internal_failure("request_rewritten", exc)

    def _model_changed(self, call: CallInfo, op: OpState, model: str) -> None:
        if op.original_model is None and call.model:
            op.original_model = _c(call.model)
        call.model = model  # hook records of this call name the model that is asked
        clean = _c(model)
        op.span.update_name(f"chat {clean}")
        attrs = {a.GEN_AI_REQUEST_MODEL: clean}
        if op.original_model is not None:
            attrs[a.OTELMW_REQUEST_ORIGINAL_MODEL] = op.original_model
        op.span.set_attributes(attrs)
        op.attrs[a.GEN_AI_REQUEST_MODEL] = clean

    def _start_tool(self, call: CallInfo, args: Any) -> None:
        tool = _c(call.tool_name) or "unknown"
        attrs: dict[str, Any] = {a.GEN_AI_OPERATION_NAME: a.OP_EXECUTE_TOOL,
                                 a.GEN_AI_TOOL_NAME: tool}
        span = self.tracer.start_span(f"execute_tool {tool}", kind=_INTERNAL, attributes=attrs)
        if span.is_recording():
            extra = self._ids(call, {a.GEN_AI_TOOL_TYPE: "function"})
            put_present(extra, ((a.GEN_AI_TOOL_CALL_ID, call.tool_call_id),
                                (a.OTELMW_RUNTIME_ID, call.runtime_id)))
            if self.content.on_spans:
                extra[a.GEN_AI_TOOL_CALL_ARGUMENTS] = self.content.render(args)
            span.set_attributes(extra)
        token = _attach(_set_span_in_context(span))
        metric_attrs = {a.GEN_AI_TOOL_NAME: tool}
        call.observer_state = OpState(span, token, _perf_counter(), metric_attrs, None)

    def call_finished(self, call: CallInfo, result: Any, error: BaseException | None) -> Any:
        op = call.observer_state
        if not isinstance(op, OpState):
            return result
        try:
            safe_detach(op.token)
            op.token = None
            operation = call.operation
            if operation == "chat":
                if error is None and is_stream(result):
                    return wrap_stream(result, _ChatStream(self, call, op))
                facts = ResponseFacts()
                if error is None:
                    facts.absorb(result)
                self._end_chat(call, op, facts, error, None)
            elif operation == "embeddings":
                self._end_embeddings(op, result, error)
            else:
                self._end_tool(op, error)
        except Exception as exc:
            self._internal_failure("call_finished", exc)
        return result

    def call_enriched(self, call: CallInfo, result: Any, server_address: str | None,
                      server_port: int | None) -> Any:
        """The SDK layer under a host-level ``chat`` span: no second span or metric
        point; the outer span gets the server and the raw response's facts."""
        op = call.observer_state
        if not isinstance(op, OpState):
            return result
        try:
            if server_address and call.server_address is None:
                call.server_address, call.server_port = server_address, server_port
                op.span.set_attribute(a.SERVER_ADDRESS, server_address)
                server_port = port_number(server_port)
                if server_port:
                    op.span.set_attribute(a.SERVER_PORT, server_port)
                op.attrs[a.SERVER_ADDRESS] = server_address
            if op.facts is None:
                op.facts = ResponseFacts()
            if is_stream(result):
                return wrap_stream(result, _EnrichStream(op.facts))
            op.facts.absorb(result)
        except Exception as exc:
            self._internal_failure("call_enriched", exc)
        return result

    def _end_chat(self, call: CallInfo, op: OpState, facts: ResponseFacts,
                  error: BaseException | None, ended_by: str | None) -> None:
        if op.facts is not None:  # what the SDK layer saw beats the host's summary
            inner = op.facts
            facts.response_id = inner.response_id or facts.response_id
            facts.model = inner.model or facts.model
            facts.finish_reasons = inner.finish_reasons or facts.finish_reasons
            if inner.input_tokens is not None:
                facts.input_tokens = inner.input_tokens
            if inner.output_tokens is not None:
                facts.output_tokens = inner.output_tokens
        span, duration = op.span, time.perf_counter() - op.start
        response_model = self._response_model(op, facts.model)
        if span.is_recording():
            attrs: dict[str, Any] = {}
            request = op.request
            if isinstance(request, dict):  # the effective request (see request_rewritten)
                for key, attr in _REQUEST_PARAMS:
                    v = otlp_number(request.get(key))  # max_tokens=2**70: not exportable
                    if v is not None:
                        attrs[attr] = v
            if facts.response_id:
                attrs[a.GEN_AI_RESPONSE_ID] = _c(facts.response_id)
            if response_model:
                attrs[a.GEN_AI_RESPONSE_MODEL] = response_model
            if facts.finish_reasons:
                attrs[a.GEN_AI_RESPONSE_FINISH_REASONS] = [
                    _c(r, 64) for r in facts.finish_reasons[:16]]
            if facts.input_tokens is not None:
                attrs[a.GEN_AI_USAGE_INPUT_TOKENS] = facts.input_tokens
            if facts.output_tokens is not None:
                attrs[a.GEN_AI_USAGE_OUTPUT_TOKENS] = facts.output_tokens
            if ended_by is not None:
                attrs[a.OTELMW_STREAM_ENDED_BY] = ended_by
            span.set_attributes(attrs)
        self._close_model_call(op, duration, error, facts.input_tokens, facts.output_tokens)

    @staticmethod
    def _response_model(op: OpState, model: str | None) -> str | None:
        """The answering model, cleaned; it goes on the metric points too."""
        clean = _c(model) if model else None
        if clean:
            op.attrs[a.GEN_AI_RESPONSE_MODEL] = clean
        return clean

    def _close_model_call(self, op: OpState, duration: float, error: BaseException | None,
                          input_tokens: int | None, output_tokens: int | None) -> None:
        """End a chat/embeddings span and record its duration and token points."""
        mattrs = op.attrs
        if error is not None:
            mark_exception(op.span, error, mattrs, with_content=self.content.on_spans)
        op.span.end()
        inst = self.inst
        inst.operation_duration.record(duration, mattrs)
        if input_tokens is not None:
            inst.token_usage.record(input_tokens, {**mattrs, a.GEN_AI_TOKEN_TYPE: "input"})
        if output_tokens is not None:
            inst.token_usage.record(output_tokens, {**mattrs, a.GEN_AI_TOKEN_TYPE: "output"})

    def _end_embeddings(self, op: OpState, result: Any, error: BaseException | None) -> None:
        span, duration = op.span, time.perf_counter() - op.start
        facts = EmbeddingsFacts()
        if error is None:
            facts.absorb(result)
        response_model = self._response_model(op, facts.model)
        if span.is_recording():
            attrs: dict[str, Any] = {}
            request = op.request
            dimensions = facts.dimensions
            if isinstance(request, dict):
                fmt = request.get("encoding_format")
                if isinstance(fmt, str) and fmt:
                    attrs[a.GEN_AI_REQUEST_ENCODING_FORMATS] = [_c(fmt, 64)]
                asked = otlp_number(request.get("dimensions"))
                if type(asked) is int and asked > 0:
                    dimensions = asked
            if dimensions is not None:
                attrs[a.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] = dimensions
            if response_model:
                attrs[a.GEN_AI_RESPONSE_MODEL] = response_model
            if facts.input_tokens is not None:
                attrs[a.GEN_AI_USAGE_INPUT_TOKENS] = facts.input_tokens
            span.set_attributes(attrs)
        self._close_model_call(op, duration, error, facts.input_tokens, None)

    def _end_tool(self, op: OpState, error: BaseException | None) -> None:
        span = op.span
        if error is not None:
            mark_exception(span, error, op.attrs, with_content=self.content.on_spans)
        span.end()
        self.inst.tool_duration.record(time.perf_counter() - op.start, op.attrs)

    def tool_result(self, call: CallInfo, normalized: NormalizedToolResult,
                    status: str) -> None:
        op = call.observer_state
        if not isinstance(op, OpState):
            return
        try:
            self._tool_result(call, op, normalized, status)
        except Exception as exc:
            self._internal_failure("tool_result", exc)

    def _tool_result(self, call: CallInfo, op: OpState, normalized: NormalizedToolResult,
                     status: str) -> None:
        span = op.span
        success = bool(normalized.success)
        blocked = status == "blocked"
        raw = normalized.raw_result
        if span.is_recording():
            attrs: dict[str, Any] = {
                a.OTELMW_RESULT_SUCCESS: success,
                a.OTELMW_RESULT_STATUS: status,
                a.OTELMW_RESULT_EXECUTION_TIME_MS: float(normalized.execution_time_ms or 0.0),
            }
            if normalized.error_message:
                attrs[a.OTELMW_RESULT_ERROR_MESSAGE] = short_text(normalized.error_message)
            attrs.update(flatten_metadata(normalized.metadata))
            raw_digest, raw_size = digest_once(call, raw)
            attrs[a.OTELMW_RESULT_RAW_DIGEST] = raw_digest
            attrs[a.OTELMW_RESULT_RAW_SIZE] = raw_size
            attrs[a.OTELMW_RESULT_RAW_TYPE] = type_name(raw)
            content = normalized.content
            attrs[a.OTELMW_RESULT_CONTENT_DIGEST] = (
                raw_digest if content is raw else digest_once(call, content)[0])
            if self.content.on_spans:
                attrs[a.GEN_AI_TOOL_CALL_RESULT] = self.content.render(normalized.model_text())
            span.set_attributes(attrs)
        if isinstance(raw, BaseException):
            mark_exception(span, raw, op.attrs, with_content=self.content.on_spans)
        elif not success and not blocked:
            mark_error(span, "tool_error", short_text(normalized.error_message, 256), op.attrs)
        self.inst.tool_results.add(1, {a.OTELMW_RESULT_SUCCESS: success,
                                       a.OTELMW_RUNTIME_ID: _c(call.runtime_id) or "native",
                                       a.GEN_AI_TOOL_NAME: _c(call.tool_name) or "unknown"})

    # ------------------------------------------------------------------ turns
    def turn_started(self, turn: RuntimeContext) -> Any:
        try:
            name = _c(turn.agent_name) or "agent"
            attrs: dict[str, Any] = {a.GEN_AI_OPERATION_NAME: a.OP_INVOKE_AGENT,
                                     a.GEN_AI_AGENT_NAME: name}
            put_present(attrs, ((a.GEN_AI_CONVERSATION_ID, turn.session_id),
                                (a.OTELMW_RUNTIME_ID, turn.runtime_id),
                                (a.OTELMW_TURN_ID, turn.turn_id)))
            span = self.tracer.start_span(f"invoke_agent {name}", kind=_INTERNAL,
                                          attributes=attrs)
            token = _attach(_set_span_in_context(span))
            return (span, token, time.perf_counter(), name)
        except Exception as exc:
            self._internal_failure("turn_started", exc)
            return None

    def turn_left(self, token: Any) -> None:
        """A context still holding a finished turn (its starter's thread when it
        was finished on another, a thread it started) leaves it: back to the
        OpenTelemetry context from before the turn."""
        try:
            restore_context(token[1])
        except Exception as exc:
            self._internal_failure("turn_left", exc)

    def turn_finished(self, token: Any, error: BaseException | None, failed: bool) -> None:
        if token is None:
            return
        try:
            span, ctx_token, start, name = token
            end_current(ctx_token, span)
            mattrs: dict[str, Any] = {a.GEN_AI_OPERATION_NAME: a.OP_INVOKE_AGENT,
                                      a.GEN_AI_AGENT_NAME: name}
            if error is not None:
                mark_exception(span, error, mattrs, with_content=self.content.on_spans)
            elif failed:
                mark_error(span, "turn_failed", "the agent turn failed", mattrs)
            span.end()
            self.inst.agent_duration.record(time.perf_counter() - start, mattrs)
        except Exception as exc:
            self._internal_failure("turn_finished", exc)


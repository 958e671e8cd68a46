"""``TelemetryObserver``: the pipeline made visible as spans, metrics and log events.

Implements ``otelmw.observe.PipelineObserver``. Hot-path rules: ``start_span`` +
attach/detach (no generator context managers), a concrete tracer fetched once,
attributes beyond the sampler-relevant ones built only when the span records,
digests computed once per value. Every method is guarded: telemetry never
raises into the agent (failures are counted under ``instrumentation``).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from opentelemetry import _logs, metrics, trace
from opentelemetry import context as otel_context
from opentelemetry.trace import SpanKind, Status, StatusCode

from .. import __version__
from ..contract import (
    MIDDLEWARE_SCHEMA_VERSION,
    TELEMETRY_SCHEMA_VERSION,
    CallInfo,
    RuntimeContext,
)
from ..failures import HOOK, INSTRUMENTATION, MIDDLEWARE, NORMALIZE, FailureLog, describe
from ..observe import FAILED, REWRITTEN
from ..registry import Layer
from ..results import NormalizedToolResult
from . import attributes as a
from .content import ContentPolicy, default_redactor
from .context import safe_detach
from .digests import digest, type_name
from .metrics import Instruments
from .responses import ResponseFacts, is_stream
from .streams import wrap_stream

_CLIENT, _INTERNAL = SpanKind.CLIENT, SpanKind.INTERNAL
_REQUEST_PARAMS = (("temperature", a.GEN_AI_REQUEST_TEMPERATURE),
                   ("max_tokens", a.GEN_AI_REQUEST_MAX_TOKENS),
                   ("stream", a.GEN_AI_REQUEST_STREAM))
_NUMBER = (bool, int, float)
# Bound once: these run per call and per middleware layer.
_attach, _set_span_in_context, _perf_counter = (
    otel_context.attach, trace.set_span_in_context, time.perf_counter)
_MAX_META_KEYS = 32
_MAX_STR = 1024
HOOK_EVENT_MODES = ("registered", "all", "none")
ENV_HOOK_EVENTS = "OTELMW_HOOK_EVENTS"


def hook_events_mode(value: str | None = None) -> str:
    """``registered`` (default) | ``all`` | ``none``, from ``value`` or
    ``OTELMW_HOOK_EVENTS``; ``ValueError`` on a typo."""
    raw = value if value is not None else os.environ.get(ENV_HOOK_EVENTS, "")
    mode = raw.strip().lower() or "registered"
    if mode not in HOOK_EVENT_MODES:
        raise ValueError(f"{ENV_HOOK_EVENTS}={raw!r} is not one of {', '.join(HOOK_EVENT_MODES)}")
    return mode


def error_type(exc: BaseException) -> str:
    # Host wrappers are unwrapped by their adapter (Hermes' downstream wrapper in
    # instrumentation/hermes.py), not guessed here from an ``original`` attribute.
    t = type(exc)
    return f"{t.__module__}.{t.__qualname__}"


def _c(value: Any, limit: int = 256) -> Any:
    """A host-provided name/id made safe for OTLP: bounded, valid UTF-8 (a lone
    surrogate would make protobuf reject the whole export batch)."""
    if not isinstance(value, str):
        return value
    if len(value) > limit:
        value = value[:limit]
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            value = value.encode("utf-8", "replace").decode("utf-8")
    return value


def _short(text: Any, limit: int = _MAX_STR) -> str:
    try:
        s = text if isinstance(text, str) else str(text)
    except Exception:
        s = "<unprintable>"
    s = default_redactor(s[: limit * 2])
    return str(_c(s if len(s) <= limit else s[: limit - 1] + "…", limit))


def _flatten_metadata(meta: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not isinstance(meta, dict):
        return out
    for key, value in meta.items():
        if len(out) >= _MAX_META_KEYS:
            break
        k = a.OTELMW_RESULT_METADATA_PREFIX + _c(str(key), 64)
        if isinstance(value, bool | int | float):
            out[k] = value
        elif isinstance(value, str):
            out[k] = _c(value)
    return out


class _Op:
    """Per-call state (kept on ``CallInfo.observer_state``)."""

    __slots__ = ("attrs", "digests", "facts", "span", "start", "token")

    def __init__(self, span: trace.Span, token: object, start: float,
                 attrs: dict[str, Any]) -> None:
        self.span, self.token, self.start, self.attrs = span, token, start, attrs
        self.facts: ResponseFacts | None = None  # filled by a nested SDK layer
        # The same request/args/result objects reach the span and several hook
        # events of one call: digest each once. id → (object kept alive, digest).
        self.digests: dict[int, tuple[Any, tuple[str, int]]] | None = None


def _digest_once(call: CallInfo, value: Any) -> tuple[str, int]:
    op = call.observer_state
    if not isinstance(op, _Op):
        return digest(value)
    cache = op.digests
    if cache is None:
        cache = op.digests = {}
    hit = cache.get(id(value))
    if hit is not None and hit[0] is value:
        return hit[1]
    result = digest(value)
    cache[id(value)] = (value, result)
    return result


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

    def __init__(self, obs: TelemetryObserver, call: CallInfo, op: _Op) -> None:
        super().__init__(ResponseFacts())
        self.obs, self.call, self.op = obs, call, op

    def end(self, ended_by: str, error: BaseException | None = None) -> None:
        try:
            self.obs._end_chat(self.call, self.op, self.facts, error, ended_by)
        except Exception as exc:
            self.obs._internal_failure("stream_end", exc)


class TelemetryObserver:
    """Spans for calls, rewrites and wrappers; hook log events; contract metrics."""

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None,
                 logger_provider: Any = None, content: ContentPolicy | None = None,
                 failures: FailureLog | None = None, hook_events: str | None = None) -> None:
        self.tracer = trace.get_tracer("otelmw", __version__, tracer_provider)
        self.meter = metrics.get_meter("otelmw", __version__, meter_provider)
        self.logger = _logs.get_logger("otelmw", __version__, logger_provider=logger_provider)
        self.inst = Instruments(self.meter)
        self.content = content if content is not None else ContentPolicy.from_env()
        # Which hook firings become log records (read by ``otelmw.hooks``).
        self.hook_events = hook_events_mode(hook_events)
        # Per-layer constants (span name, start attributes, metric attributes by
        # outcome), keyed by id(layer) and checked by identity.
        self._layers: dict[int, tuple[Layer, int, str, dict[str, Any], dict[str, Any]]] = {}
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

    def _internal_failure(self, where: str, exc: BaseException) -> None:
        if self.failures is not None:
            self.failures.record(INSTRUMENTATION, "telemetry", where,
                                 f"telemetry error: {describe(exc)}", exc)

    # ------------------------------------------------------------ operations
    def call_started(self, call: CallInfo, payload: Any) -> None:
        try:
            if call.operation == "chat":
                self._start_chat(call, payload)
            else:
                self._start_tool(call, payload)
        except Exception as exc:
            call.observer_state = None
            self._internal_failure("call_started", exc)

    def _chat_base(self, key: tuple[Any, ...]) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """(span name, span attributes, metric attributes) shared by every chat call
        to one provider/model/server/mode; built (and sanitized) once per key."""
        provider, model, address, port, api_mode = key
        attrs: dict[str, Any] = {a.GEN_AI_OPERATION_NAME: a.OP_CHAT,
                                 a.GEN_AI_PROVIDER_NAME: _c(provider) or "unknown"}
        model = _c(model)
        if model:
            attrs[a.GEN_AI_REQUEST_MODEL] = model
        # server.address/port are metric attributes too (GenAI conventions),
        # whether or not the span is sampled.
        if address:
            attrs[a.SERVER_ADDRESS] = _c(address)
            if port:
                attrs[a.SERVER_PORT] = port
        metric_attrs = dict(attrs)
        if api_mode:
            attrs[a.OTELMW_API_MODE] = _c(api_mode)
        if len(self._chat_bases) > 1024:  # one entry per distinct model/endpoint: bounded
            self._chat_bases.clear()
        base = self._chat_bases[key] = (f"chat {model}" if model else "chat", attrs,
                                        metric_attrs)
        return base

    def _start_chat(self, call: CallInfo, request: Any) -> None:
        base_key = (call.provider, call.model, call.server_address, call.server_port,
                    call.api_mode)
        base = self._chat_bases.get(base_key)
        if base is None:
            base = self._chat_base(base_key)
        name, attrs, metric_attrs = base[0], dict(base[1]), dict(base[2])
        # The cheap ids go in with start_span (one attribute set instead of two);
        # only content, the costly part, waits for is_recording().
        if call.session_id or call.turn_id or call.task_id:
            attrs.update(self._ids(call))
        if call.api_request_id:
            attrs[a.OTELMW_API_REQUEST_ID] = _c(call.api_request_id)
        if type(request) is dict:
            for key, attr in _REQUEST_PARAMS:
                v = request.get(key)
                if v is not None and isinstance(v, _NUMBER):
                    attrs[attr] = v
        span = self.tracer.start_span(name, kind=_CLIENT, attributes=attrs)
        if self.content.on_spans and isinstance(request, dict) and span.is_recording():
            msgs = request.get("messages", request.get("input"))
            if msgs is not None:
                span.set_attribute(a.GEN_AI_INPUT_MESSAGES, self.content.render(msgs))
        call.observer_state = _Op(span, _attach(_set_span_in_context(span)), _perf_counter(),
                                  metric_attrs)

    def _start_tool(self, call: CallInfo, args: Any) -> None:
        tool = _c(call.tool_name) or "unknown"
        attrs: dict[str, Any] = {a.GEN_AI_OPERATION_NAME: a.OP_EXECUTE_TOOL,
                                 a.GEN_AI_TOOL_NAME: tool}
        span = self.tracer.start_span(f"execute_tool {tool}", kind=_INTERNAL, attributes=attrs)
        if span.is_recording():
            extra = self._ids(call)
            extra[a.GEN_AI_TOOL_TYPE] = "function"
            if call.tool_call_id:
                extra[a.GEN_AI_TOOL_CALL_ID] = _c(call.tool_call_id)
            if call.runtime_id:
                extra[a.OTELMW_RUNTIME_ID] = _c(call.runtime_id)
            if call.api_request_id:
                extra[a.OTELMW_API_REQUEST_ID] = _c(call.api_request_id)
            if self.content.on_spans:
                extra[a.GEN_AI_TOOL_CALL_ARGUMENTS] = self.content.render(args)
            span.set_attributes(extra)
        token = otel_context.attach(trace.set_span_in_context(span))
        metric_attrs = {a.GEN_AI_TOOL_NAME: tool}
        call.observer_state = _Op(span, token, time.perf_counter(), metric_attrs)

    @staticmethod
    def _ids(call: CallInfo) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if call.session_id:
            out[a.GEN_AI_CONVERSATION_ID] = _c(call.session_id)
        if call.turn_id:
            out[a.OTELMW_TURN_ID] = _c(call.turn_id)
        if call.task_id:
            out[a.OTELMW_TASK_ID] = _c(call.task_id)
        return out

    def call_finished(self, call: CallInfo, result: Any, error: BaseException | None) -> Any:
        op = call.observer_state
        if not isinstance(op, _Op):
            return result
        try:
            safe_detach(op.token)
            op.token = None
            if call.operation == "chat":
                if error is None and is_stream(result):
                    return wrap_stream(result, _ChatStream(self, call, op))
                facts = ResponseFacts()
                if error is None:
                    facts.absorb(result)
                self._end_chat(call, op, facts, error, None)
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
        if not isinstance(op, _Op):
            return result
        try:
            if server_address and call.server_address is None:
                call.server_address, call.server_port = server_address, server_port
                op.span.set_attribute(a.SERVER_ADDRESS, server_address)
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

    def _end_chat(self, call: CallInfo, op: _Op, facts: ResponseFacts,
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
        span = op.span
        duration = time.perf_counter() - op.start
        mattrs = op.attrs
        response_model = _c(facts.model) if facts.model else None
        if response_model:
            mattrs[a.GEN_AI_RESPONSE_MODEL] = response_model
        if span.is_recording():
            attrs: dict[str, Any] = {}
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
        if error is not None:
            et = error_type(error)
            mattrs[a.ERROR_TYPE] = et
            span.set_attribute(a.ERROR_TYPE, et)
            span.set_status(Status(StatusCode.ERROR, _short(error, 256)))
        span.end()
        inst = self.inst
        inst.operation_duration.record(duration, mattrs)
        if facts.input_tokens is not None:
            inst.token_usage.record(facts.input_tokens, {**mattrs, a.GEN_AI_TOKEN_TYPE: "input"})
        if facts.output_tokens is not None:
            inst.token_usage.record(facts.output_tokens,
                                    {**mattrs, a.GEN_AI_TOKEN_TYPE: "output"})

    def _end_tool(self, op: _Op, error: BaseException | None) -> None:
        span = op.span
        if error is not None:
            et = error_type(error)
            op.attrs[a.ERROR_TYPE] = et
            span.set_attribute(a.ERROR_TYPE, et)
            span.set_status(Status(StatusCode.ERROR, _short(error, 256)))
        span.end()
        self.inst.tool_duration.record(time.perf_counter() - op.start, op.attrs)

    def tool_result(self, call: CallInfo, normalized: NormalizedToolResult,
                    status: str) -> None:
        op = call.observer_state
        if not isinstance(op, _Op):
            return
        try:
            self._tool_result(call, op, normalized, status)
        except Exception as exc:
            self._internal_failure("tool_result", exc)

    def _tool_result(self, call: CallInfo, op: _Op, normalized: NormalizedToolResult,
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
                attrs[a.OTELMW_RESULT_ERROR_MESSAGE] = _short(normalized.error_message)
            attrs.update(_flatten_metadata(normalized.metadata))
            raw_digest, raw_size = _digest_once(call, raw)
            attrs[a.OTELMW_RESULT_RAW_DIGEST] = raw_digest
            attrs[a.OTELMW_RESULT_RAW_SIZE] = raw_size
            attrs[a.OTELMW_RESULT_RAW_TYPE] = type_name(raw)
            content = normalized.content
            attrs[a.OTELMW_RESULT_CONTENT_DIGEST] = (
                raw_digest if content is raw else digest(content)[0])
            if self.content.on_spans:
                attrs[a.GEN_AI_TOOL_CALL_RESULT] = self.content.render(normalized.model_text())
            span.set_attributes(attrs)
        if not success and not blocked and not isinstance(raw, BaseException):
            span.set_status(Status(StatusCode.ERROR, _short(normalized.error_message, 256)))
            span.set_attribute(a.ERROR_TYPE, "tool_error")
            op.attrs[a.ERROR_TYPE] = "tool_error"
        elif isinstance(raw, BaseException):
            et = error_type(raw)
            span.set_attribute(a.ERROR_TYPE, et)
            span.set_status(Status(StatusCode.ERROR, _short(raw, 256)))
            op.attrs[a.ERROR_TYPE] = et
        self.inst.tool_results.add(1, {a.OTELMW_RESULT_SUCCESS: success,
                                       a.OTELMW_RUNTIME_ID: _c(call.runtime_id) or "native",
                                       a.GEN_AI_TOOL_NAME: _c(call.tool_name) or "unknown"})

    # ------------------------------------------------------------- middleware
    def _layer_info(self, layer: Layer, position: int
                    ) -> tuple[Layer, int, str, dict[str, Any], dict[str, Any]]:
        info = self._layers.get(id(layer))
        if info is None or info[0] is not layer or info[1] != position:
            attrs: dict[str, Any] = {
                a.OTELMW_MIDDLEWARE_KIND: layer.kind, a.OTELMW_MIDDLEWARE_NAME: layer.name,
                a.OTELMW_MIDDLEWARE_POSITION: position, a.OTELMW_MIDDLEWARE_PLUGIN: layer.plugin}
            if len(self._layers) > 4096:  # plugin reloads create new layers: stay bounded
                self._layers.clear()
            info = (layer, position, f"{layer.kind} {layer.name}", attrs, {})
            self._layers[id(layer)] = info
        return info

    def _metric_attrs(self, info: tuple[Layer, int, str, dict[str, Any], dict[str, Any]],
                      outcome: str) -> dict[str, Any]:
        by_outcome = info[4]
        m = by_outcome.get(outcome)
        if m is None:
            layer = info[0]
            m = by_outcome[outcome] = {a.OTELMW_MIDDLEWARE_KIND: layer.kind,
                                       a.OTELMW_MIDDLEWARE_NAME: layer.name,
                                       a.OTELMW_MIDDLEWARE_OUTCOME: outcome}
        return m

    def layer_started(self, call: CallInfo, layer: Layer, position: int) -> Any:
        """``rewrite_started`` and ``wrapper_started``: one span per layer, made
        current so spans the callback opens nest under it. Runs per layer per call,
        hence flat (no helper calls on the cached path)."""
        try:
            info = self._layers.get(id(layer))
            if info is None or info[0] is not layer or info[1] != position:
                info = self._layer_info(layer, position)
            span = self.tracer.start_span(info[2], kind=_INTERNAL, attributes=info[3])
            return (span, _attach(_set_span_in_context(span)), _perf_counter(), info)
        except Exception as exc:
            self._internal_failure(f"{layer.kind} started", exc)
            return None

    rewrite_started = wrapper_started = layer_started

    def _end_layer(self, token: Any, outcome: str, error: BaseException | None,
                   extra: dict[str, Any] | None) -> None:
        span, ctx_token, start, info = token
        safe_detach(ctx_token)
        if extra:
            extra[a.OTELMW_MIDDLEWARE_OUTCOME] = outcome
            span.set_attributes(extra)  # a span that is not recording ignores these
        else:
            span.set_attribute(a.OTELMW_MIDDLEWARE_OUTCOME, outcome)
        if error is not None:
            span.set_attribute(a.ERROR_TYPE, error_type(error))
            span.set_status(Status(StatusCode.ERROR, _short(error, 256)))
        span.end()
        self.inst.middleware_duration.record(
            _perf_counter() - start, info[4].get(outcome) or self._metric_attrs(info, outcome))

    def rewrite_finished(self, call: CallInfo, token: Any, outcome: str,
                         changed_keys: list[str], source: str | None, reason: str | None,
                         error: BaseException | None) -> None:
        if token is None:
            return
        try:
            extra: dict[str, Any] | None = None
            if outcome == REWRITTEN:
                src = _c(source or token[3][0].plugin)
                extra = {a.OTELMW_REWRITE_SOURCE: src}
                if token[0].is_recording():
                    extra[a.OTELMW_REWRITE_CHANGED_KEYS] = [_c(k, 128)
                                                            for k in changed_keys[:64]]
                    if reason:
                        extra[a.OTELMW_REWRITE_REASON] = _c(reason, _MAX_STR)
                self.inst.rewrites.add(1, {a.OTELMW_REWRITE_SOURCE: src,
                                           a.OTELMW_MIDDLEWARE_KIND: token[3][0].kind})
            elif outcome == FAILED and error is None:
                extra = {a.ERROR_TYPE: "bad_return_shape"}
            self._end_layer(token, outcome, error, extra)
        except Exception as exc:
            self._internal_failure("rewrite_finished", exc)

    def wrapper_finished(self, call: CallInfo, token: Any, outcome: str,
                         error: BaseException | None) -> None:
        if token is None:
            return
        try:
            self._end_layer(token, outcome, error, None)
        except Exception as exc:
            self._internal_failure("wrapper_finished", exc)

    # ------------------------------------------------------------------ turns
    def turn_started(self, turn: RuntimeContext) -> Any:
        try:
            name = _c(turn.agent_name) or "agent"
            attrs: dict[str, Any] = {a.GEN_AI_OPERATION_NAME: a.OP_INVOKE_AGENT,
                                     a.GEN_AI_AGENT_NAME: name}
            if turn.session_id:
                attrs[a.GEN_AI_CONVERSATION_ID] = turn.session_id
            if turn.runtime_id:
                attrs[a.OTELMW_RUNTIME_ID] = turn.runtime_id
            if turn.turn_id:
                attrs[a.OTELMW_TURN_ID] = turn.turn_id
            span = self.tracer.start_span(f"invoke_agent {name}", kind=_INTERNAL,
                                          attributes=attrs)
            token = otel_context.attach(trace.set_span_in_context(span))
            return (span, token, time.perf_counter(), name)
        except Exception as exc:
            self._internal_failure("turn_started", exc)
            return None

    def turn_finished(self, token: Any, error: BaseException | None, failed: bool) -> None:
        if token is None:
            return
        try:
            span, ctx_token, start, name = token
            safe_detach(ctx_token)
            mattrs: dict[str, Any] = {a.GEN_AI_OPERATION_NAME: a.OP_INVOKE_AGENT,
                                      a.GEN_AI_AGENT_NAME: name}
            if error is not None:
                et = error_type(error)
                span.set_attribute(a.ERROR_TYPE, et)
                span.set_status(Status(StatusCode.ERROR, _short(error, 256)))
                mattrs[a.ERROR_TYPE] = et
            elif failed:
                span.set_attribute(a.ERROR_TYPE, "turn_failed")
                span.set_status(Status(StatusCode.ERROR, "the agent turn failed"))
                mattrs[a.ERROR_TYPE] = "turn_failed"
            span.end()
            self.inst.agent_duration.record(time.perf_counter() - start, mattrs)
        except Exception as exc:
            self._internal_failure("turn_finished", exc)

    # ------------------------------------------------------------------ hooks
    def hook_fired(self, call: CallInfo, hook_name: str, payload: dict[str, Any],
                   failures: int) -> None:
        try:
            # Nothing to build (attributes, digests) when no log processor listens.
            enabled = getattr(self.logger, "enabled", None)
            if enabled is not None and not enabled(event_name=f"otelmw.hook.{hook_name}"):
                return
            self._emit_hook(call, hook_name, payload, failures)
        except Exception as exc:
            self._internal_failure("hook_fired", exc)

    def _emit_hook(self, call: CallInfo, hook_name: str, payload: dict[str, Any],
                   failures: int) -> None:
        # The payload's own schema versions when it carries them (a host's
        # hooks, e.g. Hermes' ``hermes.observer.v1``), else otelmw's.
        tsv, msv = payload.get("telemetry_schema_version"), payload.get(
            "middleware_schema_version")
        attrs: dict[str, Any] = {
            a.OTELMW_HOOK_NAME: hook_name,
            a.OTELMW_SCHEMA_TELEMETRY: tsv if isinstance(tsv, str) else TELEMETRY_SCHEMA_VERSION,
            a.OTELMW_SCHEMA_MIDDLEWARE: msv if isinstance(msv, str) else MIDDLEWARE_SCHEMA_VERSION,
            a.OTELMW_HOOK_FAILURES: failures,
        }
        attrs.update(self._ids(call))
        if call.api_request_id:
            attrs[a.OTELMW_API_REQUEST_ID] = _c(call.api_request_id)
        if call.operation == "chat":
            if call.model:
                attrs[a.GEN_AI_REQUEST_MODEL] = _c(call.model)
        elif call.operation == "execute_tool":  # (agent-level host hooks carry neither)
            attrs[a.GEN_AI_TOOL_NAME] = _c(call.tool_name) or "unknown"
            if call.tool_call_id:
                attrs[a.GEN_AI_TOOL_CALL_ID] = _c(call.tool_call_id)
        trace_entries = payload.get("middleware_trace")
        if trace_entries:
            attrs[a.OTELMW_MIDDLEWARE_TRACE] = json.dumps(trace_entries, default=str)[:4096]
        body: dict[str, Any] = {}
        for key, attr in (("request", a.OTELMW_REQUEST_DIGEST),
                          ("args", a.OTELMW_TOOL_ARGS_DIGEST)):
            if key in payload:
                attrs[attr] = _digest_once(call, payload[key])[0]
                if self.content.on_events:
                    body[key] = self.content.render(payload[key])
        normalized = payload.get("normalized")
        if isinstance(normalized, NormalizedToolResult):
            attrs[a.OTELMW_RESULT_SUCCESS] = bool(normalized.success)
            attrs[a.OTELMW_RESULT_RAW_DIGEST] = _digest_once(call, normalized.raw_result)[0]
            if self.content.on_events:
                body["result"] = self.content.render(normalized.model_text())
        status = payload.get("status")
        if isinstance(status, str):
            attrs[a.OTELMW_RESULT_STATUS] = status
        err = payload.get("error")
        if isinstance(err, BaseException):
            attrs[a.ERROR_TYPE] = error_type(err)
        elif isinstance(payload.get("error_type"), str):
            attrs[a.ERROR_TYPE] = payload["error_type"]
        self.logger.emit(event_name=f"otelmw.hook.{hook_name}",
                         severity_number=_logs.SeverityNumber.INFO,
                         body=body or None, attributes=attrs)

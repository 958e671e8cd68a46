"""``chat`` spans: born in ``ModelCallSpans.start`` (with the input messages when
content goes on spans), renamed when a rewrite changes the model
(``request_rewritten``), enriched by the provider SDK layer under a host-level
call (``enriched``), ended with the response's facts (``finish``/``end``) or, for
a streamed response, when the stream ends (``ChatStream``).
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace

from ...core.contract import CallInfo
from .. import attributes as a
from ..responses import ResponseFacts, is_stream
from ..streams import wrap_stream
from ..values import clean_str as _c
from ..values import otlp_number, port_number
from .model_call import ModelCallSpans
from .operation import OpState, perf_counter

# Request parameters the span records (from the effective request, at its end).
_REQUEST_PARAMS = (("temperature", a.GEN_AI_REQUEST_TEMPERATURE),
                   ("max_tokens", a.GEN_AI_REQUEST_MAX_TOKENS),
                   ("stream", a.GEN_AI_REQUEST_STREAM))


class EnrichStream:
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


class ChatStream(EnrichStream):
    """Finisher for a streamed chat response: absorbs chunks, ends the span."""

    __slots__ = ("call", "chat", "op")

    def __init__(self, chat: ChatSpans, call: CallInfo, op: OpState) -> None:
        super().__init__(ResponseFacts())
        self.chat, self.call, self.op = chat, call, op

    def end(self, ended_by: str, error: BaseException | None = None) -> None:
        try:
            self.chat.end(self.call, self.op, self.facts, error, ended_by)
        except Exception as exc:
            self.chat.signals.internal_failure("stream_end", exc)


class ChatSpans(ModelCallSpans):
    """The ``chat`` span of an LLM call."""

    def _content_on_start(self, span: trace.Span, request: Any) -> None:
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
                self._content_on_start(op.span, request)
        except Exception as exc:
            self.signals.internal_failure("request_rewritten", exc)

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

    def enriched(self, call: CallInfo, result: Any, server_address: str | None,
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
                return wrap_stream(result, EnrichStream(op.facts))
            op.facts.absorb(result)
        except Exception as exc:
            self.signals.internal_failure("call_enriched", exc)
        return result

    def finish(self, call: CallInfo, op: OpState, result: Any,
               error: BaseException | None) -> Any:
        op.leave_context()
        if error is None and is_stream(result):
            return wrap_stream(result, ChatStream(self, call, op))
        facts = ResponseFacts()
        if error is None:
            facts.absorb(result)
        self.end(call, op, facts, error, None)
        return result

    def end(self, call: CallInfo, op: OpState, facts: ResponseFacts,
            error: BaseException | None, ended_by: str | None) -> None:
        """End the span with the response's ``facts``; ``ended_by``: how a stream ended."""
        if op.facts is not None:  # what the SDK layer saw beats the host's summary
            inner = op.facts
            facts.response_id = inner.response_id or facts.response_id
            facts.model = inner.model or facts.model
            facts.finish_reasons = inner.finish_reasons or facts.finish_reasons
            if inner.input_tokens is not None:
                facts.input_tokens = inner.input_tokens
            if inner.output_tokens is not None:
                facts.output_tokens = inner.output_tokens
        span, duration = op.span, perf_counter() - op.start
        response_model = self.response_model(op, facts.model)
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
        self.close(op, duration, error, facts.input_tokens, facts.output_tokens)

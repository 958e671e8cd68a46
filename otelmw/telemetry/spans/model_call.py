"""The ``CLIENT`` span of one model call, as ``chat`` and ``embeddings`` share it:
born with the endpoint's attributes (built once per endpoint), closed with the
duration and token metric points; or, for a call whose span the host's own tracing
opened (``adopt``), the same recorded on the host's span, which the host ends.
``chat.ChatSpans`` and ``embeddings.EmbeddingsSpans`` add what each records at its end.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from opentelemetry.context import get_current
from opentelemetry.trace import SpanKind, get_current_span

from ...core.contract import CallInfo
from .. import attributes
from ..content.values import clean_str as _c
from ..content.values import port_number
from .operation import (
    HostSpan,
    OpState,
    Signals,
    attach,
    call_ids,
    mark_exception,
    perf_counter,
    set_span_in_context,
)

_CLIENT = SpanKind.CLIENT
_MAX_ENDPOINTS = 1024  # one entry per distinct model/endpoint: bounded


class Endpoint(NamedTuple):
    """What every call to one provider/model/server/API mode starts with."""

    span_name: str
    span_attributes: dict[str, Any]  # shared by those calls: copied, never mutated
    metric_attributes: dict[str, Any]  # likewise


class ModelCallSpans:
    """``start`` and the metric points of a chat or embeddings span."""

    def __init__(self, signals: Signals) -> None:
        self.signals = signals
        self.tracer, self.inst, self.content = signals.tracer, signals.inst, signals.content
        self._endpoints: dict[tuple[Any, ...], Endpoint] = {}

    def _endpoint(self, key: tuple[Any, ...]) -> Endpoint:
        """Built (and sanitized) once per key; server.address/port are metric
        attributes too (GenAI conventions), whether or not the span is sampled."""
        operation, provider, model, address, port, api_mode = key
        attrs: dict[str, Any] = {attributes.GEN_AI_OPERATION_NAME: operation,
                                 attributes.GEN_AI_PROVIDER_NAME: _c(provider) or "unknown"}
        model = _c(model)
        if model:
            attrs[attributes.GEN_AI_REQUEST_MODEL] = model
        if address:
            attrs[attributes.SERVER_ADDRESS] = _c(address)
            port = port_number(port)
            if port:
                attrs[attributes.SERVER_PORT] = port
        metric_attrs = dict(attrs)
        if api_mode:
            attrs[attributes.OTELMW_API_MODE] = _c(api_mode)
        if len(self._endpoints) > _MAX_ENDPOINTS:
            self._endpoints.clear()
        endpoint = self._endpoints[key] = Endpoint(
            f"{operation} {model}" if model else operation, attrs, metric_attrs)
        return endpoint

    def _endpoint_of(self, call: CallInfo) -> Endpoint:
        key = (call.operation, call.provider, call.model, call.server_address,
               call.server_port, call.api_mode)
        endpoint = self._endpoints.get(key)
        return endpoint if endpoint is not None else self._endpoint(key)

    def start(self, call: CallInfo, request: Any) -> OpState:
        endpoint = self._endpoint_of(call)
        # The cheap ids go in with start_span (one attribute set instead of two);
        # request parameters wait for the span's end (a rewrite may change them),
        # content, the costly part, for is_recording().
        attrs = call_ids(call, dict(endpoint.span_attributes))
        span = self.tracer.start_span(endpoint.span_name, kind=_CLIENT, attributes=attrs)
        rendered = self._content_on_start(request) if (
            self.content.on_spans and span.is_recording()) else None
        context = set_span_in_context(span)
        op = OpState(span, attach(context), perf_counter(),
                     dict(endpoint.metric_attributes), request, context)
        op.content, op.model = rendered, call.model
        return op

    def adopt(self, call: CallInfo, request: Any) -> OpState:
        """The call's span is the host's own, current here (Strands' ``chat`` span): the
        call is recorded on it as ``start`` would record it on a span of otelmw's
        (through ``HostSpan``: the host's own attributes, name, kind and end stay its
        own); the host's span stays the current one, so the call's layers are its
        children. A current span that does not record: a span of otelmw's own, as
        ``start``."""
        current = get_current_span()
        if not current.is_recording():
            return self.start(call, request)
        span = HostSpan(current)
        endpoint = self._endpoint_of(call)
        span.set_attributes(call_ids(call, dict(endpoint.span_attributes)))
        rendered = self._content_on_start(request) if self.content.on_spans else None
        op = OpState(span, None, perf_counter(), dict(endpoint.metric_attributes), request,
                     get_current())
        op.content, op.model = rendered, call.model
        return op

    def _content_on_start(self, request: Any) -> Any:
        """The request's content, rendered when the call starts (content on spans,
        recording), kept as ``OpState.content`` for the span's end."""
        return None

    def response_model(self, op: OpState, model: str | None) -> str | None:
        """The answering model, cleaned; it goes on the metric points too."""
        clean = _c(model) if model else None
        if clean:
            op.attrs[attributes.GEN_AI_RESPONSE_MODEL] = clean
        return clean

    def close(self, op: OpState, duration: float, error: BaseException | None,
              input_tokens: int | None, output_tokens: int | None) -> None:
        """End the span (failed by ``error``) and record its duration and token points
        (unless the host records them: ``OpState.measured``)."""
        mattrs = op.attrs
        if error is not None:
            mark_exception(op.span, error, mattrs, with_content=self.content.on_spans)
        op.span.end()
        if not op.measured:
            return
        inst = self.inst
        inst.operation_duration.record(duration, mattrs)
        if input_tokens is not None:
            inst.token_usage.record(input_tokens,
                                    {**mattrs, attributes.GEN_AI_TOKEN_TYPE: "input"})
        if output_tokens is not None:
            inst.token_usage.record(output_tokens,
                                    {**mattrs, attributes.GEN_AI_TOKEN_TYPE: "output"})

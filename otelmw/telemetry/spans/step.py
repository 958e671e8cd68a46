"""A host's own attributes on a call's span (``host.describe_call``) and the spans of
a host's own steps over several calls (``host.open_step``: a router over its
attempts): ``INTERNAL``, current while the step runs so its calls are children, ended
when the step returns or, when it returns a stream, when that stream ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from ...core.contract import CallInfo
from ..attributes import OTELMW_STREAM_ENDED_BY
from ..content.values import clean_str, otlp_number
from ..setup.context import safe_detach
from ..shapes.responses import is_stream
from ..shapes.streams import wrap_stream
from .operation import OpState, Signals, attach, mark_exception, set_span_in_context

_INTERNAL = SpanKind.INTERNAL
_MAX_ATTRIBUTES = 32  # a host's own attributes per report: bounded


def host_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes OTLP can carry (str keys; str, bool, int, float values), cleaned."""
    out: dict[str, Any] = {}
    for key, value in list(attributes.items())[:_MAX_ATTRIBUTES]:
        if not isinstance(key, str) or not key:
            continue
        v = clean_str(value) if isinstance(value, str) else otlp_number(value)
        if v is not None and not (isinstance(v, float) and v != v):  # NaN: no value
            out[clean_str(key, 128)] = v
    return out


class StepToken:
    """An open step: its span and the attach that made it current."""

    __slots__ = ("context_token", "span")

    def __init__(self, span: trace.Span, context_token: object) -> None:
        self.span, self.context_token = span, context_token


class StepStream:
    """Finisher of a stream a step returned: the step's span ends with it."""

    __slots__ = ("spans", "token")

    def __init__(self, spans: StepSpans, token: StepToken) -> None:
        self.spans, self.token = spans, token

    def chunk(self, chunk: Any) -> None:
        pass

    def end(self, ended_by: str, error: BaseException | None = None) -> None:
        self.spans.end(self.token, error, ended_by)


class StepSpans:
    """Host steps' spans and host attributes on calls' spans."""

    def __init__(self, signals: Signals) -> None:
        self.signals = signals
        self.tracer, self.content = signals.tracer, signals.content

    def call_described(self, call: CallInfo, attributes: Mapping[str, Any]) -> None:
        op = call.observation
        try:
            if isinstance(op, OpState) and op.span.is_recording():
                op.span.set_attributes(host_attributes(attributes))
        except Exception as exc:
            self.signals.internal_failure("call_described", exc)

    def started(self, name: str, attributes: Mapping[str, Any]) -> StepToken | None:
        try:
            span = self.tracer.start_span(clean_str(name) or "step", kind=_INTERNAL,
                                          attributes=host_attributes(attributes))
            return StepToken(span, attach(set_span_in_context(span)))
        except Exception as exc:
            self.signals.internal_failure("step_started", exc)
            return None

    def described(self, token: object, attributes: Mapping[str, Any]) -> None:
        try:
            if isinstance(token, StepToken) and token.span.is_recording():
                token.span.set_attributes(host_attributes(attributes))
        except Exception as exc:
            self.signals.internal_failure("step_described", exc)

    def finished(self, token: object, result: Any,
                 error: BaseException | None) -> Any:
        if not isinstance(token, StepToken):
            return result
        try:
            safe_detach(token.context_token)
            token.context_token = None
            if error is None and is_stream(result):
                return wrap_stream(result, StepStream(self, token))
            self.end(token, error, None)
        except Exception as exc:
            self.signals.internal_failure("step_finished", exc)
        return result

    def end(self, token: StepToken, error: BaseException | None, ended_by: str | None) -> None:
        try:
            span = token.span
            if ended_by is not None:
                span.set_attribute(OTELMW_STREAM_ENDED_BY, ended_by)
            if error is not None:
                mark_exception(span, error, with_content=self.content.on_spans)
            span.end()
        except Exception as exc:
            self.signals.internal_failure("step_end", exc)

"""``invoke_agent`` spans: one per agent turn (``Pipeline.turn``), born current
in the turn's context (``started``), left by a context that still holds a turn
finished elsewhere (``left``), failed by an error or a turn the host marked
failed, ended with the ``gen_ai.invoke_agent.duration`` point (``finished``).

Under content capture on spans, the span also carries the turn's input and final
answer as OpenInference's ``input.value``/``output.value`` (what Arize Phoenix
shows for an agent span): the input messages of the turn's first model call and
the output messages of its last, as JSON text in the GenAI conventions' shapes (those
of the chat spans' ``gen_ai.input.messages``/``gen_ai.output.messages``), gathered by
``TurnContent`` from the chat spans that end inside the turn (``spans.chat`` reports
them, ``events.chat_messages`` renders them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from ...core.contract import RuntimeContext
from .. import attributes
from ..content.policy import mime_type
from ..content.values import clean_str as _c
from ..content.values import put_present
from ..setup.context import end_current, restore_context
from .operation import (
    Signals,
    attach,
    mark_error,
    mark_exception,
    perf_counter,
    set_span_in_context,
)

_INTERNAL = SpanKind.INTERNAL
# The turn's ``TurnContent`` in the OpenTelemetry context the turn attaches (only
# under content capture on spans): carried wherever the turn's spans are.
# An OpenTelemetry context key, internal to the process: never exported.
_TURN_CONTENT = otel_context.create_key("otelmw.turn_content")


class TurnContent:
    """The turn's input and final answer as its model calls report them: the input
    of the call that started first, the output of the last one that ended with one
    (a judge model called inside a wrapper ends before the call it judges)."""

    __slots__ = ("input_started", "input_value", "output_value")

    def __init__(self) -> None:
        self.input_value: str | None = None
        self.input_started = 0.0
        self.output_value: str | None = None

    def model_call_ended(self, started: float, input_value: str | None,
                         output_value: str | None) -> None:
        if input_value is not None and (self.input_value is None
                                        or started < self.input_started):
            self.input_value, self.input_started = input_value, started
        if output_value is not None:
            self.output_value = output_value


def current_turn_content() -> TurnContent | None:
    """The ``TurnContent`` of the turn the current context is in (content on spans)."""
    found = otel_context.get_value(_TURN_CONTENT)
    return found if isinstance(found, TurnContent) else None


class TurnToken(NamedTuple):
    """What ``started`` hands the pipeline and gets back at the turn's end."""

    span: trace.Span
    context_token: object  # the attach that made the span current
    start: float
    agent_name: str
    content: TurnContent | None  # content on spans and the span records
    measured: bool  # otelmw records the duration point (not the host: host_measured)


class TurnSpans:
    """The ``invoke_agent`` span of an agent turn."""

    def __init__(self, signals: Signals,
                 shares_host_meters: Callable[[], bool] = lambda: False) -> None:
        """``shares_host_meters()``: otelmw's meter provider is the one a host's own meter
        records with (the global one), so a turn the host measures gets no point here."""
        self.signals = signals
        self.tracer, self.inst, self.content = signals.tracer, signals.inst, signals.content
        self.shares_host_meters = shares_host_meters

    def started(self, turn: RuntimeContext) -> TurnToken | None:
        try:
            name = _c(turn.agent_name) or "agent"
            attrs: dict[str, Any] = {attributes.GEN_AI_OPERATION_NAME: attributes.OP_INVOKE_AGENT,
                                     attributes.GEN_AI_AGENT_NAME: name}
            put_present(attrs, ((attributes.GEN_AI_CONVERSATION_ID, turn.session_id),
                                (attributes.OTELMW_RUNTIME_ID, turn.runtime_id),
                                (attributes.OTELMW_TURN_ID, turn.turn_id)))
            span = self.tracer.start_span(f"invoke_agent {name}", kind=_INTERNAL,
                                          attributes=attrs)
            ctx, content = set_span_in_context(span), None
            if self.content.on_spans and span.is_recording():
                content = TurnContent()
                ctx = otel_context.set_value(_TURN_CONTENT, content, ctx)
            mark = turn.turn
            measured = not (mark is not None and mark.host_measured
                            and self.shares_host_meters())
            return TurnToken(span, attach(ctx), perf_counter(), name, content, measured)
        except Exception as exc:
            self.signals.internal_failure("turn_started", exc)
            return None

    def left(self, token: object) -> None:
        """A context still holding a finished turn (its starter's thread when it
        was finished on another, a thread it started) leaves it: back to the
        OpenTelemetry context from before the turn."""
        try:
            if isinstance(token, TurnToken):
                restore_context(token.context_token)
        except Exception as exc:
            self.signals.internal_failure("turn_left", exc)

    def finished(self, token: object, error: BaseException | None,
                 failed: bool) -> None:
        if not isinstance(token, TurnToken):
            return
        try:
            span = token.span
            end_current(token.context_token, span)
            mattrs: dict[str, Any] = {attributes.GEN_AI_OPERATION_NAME: attributes.OP_INVOKE_AGENT,
                                      attributes.GEN_AI_AGENT_NAME: token.agent_name}
            if error is not None:
                mark_exception(span, error, mattrs, with_content=self.content.on_spans)
            elif failed:
                mark_error(span, "turn_failed", "the agent turn failed", mattrs)
            content = token.content
            if content is not None:
                _show_turn_content(span, content)
            span.end()
            if token.measured:
                # The turn's context is detached already: name its span, so the point
                # carries the exemplar (trace id) that links a dashboard to the trace.
                self.inst.agent_duration.record(perf_counter() - token.start, mattrs,
                                                context=set_span_in_context(span))
        except Exception as exc:
            self.signals.internal_failure("turn_finished", exc)


def _show_turn_content(span: trace.Span, content: TurnContent) -> None:
    shown: dict[str, Any] = {}
    for text, value_key, mime_key in ((content.input_value, attributes.INPUT_VALUE,
                                       attributes.INPUT_MIME_TYPE),
                                      (content.output_value, attributes.OUTPUT_VALUE,
                                       attributes.OUTPUT_MIME_TYPE)):
        if text is not None:
            shown[value_key], shown[mime_key] = text, mime_type(text)
    if shown:
        span.set_attributes(shown)

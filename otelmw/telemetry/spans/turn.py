"""``invoke_agent`` spans: one per agent turn (``Pipeline.turn``), born current
in the turn's context (``started``), left by a context that still holds a turn
finished elsewhere (``left``), failed by an error or a turn the host marked
failed, ended with the ``gen_ai.invoke_agent.duration`` point (``finished``)."""

from __future__ import annotations

from typing import Any, NamedTuple

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from ...core.contract import RuntimeContext
from .. import attributes as a
from ..context import end_current, restore_context
from ..values import clean_str as _c
from ..values import put_present
from .operation import (
    Signals,
    attach,
    mark_error,
    mark_exception,
    perf_counter,
    set_span_in_context,
)

_INTERNAL = SpanKind.INTERNAL


class TurnToken(NamedTuple):
    """What ``started`` hands the pipeline and gets back at the turn's end."""

    span: trace.Span
    context_token: object  # the attach that made the span current
    start: float
    agent_name: str


class TurnSpans:
    """The ``invoke_agent`` span of an agent turn."""

    def __init__(self, signals: Signals) -> None:
        self.signals = signals
        self.tracer, self.inst, self.content = signals.tracer, signals.inst, signals.content

    def started(self, turn: RuntimeContext) -> TurnToken | None:
        try:
            name = _c(turn.agent_name) or "agent"
            attrs: dict[str, Any] = {a.GEN_AI_OPERATION_NAME: a.OP_INVOKE_AGENT,
                                     a.GEN_AI_AGENT_NAME: name}
            put_present(attrs, ((a.GEN_AI_CONVERSATION_ID, turn.session_id),
                                (a.OTELMW_RUNTIME_ID, turn.runtime_id),
                                (a.OTELMW_TURN_ID, turn.turn_id)))
            span = self.tracer.start_span(f"invoke_agent {name}", kind=_INTERNAL,
                                          attributes=attrs)
            return TurnToken(span, attach(set_span_in_context(span)), perf_counter(), name)
        except Exception as exc:
            self.signals.internal_failure("turn_started", exc)
            return None

    def left(self, token: TurnToken) -> None:
        """A context still holding a finished turn (its starter's thread when it
        was finished on another, a thread it started) leaves it: back to the
        OpenTelemetry context from before the turn."""
        try:
            restore_context(token.context_token)
        except Exception as exc:
            self.signals.internal_failure("turn_left", exc)

    def finished(self, token: TurnToken | None, error: BaseException | None,
                 failed: bool) -> None:
        if token is None:
            return
        try:
            span = token.span
            end_current(token.context_token, span)
            mattrs: dict[str, Any] = {a.GEN_AI_OPERATION_NAME: a.OP_INVOKE_AGENT,
                                      a.GEN_AI_AGENT_NAME: token.agent_name}
            if error is not None:
                mark_exception(span, error, mattrs, with_content=self.content.on_spans)
            elif failed:
                mark_error(span, "turn_failed", "the agent turn failed", mattrs)
            span.end()
            self.inst.agent_duration.record(perf_counter() - token.start, mattrs)
        except Exception as exc:
            self.signals.internal_failure("turn_finished", exc)

"""The GenAI conventions' events of a chat call, as OTLP log records through the
logger otelmw's hook events use, in the context of the call's ``chat`` span:

* ``gen_ai.client.inference.operation.details`` — once per chat call, when content
  capture includes events (``EVENT_ONLY``, ``SPAN_AND_EVENT``; the event is opt-in
  and exists to carry content): the span's attributes, and the call's system
  instructions, input and output messages in structured form. Severity DEBUG, as
  the conventions ask.
* ``gen_ai.client.operation.exception`` — once per failed chat call, in every mode:
  ``exception.type`` and ``exception.message`` (the redacted description the span's
  status has; a provider's error response summarized unless content goes on
  events), ``exception.stacktrace`` only under event capture, with the call's metric
  attributes. Severity WARN, as the conventions ask.

``chat_messages`` is the one place a chat call's messages are rendered for these
events and for the agent span (``spans.turn.TurnContent``).
"""

from __future__ import annotations

import json
import traceback
from typing import Any, NamedTuple

from opentelemetry import _logs
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as g
from opentelemetry.trace import set_span_in_context

from ..core.contract import CallInfo
from . import attributes as a
from .content import ContentPolicy
from .responses import get
from .spans.operation import OpState, Signals
from .spans.turn import current_turn_content
from .values import error_description, error_type

# Span attributes that hold content (as JSON text): the event's content comes from
# ``chat_messages`` alone, in structured form.
_SPAN_CONTENT_KEYS = frozenset({a.GEN_AI_INPUT_MESSAGES, a.GEN_AI_OUTPUT_MESSAGES,
                                a.GEN_AI_SYSTEM_INSTRUCTIONS, g.GEN_AI_TOOL_DEFINITIONS})


class ChatMessages(NamedTuple):
    """One chat call's content, rendered (redacted, truncated JSON text); ``None``
    where the request or response has none."""

    system_instructions: str | None
    input_messages: str | None
    output_messages: str | None


def chat_messages(content: ContentPolicy, request: Any, response: Any) -> ChatMessages:
    """The system instructions, input and output messages of one chat call, with
    ``ContentPolicy.render``. The message shape comes from here alone, so a renderer
    of the conventions' message parts takes over everywhere by changing this."""
    system = inputs = outputs = None
    if isinstance(request, dict):
        msgs = request.get("messages", request.get("input"))
        if msgs is not None:
            inputs = content.render(msgs)
        # Anthropic's ``system``, the Responses API's ``instructions``
        instructions = request.get("system", request.get("instructions"))
        if instructions:
            system = content.render(instructions)
    if response is not None:
        choices = get(response, "choices")  # OpenAI chat completions
        if isinstance(choices, list | tuple) and choices:
            out: Any = [get(c, "message") for c in choices]
        else:  # Anthropic messages, the Responses API
            out = get(response, "content")
            if out is None:
                out = get(response, "output")
        if out is not None:
            outputs = content.render(out)
    return ChatMessages(system, inputs, outputs)


def _structured(text: str) -> Any:
    """On events the conventions want messages structured: the parsed JSON, or the
    text when it is not JSON (cut by truncation)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


class InferenceEvents:
    """``chat_ended``: the conventions' events of one chat call, and its content
    reported to the turn it runs in (for the agent span)."""

    def __init__(self, signals: Signals) -> None:
        self.signals, self.logger, self.content = signals, signals.logger, signals.content
        # What ``chat_ended`` has to do on success: render content for the event
        # or for the agent span. Read by ``spans.chat`` before calling.
        self.on_content = self.content.on_events or self.content.on_spans
        self._enabled = getattr(self.logger, "enabled", None)

    def _listened(self, event_name: str) -> bool:
        """Whether a log processor wants ``event_name`` (nothing is built otherwise)."""
        return self._enabled is None or bool(self._enabled(event_name=event_name))

    def chat_ended(self, call: CallInfo, op: OpState, response: Any,
                   error: BaseException | None) -> None:
        """The chat span of ``op`` ended (with ``response`` or ``error``)."""
        try:
            turn = current_turn_content() if self.content.on_spans else None
            details = self.content.on_events and self._listened(a.EV_INFERENCE_DETAILS)
            if turn is not None or details:
                messages = chat_messages(self.content, op.request,
                                         response if error is None else None)
                if turn is not None:
                    turn.model_call_ended(op.start, messages.input_messages,
                                          messages.output_messages)
                if details:
                    self._details(op, messages)
            if error is not None and self._listened(a.EV_OPERATION_EXCEPTION):
                self._exception(op, error)
        except Exception as exc:
            self.signals.internal_failure("chat_events", exc)

    def _details(self, op: OpState, messages: ChatMessages) -> None:
        attrs: dict[str, Any] = dict(op.attrs)  # present whether or not the span records
        recorded = getattr(op.span, "attributes", None)  # an SDK span: all it recorded
        if recorded:
            attrs.update((k, v) for k, v in recorded.items() if k not in _SPAN_CONTENT_KEYS)
        for key, text in ((a.GEN_AI_SYSTEM_INSTRUCTIONS, messages.system_instructions),
                          (a.GEN_AI_INPUT_MESSAGES, messages.input_messages),
                          (a.GEN_AI_OUTPUT_MESSAGES, messages.output_messages)):
            if text is not None:
                attrs[key] = _structured(text)
        self.logger.emit(event_name=a.EV_INFERENCE_DETAILS,
                         severity_number=_logs.SeverityNumber.DEBUG, attributes=attrs,
                         context=set_span_in_context(op.span))

    def _exception(self, op: OpState, error: BaseException) -> None:
        with_content = self.content.on_events
        attrs: dict[str, Any] = dict(op.attrs)  # operation, provider, model, error.type
        attrs[a.EXCEPTION_TYPE] = error_type(error)
        attrs[a.EXCEPTION_MESSAGE] = error_description(error, with_content)
        if with_content:  # its last line is the message, whatever the error holds
            attrs[a.EXCEPTION_STACKTRACE] = self.content.render(
                "".join(traceback.format_exception(error)))
        self.logger.emit(event_name=a.EV_OPERATION_EXCEPTION,
                         severity_number=_logs.SeverityNumber.WARN, attributes=attrs,
                         context=set_span_in_context(op.span))

"""The GenAI conventions' events of a chat call, as OTLP log records through the
logger otelmw's hook events use, in the context of the call's ``chat`` span:

* ``gen_ai.client.inference.operation.details`` — once per chat call, when content
  capture includes events (``EVENT_ONLY``, ``SPAN_AND_EVENT``; the event is opt-in
  and exists to carry content): the span's attributes, and the call's
  ``gen_ai.input.messages``, ``gen_ai.output.messages`` (from the whole response or
  the stream's chunks), ``gen_ai.system_instructions`` and ``gen_ai.tool.definitions``
  in the conventions' shapes (``messages``), as structured values, not JSON text.
  Severity DEBUG, as the conventions ask.
* ``gen_ai.client.operation.exception`` — once per failed chat call, in every mode:
  ``exception.type`` and ``exception.message`` (the redacted description the span's
  status has; a provider's error response summarized unless content goes on
  events), ``exception.stacktrace`` only under event capture, with the call's metric
  attributes. Severity WARN, as the conventions ask.

``chat_messages`` is the one place a chat call's messages are rendered for these
events and for the agent span (``spans.turn.TurnContent``: the JSON text of the same
shapes).
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from typing import Any, NamedTuple

from opentelemetry import _logs
from opentelemetry.context import Context
from opentelemetry.trace import set_span_in_context

from ...core.contract import CallInfo
from ...core.failures import error_type
from ..attributes import (
    EV_INFERENCE_DETAILS,
    EV_OPERATION_EXCEPTION,
    EXCEPTION_MESSAGE,
    EXCEPTION_STACKTRACE,
    EXCEPTION_TYPE,
    GEN_AI_INPUT_MESSAGES,
    GEN_AI_OUTPUT_MESSAGES,
    GEN_AI_SYSTEM_INSTRUCTIONS,
    GEN_AI_TOOL_DEFINITIONS,
)
from ..content.policy import ContentPolicy, MessageValue
from ..content.values import error_description
from ..spans.operation import OpState, Signals
from ..spans.turn import current_turn_content
from . import gemini
from .messages import (
    newest_input_messages,
    output_messages,
    system_instructions,
    tool_definitions,
)
from .responses import OutputSink

# Span attributes that hold content (as JSON text): the event's content comes from
# ``chat_messages`` alone, in structured form.
_SPAN_CONTENT_KEYS = frozenset({GEN_AI_INPUT_MESSAGES, GEN_AI_OUTPUT_MESSAGES,
                                GEN_AI_SYSTEM_INSTRUCTIONS, GEN_AI_TOOL_DEFINITIONS})


class ChatMessages(NamedTuple):
    """One chat call's content in the conventions' shapes (``messages``), each cut to
    the content limit and redacted (``ContentPolicy.message_value``); ``None`` where
    the call has none (or it was not asked for)."""

    input_messages: MessageValue | None
    output_messages: MessageValue | None
    system_instructions: MessageValue | None
    tool_definitions: MessageValue | None


def chat_messages(content: ContentPolicy, request: Any, response: Any,
                  collected: OutputSink | None = None, *,
                  with_request_extras: bool = True,
                  rendered: ChatMessages | None = None) -> ChatMessages:
    """The input and output messages of one chat call and, ``with_request_extras``,
    its system instructions and tool definitions. The output comes from ``collected``
    (what the chat span collected from the response or its stream chunks) when there
    is one, else from the whole ``response`` (``None``: no output). ``rendered``: what
    the chat span rendered of this call's ``request`` (and of its output, once it
    did), taken as it is instead of rendered again."""
    fit = content.message_value
    if rendered is None:
        is_gemini = gemini.is_request(request)
        # The input messages shaped newest first, only as many as the attribute keeps.
        inputs = content.newest_messages_value(
            gemini.newest_input_messages(request) if is_gemini
            else newest_input_messages(request))
        system: list[dict[str, Any]] = []
        tools: list[dict[str, Any]] = []
        if with_request_extras and is_gemini:
            system, tools = gemini.system_instructions(request), gemini.tool_definitions(request)
        elif with_request_extras and isinstance(request, Mapping):
            system = system_instructions(request)
            tools = tool_definitions(request.get("tools"))
        rendered = ChatMessages(
            input_messages=inputs, output_messages=None,
            system_instructions=fit(system) if system else None,
            tool_definitions=fit(tools) if tools else None)
    output = rendered.output_messages
    if output is None and (collected is not None or response is not None):
        outputs = (collected.messages() if collected is not None else
                   gemini.output_messages(response) if gemini.is_response(response) else
                   output_messages(response))
        output = fit(outputs) if outputs else None
    if with_request_extras:
        # (the chat span rendered the output too, the usual case: nothing to replace)
        return rendered if output is rendered.output_messages else rendered._replace(
            output_messages=output)
    return ChatMessages(rendered.input_messages, output, None, None)


def _plain(attributes: Mapping[str, Any]) -> Mapping[str, Any]:
    """``attributes`` as a dict when their mapping copies itself into one (the SDK's
    ``BoundedAttributes`` behind a span's ``attributes`` view), else as they are."""
    copy = getattr(attributes, "copy", None)
    if copy is not None:
        plain = copy()
        if type(plain) is dict:
            return plain
    return attributes


def _span_context(op: OpState) -> Context:
    """The context of ``op``'s span, where its events are emitted. Every chat ``OpState``
    carries the context its span was made current in (``ModelCallSpans.start``); the
    fallback keeps an operation made elsewhere from failing the event."""
    return op.context if op.context is not None else set_span_in_context(op.span)


def _text(fitted: MessageValue | None) -> str | None:
    return None if fitted is None else fitted.text


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

    def details_wanted(self) -> bool:
        """Whether a chat call's inference event is to be built (event capture, and a
        log processor that wants it): the chat span collects its output then."""
        return self.content.on_events and self._listened(EV_INFERENCE_DETAILS)

    def chat_ended(self, call: CallInfo, op: OpState, response: Any,
                   error: BaseException | None,
                   collected: OutputSink | None = None) -> None:
        """The chat span of ``op`` ended (with ``response`` or ``error``; ``collected``:
        the output messages its facts collected, whole or streamed)."""
        try:
            turn = current_turn_content() if self.content.on_spans else None
            details = self.details_wanted()
            if turn is not None or details:
                failed = error is not None
                messages = chat_messages(self.content, op.request,
                                         None if failed else response,
                                         None if failed else collected,
                                         with_request_extras=details, rendered=op.content)
                if turn is not None:
                    turn.model_call_ended(op.start, _text(messages.input_messages),
                                          _text(messages.output_messages))
                if details:
                    self._details(op, messages)
        except Exception as exc:
            self.signals.internal_failure("chat_events", exc)
        try:
            if error is not None and self._listened(EV_OPERATION_EXCEPTION):
                self._exception(op, error)
        except Exception as exc:
            self.signals.internal_failure("chat_events", exc)

    def _details(self, op: OpState, messages: ChatMessages) -> None:
        attrs: dict[str, Any] = dict(op.attrs)  # present whether or not the span records
        recorded = getattr(op.span, "attributes", None)  # an SDK span: all it recorded
        if recorded:
            # The SDK span's attributes are a read-only view of a ``BoundedAttributes``,
            # which reads key by key in Python; its ``copy()`` is a plain dict copy
            # (benchmark 6: ~16 attributes read per call, every call with the event).
            attrs.update(_plain(recorded))
            for key in _SPAN_CONTENT_KEYS:  # (set again below, from the structured form)
                attrs.pop(key, None)
        # On events the conventions want these structured, not as JSON text.
        for key, fitted in ((GEN_AI_SYSTEM_INSTRUCTIONS, messages.system_instructions),
                            (GEN_AI_INPUT_MESSAGES, messages.input_messages),
                            (GEN_AI_OUTPUT_MESSAGES, messages.output_messages),
                            (GEN_AI_TOOL_DEFINITIONS, messages.tool_definitions)):
            if fitted is not None:
                attrs[key] = fitted.value
        self.logger.emit(event_name=EV_INFERENCE_DETAILS,
                         severity_number=_logs.SeverityNumber.DEBUG, attributes=attrs,
                         context=_span_context(op))

    def _exception(self, op: OpState, error: BaseException) -> None:
        with_content = self.content.on_events
        attrs: dict[str, Any] = dict(op.attrs)  # operation, provider, model, error.type
        attrs[EXCEPTION_TYPE] = error_type(error)
        attrs[EXCEPTION_MESSAGE] = error_description(error, with_content)
        if with_content:  # its last line is the message, whatever the error holds
            attrs[EXCEPTION_STACKTRACE] = self.content.render(
                "".join(traceback.format_exception(error)))
        self.logger.emit(event_name=EV_OPERATION_EXCEPTION,
                         severity_number=_logs.SeverityNumber.WARN, attributes=attrs,
                         context=_span_context(op))

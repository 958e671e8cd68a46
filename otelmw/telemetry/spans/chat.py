"""``chat`` spans: born in ``ModelCallSpans.start`` (which renders the request's
messages, system instructions and tool definitions in the conventions' shapes when
content goes on spans) or adopted from the host's tracing (``ModelCallSpans.adopt``:
the host's own ``chat`` span, recorded on through ``HostSpan`` and ended by the host),
renamed when a rewrite changes the model (``request_rewritten``), enriched by the
provider SDK layer under a host-level call (``enriched``), ended with the rendered
request content, the response's facts and output messages (``finish``/``end``) or, for
a streamed response, when the stream ends (``ChatStream``).
"""

from __future__ import annotations

from typing import Any

from ...core.contract import CallInfo
from .. import attributes
from ..content.values import clean_str as _c
from ..content.values import otlp_number, port_number
from ..shapes import gemini
from ..shapes.events import ChatMessages, InferenceEvents, chat_messages
from ..shapes.messages import OutputCollector
from ..shapes.responses import ResponseFacts, is_stream, raw_response_body
from ..shapes.streams import wrap_stream
from .model_call import ModelCallSpans
from .operation import HostSpan, OpState, Signals, perf_counter

# Numeric request parameters the span records (from the effective request, at its
# end), by the request key of OpenAI chat/Responses and Anthropic messages.
_REQUEST_PARAMS = {"temperature": attributes.GEN_AI_REQUEST_TEMPERATURE,
                   "max_tokens": attributes.GEN_AI_REQUEST_MAX_TOKENS,
                   "stream": attributes.GEN_AI_REQUEST_STREAM,
                   "top_p": attributes.GEN_AI_REQUEST_TOP_P,
                   "top_k": attributes.GEN_AI_REQUEST_TOP_K,
                   "frequency_penalty": attributes.GEN_AI_REQUEST_FREQUENCY_PENALTY,
                   "presence_penalty": attributes.GEN_AI_REQUEST_PRESENCE_PENALTY,
                   "seed": attributes.GEN_AI_REQUEST_SEED}
# Request keys read by ``_shaped_request_attributes`` (rarely set: looked at only then).
_SHAPED_KEYS = frozenset({"stop", "stop_sequences", "n", "response_format", "text",
                          "service_tier", "max_completion_tokens", "max_output_tokens",
                          "extra_body"})
_MAX_STOP_SEQUENCES = 16
# OpenAI ``response_format`` / Responses ``text.format`` type → ``gen_ai.output.type``
# (the official OpenAI instrumentation's mapping: a JSON schema or object is ``json``,
# any other type, ``text`` first, is named as it is).
_JSON_FORMATS = ("json_schema", "json_object")


def request_attributes(request: dict[str, Any], attrs: dict[str, Any],
                       provider: str | None) -> None:
    """The request parameters of the GenAI conventions that ``request`` sets, into
    ``attrs`` (parameters, not content: recorded whatever the capture mode); the
    ``openai.*`` ones for the ``openai`` provider only. One pass over the request's
    keys (a few): this runs for every chat span."""
    shaped = False
    for key, value in request.items():
        attr = _REQUEST_PARAMS.get(key)
        if attr is not None:
            v = otlp_number(value)  # max_tokens=2**70: not exportable
            if v is not None:
                attrs[attr] = v
        elif key in _SHAPED_KEYS:
            shaped = True
        elif key == "config" and gemini.is_request(request):  # Google Gen AI: all in config
            gemini.request_attributes(value, attrs)
    if shaped:
        _shaped_request_attributes(request, attrs, provider)


# otelmw's api_mode → openai.api.type (Hermes calls the Responses API codex_responses).
_OPENAI_API_TYPES = {"chat_completions": "chat_completions", "responses": "responses",
                     "codex_responses": "responses"}


def _shaped_request_attributes(request: dict[str, Any], attrs: dict[str, Any],
                               provider: str | None) -> None:
    # Parameters the SDK signature lacks travel in ``extra_body`` (Anthropic 2.x:
    # temperature, top_p, top_k); they are sent all the same. The request's own win.
    extra = request.get("extra_body")
    if isinstance(extra, dict) and extra:
        for key, value in extra.items():
            attr = _REQUEST_PARAMS.get(key) if isinstance(key, str) else None
            if attr is not None and attr not in attrs:
                v = otlp_number(value)
                if v is not None:
                    attrs[attr] = v
        request = {**extra, **{k: v for k, v in request.items() if v is not None}}
    # OpenAI's newer names for max_tokens win over it, as the official instrumentation
    # reads them (chat completions: max_completion_tokens; Responses: max_output_tokens).
    v = otlp_number(request.get("max_completion_tokens"))
    if v is None:
        v = otlp_number(request.get("max_output_tokens"))
    if v is not None:
        attrs[attributes.GEN_AI_REQUEST_MAX_TOKENS] = v
    stop = request.get("stop")  # OpenAI: a str or a list
    if stop is None:
        stop = request.get("stop_sequences")  # Anthropic
    if isinstance(stop, str):
        stop = [stop]
    if isinstance(stop, list | tuple):
        sequences = [_c(x, 64) for x in stop[:_MAX_STOP_SEQUENCES] if isinstance(x, str)]
        if sequences:
            attrs[attributes.GEN_AI_REQUEST_STOP_SEQUENCES] = sequences
    n = request.get("n")  # the default (1) is not recorded
    if type(n) is int and n != 1 and otlp_number(n) is not None:
        attrs[attributes.GEN_AI_REQUEST_CHOICE_COUNT] = n
    output_type = _output_type(request)
    if output_type:
        attrs[attributes.GEN_AI_OUTPUT_TYPE] = output_type
    tier = request.get("service_tier") if provider == "openai" else None
    if isinstance(tier, str) and tier and tier != "auto":
        attrs[attributes.OPENAI_REQUEST_SERVICE_TIER] = _c(tier, 64)


def _output_type(request: dict[str, Any]) -> str | None:
    fmt = request.get("response_format")
    if fmt is None:
        text = request.get("text")  # Responses API: text={"format": {...}}
        fmt = text.get("format") if isinstance(text, dict) else None
    if fmt is None:
        return None
    if isinstance(fmt, type):  # a model class (``parse``): a JSON answer
        return "json"
    kind = fmt.get("type") if isinstance(fmt, dict) else fmt
    if not isinstance(kind, str) or not kind:
        return None
    return "json" if kind in _JSON_FORMATS else _c(kind, 64)


def _read_already(inner: ResponseFacts | None) -> bool:
    """Whether the SDK layer under a host's chat span read every fact the host's own
    answer could give (id, model, finish reasons, tokens): ``end`` prefers those, so the
    host's answer is not read a second time (benchmark 7: two reads of each response on
    every host that calls a provider SDK otelmw also wraps)."""
    return (inner is not None and inner.response_id is not None and inner.model is not None
            and bool(inner.finish_reasons) and inner.input_tokens is not None
            and inner.output_tokens is not None)


def facts_for(call: CallInfo) -> ResponseFacts:
    """The reader of a call's response: Google Gen AI's for its calls, else the one
    that reads OpenAI's and Anthropic's shapes."""
    return gemini.GeminiResponseFacts() if call.api_mode == gemini.API_MODE else ResponseFacts()


class ChunkClock:
    """Times one call's response stream as the GenAI conventions define it and the
    official instrumentations measure it: every chunk the SDK stream yields counts;
    the first one's delay from the span's start is ``gen_ai.response.time_to_first_chunk``
    (span) and one ``gen_ai.client.operation.time_to_first_chunk`` point, each later
    one's gap from the previous one a ``gen_ai.client.operation.time_per_output_chunk``
    point. The points carry the call's metric attributes, with the response model
    once a chunk has named it (a chunk is absorbed before it is timed)."""

    __slots__ = ("chat", "first_chunk_s", "last_chunk_at", "op")

    def __init__(self, chat: ChatSpans, op: OpState) -> None:
        self.chat, self.op = chat, op
        self.first_chunk_s: float | None = None
        self.last_chunk_at: float | None = None

    def tick(self, arrived: float, model: str | None) -> None:
        op, inst = self.op, self.chat.inst
        last, self.last_chunk_at = self.last_chunk_at, arrived
        if model and attributes.GEN_AI_RESPONSE_MODEL not in op.attrs:
            self.chat.response_model(op, model)
        if last is None:
            self.first_chunk_s = max(arrived - op.start, 0.0)
            inst.time_to_first_chunk.record(self.first_chunk_s, op.attrs)
        else:
            inst.time_per_output_chunk.record(max(arrived - last, 0.0), op.attrs)

    def mark(self) -> None:
        """The streaming facts on the span, while it is open: a streamed request
        (whether or not its parameters say so: ``messages.stream()`` takes no
        ``stream`` argument) and the time to its first chunk."""
        span = self.op.span
        if span.is_recording():
            span.set_attribute(attributes.GEN_AI_REQUEST_STREAM, True)
            if self.first_chunk_s is not None:
                span.set_attribute(attributes.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
                                   self.first_chunk_s)


class EnrichStream:
    """Feeds a nested layer's stream chunks into the outer call's facts, and times
    them for the outer call's span (``clock``)."""

    __slots__ = ("clock", "facts")

    def __init__(self, facts: ResponseFacts, clock: ChunkClock) -> None:
        self.facts, self.clock = facts, clock

    def chunk(self, chunk: Any) -> None:
        arrived = perf_counter()
        facts = self.facts
        try:
            facts.absorb_chunk(chunk)
        except Exception:
            pass  # a chunk of an unknown shape gives no facts
        if self._times_chunks():
            try:
                self.clock.tick(arrived, facts.model)
            except Exception as exc:
                self.clock.chat.signals.internal_failure("stream_chunk", exc)

    def _times_chunks(self) -> bool:
        return True

    def end(self, ended_by: str, error: BaseException | None = None) -> None:
        try:  # the outer span ends later, with its own call
            self.clock.mark()
        except Exception as exc:
            self.clock.chat.signals.internal_failure("stream_end", exc)


def _request_content(rendered: Any) -> dict[str, Any]:
    """The span's request content attributes (JSON text): what ``_content_on_start``
    rendered when the call started, set first among the span's end attributes (one
    attribute set a call instead of two), in the order it rendered them."""
    if not isinstance(rendered, ChatMessages):
        return {}
    return {key: value.text for key, value in (
        (attributes.GEN_AI_INPUT_MESSAGES, rendered.input_messages),
        (attributes.GEN_AI_SYSTEM_INSTRUCTIONS, rendered.system_instructions),
        (attributes.GEN_AI_TOOL_DEFINITIONS, rendered.tool_definitions)) if value is not None}


class ChatStream(EnrichStream):
    """Finisher for a streamed chat response: absorbs chunks, times them
    (``ChunkClock``), ends the span."""

    __slots__ = ("call", "chat", "op")

    def __init__(self, chat: ChatSpans, call: CallInfo, op: OpState) -> None:
        super().__init__(facts_for(call), ChunkClock(chat, op))
        self.chat, self.call, self.op = chat, call, op

    def _times_chunks(self) -> bool:
        # A chunk that came through a nested SDK layer's stream was timed there.
        inner = self.op.facts
        return inner is None or not inner.chunks

    def end(self, ended_by: str, error: BaseException | None = None) -> None:
        try:
            self.clock.mark()
            self.chat.end(self.call, self.op, self.facts, error, ended_by)
        except Exception as exc:
            self.chat.signals.internal_failure("stream_end", exc)


class ChatSpans(ModelCallSpans):
    """The ``chat`` span of an LLM call."""

    def __init__(self, signals: Signals) -> None:
        super().__init__(signals)
        self.events = InferenceEvents(signals)  # the conventions' events of each call

    def _content_on_start(self, request: Any) -> ChatMessages | None:
        """The request's messages, system instructions and tool definitions, in the
        conventions' shapes (``messages``), each cut to the content limit, rendered when
        the call starts (what was sent: the host may change its request objects later);
        they go on the span with its end attributes (one attribute set instead of two),
        and its events and turn reuse them (``None``: the request could not be read)."""
        try:  # a request the shapes cannot read costs its content, never the span
            return chat_messages(self.content, request, None)
        except Exception as exc:
            self.signals.internal_failure("input_messages", exc)
            return None

    def _output_messages(self, op: OpState, facts: ResponseFacts) -> str | None:
        """``gen_ai.output.messages`` of what ``facts`` collected (``None``: nothing),
        kept with the rest of ``op``'s rendered content."""
        if facts.output is None:
            return None
        try:
            items = facts.output.messages()
            value = self.content.message_value(items) if items else None
        except Exception as exc:
            self.signals.internal_failure("output_messages", exc)
            return None
        if isinstance(op.content, ChatMessages):
            op.content = op.content._replace(output_messages=value)
        return None if value is None else value.text

    def _collecting(self, op: OpState, facts: ResponseFacts) -> ResponseFacts:
        """``facts`` set to collect the output messages when content goes on the span
        or the call's inference event is built (``EVENT_ONLY`` too, streams too)."""
        content = self.content
        if (content.on_spans and op.span.is_recording()) or (
                content.on_events and self.events.details_wanted()):
            cap = content.max_length * 4
            facts.output = (gemini.GeminiOutputCollector(cap)
                            if isinstance(facts, gemini.GeminiResponseFacts)
                            else OutputCollector(cap))
        return facts

    def request_rewritten(self, call: CallInfo, request: Any) -> None:
        """The chat span describes the request that is sent: model, span name and
        parameters follow the effective request (the original model is kept)."""
        op = call.observation
        if not isinstance(op, OpState) or op.request is request or call.operation != "chat":
            return
        try:
            op.request = request
            model = request.get("model") if isinstance(request, dict) else None
            if isinstance(model, str) and model and model != op.model:
                self._model_changed(op, model)
            if self.content.on_spans and op.span.is_recording():
                op.content = self._content_on_start(request)
        except Exception as exc:
            self.signals.internal_failure("request_rewritten", exc)

    def _model_changed(self, op: OpState, model: str) -> None:
        if op.original_model is None and op.model:
            op.original_model = _c(op.model)
        op.model = model
        clean = _c(model)
        op.span.update_name(f"chat {clean}")  # (a host's span keeps its name)
        attrs = {attributes.GEN_AI_REQUEST_MODEL: clean}
        if op.original_model is not None:
            attrs[attributes.OTELMW_REQUEST_ORIGINAL_MODEL] = op.original_model
        if isinstance(op.span, HostSpan):  # the model sent is otelmw's to tell
            op.span.overwrite(attrs)
        else:
            op.span.set_attributes(attrs)
        op.attrs[attributes.GEN_AI_REQUEST_MODEL] = clean

    def enriched(self, call: CallInfo, result: Any, server_address: str | None,
                 server_port: int | None) -> Any:
        """The SDK layer under a host-level ``chat`` span: no second span or metric
        point; the outer span gets the server and the raw response's facts."""
        op = call.observation
        if not isinstance(op, OpState):
            return result
        try:
            if server_address and attributes.SERVER_ADDRESS not in op.attrs:
                op.span.set_attribute(attributes.SERVER_ADDRESS, server_address)
                server_port = port_number(server_port)
                if server_port:
                    op.span.set_attribute(attributes.SERVER_PORT, server_port)
                op.attrs[attributes.SERVER_ADDRESS] = server_address
            if op.facts is None:  # a stream's shape is known by its chunks: the Gemini
                # readers read every shape (Gemini's, else as the base readers do)
                op.facts = self._collecting(op, gemini.GeminiResponseFacts() if is_stream(
                    result) or gemini.is_response(result) else ResponseFacts())
            if is_stream(result):
                return wrap_stream(result, EnrichStream(op.facts, ChunkClock(self, op)))
            op.facts.absorb(raw_response_body(result))
        except Exception as exc:
            self.signals.internal_failure("call_enriched", exc)
        return result

    def finish(self, call: CallInfo, op: OpState, result: Any,
               error: BaseException | None) -> Any:
        op.leave_context()
        if error is None and is_stream(result):
            finisher = ChatStream(self, call, op)
            self._collecting(op, finisher.facts)
            return wrap_stream(result, finisher)
        facts = self._collecting(op, facts_for(call))
        if error is None and not _read_already(op.facts):
            facts.absorb(result)
        self.end(call, op, facts, error, None, result)
        return result

    def end(self, call: CallInfo, op: OpState, facts: ResponseFacts,
            error: BaseException | None, ended_by: str | None, response: Any = None) -> None:
        """End the span with the response's ``facts``; ``ended_by``: how a stream ended;
        ``response``: the whole response, when it was not streamed."""
        if op.facts is not None:  # what the SDK layer saw beats the host's summary
            inner = op.facts
            facts.response_id = inner.response_id or facts.response_id
            facts.model = inner.model or facts.model
            facts.finish_reasons = inner.finish_reasons or facts.finish_reasons
            if inner.input_tokens is not None:
                facts.input_tokens = inner.input_tokens
            if inner.output_tokens is not None:
                facts.output_tokens = inner.output_tokens
            if inner.cache_read_tokens is not None or inner.cache_creation_tokens is not None:
                facts.cache_read_tokens = inner.cache_read_tokens
                facts.cache_creation_tokens = inner.cache_creation_tokens
            if inner.reasoning_tokens is not None:
                facts.reasoning_tokens = inner.reasoning_tokens
            facts.service_tier = inner.service_tier or facts.service_tier
            facts.system_fingerprint = inner.system_fingerprint or facts.system_fingerprint
            if inner.output is not None:
                facts.output = inner.output
        span, duration = op.span, perf_counter() - op.start
        response_model = self.response_model(op, facts.model)
        if span.is_recording():
            attrs = _request_content(op.content)
            request = op.request
            if isinstance(request, dict):  # the effective request (see request_rewritten)
                try:  # a hostile request value must not keep the span from ending
                    request_attributes(request, attrs, call.provider)
                except Exception as exc:
                    self.signals.internal_failure("request_attributes", exc)
            if facts.response_id:
                attrs[attributes.GEN_AI_RESPONSE_ID] = _c(facts.response_id)
            if response_model:
                attrs[attributes.GEN_AI_RESPONSE_MODEL] = response_model
            if facts.finish_reasons:
                attrs[attributes.GEN_AI_RESPONSE_FINISH_REASONS] = [
                    _c(r, 64) for r in facts.finish_reasons[:16]]
            if facts.input_tokens is not None:
                attrs[attributes.GEN_AI_USAGE_INPUT_TOKENS] = facts.input_tokens
            if facts.output_tokens is not None:
                attrs[attributes.GEN_AI_USAGE_OUTPUT_TOKENS] = facts.output_tokens
            # A zero cache count is left out, as the official instrumentations do.
            if facts.cache_read_tokens:
                attrs[attributes.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = facts.cache_read_tokens
            if facts.cache_creation_tokens:
                attrs[attributes.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] = (
                    facts.cache_creation_tokens)
            if facts.reasoning_tokens:
                attrs[attributes.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = facts.reasoning_tokens
            if call.provider == "openai":
                api_type = _OPENAI_API_TYPES.get(call.api_mode)  # type: ignore[arg-type]
                if api_type:
                    attrs[attributes.OPENAI_API_TYPE] = api_type
                if facts.service_tier:
                    attrs[attributes.OPENAI_RESPONSE_SERVICE_TIER] = _c(facts.service_tier, 64)
                if facts.system_fingerprint:
                    attrs[attributes.OPENAI_RESPONSE_SYSTEM_FINGERPRINT] = _c(
                        facts.system_fingerprint)
            if ended_by is not None:
                attrs[attributes.OTELMW_STREAM_ENDED_BY] = ended_by
            # (under EVENT_ONLY the output is collected for the event alone)
            output = (self._output_messages(op, facts)
                      if error is None and self.content.on_spans else None)
            if output is not None:
                attrs[attributes.GEN_AI_OUTPUT_MESSAGES] = output
            span.set_attributes(attrs)
        self.close(op, duration, error, facts.input_tokens, facts.output_tokens)
        if error is not None or self.events.on_content:  # nothing to do otherwise
            self.events.chat_ended(call, op, response, error, facts.output)

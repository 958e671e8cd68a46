"""Pure extractors: provider responses and stream chunks → response facts.

Work on dicts and SDK objects alike (OpenAI chat completions and Responses,
Anthropic messages, their stream chunks/events, Hermes' SimpleNamespace).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

# Built once (``isinstance(v, list | tuple)`` builds the union on every call).
SEQUENCES = (list, tuple)


class OutputSink(Protocol):
    """Where a response's output messages are collected when content is captured
    (``messages.OutputCollector``; declared here so the extractors need not import the
    message renderer, which imports them)."""

    def add_response(self, response: Any) -> None: ...

    def add_chunk(self, chunk: Any) -> None: ...

    def messages(self) -> list[Any]: ...


def get(obj: Any, key: str) -> Any:
    """``obj[key]`` of a dict, else ``getattr(obj, key, None)`` (``None`` when it raises).

    The readers try one name after another (``prompt_tokens``, then ``input_tokens``), so
    most lookups of a provider's pydantic model miss; a miss through pydantic's own
    ``__getattr__`` raises and catches an ``AttributeError`` (benchmark 7: 28 a turn of the
    Agents SDK). A pydantic model's field, extra or class attribute is looked up where
    pydantic keeps it instead: the same answers, no exception
    (``tests/test_telemetry_response_reads.py`` checks both ways agree)."""
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(key)
    cls = type(obj)
    if _is_pydantic(cls):
        try:
            found = obj.__dict__.get(key, _MISSING)  # a field's value
            if found is not _MISSING:
                return found
            if _class_has(cls, key):  # a property, method or class attribute
                return getattr(obj, key, None)
            extra = obj.__pydantic_extra__  # a field the model does not declare
            return extra.get(key) if extra else None
        except Exception:
            return None
    try:
        return getattr(obj, key, None)
    except Exception:
        return None


_MISSING = object()
_PYDANTIC: dict[type, bool] = {}  # class -> a pydantic v2 model with the usual storage
# (class, name) -> whether the class has it: ``hasattr`` on a pydantic class misses
# through its metaclass's ``__getattr__``, raising (the readers ask the same few names)
_CLASS_HAS: dict[tuple[type, str], bool] = {}


def _class_has(cls: type, key: str) -> bool:
    known = _CLASS_HAS.get((cls, key))
    if known is None:
        known = hasattr(cls, key)
        if len(_CLASS_HAS) < 4096:
            _CLASS_HAS[(cls, key)] = known
    return known


def _is_pydantic(cls: type) -> bool:
    known = _PYDANTIC.get(cls)
    if known is None:
        # pydantic v2: fields in the instance __dict__, undeclared ones in the
        # __pydantic_extra__ slot; a class of its own __getattr__ keeps getattr's path
        getattr_of = getattr(cls, "__getattr__", None)
        known = hasattr(cls, "__pydantic_fields__") and hasattr(cls, "__pydantic_extra__") and (
            getattr(getattr_of, "__module__", "") or "").startswith("pydantic.")
        if len(_PYDANTIC) < 4096:  # classes made per call: forget none, grow no further
            _PYDANTIC[cls] = known
    return known


def _int(value: Any) -> int | None:
    """A plausible token count (OTLP int64, non-negative) or None."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63:
        return value
    return None


# Anthropic ``stop_reason`` → the conventions' finish reason, as the official
# OpenTelemetry Anthropic instrumentation maps it; other values pass through.
ANTHROPIC_FINISH_REASONS: dict[str, str] = {
    "end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_call"}


def anthropic_finish_reason(stop_reason: Any) -> Any:
    return ANTHROPIC_FINISH_REASONS.get(stop_reason, stop_reason) if isinstance(
        stop_reason, str) else stop_reason


@dataclass(slots=True)
class ResponseFacts:
    """What a chat span records from a response (or accumulates from a stream)."""

    response_id: str | None = None
    model: str | None = None
    finish_reasons: list[str] = field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
    # Prompt-cache tokens, part of ``input_tokens`` (the conventions' rule).
    cache_read_tokens: int | None = None
    cache_creation_tokens: int | None = None
    reasoning_tokens: int | None = None  # OpenAI: part of the output tokens
    # OpenAI: the tier that served the request, the backend configuration.
    service_tier: str | None = None
    system_fingerprint: str | None = None
    chunks: int = 0
    # The output messages, collected only when content is captured (else None).
    output: OutputSink | None = None

    def add_usage(self, usage: Any) -> None:
        if usage is None:
            return
        # OpenAI chat: prompt/completion; Responses + Anthropic: input/output.
        # Anthropic reports cache reads/writes apart from input_tokens; add them.
        inp = _int(get(usage, "prompt_tokens"))
        if inp is None:
            inp = _int(get(usage, "input_tokens"))
            if inp is not None:
                read = _int(get(usage, "cache_read_input_tokens"))
                created = _int(get(usage, "cache_creation_input_tokens"))
                inp += (read or 0) + (created or 0)
                if read is not None or created is not None:
                    self.cache_read_tokens, self.cache_creation_tokens = read, created
        out = _int(get(usage, "completion_tokens"))
        if out is None:
            out = _int(get(usage, "output_tokens"))
        if inp is not None:
            self.input_tokens = inp
        if out is not None:
            self.output_tokens = out
        # OpenAI: cached tokens are counted inside the prompt tokens already, reasoning
        # tokens inside the completion tokens.
        details = get(usage, "prompt_tokens_details") or get(usage, "input_tokens_details")
        if details is not None:
            self.add_openai_cache(details)
        details = get(usage, "completion_tokens_details") or get(usage, "output_tokens_details")
        if details is not None:
            self.add_openai_reasoning(details)

    def add_openai_cache(self, details: Any) -> None:
        cached = _int(get(details, "cached_tokens"))
        if cached is not None:
            self.cache_read_tokens = cached

    def add_openai_reasoning(self, details: Any) -> None:
        reasoning = _int(get(details, "reasoning_tokens"))
        if reasoning is not None:
            self.reasoning_tokens = reasoning

    def add_finish(self, reason: Any) -> None:
        if isinstance(reason, str) and reason:
            self.finish_reasons.append(reason)

    def _take_identity(self, obj: Any, *, keep_first_id: bool) -> None:
        """The response id and model a response or chunk names; with ``keep_first_id``
        (a stream's chunks) the first id seen stays."""
        rid = get(obj, "id")
        if isinstance(rid, str) and (self.response_id is None or not keep_first_id):
            self.response_id = rid
        model = get(obj, "model")
        if isinstance(model, str):
            self.model = model

    def absorb(self, obj: Any) -> None:
        """Take facts from a full response object."""
        if self.output is not None:
            self.output.add_response(obj)
        if type(obj).__name__ == "ChatCompletion":  # OpenAI fast path (pydantic getattr)
            try:
                self.response_id, self.model = obj.id, obj.model
                # A choice without a reason counts as "error" (the official OpenAI
                # instrumentation's rule), so the list has one reason per choice.
                self.finish_reasons = [c.finish_reason or "error" for c in obj.choices]
                # Fields newer than the oldest SDK supported (openai 1.26 has neither
                # ``service_tier`` nor the usage details) are read with a default.
                self.service_tier = getattr(obj, "service_tier", None)
                self.system_fingerprint = obj.system_fingerprint
                u = obj.usage
                if u is not None:
                    self.input_tokens = _int(u.prompt_tokens)
                    self.output_tokens = _int(u.completion_tokens)
                    details = getattr(u, "prompt_tokens_details", None)
                    if details is not None:
                        self.add_openai_cache(details)
                    details = getattr(u, "completion_tokens_details", None)
                    if details is not None:
                        self.add_openai_reasoning(details)
                return
            except AttributeError:
                self.finish_reasons = []  # the general path below reads them again
        self._take_identity(obj, keep_first_id=False)
        tier = get(obj, "service_tier")
        if isinstance(tier, str):
            self.service_tier = tier
        choices = get(obj, "choices")
        if isinstance(choices, SEQUENCES):
            fingerprint = get(obj, "system_fingerprint")
            if isinstance(fingerprint, str):
                self.system_fingerprint = fingerprint
            for ch in choices:
                self.add_finish(get(ch, "finish_reason"))
        else:
            stop = anthropic_finish_reason(get(obj, "stop_reason"))
            if stop is None and get(obj, "object") == "response":
                stop = get(obj, "status")  # Responses API
            self.add_finish(stop if stop is not None else get(obj, "finish_reason"))
        self.add_usage(get(obj, "usage"))

    def absorb_chunk(self, chunk: Any) -> None:
        """Take facts from one stream chunk or event."""
        self.chunks += 1
        if self.output is not None:
            self.output.add_chunk(chunk)
        etype = get(chunk, "type")
        if isinstance(etype, str):
            self._absorb_event(etype, chunk)
            return
        self._take_identity(chunk, keep_first_id=True)
        choices = get(chunk, "choices")
        if isinstance(choices, SEQUENCES):
            for ch in choices:
                self.add_finish(get(ch, "finish_reason"))
        self.add_usage(get(chunk, "usage"))

    def _absorb_event(self, etype: str, event: Any) -> None:
        if etype == "message_start":  # Anthropic
            msg = get(event, "message")
            self.response_id = get(msg, "id") or self.response_id
            self.model = get(msg, "model") or self.model
            self.add_usage(get(msg, "usage"))
        elif etype == "message_delta":
            self.add_finish(anthropic_finish_reason(get(get(event, "delta"), "stop_reason")))
            usage = get(event, "usage")
            out = _int(get(usage, "output_tokens"))
            if out is not None:
                self.output_tokens = out
        elif etype in ("response.completed", "response.incomplete", "response.failed"):
            self.absorb(get(event, "response"))
        elif etype == "response.created":
            resp = get(event, "response")
            self.response_id = get(resp, "id") or self.response_id
            self.model = get(resp, "model") or self.model


@dataclass(slots=True)
class EmbeddingsFacts:
    """What an embeddings span records from a response (OpenAI ``CreateEmbeddingResponse``)."""

    model: str | None = None
    input_tokens: int | None = None
    dimensions: int | None = None  # length of the first vector

    def absorb(self, obj: Any) -> None:
        model = get(obj, "model")
        if isinstance(model, str):
            self.model = model
        usage = get(obj, "usage")
        tokens = _int(get(usage, "prompt_tokens"))
        self.input_tokens = tokens if tokens is not None else _int(get(usage, "input_tokens"))
        data = get(obj, "data")
        if isinstance(data, SEQUENCES) and data:
            self.dimensions = _dimensions(get(data[0], "embedding"))


def _dimensions(vector: Any) -> int | None:
    if isinstance(vector, SEQUENCES):
        return len(vector) or None
    if isinstance(vector, str) and vector:  # base64 of little-endian float32s
        size = len(vector) * 3 // 4 - (2 if vector.endswith("==") else
                                       1 if vector.endswith("=") else 0)
        return size // 4 or None
    return None


_STREAM_TYPES: dict[type, bool] = {}


def raw_response_body(result: Any) -> Any:
    """The parsed body of an openai ``with_raw_response`` answer to a request that was
    not streamed (``LegacyAPIResponse``, what langchain-openai asks for); its ``parse()``
    caches, so the caller's own ``parse()`` gets the same object. Anything else as it is."""
    if type(result).__name__ != "LegacyAPIResponse" or getattr(result, "_stream", True):
        return result
    try:
        return result.parse()
    except Exception:  # the caller's own parse() meets the same error
        return result


def is_stream(result: Any) -> bool:
    """An iterator / async iterator result that is consumed after the call returns."""
    t = type(result)
    known = _STREAM_TYPES.get(t)  # per-type cache: pydantic's metaclass __getattr__
    if known is not None:         # makes each hasattr miss cost ~0.7 µs
        return known
    if result is None or isinstance(result, str | bytes | dict | list | tuple):
        known = False
    else:
        known = hasattr(t, "__next__") or hasattr(t, "__anext__")
    if len(_STREAM_TYPES) < 256:
        _STREAM_TYPES[t] = known
    return known

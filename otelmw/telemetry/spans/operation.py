"""What every span kind shares: the signals it writes to (the tracer, the logger and the
metric instruments of the telemetry contract), one call's span state, failure marking,
the ids every record of a call carries, digests computed once.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.metrics import Counter, Histogram, Meter
from opentelemetry.trace import Status, StatusCode

from ...core.contract import CallInfo
from ...core.failures import INSTRUMENTATION, FailureLog, describe, error_type
from ..attributes import (
    DURATION_BUCKETS,
    ERROR_TYPE,
    GEN_AI_CONVERSATION_ID,
    M_AGENT_DURATION,
    M_HOOK_FAILURES,
    M_MIDDLEWARE_DURATION,
    M_MIDDLEWARE_FAILURES,
    M_NORMALIZE_FAILURES,
    M_OPERATION_DURATION,
    M_REWRITES,
    M_TIME_PER_OUTPUT_CHUNK,
    M_TIME_TO_FIRST_CHUNK,
    M_TOKEN_USAGE,
    M_TOOL_DURATION,
    M_TOOL_RESULTS,
    MIDDLEWARE_BUCKETS,
    OTELMW_API_REQUEST_ID,
    OTELMW_TASK_ID,
    OTELMW_TURN_ID,
    TOKEN_BUCKETS,
)
from ..content.digests import digest
from ..content.policy import ContentPolicy
from ..content.values import clean_str, error_description
from ..setup.context import safe_detach
from ..shapes.responses import ResponseFacts

# Bound once: these run per call and per middleware layer.
attach, set_span_in_context, perf_counter = (
    otel_context.attach, trace.set_span_in_context, time.perf_counter)


# The metric instruments of the telemetry contract, as (attribute, metric name, unit,
# description, bucket boundaries); a row with no boundaries is a counter. The
# streamed-response histograms use the operation-duration buckets, as the GenAI
# conventions and the official instrumentations define them.
_INSTRUMENTS: tuple[tuple[str, str, str, str, tuple[float, ...] | None], ...] = (
    ("operation_duration", M_OPERATION_DURATION, "s", "GenAI operation duration",
     DURATION_BUCKETS),
    ("token_usage", M_TOKEN_USAGE, "{token}", "Tokens used per LLM request", TOKEN_BUCKETS),
    ("time_to_first_chunk", M_TIME_TO_FIRST_CHUNK, "s",
     "Time from the request to the first chunk of its response stream", DURATION_BUCKETS),
    ("time_per_output_chunk", M_TIME_PER_OUTPUT_CHUNK, "s",
     "Time between two chunks of a response stream (one point per chunk after the first)",
     DURATION_BUCKETS),
    ("tool_duration", M_TOOL_DURATION, "s", "Tool call duration", DURATION_BUCKETS),
    ("agent_duration", M_AGENT_DURATION, "s", "Agent turn duration", DURATION_BUCKETS),
    ("middleware_duration", M_MIDDLEWARE_DURATION, "s",
     "Duration of one middleware callback (wrappers include downstream)", MIDDLEWARE_BUCKETS),
    ("middleware_failures", M_MIDDLEWARE_FAILURES, "{failure}",
     "Middleware callbacks that failed (fail-open)", None),
    ("rewrites", M_REWRITES, "{rewrite}", "Accepted request rewrites", None),
    ("tool_results", M_TOOL_RESULTS, "{result}", "Normalized tool results", None),
    ("normalize_failures", M_NORMALIZE_FAILURES, "{failure}",
     "Normalizers that raised or returned a wrong type", None),
    ("hook_failures", M_HOOK_FAILURES, "{failure}", "Observer hooks that failed", None),
)


class Instruments:
    """The contract's instruments, created once per meter (``_INSTRUMENTS``)."""

    __slots__ = tuple(row[0] for row in _INSTRUMENTS)
    agent_duration: Histogram
    middleware_duration: Histogram
    operation_duration: Histogram
    time_per_output_chunk: Histogram
    time_to_first_chunk: Histogram
    token_usage: Histogram
    tool_duration: Histogram
    hook_failures: Counter
    middleware_failures: Counter
    normalize_failures: Counter
    rewrites: Counter
    tool_results: Counter

    def __init__(self, meter: Meter) -> None:
        for attr, name, unit, description, buckets in _INSTRUMENTS:
            setattr(self, attr, meter.create_counter(name, unit=unit, description=description)
                    if buckets is None else
                    meter.create_histogram(name, unit=unit, description=description,
                                           explicit_bucket_boundaries_advisory=list(buckets)))


@dataclass(frozen=True, slots=True)
class Signals:
    """What the span kinds write to, made once by ``TelemetryObserver``. ``tracer``
    is the concrete tracer fetched once (not looked up per span)."""

    tracer: trace.Tracer
    logger: Any
    inst: Instruments
    content: ContentPolicy
    failures: FailureLog | None
    digest_max_bytes: int  # ``OTELMW_DIGEST_MAX_BYTES`` of the observer's settings

    def internal_failure(self, where: str, exc: BaseException) -> None:
        """A fault of the telemetry itself: counted under ``instrumentation``,
        never raised into the agent."""
        if self.failures is not None:
            self.failures.record(INSTRUMENTATION, "telemetry", where,
                                 f"telemetry error: {describe(exc)}", exc)


def mark_error(span: trace.Span, etype: str, message: str,
               metric_attrs: dict[str, Any] | None = None) -> None:
    """The span (and its metric point, when given) marked failed with ``error.type``."""
    span.set_attribute(ERROR_TYPE, etype)
    span.set_status(Status(StatusCode.ERROR, message))
    if metric_attrs is not None:
        metric_attrs[ERROR_TYPE] = etype


def mark_exception(span: trace.Span, exc: BaseException,
                   metric_attrs: dict[str, Any] | None = None, *,
                   with_content: bool = False) -> None:
    """``with_content``: content capture puts content on spans, so a provider's error
    body may be the description too (redacted); otherwise its type and code only."""
    mark_error(span, error_type(exc), error_description(exc, with_content), metric_attrs)


def call_ids(call: CallInfo, out: dict[str, Any]) -> dict[str, Any]:
    """The call's ids that are set (conversation, turn, task, API request),
    cleaned, added to ``out``: every span and hook record of a call carries them."""
    # Tested one by one, not through ``put_present``: this runs for every span.
    if call.session_id:
        out[GEN_AI_CONVERSATION_ID] = clean_str(call.session_id)
    if call.turn_id:
        out[OTELMW_TURN_ID] = clean_str(call.turn_id)
    if call.task_id:
        out[OTELMW_TASK_ID] = clean_str(call.task_id)
    if call.api_request_id:
        out[OTELMW_API_REQUEST_ID] = clean_str(call.api_request_id)
    return out


class OpState:
    """One call's observation: its span state from the span's start to its end (the
    core keeps it on ``CallInfo.observation`` and hands it back with the call)."""

    __slots__ = ("attrs", "content", "context", "digests", "facts", "measured", "model",
                 "original_model", "request", "span", "start", "token")

    def __init__(self, span: trace.Span, token: object, start: float,
                 attrs: dict[str, Any], request: Any = None,
                 context: otel_context.Context | None = None) -> None:
        self.span, self.token, self.start = span, token, start
        # The context the span was made current in (``None``: it was not), where the
        # call's events are emitted (one context built per call, not one per event).
        self.context = context
        self.attrs = attrs  # the call's metric attributes (its own copy: error.type goes in)
        # chat: the effective request (its parameters go on the span when it ends)
        self.request = request
        self.model: str | None = None  # chat: the model the span names (rewrites follow)
        self.original_model: str | None = None  # set when a rewrite changed the model
        self.facts: ResponseFacts | None = None  # filled by a nested SDK layer
        # The same request/args/result objects reach the span and several hook
        # events of one call: digest each once (by id, see ``digest_once``).
        self.digests: dict[int, Digested] | None = None
        # chat, content on a recording span: the messages rendered for it
        # (``events.ChatMessages``), which its events and its turn reuse
        self.content: Any = None
        # Whether otelmw records the call's duration and usage points (not when the host
        # records its own into the same meter provider: ``CallInfo.host_measured``).
        self.measured = True

    def leave_context(self) -> None:
        """The call's span stops being current (the call returned, its span may
        still be open: a stream)."""
        safe_detach(self.token)
        self.token = None


class HostSpan(trace.Span):
    """A span the host's own tracing opened, made current and ends (Strands' ``chat``
    span), as otelmw records a call on it: every attribute the host had set when otelmw
    adopted the span stays the host's (otelmw leaves those keys out), its name and kind
    are the host's, ``end`` is the host's own (a no-op here), and once the host ended it
    nothing more is written. What the host sets after otelmw (at its end) replaces
    otelmw's values: the host writes last."""

    __slots__ = ("host_keys", "span")

    def __init__(self, span: trace.Span) -> None:
        self.span = span
        recorded = getattr(span, "attributes", None)  # an SDK span: what the host set
        self.host_keys = frozenset(recorded) if isinstance(recorded, Mapping) else frozenset()

    @property
    def attributes(self) -> dict[str, Any]:
        """What otelmw recorded on the span (its events carry otelmw's view, not the
        host's)."""
        recorded = getattr(self.span, "attributes", None)
        if not isinstance(recorded, Mapping):
            return {}
        return {k: v for k, v in recorded.items() if k not in self.host_keys}

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        if self.span.is_recording():
            keys = self.host_keys
            self.span.set_attributes({k: v for k, v in attributes.items() if k not in keys})

    def set_attribute(self, key: str, value: Any) -> None:
        if key not in self.host_keys and self.span.is_recording():
            self.span.set_attribute(key, value)

    def overwrite(self, attributes: Mapping[str, Any]) -> None:
        """Attributes of what otelmw's contract changed (a rewritten model): only otelmw
        knows, so they replace the host's values."""
        if self.span.is_recording():
            self.span.set_attributes(attributes)

    def update_name(self, name: str) -> None:
        """The name is the host's."""

    def end(self, end_time: int | None = None) -> None:
        """The host ends its span."""

    def is_recording(self) -> bool:
        return self.span.is_recording()

    def get_span_context(self) -> trace.SpanContext:
        return self.span.get_span_context()

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        if self.span.is_recording():
            self.span.set_status(status, description)

    def add_event(self, name: str, attributes: Any = None,
                  timestamp: int | None = None) -> None:
        if self.span.is_recording():
            self.span.add_event(name, attributes, timestamp)

    def record_exception(self, exception: BaseException, attributes: Any = None,
                         timestamp: int | None = None, escaped: bool = False) -> None:
        if self.span.is_recording():
            self.span.record_exception(exception, attributes, timestamp, escaped)


class OperationSpans(Protocol):
    """A span kind of one call (chat, embeddings, execute_tool): what
    ``TelemetryObserver`` routes ``call_started``/``call_finished`` to."""

    def start(self, call: CallInfo, payload: Any) -> OpState:
        """Open the call's span; returns its state (the call's observation)."""

    def finish(self, call: CallInfo, op: OpState, result: Any,
               error: BaseException | None) -> Any:
        """The call returned (or raised): end its span, or hand back a stream that
        ends it; returns the result to hand back."""


class Digested(NamedTuple):
    """One cached digest: ``value`` is kept alive so its id is not reused."""

    value: Any
    digest: tuple[str, int]


def digest_once(call: CallInfo, value: Any, max_bytes: int) -> tuple[str, int]:
    """``digests.digest(value, max_bytes)`` (digest, size), computed once per object and
    call."""
    op = call.observation
    if not isinstance(op, OpState):
        return digest(value, max_bytes)
    cache = op.digests
    if cache is None:
        cache = op.digests = {}
    hit = cache.get(id(value))
    if hit is not None and hit.value is value:
        return hit.digest
    result = digest(value, max_bytes)
    cache[id(value)] = Digested(value, result)
    return result

"""State and helpers shared by the parts of ``TelemetryObserver`` (one class
assembled from ``LayerSpans``, ``HookEvents`` and the operation spans)."""

from __future__ import annotations

import time
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from ..core.contract import CallInfo
from ..core.failures import INSTRUMENTATION, FailureLog, describe
from ..core.registry import Layer
from . import attributes as a
from .content import ContentPolicy
from .digests import digest
from .metrics import Instruments
from .responses import ResponseFacts
from .values import error_description, error_type, put_present

# Bound once: these run per call and per middleware layer.
_attach, _set_span_in_context, _perf_counter = (
    otel_context.attach, trace.set_span_in_context, time.perf_counter)


def mark_error(span: trace.Span, etype: str, message: str,
               metric_attrs: dict[str, Any] | None = None) -> None:
    """The span (and its metric point, when given) marked failed with ``error.type``."""
    span.set_attribute(a.ERROR_TYPE, etype)
    span.set_status(Status(StatusCode.ERROR, message))
    if metric_attrs is not None:
        metric_attrs[a.ERROR_TYPE] = etype


def mark_exception(span: trace.Span, exc: BaseException,
                   metric_attrs: dict[str, Any] | None = None, *,
                   with_content: bool = False) -> None:
    """``with_content``: content capture puts content on spans, so a provider's error
    body may be the description too (redacted); otherwise its type and code only."""
    mark_error(span, error_type(exc), error_description(exc, with_content), metric_attrs)


class OpState:
    """Per-call state (kept on ``CallInfo.observer_state``)."""

    __slots__ = ("attrs", "digests", "facts", "original_model", "request", "span", "start",
                 "token")

    def __init__(self, span: trace.Span, token: object, start: float,
                 attrs: dict[str, Any], request: Any = None) -> None:
        self.span, self.token, self.start, self.attrs = span, token, start, attrs
        # chat: the effective request (its parameters go on the span when it ends)
        self.request = request
        self.original_model: str | None = None  # set when a rewrite changed the model
        self.facts: ResponseFacts | None = None  # filled by a nested SDK layer
        # The same request/args/result objects reach the span and several hook
        # events of one call: digest each once. id → (object kept alive, digest).
        self.digests: dict[int, tuple[Any, tuple[str, int]]] | None = None


def digest_once(call: CallInfo, value: Any) -> tuple[str, int]:
    op = call.observer_state
    if not isinstance(op, OpState):
        return digest(value)
    cache = op.digests
    if cache is None:
        cache = op.digests = {}
    hit = cache.get(id(value))
    if hit is not None and hit[0] is value:
        return hit[1]
    result = digest(value)
    cache[id(value)] = (value, result)
    return result


class ObserverCore:
    """What every part of the observer reads (set up by ``TelemetryObserver``)."""

    tracer: trace.Tracer
    logger: Any
    inst: Instruments
    content: ContentPolicy
    failures: FailureLog | None
    layer_metrics: bool  # record otelmw.middleware.duration per layer
    # Per-layer constants (span name, start attributes, metric attributes by
    # outcome), keyed by id(layer) and checked by identity.
    _layers: dict[int, tuple[Layer, int, str, dict[str, Any], dict[str, Any]]]

    def _internal_failure(self, where: str, exc: BaseException) -> None:
        if self.failures is not None:
            self.failures.record(INSTRUMENTATION, "telemetry", where,
                                 f"telemetry error: {describe(exc)}", exc)

    @staticmethod
    def _ids(call: CallInfo, out: dict[str, Any]) -> dict[str, Any]:
        """The call's ids that are set (conversation, turn, task, API request),
        cleaned, added to ``out``: every span and hook record of a call carries them."""
        return put_present(out, ((a.GEN_AI_CONVERSATION_ID, call.session_id),
                                 (a.OTELMW_TURN_ID, call.turn_id),
                                 (a.OTELMW_TASK_ID, call.task_id),
                                 (a.OTELMW_API_REQUEST_ID, call.api_request_id)))

"""Middleware layer spans: one per request rewrite and per execution wrapper,
born current (so spans the callback opens nest under it), ended with its
outcome (a rewrite's source, changed keys and reason when it rewrote), failed by
the callback's error, with the ``otelmw.middleware.duration`` point.

Each also speaks OpenInference (what Arize Phoenix reads): ``openinference.span.kind``
``CHAIN`` (``GUARDRAIL`` for a wrapper that short-circuits: it answered instead of
the call), its ``otelmw.*`` facts as the ``metadata`` JSON and, under content
capture on spans, the payload it got and what it made of it as
``input.value``/``output.value``.

These run per layer per call: per-layer constants (``LayerInfo``) are cached, the
end attributes per outcome too; ``started``/``finished`` stay flat (no helper calls
on the cached path), nothing is built for an unchanged rewrite, nothing rendered
unless content goes on spans and the span records.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NamedTuple

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from ...core.contract import CallInfo
from ...core.registry import Layer
from ...core.seam import ERROR, FAILED, NO_VALUE, REWRITTEN, SHORT_CIRCUIT, UNCHANGED
from ..attributes import (
    ERROR_TYPE,
    INPUT_MIME_TYPE,
    INPUT_VALUE,
    METADATA,
    OI_CHAIN,
    OI_GUARDRAIL,
    OPENINFERENCE_SPAN_KIND,
    OTELMW_MIDDLEWARE_KIND,
    OTELMW_MIDDLEWARE_NAME,
    OTELMW_MIDDLEWARE_OUTCOME,
    OTELMW_MIDDLEWARE_PLUGIN,
    OTELMW_MIDDLEWARE_POSITION,
    OTELMW_REWRITE_CHANGED_KEYS,
    OTELMW_REWRITE_REASON,
    OTELMW_REWRITE_SOURCE,
    OUTPUT_MIME_TYPE,
    OUTPUT_VALUE,
)
from ..content.policy import mime_type
from ..content.values import MAX_STR, short_text
from ..content.values import clean_str as _c
from ..setup.context import raw_detach as _detach
from .operation import Signals, attach, mark_exception, perf_counter, set_span_in_context

_INTERNAL = SpanKind.INTERNAL
_MAX_LAYERS = 4096  # plugin reloads create new layers: the cache stays bounded
@dataclass(frozen=True, slots=True)
class LayerInfo:
    """One layer's constants at one position, shared by all its spans: the
    dicts are handed to the SDK as they are, so they are never mutated."""

    layer: Layer
    position: int
    span_name: str
    attributes: dict[str, Any]  # the span's start attributes
    metric_attributes: dict[str, dict[str, Any]]  # by outcome, filled as outcomes occur
    end_attributes: dict[str, dict[str, Any]]  # by outcome: outcome, kind, metadata


def _metadata(facts: dict[str, Any]) -> str:
    """OpenInference's ``metadata``: a JSON object (here: the span's ``otelmw.*`` facts)."""
    return json.dumps(facts, ensure_ascii=False, separators=(",", ":"), default=str)


class LayerToken(NamedTuple):
    """What ``started`` hands the core and gets back in ``finished``."""

    span: trace.Span
    context_token: object  # the attach that made the span current
    start: float
    info: LayerInfo
    input_value: str | None  # the rendered payload it got (content on spans, recording)


# LayerToken(...) runs the NamedTuple's Python-level __new__ (≈ 0.1–0.2 µs, once per
# layer per call on benchmark 2's path); tuple.__new__ builds the same record in C.
_new_token = tuple.__new__


class LayerSpans:
    """``rewrite_started/finished`` and ``wrapper_started/finished``."""

    def __init__(self, signals: Signals, record_duration: bool) -> None:
        self.signals = signals
        self.tracer, self.inst, self.content = signals.tracer, signals.inst, signals.content
        self.record_duration = record_duration  # otelmw.middleware.duration per layer
        self.content_on_spans = signals.content.on_spans  # input/output values
        # keyed by id(layer), checked by identity and position
        self._infos: dict[int, LayerInfo] = {}

    def _info(self, layer: Layer, position: int) -> LayerInfo:
        attrs: dict[str, Any] = {
            OTELMW_MIDDLEWARE_KIND: layer.kind, OTELMW_MIDDLEWARE_NAME: layer.name,
            OTELMW_MIDDLEWARE_POSITION: position, OTELMW_MIDDLEWARE_PLUGIN: layer.plugin}
        if len(self._infos) > _MAX_LAYERS:
            self._infos.clear()
        info = self._infos[id(layer)] = LayerInfo(layer, position, f"{layer.kind} {layer.name}",
                                                  attrs, {}, {})
        return info

    @staticmethod
    def _metric_attributes(info: LayerInfo, outcome: str) -> dict[str, Any]:
        m = info.metric_attributes[outcome] = {OTELMW_MIDDLEWARE_KIND: info.layer.kind,
                                               OTELMW_MIDDLEWARE_NAME: info.layer.name,
                                               OTELMW_MIDDLEWARE_OUTCOME: outcome}
        return m

    @staticmethod
    def _end_attributes(info: LayerInfo, outcome: str,
                        facts: dict[str, Any] | None = None) -> dict[str, Any]:
        """What a span ends with: its outcome, OpenInference kind and ``metadata``
        (the start attributes, the outcome and ``facts``); cached per outcome
        unless there are ``facts`` (a rewrite's)."""
        end = {OTELMW_MIDDLEWARE_OUTCOME: outcome,
               OPENINFERENCE_SPAN_KIND: OI_GUARDRAIL if outcome == SHORT_CIRCUIT
               else OI_CHAIN,
               METADATA: _metadata({**info.attributes, OTELMW_MIDDLEWARE_OUTCOME: outcome,
                                    **(facts or {})})}
        if facts is None:
            info.end_attributes[outcome] = end
        return end

    def started(self, call: CallInfo, layer: Layer, position: int,
                payload: Any = NO_VALUE) -> LayerToken | None:
        """``rewrite_started`` and ``wrapper_started``."""
        try:
            info = self._infos.get(id(layer))
            if info is None or info.layer is not layer or info.position != position:
                info = self._info(layer, position)
            span = self.tracer.start_span(info.span_name, kind=_INTERNAL,
                                          attributes=info.attributes)
            shown = None
            if self.content_on_spans and payload is not NO_VALUE and span.is_recording():
                shown = self._show(span, INPUT_VALUE, INPUT_MIME_TYPE, payload)
            return _new_token(LayerToken, (span, attach(set_span_in_context(span)),
                                           perf_counter(), info, shown))
        except Exception as exc:
            self.signals.internal_failure(f"{layer.kind} started", exc)
            return None

    def _show(self, span: trace.Span, value_key: str, mime_key: str, value: Any,
              text: str | None = None) -> str:
        """``value`` (or its ``text`` already rendered) on the span as OpenInference's
        input or output value; returns the text."""
        if text is None:
            text = self.content.render(value)
        span.set_attributes({value_key: text, mime_key: mime_type(text)})
        return text

    def finished(self, call: CallInfo, token: object, outcome: str,
                 error: BaseException | None, result: Any = NO_VALUE,
                 end_attributes: dict[str, Any] | None = None) -> None:
        """``wrapper_finished`` (and the end of every rewrite span, which gives its
        ``end_attributes`` when it has facts of its own). ``token``: what ``started``
        returned (``None`` when it opened no span)."""
        if not isinstance(token, LayerToken):
            return
        try:
            span = token.span
            try:  # as context.safe_detach, without the call
                _detach(token.context_token)  # type: ignore[arg-type]
            except Exception:
                pass
            try:  # the span ends whatever its attributes do
                if token.input_value is not None and result is not NO_VALUE:
                    self._show(span, OUTPUT_VALUE, OUTPUT_MIME_TYPE, result)
                span.set_attributes(end_attributes or token.info.end_attributes.get(outcome)
                                    or self._end_attributes(token.info, outcome))
                if error is not None:
                    mark_exception(span, error, with_content=self.content.on_spans)
            finally:
                span.end()
            if self.record_duration:
                info = token.info
                self.inst.middleware_duration.record(
                    perf_counter() - token.start,
                    info.metric_attributes.get(outcome)
                    or self._metric_attributes(info, outcome))
        except Exception as exc:
            self.signals.internal_failure("layer_finished", exc)

    def rewrite_finished(self, call: CallInfo, token: object, outcome: str,
                         changed_keys: list[str], source: str | None, reason: str | None,
                         error: BaseException | None, payload: Any = NO_VALUE) -> None:
        if not isinstance(token, LayerToken):
            return
        shown = token.input_value
        if outcome == UNCHANGED:  # the usual case: nothing but the outcome
            if shown is not None:  # the payload it got is the one it hands on
                try:
                    self._show(token.span, OUTPUT_VALUE, OUTPUT_MIME_TYPE, None, shown)
                except Exception as exc:
                    self.signals.internal_failure("rewrite_finished", exc)
            return self.finished(call, token, outcome, error)
        end: dict[str, Any] | None = None
        try:
            span, info = token.span, token.info
            extra: dict[str, Any] | None = None
            if outcome == REWRITTEN:
                src = _c(source or info.layer.plugin)
                extra = {OTELMW_REWRITE_SOURCE: src}
                if span.is_recording():
                    extra[OTELMW_REWRITE_CHANGED_KEYS] = [_c(k, 128)
                                                          for k in changed_keys[:64]]
                    if reason:
                        extra[OTELMW_REWRITE_REASON] = short_text(reason, MAX_STR)
                    end = self._end_attributes(info, outcome, extra)
                self.inst.rewrites.add(1, {OTELMW_REWRITE_SOURCE: src,
                                           OTELMW_MIDDLEWARE_KIND: info.layer.kind})
            elif outcome == FAILED and error is None:
                extra = {ERROR_TYPE: "bad_return_shape"}
            if extra:
                span.set_attributes(extra)  # a span that is not recording ignores these
            if shown is not None and outcome != ERROR:  # (interrupted: nothing handed on)
                # a failed rewrite hands on the payload it got
                self._show(span, OUTPUT_VALUE, OUTPUT_MIME_TYPE, payload,
                           None if outcome == REWRITTEN and payload is not NO_VALUE else shown)
        except Exception as exc:
            self.signals.internal_failure("rewrite_finished", exc)
        self.finished(call, token, outcome, error, NO_VALUE, end)

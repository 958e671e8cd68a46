"""Spans for middleware layers: one per request rewrite and per execution
wrapper, with outcome attributes and the ``otelmw.middleware.duration`` metric.

These run per layer per call: bound helpers, per-layer constants cached in
``ObserverCore._layers``, nothing built for an unchanged rewrite.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.trace import SpanKind

from ..core import settings as cfg
from ..core.contract import CallInfo
from ..core.registry import Layer
from ..core.seam import FAILED, REWRITTEN, UNCHANGED
from . import attributes as a
from .context import raw_detach as _detach
from .observer_core import (
    ObserverCore,
    _attach,
    _perf_counter,
    _set_span_in_context,
    mark_exception,
)
from .values import MAX_STR, short_text
from .values import clean_str as _c

_INTERNAL = SpanKind.INTERNAL
ENV_MIDDLEWARE_METRICS = cfg.MIDDLEWARE_METRICS.name


def middleware_metrics_on(value: bool | None = None) -> bool:
    """Whether each layer records ``otelmw.middleware.duration``: ``value``, else
    ``OTELMW_MIDDLEWARE_METRICS`` (``on``, the default, or ``off``); ``ValueError``
    on a typo. Off saves the SDK's per-record cost (≈ 5–6 µs per layer with an SDK
    ``MeterProvider``); layer spans keep their durations (and a Collector's
    span-metrics connector can still derive the histogram from them)."""
    if value is not None:
        return bool(value)
    return cfg.MIDDLEWARE_METRICS.read() == "on"


class LayerSpans(ObserverCore):
    """``rewrite_started/finished`` and ``wrapper_started/finished``."""

    def _layer_info(self, layer: Layer, position: int
                    ) -> tuple[Layer, int, str, dict[str, Any], dict[str, Any]]:
        info = self._layers.get(id(layer))
        if info is None or info[0] is not layer or info[1] != position:
            attrs: dict[str, Any] = {
                a.OTELMW_MIDDLEWARE_KIND: layer.kind, a.OTELMW_MIDDLEWARE_NAME: layer.name,
                a.OTELMW_MIDDLEWARE_POSITION: position, a.OTELMW_MIDDLEWARE_PLUGIN: layer.plugin}
            if len(self._layers) > 4096:  # plugin reloads create new layers: stay bounded
                self._layers.clear()
            info = (layer, position, f"{layer.kind} {layer.name}", attrs, {})
            self._layers[id(layer)] = info
        return info

    def _metric_attrs(self, info: tuple[Layer, int, str, dict[str, Any], dict[str, Any]],
                      outcome: str) -> dict[str, Any]:
        by_outcome = info[4]
        m = by_outcome.get(outcome)
        if m is None:
            layer = info[0]
            m = by_outcome[outcome] = {a.OTELMW_MIDDLEWARE_KIND: layer.kind,
                                       a.OTELMW_MIDDLEWARE_NAME: layer.name,
                                       a.OTELMW_MIDDLEWARE_OUTCOME: outcome}
        return m

    def layer_started(self, call: CallInfo, layer: Layer, position: int) -> Any:
        """``rewrite_started`` and ``wrapper_started``: one span per layer, made
        current so spans the callback opens nest under it. Runs per layer per call,
        hence flat (no helper calls on the cached path)."""
        try:
            info = self._layers.get(id(layer))
            if info is None or info[0] is not layer or info[1] != position:
                info = self._layer_info(layer, position)
            span = self.tracer.start_span(info[2], kind=_INTERNAL, attributes=info[3])
            return (span, _attach(_set_span_in_context(span)), _perf_counter(), info)
        except Exception as exc:
            self._internal_failure(f"{layer.kind} started", exc)
            return None

    rewrite_started = wrapper_started = layer_started

    def layer_finished(self, call: CallInfo, token: Any, outcome: str,
                       error: BaseException | None) -> None:
        """``wrapper_finished`` (and the end of every rewrite span): flat, like
        ``layer_started`` — it runs per layer per call."""
        if token is None:
            return
        try:
            span, ctx_token, start, info = token
            try:  # as context.safe_detach, without the call
                _detach(ctx_token)
            except Exception:
                pass
            span.set_attribute(a.OTELMW_MIDDLEWARE_OUTCOME, outcome)
            if error is not None:
                mark_exception(span, error, with_content=self.content.on_spans)
            span.end()
            if self.layer_metrics:
                self.inst.middleware_duration.record(
                    _perf_counter() - start,
                    info[4].get(outcome) or self._metric_attrs(info, outcome))
        except Exception as exc:
            self._internal_failure("layer_finished", exc)

    wrapper_finished = layer_finished

    def rewrite_finished(self, call: CallInfo, token: Any, outcome: str,
                         changed_keys: list[str], source: str | None, reason: str | None,
                         error: BaseException | None) -> None:
        if token is None:
            return
        if outcome == UNCHANGED:  # the usual case: nothing but the outcome
            return self.layer_finished(call, token, outcome, error)
        try:
            extra: dict[str, Any] | None = None
            if outcome == REWRITTEN:
                src = _c(source or token[3][0].plugin)
                extra = {a.OTELMW_REWRITE_SOURCE: src}
                if token[0].is_recording():
                    extra[a.OTELMW_REWRITE_CHANGED_KEYS] = [_c(k, 128)
                                                            for k in changed_keys[:64]]
                    if reason:
                        extra[a.OTELMW_REWRITE_REASON] = short_text(reason, MAX_STR)
                self.inst.rewrites.add(1, {a.OTELMW_REWRITE_SOURCE: src,
                                           a.OTELMW_MIDDLEWARE_KIND: token[3][0].kind})
            elif outcome == FAILED and error is None:
                extra = {a.ERROR_TYPE: "bad_return_shape"}
            if extra:
                token[0].set_attributes(extra)  # a span that is not recording ignores these
        except Exception as exc:
            self._internal_failure("rewrite_finished", exc)
        self.layer_finished(call, token, outcome, error)

"""``TelemetryObserver``: the pipeline made visible as spans, metrics and log events.

Implements ``otelmw.core.seam.PipelineObserver`` as a dispatcher: one object per
span kind (``spans.chat``, ``spans.embeddings``, ``spans.tool``, ``spans.turn``,
``spans.layer``) and the hook event emitter (``hook_events``), all writing to one
``spans.operation.Signals``. Hot-path rules, kept by those objects:
``start_span`` + attach/detach (no generator context managers), a concrete
tracer fetched once, attributes beyond the sampler-relevant ones built only when
the span records, digests computed once per value. Every method is guarded:
telemetry never raises into the agent (failures are counted under
``instrumentation``).
"""

from __future__ import annotations

from typing import Any

from opentelemetry import _logs, metrics, trace

from ...config import settings as cfg
from ...core.contract import CallInfo
from ...core.failures import HOOK, MIDDLEWARE, NORMALIZE, FailureLog
from ...version import __version__
from .. import attributes
from ..content.policy import ContentPolicy
from ..hook_events import HookEventEmitter
from ..protocol_metrics import ProtocolMetrics
from ..spans.chat import ChatSpans
from ..spans.embeddings import EmbeddingsSpans
from ..spans.layer import LayerSpans
from ..spans.operation import Instruments, OperationSpans, OpState, Signals
from ..spans.step import StepSpans
from ..spans.tool import ToolSpans
from ..spans.turn import TurnSpans

__all__ = ["TelemetryObserver"]


class TelemetryObserver:
    """Spans for calls, rewrites and wrappers; hook log events; contract metrics.

    A seam method served by one object is that object's bound method, set here
    (``self.wrapper_started = layers.started``): the per-layer and per-call paths
    pay no extra frame for the dispatch. ``call_started``/``call_finished`` pick
    the span kind by the call's operation.
    """

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None,
                 logger_provider: Any = None, content: ContentPolicy | None = None,
                 failures: FailureLog | None = None, hook_events: str | None = None,
                 middleware_metrics: bool | None = None,
                 digest_max_bytes: int | None = None,
                 settings: cfg.Settings | None = None) -> None:
        """What it records follows ``settings`` (``configure()`` hands down the ones it
        validated; without them, the environment's are loaded here and a bad value
        raises ``ValueError``); an argument given here wins over its setting."""
        s = settings if settings is not None else cfg.load()
        self.tracer = trace.get_tracer("otelmw", __version__, tracer_provider)
        self.meter = metrics.get_meter("otelmw", __version__, meter_provider)
        self._meter_provider = meter_provider
        self.logger = _logs.get_logger("otelmw", __version__, logger_provider=logger_provider)
        self.inst = Instruments(self.meter)
        self.content = content if content is not None else ContentPolicy.from_settings(s)
        self.failures = failures
        # Which hook firings the core reports (``PipelineObserver.hook_events``).
        self.hook_events: str = (s[cfg.HOOK_EVENTS] if hook_events is None
                                 else cfg.HOOK_EVENTS.validated(hook_events))
        signals = self.signals = Signals(
            self.tracer, self.logger, self.inst, self.content, failures,
            s[cfg.DIGEST_MAX_BYTES] if digest_max_bytes is None else digest_max_bytes)

        self.chat = ChatSpans(signals)
        self.embeddings = EmbeddingsSpans(signals)
        self.tools = ToolSpans(signals)
        self.turns = TurnSpans(signals, self.shares_host_meters)
        self.steps = StepSpans(signals)
        self.layers = LayerSpans(signals, s[cfg.MIDDLEWARE_METRICS] == "on"
                                 if middleware_metrics is None else middleware_metrics)
        self.hook_emitter = HookEventEmitter(signals)
        self._by_operation: dict[str, OperationSpans] = {
            attributes.OP_CHAT: self.chat, attributes.OP_EMBEDDINGS: self.embeddings}

        self.call_enriched = self.chat.enriched
        self.tool_result = self.tools.result
        self.tool_enriched = self.tools.enriched
        self.rewrite_started = self.wrapper_started = self.layers.started
        self.rewrite_finished = self.layers.rewrite_finished
        self.wrapper_finished = self.layers.finished
        self.hook_fired = self.hook_emitter.fired
        self.protocol_operation = ProtocolMetrics(self.meter, signals.internal_failure).record
        self.turn_started = self.turns.started
        self.turn_left = self.turns.left
        self.turn_finished = self.turns.finished
        self.call_described = self.steps.call_described
        self.step_started = self.steps.started
        self.step_described = self.steps.described
        self.step_finished = self.steps.finished

        if failures is not None:
            failures.add_listener(self.on_failure)

    @property
    def layer_metrics(self) -> bool:
        """Whether each layer records ``otelmw.middleware.duration``."""
        return self.layers.record_duration

    def close(self) -> None:
        if self.failures is not None:
            self.failures.remove_listener(self.on_failure)

    def on_failure(self, category: str, kind: str, name: str, exc: BaseException | None
                   ) -> None:
        """A ``FailureLog`` listener: middleware, hook and normalizer failures counted."""
        attrs = {attributes.OTELMW_MIDDLEWARE_KIND: kind, attributes.OTELMW_MIDDLEWARE_NAME: name}
        if category == MIDDLEWARE:
            self.inst.middleware_failures.add(1, attrs)
        elif category == HOOK:
            self.inst.hook_failures.add(1, {attributes.OTELMW_HOOK_NAME: kind,
                                            attributes.OTELMW_MIDDLEWARE_NAME: name})
        elif category == NORMALIZE:
            self.inst.normalize_failures.add(1, {attributes.OTELMW_RUNTIME_ID: kind})

    def call_started(self, call: CallInfo, payload: Any) -> OpState | None:
        try:
            op = self._by_operation.get(call.operation, self.tools).start(call, payload)
            self._note_host_measured(call, op)
            return op
        except Exception as exc:
            self.signals.internal_failure("call_started", exc)
            return None

    def call_adopted(self, call: CallInfo, payload: Any) -> OpState | None:
        try:
            if call.operation == attributes.OP_EXECUTE_TOOL:
                op = self.tools.adopt(call, payload)
            elif call.operation == attributes.OP_CHAT:
                op = self.chat.adopt(call, payload)
            else:  # only tool and chat calls adopt a host's span; others open their own
                op = self._by_operation.get(call.operation, self.tools).start(call, payload)
            self._note_host_measured(call, op)
            return op
        except Exception as exc:
            self.signals.internal_failure("call_adopted", exc)
            return None

    def shares_host_meters(self) -> bool:
        """Whether otelmw's points and a host's own meet: a host's meter is the global
        meter provider's (``CallInfo.host_measured``). Asked when a host-measured call
        or turn starts, so a global provider the program sets after this observer was
        made counts (otelmw's meter, given no provider, follows the global one)."""
        return (self._meter_provider is None
                or self._meter_provider is metrics.get_meter_provider())

    def _note_host_measured(self, call: CallInfo, op: OpState) -> None:
        """A call the host records duration and usage points for itself gets none of
        otelmw's where both reach the same meter provider (never counted twice)."""
        if call.host_measured and self.shares_host_meters():
            op.measured = False

    def request_rewritten(self, call: CallInfo, request: Any) -> None:
        if call.operation == attributes.OP_EXECUTE_TOOL:
            self.tools.arguments_rewritten(call, request)
        else:
            self.chat.request_rewritten(call, request)

    def call_finished(self, call: CallInfo, result: Any, error: BaseException | None) -> Any:
        op = call.observation
        if not isinstance(op, OpState):
            return result
        try:
            return self._by_operation.get(call.operation, self.tools).finish(
                call, op, result, error)
        except Exception as exc:
            self.signals.internal_failure("call_finished", exc)
        return result

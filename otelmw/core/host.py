"""The host-adapter API: everything a host adapter (``otelmw/instrumentation/``) needs
from the core, and the only way it reaches the observer.

A host adapter catches what a host does and hands it to the pipeline:

* **a call the pipeline runs** (``Pipeline.run_llm`` / ``run_tool`` /
  ``run_embeddings`` and their async twins; ``Pipeline.turn`` for a turn): otelmw's
  own request stage, hook points and execution chain around the host's function;
* **a call the host opened itself** (``open_call``): its span starts where the host
  starts it (e.g. before the host's own request middleware), the pipeline runs it
  later (``run_llm(..., call=...)``) or the adapter ends it (``HostCall.finish``);
* **what the host itself observed**, reported on an open call: the request it sends
  (``HostCall.request_sent``), a tool result it produced or a call it blocked
  (``HostCall.report_tool_result`` / ``tool_blocked``), each of its own middleware callbacks
  as a layer (``HostCall.rewrite_layer`` / ``wrapper_layer``), each firing of its own
  hook points (``HostCall.report_hook_firing``);
* **a nested call** that must enrich the call in flight rather than open a second one
  (``current_llm_call`` + ``enrich_llm_call`` for a provider SDK under a host-level
  model call; ``current_tool_call`` + ``enrich_tool_call`` for a tool protocol, e.g.
  an MCP client, under a tool call a host or the pipeline runs).

Nothing here imports OpenTelemetry; the observer stays behind the seam. Failures of
an adapter's own code are reported with ``instrumentation_failed`` (counted, warned
once); an adapter fails open: the host's call always runs.
"""

from __future__ import annotations

import contextvars
import hashlib
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, TypeVar, cast

from . import calls, contract, seam
from .contract import CallInfo
from .failures import INSTRUMENTATION, describe
from .payloads import changed_keys
from .pipeline import BLOCKED_KEY, Pipeline, get_pipeline
from .registry import Layer, make_layer
from .results import NormalizedToolResult
from .seam import NO_VALUE, AttributeValue, NoValue, Payload

__all__ = [
    "AttributeValue",
    "HostCall",
    "HostOutcome",
    "HostStep",
    "LayerRun",
    "Payload",
    "RewriteOutcome",
    "ToolPlugin",
    "ToolStatus",
    "WrapperOutcome",
    "changed_payload_keys",
    "current_llm_call",
    "current_tool_call",
    "describe_call",
    "enrich_llm_call",
    "enrich_tool_call",
    "hook_firings_recorded",
    "host_layer",
    "install_observer",
    "instrumentation_failed",
    "llm_call_current",
    "observing",
    "open_call",
    "open_step",
    "record_protocol_operation",
    "tool_call_current",
    "tool_plugins",
    "unopened_call",
]

R = TypeVar("R")
X = TypeVar("X")

RewriteOutcome = Literal["rewritten", "unchanged", "failed", "error"]
WrapperOutcome = Literal["passed", "short_circuit", "failed_before_next",
                         "failed_after_next", "error"]
ToolStatus = Literal["ok", "error", "blocked"]


def observing(pipeline: Pipeline | None = None) -> bool:
    """Whether an observer is installed (without one, opening calls ahead is moot)."""
    return (pipeline or get_pipeline()).observer is not None


def install_observer(make: Callable[[], seam.PipelineObserver],
                     pipeline: Pipeline | None = None) -> None:
    """Install ``make()`` as the pipeline's observer unless one is installed (an
    instrumentor enabled without ``configure()``, e.g. by ``opentelemetry-instrument``)."""
    pipe = pipeline or get_pipeline()
    if pipe.observer is None:
        pipe.observer = make()


def hook_firings_recorded(pipeline: Pipeline | None = None) -> bool:
    """Whether each firing of a host's own hook points becomes an ``otelmw.hook.*``
    record: an observer is installed and hook events are not ``none``."""
    obs = (pipeline or get_pipeline()).observer
    return obs is not None and obs.hook_events in ("registered", "all")


def instrumentation_failed(host: str, where: str, exc: BaseException,
                           pipeline: Pipeline | None = None) -> None:
    """Count (and warn once about) an error of a host adapter's own code at ``where``;
    the adapter then fails open (the host's call runs as without otelmw)."""
    (pipeline or get_pipeline()).failures.record(
        INSTRUMENTATION, host, where, f"{host} instrumentation error: {describe(exc)}", exc)


class HostOutcome:
    """What the host's own call did inside the pipeline, for an adapter that fails open.
    ``call``/``acall`` run it (in the base call of the pipeline's execution chain) and
    note its result or error; when the pipeline raised, ``recover`` tells the host's
    own error (re-raised) from otelmw's (counted, as ``instrumentation_failed``) and
    says whether the host's call still has to run: it never runs twice."""

    __slots__ = ("error", "executed", "host", "result", "swallowed")

    def __init__(self, host: str) -> None:
        self.host = host  # the adapter's name, as ``instrumentation_failed`` takes it
        self.executed = False
        # the host answered with its error rather than raising it (``error`` is what it
        # answered, ``result`` what it returned): recovered as a result, not re-raised
        self.swallowed = False
        self.error: BaseException | None = None
        self.result: object = None

    def call(self, run: Callable[[X], R], x: X) -> R:
        """``run(x)``, the host's call, noted."""
        self.executed = True
        try:
            result = run(x)
        except BaseException as exc:
            self.error = exc
            raise
        self.result = result
        return result

    async def acall(self, run: Callable[[X], Awaitable[R]], x: X) -> R:
        """``await run(x)``, the host's call, noted."""
        self.executed = True
        try:
            result = await run(x)
        except BaseException as exc:
            self.error = exc
            raise
        self.result = result
        return result

    def recover(self, exc: BaseException, where: str) -> bool:
        """After the pipeline raised ``exc``: the host's own error is re-raised; otelmw's
        is counted (at ``where``) and the host's outcome stands: its error is raised, or
        False (its result is ``result``), or True when its call has not run yet (the
        adapter runs it now, without the pipeline)."""
        if exc is not self.error:
            instrumentation_failed(self.host, where, exc)
        elif not self.swallowed:
            raise exc
        if not self.executed:
            return True
        if self.error is not None and not self.swallowed:
            raise self.error
        return False


def changed_payload_keys(before: Payload, after: Payload) -> list[str]:
    """The top-level keys a host's rewrite changed (for its layer's span)."""
    return changed_keys(before, after)


class LayerRun:
    """One run of a host's own middleware callback, reported as a layer of the call
    (its span): ``finished`` once with its outcome."""

    __slots__ = ("_call", "_obs", "_token")

    def __init__(self, obs: seam.PipelineObserver | None, call: CallInfo,
                 token: object) -> None:
        self._obs, self._call, self._token = obs, call, token

    def end_rewrite(self, outcome: RewriteOutcome, *, changed: Sequence[str] = (),
                         source: str | None = None, reason: str | None = None,
                         error: BaseException | None = None,
                         payload: Payload | NoValue = NO_VALUE) -> None:
        """A request callback ended: ``payload`` is the request or arguments it made."""
        if self._obs is not None:
            self._obs.rewrite_finished(self._call, self._token, outcome, list(changed),
                                       source, reason, error, payload)

    def end_wrapper(self, outcome: WrapperOutcome, *,
                         error: BaseException | None = None,
                         result: object = NO_VALUE) -> None:
        """An execution callback ended: ``result`` is what it returned."""
        if self._obs is not None:
            self._obs.wrapper_finished(self._call, self._token, outcome, error, result)


def host_layer(kind: str, callback: Callable[..., object], plugin: str) -> Layer:
    """A host's own middleware or hook callback as a layer of ``plugin`` (its span's
    name is ``<kind> <plugin>.<callback name>``)."""
    return make_layer(kind, callback, plugin)


class HostCall:
    """A call a host adapter opened itself (``open_call``): what the host observed
    about it is reported here, and it ends once (``finish``) unless the pipeline runs
    it (``Pipeline.run_llm(..., call=host_call.call)``)."""

    __slots__ = ("_obs", "call")

    def __init__(self, obs: seam.PipelineObserver | None, call: CallInfo) -> None:
        self._obs, self.call = obs, call

    @property
    def observed(self) -> bool:
        """Whether an observer hears of this call (else every report is a no-op)."""
        return self._obs is not None

    def request_sent(self, request: Payload) -> None:
        """The request the host sends now differs from the one the call opened with."""
        self.call.request_sent(request)
        if self._obs is not None:
            self._obs.request_rewritten(self.call, request)

    def rewrite_layer(self, layer: Layer, position: int, payload: Payload) -> LayerRun:
        """A host request callback starts on ``payload``; its span is current until
        ``LayerRun.end_rewrite``."""
        obs = self._obs
        token = obs.rewrite_started(self.call, layer, position, payload) if obs else None
        return LayerRun(obs, self.call, token)

    def wrapper_layer(self, layer: Layer, position: int, payload: Payload) -> LayerRun:
        """A host execution callback starts on ``payload``; its span is current until
        ``LayerRun.end_wrapper``."""
        obs = self._obs
        token = obs.wrapper_started(self.call, layer, position, payload) if obs else None
        return LayerRun(obs, self.call, token)

    def report_hook_firing(self, hook_name: str, payload: dict[str, object],
                           failures: int) -> None:
        """The host fired one of its own hook points for this call (``failures``: how
        many of its callbacks raised); the record goes on the current span."""
        obs = self._obs
        if obs is not None and obs.hook_events in ("registered", "all"):
            obs.hook_fired(self.call, hook_name, payload, failures)

    def report_tool_result(self, result: NormalizedToolResult, status: ToolStatus) -> None:
        """The tool call's result as the host (or a nested tool protocol) produced it."""
        if self._obs is not None:
            self._obs.tool_result(self.call, result, status)

    def tool_blocked(self, message: str, result: object) -> None:
        """The host blocked the tool call before it ran (its own policy hook)."""
        self.report_tool_result(NormalizedToolResult(
            content=result, success=False, raw_result=result, error_message=message,
            metadata={BLOCKED_KEY: True}), "blocked")

    def finish(self, result: R, error: BaseException | None = None) -> R:
        """End the call; returns the result to hand back (a stream may come back
        wrapped so its end is observed)."""
        if self._obs is None:
            return result
        # the result, or a wrapper that behaves as it (a stream whose end is observed)
        return cast(R, self._obs.call_finished(self.call, result, error))


def open_call(call: CallInfo, payload: Payload,
              pipeline: Pipeline | None = None, *, on_host_span: bool = False) -> HostCall:
    """Open ``call`` now (its span starts in the current context and becomes
    current): a call the host starts before the pipeline runs it, or one the
    pipeline never runs (a host's own call, ended with ``HostCall.finish``).

    ``on_host_span``: the host's own tracing already opened this call's span and it is
    current here (the MCP SDK's ``tools/call`` server span): the call is recorded on
    that span, which the host ends, instead of on a second one of otelmw's."""
    obs = (pipeline or get_pipeline()).observer
    if obs is not None:
        adopt = getattr(obs, "call_adopted", None) if on_host_span else None
        call.observation = (adopt or obs.call_started)(call, payload)
    return HostCall(obs, call)


def unopened_call(call: CallInfo, pipeline: Pipeline | None = None) -> HostCall:
    """``call`` without a span of its own: what the host reports on it (a hook
    firing) goes on the current span."""
    return HostCall((pipeline or get_pipeline()).observer, call)


def describe_call(call: CallInfo, attributes: Mapping[str, AttributeValue],
                  pipeline: Pipeline | None = None) -> None:
    """Attributes of the host's own about ``call`` while its span is open (keys in the
    host's namespace, e.g. ``litellm.response_cost``): what only the host knows, such
    as a cost it computed. Ignored once the call's span has ended."""
    obs = (pipeline or get_pipeline()).observer
    if obs is not None:
        obs.call_described(call, attributes)


class HostStep:
    """A step of the host's own that spans several calls (a router over its attempts,
    a retry loop): its span is current from ``open_step`` to ``finish``, so the calls
    made meanwhile are its children."""

    __slots__ = ("_obs", "_token")

    def __init__(self, obs: seam.PipelineObserver | None, token: object) -> None:
        self._obs, self._token = obs, token

    def describe(self, attributes: Mapping[str, AttributeValue]) -> None:
        """More attributes of the host's own on the step's span (before ``finish``)."""
        if self._obs is not None and self._token is not None:
            self._obs.step_described(self._token, attributes)

    def finish(self, result: R, error: BaseException | None = None) -> R:
        """End the step (once) in the context that opened it; returns the result to hand
        back (a stream comes back wrapped: the step's span ends with the stream)."""
        obs, token = self._obs, self._token
        if obs is None or token is None:
            return result
        self._token = None
        return cast(R, obs.step_finished(token, result, error))  # as call_finished


def open_step(name: str, attributes: Mapping[str, AttributeValue],
              pipeline: Pipeline | None = None) -> HostStep:
    """Open a host step named ``name`` (its span's name) in the current context; the
    calls made until ``HostStep.finish`` are its children."""
    obs = (pipeline or get_pipeline()).observer
    return HostStep(obs, obs.step_started(name, attributes) if obs is not None else None)


# ----------------------------------------------------------------- nested calls

# The model call the pipeline (or a host adapter) runs in this context: a provider SDK
# call under it enriches it (``enrich_llm_call``) instead of opening a second ``chat``
# span. The contract's own accessor, not a wrapper of it: every SDK call asks.
current_llm_call = contract.current_llm_call


@contextmanager
def llm_call_current(call: CallInfo | None) -> Iterator[None]:
    """Make ``call`` the current model call inside the block (``None``: no call, e.g.
    around a host's own middleware, whose model calls are calls of their own)."""
    token = contract.set_current_llm_call(call)
    try:
        yield
    finally:
        contract.reset_current_llm_call(token)


def enrich_llm_call(call: CallInfo, raw_response: R, server_address: str | None,
                    server_port: int | None, pipeline: Pipeline | None = None) -> R:
    """A nested layer (the provider SDK under a host-level ``chat`` call) saw the raw
    provider response of ``call``; returns what to hand back (a stream may be wrapped
    so its chunks are observed)."""
    if server_address and call.server_address is None:
        call.server_address, call.server_port = server_address, server_port
    obs = (pipeline or get_pipeline()).observer
    if obs is None:
        return raw_response
    return cast(R, obs.call_enriched(call, raw_response, server_address, server_port))


_current_tool_call: contextvars.ContextVar[HostCall | None] = contextvars.ContextVar(
    "otelmw_current_host_tool_call", default=None)


def current_tool_call() -> HostCall | None:
    """The tool call in flight in this context: the one a host adapter marked
    (``tool_call_current``), else the one whose tool the pipeline is running
    (``run_tool``'s base call). A nested tool protocol (an MCP client inside a
    framework's tool) enriches it (``enrich_tool_call``) instead of opening a second
    ``execute_tool`` span and running the contract twice."""
    host = _current_tool_call.get()
    if host is not None:
        return host
    running = calls.tool_in_flight()
    return None if running is None else HostCall(running.observer, running.call)


def enrich_tool_call(call: HostCall, attributes: Mapping[str, AttributeValue]) -> None:
    """A nested tool protocol (the MCP client under a framework's tool call) adds what
    it knows (its protocol's attributes) to ``call``'s ``execute_tool`` span; the
    call's result is still the host's to report."""
    obs = call._obs  # the HostCall's own observer
    enrich = getattr(obs, "tool_enriched", None)  # an observer older than the method
    if enrich is not None and attributes:
        enrich(call.call, dict(attributes))


def record_protocol_operation(protocol: str, side: str, seconds: float,
                              attributes: Mapping[str, AttributeValue],
                              pipeline: Pipeline | None = None) -> None:
    """One request of a tool protocol a host adapter timed on the wire (``protocol``
    ``mcp``; ``side`` ``client`` or ``server``): a point of the protocol's duration metric
    (``mcp.client.operation.duration``, ...) with ``attributes``."""
    obs = (pipeline or get_pipeline()).observer
    record = getattr(obs, "protocol_operation", None)  # an observer older than the method
    if record is not None:
        record(protocol, side, seconds, dict(attributes))


@contextmanager
def tool_call_current(call: HostCall | None) -> Iterator[None]:
    """Make ``call`` the tool call in flight inside the block."""
    token = _current_tool_call.set(call)
    try:
        yield
    finally:
        try:
            _current_tool_call.reset(token)
        except ValueError:  # reset from another context: leave it there
            pass


# The stages of a tool call a plugin can take part in (``tool_plugins``).
_TOOL_STAGES = (contract.TOOL_REQUEST, contract.TOOL_EXECUTION, contract.PRE_TOOL_CALL,
                contract.POST_TOOL_CALL, contract.TRANSFORM_TOOL_RESULT)


@dataclass(frozen=True, slots=True)
class ToolPlugin:
    """A plugin as a tool call runs it: its name and a fingerprint of its tool-call
    layers, to tell "the same plugin" in another process (an MCP client and its server):
    the same name with the same callbacks (stage, module, qualified name) at the same
    stages."""

    name: str
    fingerprint: str  # 16 hex digits of a SHA-256 over the sorted layer descriptions


def tool_plugins(pipeline: Pipeline | None = None) -> tuple[ToolPlugin, ...]:
    """The plugins with a layer a tool call runs now (middleware ``tool_request`` /
    ``tool_execution``, hooks ``pre_tool_call`` / ``post_tool_call`` /
    ``transform_tool_result``), by name, each with its fingerprint."""
    middleware, hooks = (pipeline or get_pipeline()).registry.tables()
    described: dict[str, list[str]] = {}
    for stage in _TOOL_STAGES:
        for layer in (*middleware.get(stage, ()), *hooks.get(stage, ())):
            module = getattr(layer.callback, "__module__", None)
            described.setdefault(layer.plugin, []).append(
                f"{stage} {module if isinstance(module, str) else ''}:{layer.name}")
    return tuple(
        ToolPlugin(name, hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()[:16])
        for name, lines in sorted(described.items()))

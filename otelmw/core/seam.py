"""The seam through which telemetry (or anything else) watches the pipeline.

The core calls these methods only when an observer is installed, so with none
installed observation costs one ``is None`` check per stage. Observers must not
raise: otelmw's telemetry observer guards each method itself and counts its
own failures under the ``instrumentation`` category.

Outcomes reported:

* request rewrites: ``rewritten`` | ``unchanged`` | ``failed``
* execution wrappers: ``passed`` | ``short_circuit`` | ``failed_before_next`` |
  ``failed_after_next`` | ``error`` (a downstream or deliberate error propagated)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final, Protocol, TypeAlias

if TYPE_CHECKING:
    from .contract import CallInfo, RuntimeContext
    from .registry import Layer
    from .results import NormalizedToolResult

REWRITTEN = "rewritten"
UNCHANGED = "unchanged"
FAILED = "failed"
PASSED = "passed"
SHORT_CIRCUIT = "short_circuit"
FAILED_BEFORE_NEXT = "failed_before_next"
FAILED_AFTER_NEXT = "failed_after_next"
ERROR = "error"


class NoValue:
    """The type of ``NO_VALUE``: a payload or result a caller of the seam does not
    report (``None`` is a value a callback may return)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_VALUE"


NO_VALUE: Final = NoValue()

#: What a host passed or a callback returned: a request, tool arguments, a result. The
#: core hands it on unchanged; an observer reads what it knows of its shape.
Payload: TypeAlias = object
#: What an observer returns from a ``*_started`` method, handed back to it by the
#: matching ``*_finished``: opaque to the core (the observer checks what it gets back).
Token: TypeAlias = object
#: An attribute value a host or a nested protocol reports (OpenTelemetry's primitive
#: attribute values and string lists, without depending on it).
AttributeValue: TypeAlias = str | bool | int | float | Sequence[str]
#: A hook point's payload: the keyword arguments its callbacks get.
HookPayload: TypeAlias = Mapping[str, object]


class PipelineObserver(Protocol):
    """Everything the core (and the host adapters) read from an observer."""

    #: Which hook firings the core reports through ``hook_fired``: ``registered``
    #: (hook points with callbacks, and every firing of a host's own hook points),
    #: ``all`` (every hook point, with or without callbacks; payloads are then
    #: built for each) or ``none`` (no firing, not even a host's own).
    hook_events: str

    def call_started(self, call: CallInfo, payload: Payload) -> object | None:
        """An LLM or tool call entered the pipeline (before any middleware). Returns the
        call's observation (whatever the observer keeps for it), which the core puts on
        ``call.observation`` and never reads; the observer never writes the call."""

    def call_adopted(self, call: CallInfo, payload: Payload) -> object | None:
        """As ``call_started`` (returns the call's observation), for a call whose span
        the host's own tracing opened and made current
        (``host.open_call(..., on_host_span=True)``): the call's telemetry goes on that
        span, and the host ends it."""

    def request_rewritten(self, call: CallInfo, request: Payload) -> None:
        """The request of an LLM call, or the arguments of a tool call, changed since
        ``call_started`` (a request stage rewrote it, or a wrapper passed another one on):
        ``request`` is the one that goes to the provider, or to the tool. Reported only
        when the object changed."""

    def call_finished(self, call: CallInfo, result: Payload,
                      error: BaseException | None) -> Payload:
        """The call left the pipeline. Returns the result to hand back (it may
        wrap a stream so the observer sees its end)."""

    def rewrite_started(self, call: CallInfo, layer: Layer, position: int,
                        payload: Payload = NO_VALUE) -> Token:
        """A request-rewrite callback is about to run on ``payload`` (the request or
        arguments as rewritten so far); returns a token."""

    def rewrite_finished(
        self,
        call: CallInfo,
        token: Token,
        outcome: str,
        changed_keys: list[str],
        source: str | None,
        reason: str | None,
        error: BaseException | None,
        payload: Payload = NO_VALUE,
    ) -> None:
        """``payload``: the payload after the callback (``NO_VALUE``: not reported,
        as for an unchanged rewrite, whose payload is the one it got)."""

    def wrapper_started(self, call: CallInfo, layer: Layer, position: int,
                        payload: Payload = NO_VALUE) -> Token:
        """An execution wrapper is about to run on ``payload`` (the request or
        arguments it gets); returns a token."""

    def wrapper_finished(
        self, call: CallInfo, token: Token, outcome: str, error: BaseException | None,
        result: Payload = NO_VALUE,
    ) -> None:
        """``result``: what the wrapper returned (``passed``/``short_circuit``;
        ``NO_VALUE`` when it returned nothing to hand back)."""

    def hook_fired(
        self, call: CallInfo, hook_name: str, payload: HookPayload, failures: int
    ) -> None:
        """An observer hook point fired (whether or not callbacks are registered)."""

    def tool_result(self, call: CallInfo, normalized: NormalizedToolResult,
                    status: str) -> None:
        """The tool call's normalized result is known; ``status`` is ``ok``,
        ``error`` or ``blocked`` (a ``pre_tool_call`` block directive)."""

    def tool_enriched(self, call: CallInfo, attributes: Mapping[str, AttributeValue]) -> None:
        """A nested tool protocol (an MCP client inside the tool) reported its own
        attributes for ``call`` (``host.enrich_tool_call``); may be called before or
        after ``tool_result``, never after ``call_finished``."""

    def protocol_operation(self, protocol: str, side: str, seconds: float,
                           attributes: Mapping[str, AttributeValue]) -> None:
        """A host adapter timed one request of a tool protocol on the wire
        (``host.record_protocol_operation``: MCP's ``tools/call`` on a client or a
        server); the protocol's duration metric gets a point."""

    def turn_started(self, turn: RuntimeContext) -> Token:
        """An agent turn began (``Pipeline.turn``); returns a token."""

    def turn_finished(self, token: Token, error: BaseException | None, failed: bool) -> None:
        """The turn ended; ``failed`` marks a turn whose host swallowed an error."""

    def turn_left(self, token: Token) -> None:
        """A context that still held the turn of ``token`` (a ``turn_started``
        token, not None) after it finished elsewhere leaves it (see
        ``contract.TurnMark``): the observer restores its own context there."""

    def call_enriched(self, call: CallInfo, result: Payload, server_address: str | None,
                      server_port: int | None) -> Payload:
        """A nested layer (e.g. the provider SDK under a host adapter) saw the raw
        provider response of ``call`` (and the server it came from; the core has put it
        on the call if the call had none); returns the result to hand back (streams
        may be wrapped so their chunks are observed)."""

    def call_described(self, call: CallInfo, attributes: Mapping[str, AttributeValue]) -> None:
        """A host adapter's own attributes of ``call`` (``host.describe_call``), while
        its span is open."""

    def step_started(self, name: str, attributes: Mapping[str, AttributeValue]) -> Token:
        """A host's own step over several calls began (``host.open_step``); returns a
        token. Its span is current until ``step_finished``."""

    def step_described(self, token: Token, attributes: Mapping[str, AttributeValue]) -> None:
        """More of the host's own attributes of an open step."""

    def step_finished(self, token: Token, result: Payload, error: BaseException | None) -> Payload:
        """The step returned (or raised); returns the result to hand back (a stream may
        be wrapped so the step ends with it)."""

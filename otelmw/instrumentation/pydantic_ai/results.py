"""pydantic-ai's tool results and otelmw's ``pydantic-ai`` normalizer.

A tool's return value is the result (a ``ToolReturn``'s ``return_value``). pydantic-ai's
control flow out of a tool — ``ModelRetry`` (ask the model to call again),
``SkipToolExecution``, ``CallDeferred`` / ``ApprovalRequired`` — is not a failure: the
adapter hands it to the pipeline as a ``ControlFlow`` result, normalized as a success
whose metadata names it (``pydantic_ai.control_flow``), and raises it again to
pydantic-ai afterwards, so the run goes on exactly as without otelmw.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from ...core import MiddlewareContext, NormalizedToolResult, instrumentation_failed

HOST = RUNTIME_ID = "pydantic-ai"
CONTROL_FLOW_KEY = "pydantic_ai.control_flow"


def failed(where: str, exc: BaseException) -> None:
    """Count (and warn once about) an error of this adapter; it then fails open."""
    instrumentation_failed(HOST, where, exc)


class ControlFlow:
    """A pydantic-ai control-flow exception raised by the tool's lifecycle, as the
    tool call's result: ``kind`` (``model_retry``, ``skip``, ``deferred``), the text
    the model gets (``message``), the exception to raise again (``error``)."""

    __slots__ = ("error", "kind", "message")

    def __init__(self, kind: str, message: Any, error: BaseException) -> None:
        self.kind, self.message, self.error = kind, message, error

    def __repr__(self) -> str:
        return f"ControlFlow({self.kind}: {self.message!r})"


class ToolOutcome:
    """What one tool call's lifecycle did inside the pipeline (per call, in a
    ContextVar the normalizer reads): the host's result or error, whether it ran,
    and the normalized result otelmw made of it."""

    __slots__ = ("control", "error", "executed", "normalized", "result")

    def __init__(self) -> None:
        self.executed = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.control: ControlFlow | None = None
        self.normalized: NormalizedToolResult | None = None


current_outcome: ContextVar[ToolOutcome | None] = ContextVar("otelmw_pydantic_ai_tool",
                                                             default=None)


def normalized(result: Any, execution_time_ms: float = 0.0) -> NormalizedToolResult:
    if isinstance(result, ControlFlow):
        return NormalizedToolResult(
            content=result.message, success=True, execution_time_ms=execution_time_ms,
            raw_result=result.message, metadata={CONTROL_FLOW_KEY: result.kind})
    value = getattr(result, "return_value", result) if _is_tool_return(result) else result
    return NormalizedToolResult(content=value, success=True,
                                execution_time_ms=execution_time_ms, raw_result=result)


def _is_tool_return(result: Any) -> bool:
    from pydantic_ai.messages import ToolReturn

    return isinstance(result, ToolReturn)


class PydanticAIResultNormalizer:
    """Runtime ``pydantic-ai``: a tool that returned is a success (its failures are
    exceptions, normalized by the pipeline); control flow is a success named in the
    metadata. The normalized result is kept for the adapter (``ToolOutcome``)."""

    runtime_id = RUNTIME_ID

    def normalize(self, result: Any, name: str, ctx: MiddlewareContext) -> NormalizedToolResult:
        out = normalized(result, ctx.execution_time_ms)
        outcome = current_outcome.get()
        if outcome is not None:
            outcome.normalized = out
        return out


NORMALIZER = PydanticAIResultNormalizer()

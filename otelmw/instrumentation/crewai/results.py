"""CrewAI's tool results and otelmw's ``crewai`` normalizer, and what CrewAI gets back
from otelmw's tool pipeline.

A CrewAI tool answers with a value (any type: CrewAI formats it for the model itself)
or declares a failure by returning a ``ToolFailure`` (``crewai.tools.tool_failure``);
a raised error is CrewAI's to catch (``"Error executing tool: …"``), so the adapter
re-raises it after the pipeline normalized it. CrewAI gets the tool's own value back
unless an otelmw plugin answered instead (a block, a wrapper's own answer, a
``transform_tool_result`` text).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from ...core import HostOutcome, MiddlewareContext, NormalizedToolResult, instrumentation_failed

HOST = RUNTIME_ID = "crewai"
FAILURE_REASON_KEY = "crewai.failure.reason"


def failed(where: str, exc: BaseException) -> None:
    """Count (and warn once about) an error of this adapter; it then fails open."""
    instrumentation_failed(HOST, where, exc)


def host_outcome() -> HostOutcome:
    return HostOutcome(HOST)


class ToolRun:
    """One tool call inside the pipeline: the normalized result otelmw made of the
    tool's answer (the normalizer records it; the adapter compares the pipeline's
    answer with it)."""

    __slots__ = ("normalized",)

    def __init__(self) -> None:
        self.normalized: NormalizedToolResult | None = None


current_run: ContextVar[ToolRun | None] = ContextVar("otelmw_crewai_tool_run", default=None)


def normalized(result: Any, execution_time_ms: float = 0.0) -> NormalizedToolResult:
    if type(result).__name__ == "ToolFailure" and hasattr(result, "as_agent_message"):
        reason = getattr(result, "reason", None)
        meta = {FAILURE_REASON_KEY: str(getattr(reason, "value", reason))} if reason else {}
        return NormalizedToolResult(
            content=result.as_agent_message(), success=False,
            error_message=str(getattr(result, "message", "") or "tool failed"),
            metadata=meta, execution_time_ms=execution_time_ms, raw_result=result)
    return NormalizedToolResult(content=result, success=True,
                                execution_time_ms=execution_time_ms, raw_result=result)


class CrewAIResultNormalizer:
    """Runtime ``crewai``: a returned ``ToolFailure`` is a failure; any other value a
    success (raised errors are normalized by the pipeline)."""

    runtime_id = RUNTIME_ID

    def normalize(self, result: Any, name: str, ctx: MiddlewareContext) -> NormalizedToolResult:
        out = normalized(result, ctx.execution_time_ms)
        run = current_run.get()
        if run is not None:
            run.normalized = out
        return out


NORMALIZER = CrewAIResultNormalizer()


def host_answer(answer: Any, run: ToolRun, out: HostOutcome) -> Any:
    """What CrewAI gets for the pipeline's ``answer``: the tool's own value when the
    answer is just its normalized form, else the answer (a plugin's)."""
    norm = run.normalized
    if not out.executed or norm is None:
        return answer
    if answer is out.result or answer is norm.content:
        return out.result
    try:
        if answer == norm.model_text():
            return out.result
    except Exception:
        pass
    return answer

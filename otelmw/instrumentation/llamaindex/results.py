"""LlamaIndex tool results: the ``llamaindex`` normalizer (a ``ToolOutput``'s
``is_error``, ``content`` and ``raw_output``), what LlamaIndex gets back from otelmw's
tool pipeline (its own ``ToolOutput`` whenever nothing replaced it), and the adapter's
fail-open plumbing (``HostOutcome`` of the core's host API)."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from ...core import HostOutcome, MiddlewareContext, NormalizedToolResult
from ...core import instrumentation_failed as host_instrumentation_failed

HOST = RUNTIME_ID = "llamaindex"


def instrumentation_failed(where: str, exc: BaseException) -> None:
    """Count (and warn once about) an error of this adapter (never raises)."""
    host_instrumentation_failed(HOST, where, exc)


def host_outcome() -> HostOutcome:
    """A new ``HostOutcome`` of this adapter."""
    return HostOutcome(HOST)


class ToolRun:
    """One tool call through the pipeline: what the tool answered and what the
    normalizer made of it."""

    __slots__ = ("normalized", "output")

    def __init__(self) -> None:
        self.output: Any = None
        self.normalized: NormalizedToolResult | None = None


# The tool call this context runs (the normalizer records into it).
tool_run: ContextVar[ToolRun | None] = ContextVar("otelmw_llamaindex_tool_run", default=None)


def _is_tool_output(value: Any) -> bool:
    return type(value).__name__ == "ToolOutput" and hasattr(value, "is_error")


def normalized(result: Any, execution_time_ms: float = 0.0) -> NormalizedToolResult:
    if _is_tool_output(result):
        failed = bool(result.is_error)
        content = result.content
        meta: dict[str, Any] = {}
        if result.raw_output is not None and not isinstance(result.raw_output, str):
            meta["llamaindex.raw_output_type"] = type(result.raw_output).__name__
        return NormalizedToolResult(content=content, success=not failed,
                                    error_message=content if failed else None,
                                    metadata=meta, execution_time_ms=execution_time_ms,
                                    raw_result=result)
    return NormalizedToolResult(content=result, execution_time_ms=execution_time_ms,
                                raw_result=result)


class LlamaIndexResultNormalizer:
    """Runtime ``llamaindex``: a failed tool call is a ``ToolOutput(is_error=True)``
    (LlamaIndex's agents catch the tool's exception into one)."""

    runtime_id = RUNTIME_ID

    def normalize(self, result: Any, name: str, ctx: MiddlewareContext) -> NormalizedToolResult:
        out = normalized(result, ctx.execution_time_ms)
        run = tool_run.get()
        if run is not None:
            run.normalized = out
        return out


NORMALIZER = LlamaIndexResultNormalizer()


def host_result(answer: Any, run: ToolRun, tool: Any, tool_input: Any) -> Any:
    """What LlamaIndex gets for the pipeline's ``answer`` (``Pipeline.arun_tool``'s
    return: the normalized content, a ``transform_tool_result`` text or a block
    message): the tool's own ``ToolOutput`` when the answer is just its normalized
    form, a copy with the new text when a hook replaced it, and for a call that never
    ran (a ``pre_tool_call`` block, a wrapper that answered) a ``ToolOutput`` of the
    answer (``is_error`` for a block or a failed answer)."""
    from llama_index.core.tools.types import ToolOutput

    output, norm = run.output, run.normalized
    if _is_tool_output(answer):
        return answer
    text = answer if isinstance(answer, str) else str(answer)
    if output is not None and norm is not None:
        if answer is norm.content or answer == norm.model_text():
            return output
        if _is_tool_output(output):
            replaced = output.model_copy()  # the tool's own, with the hook's text
            replaced.content = text
            return replaced
    return ToolOutput(content=text, tool_name=tool.metadata.get_name(),
                      raw_input=tool_input if isinstance(tool_input, dict) else {},
                      raw_output=answer, is_error=norm is None or not norm.success)

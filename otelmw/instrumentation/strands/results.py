"""Strands' tool results (``ToolResult``: ``toolUseId``, ``status``, ``content``
blocks) and otelmw's ``strands`` normalizer."""

from __future__ import annotations

import json
from contextvars import ContextVar
from typing import Any

from ...core import MiddlewareContext, NormalizedToolResult, instrumentation_failed

HOST = RUNTIME_ID = "strands"


def failed(where: str, exc: BaseException) -> None:
    """Count (and warn once about) an error of this adapter; it then fails open."""
    instrumentation_failed(HOST, where, exc)


def content_text(content: Any) -> str:
    """The text of a ``ToolResult``'s content blocks (``text`` as is, ``json`` as JSON;
    other blocks, images and documents, by their kind)."""
    if not isinstance(content, list):
        return "" if content is None else str(content)
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            parts.append(str(block))
        elif "text" in block:
            parts.append(str(block["text"]))
        elif "json" in block:
            parts.append(json.dumps(block["json"], default=str))
        else:
            parts.append(f"[{', '.join(sorted(block))}]")
    return "\n".join(parts)


class ToolOutcome:
    """What one tool call did inside the pipeline (per call, in a ContextVar the
    normalizer reads): Strands' result event, whether the tool ran, and the normalized
    result otelmw made of it."""

    __slots__ = ("error", "event", "executed", "normalized")

    def __init__(self) -> None:
        self.executed = False
        self.event: Any = None  # the tool's ToolResultEvent
        self.error: BaseException | None = None  # what the host's tool run raised
        self.normalized: NormalizedToolResult | None = None


current_outcome: ContextVar[ToolOutcome | None] = ContextVar("otelmw_strands_tool",
                                                             default=None)


def normalized(result: Any, execution_time_ms: float = 0.0) -> NormalizedToolResult:
    if not isinstance(result, dict):
        return NormalizedToolResult(content=result, success=True,
                                    execution_time_ms=execution_time_ms, raw_result=result)
    text = content_text(result.get("content"))
    success = result.get("status") != "error"
    return NormalizedToolResult(
        content=text, success=success, execution_time_ms=execution_time_ms,
        raw_result=result, error_message=None if success else text or "tool error")


class StrandsResultNormalizer:
    """Runtime ``strands``: a ``ToolResult`` whose ``status`` is ``error`` is a failure
    (Strands turns a raising tool into one), its text the error message; otherwise a
    success whose content is the blocks' text. Kept for the adapter (``ToolOutcome``)."""

    runtime_id = RUNTIME_ID

    def normalize(self, result: Any, name: str, ctx: MiddlewareContext) -> NormalizedToolResult:
        out = normalized(result, ctx.execution_time_ms)
        outcome = current_outcome.get()
        if outcome is not None:
            outcome.normalized = out
        return out


NORMALIZER = StrandsResultNormalizer()

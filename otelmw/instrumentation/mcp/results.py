"""MCP tool results: the ``mcp`` normalizer (``CallToolResult`` → ``NormalizedToolResult``)
and how a pipeline answer becomes a ``CallToolResult`` again.

A ``CallToolResult`` reaches the normalizer as the model (client side) or as its wire
dict (server side: the SDK serializes inside its middleware chain); both normalize
the same way: ``content`` is the structured content when there is some, else the text
blocks joined; ``success`` is ``not isError``; the raw result is kept (digested).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from ...core import MiddlewareContext, NormalizedToolResult

RUNTIME_ID = "mcp"


class ChainOutcome:
    """What one MCP tool call's execution chain produced, as the normalizer saw it
    (a wrapper that answered from a cache included)."""

    __slots__ = ("normalized", "raw", "sent")

    def __init__(self) -> None:
        self.sent = False  # the request went to the server (the base call ran)
        self.raw: Any = None
        self.normalized: NormalizedToolResult | None = None


# The MCP tool call whose chain runs in this context (the normalizer reports to it).
chain_outcome: ContextVar[ChainOutcome | None] = ContextVar("otelmw_mcp_outcome", default=None)


def _field(result: Any, *names: str) -> Any:
    if isinstance(result, Mapping):
        for name in names:
            if name in result:
                return result[name]
        return None
    for name in names:
        value = getattr(result, name, None)
        if value is not None:
            return value
    return None


def is_call_tool_result(result: Any) -> bool:
    """A ``CallToolResult`` model or its wire dict."""
    if isinstance(result, Mapping):
        return isinstance(result.get("content"), list)
    return type(result).__name__ == "CallToolResult" and hasattr(result, "content")


def result_is_error(result: Any) -> bool:
    return _field(result, "isError", "is_error") is True


def result_text(result: Any) -> str:
    """The text blocks of a result, joined by newlines."""
    texts = []
    for block in _field(result, "content") or ():
        if _field(block, "type") == "text":
            text = _field(block, "text")
            if isinstance(text, str):
                texts.append(text)
    return "\n".join(texts)


def _plain_blocks(result: Any) -> list[Any]:
    out = []
    for block in _field(result, "content") or ():
        dump = getattr(block, "model_dump", None)
        out.append(dump(mode="json", by_alias=True, exclude_none=True) if dump else block)
    return out


def _is_blocks(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(
        _field(block, "type") is not None for block in value)


class MCPResultNormalizer:
    """The ``mcp`` runtime's normalizer."""

    runtime_id = RUNTIME_ID

    def normalize(self, result: Any, tool_name: str, ctx: MiddlewareContext
                  ) -> NormalizedToolResult:
        if is_call_tool_result(result):
            error = result_is_error(result)
            text = result_text(result)
            structured = _field(result, "structuredContent", "structured_content")
            content: Any = structured if structured is not None else (
                text if text or not _field(result, "content") else _plain_blocks(result))
            normalized = NormalizedToolResult(
                content=content, success=not error,
                error_message=(text or "tool error") if error else None,
                execution_time_ms=ctx.execution_time_ms, raw_result=result)
        elif _is_blocks(result) or (isinstance(result, tuple) and len(result) == 2
                                    and _is_blocks(result[0])):
            # 1.x ``FastMCP.call_tool``: the content blocks (and structured content)
            # the SDK makes the CallToolResult of
            blocks, structured = result if isinstance(result, tuple) else (result, None)
            text = result_text({"content": list(blocks)})
            normalized = NormalizedToolResult(
                content=structured if structured is not None else text,
                execution_time_ms=ctx.execution_time_ms, raw_result=result)
        else:  # a wrapper's own answer of another shape: passed through
            normalized = NormalizedToolResult(content=result,
                                              execution_time_ms=ctx.execution_time_ms,
                                              raw_result=result)
        outcome = chain_outcome.get()
        if outcome is not None:
            outcome.raw, outcome.normalized = result, normalized
        return normalized


def answer_of(out: Any, outcome: ChainOutcome) -> tuple[Any, bool]:
    """What the host gets back for the pipeline's answer ``out``: the chain's own
    result when the model would see exactly what it says (nothing transformed it),
    else ``out`` as a result's text; and whether that text is an error (a block, a
    failed result)."""
    normalized = outcome.normalized
    if normalized is not None:
        expected = normalized.model_text()
        if out is expected or (type(out) is type(expected) and out == expected):
            return outcome.raw, False
        return out, not normalized.success
    if outcome.sent:  # another normalizer ran (a user's for "mcp"): the server's answer
        return outcome.raw, False
    return out, True  # blocked before it was sent

"""Hermes' tool-result convention: a failed tool answers ``{"error": ...}`` or
``{"success": false}`` (a dict, or its JSON text); otelmw's normalizer for runtime id
``hermes`` reads it so, and keeps the result itself as the content."""

from __future__ import annotations

import json
from typing import Any

from ...core import MiddlewareContext, NormalizedToolResult
from .calls import RUNTIME_ID, text


def tool_error(result: Any) -> str | None:
    """The error a Hermes tool result reports, or None for a success."""
    parsed, raw = result, result.lstrip() if isinstance(result, str) else ""
    if raw.startswith("{") and ('"error"' in raw or '"success"' in raw):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return None
    if not isinstance(parsed, dict) or not (parsed.get("error") or parsed.get("success") is False):
        return None
    err = parsed.get("error") or text(parsed.get("message")) or "tool reported success: false"
    return err if isinstance(err, str) else json.dumps(err, default=str)


def normalized(result: Any, execution_time_ms: float = 0.0) -> NormalizedToolResult:
    error = tool_error(result)
    return NormalizedToolResult(content=result, success=error is None, error_message=error,
                                execution_time_ms=execution_time_ms, raw_result=result)


class HermesResultNormalizer:
    """Runtime "hermes": failures per ``tool_error``; ``content`` stays the raw result."""

    runtime_id = RUNTIME_ID

    def normalize(self, result: Any, name: str, ctx: MiddlewareContext) -> NormalizedToolResult:
        return normalized(result, ctx.execution_time_ms)


NORMALIZER = HermesResultNormalizer()

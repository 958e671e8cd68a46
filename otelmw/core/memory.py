"""Memory adapters: where normalized tool results are recorded after the hooks."""

from __future__ import annotations

import threading
from typing import Protocol, runtime_checkable

from .results import MiddlewareContext, NormalizedToolResult


@runtime_checkable
class MemoryAdapter(Protocol):
    def record_tool_result(self, normalized: NormalizedToolResult, ctx: MiddlewareContext) -> None:
        """Store one normalized tool result (content, success, metadata, raw_result…)."""


class ListMemoryAdapter:
    """In-process adapter keeping ``(normalized, ctx)`` pairs; for tests and demos."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.records: list[tuple[NormalizedToolResult, MiddlewareContext]] = []

    def record_tool_result(self, normalized: NormalizedToolResult, ctx: MiddlewareContext) -> None:
        with self._lock:
            self.records.append((normalized, ctx))

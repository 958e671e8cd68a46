"""The normalized tool result: how it is made (runtime tool-result normalization, the
runtime-tool-result contract) and who receives it after the hooks (memory adapters).

Same public names and shapes as PraisonAI's ``praisonaiagents.runtime``, so a
normalizer written for that document works here unchanged. Differences that
close the original's gaps: registration is validated, async tools and tools that
raise are normalized too (``pipeline.ToolCalls``), and a failing normalizer falls back
to a pass-through result instead of losing it.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .contract import NATIVE_RUNTIME_IDS
from .failures import NORMALIZE, FailureLog, describe, error_type

logger = logging.getLogger("otelmw")

TOOL_ERROR_PREFIX = "Tool Error: "


@dataclass
class MiddlewareContext:
    """What a normalizer knows about the call that produced ``result``."""

    tool_name: str
    runtime_id: str
    agent_id: str | None = None
    session_id: str | None = None
    execution_time_ms: float = 0.0
    timestamp: float = field(default_factory=time.time)
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class NormalizedToolResult:
    """A tool result in the one shape hooks, memory and telemetry consume."""

    content: Any
    success: bool = True
    error_message: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    execution_time_ms: float = 0.0
    timestamp: float = field(default_factory=time.time)
    raw_result: Any | None = None

    def model_text(self) -> Any:
        """What the model sees: the content, or ``"Tool Error: <message>"``."""
        if self.success:
            return self.content
        return f"{TOOL_ERROR_PREFIX}{self.error_message or 'tool failed'}"


@runtime_checkable
class RuntimeToolResultMiddleware(Protocol):
    @property
    def runtime_id(self) -> str: ...

    def normalize(
        self, result: Any, tool_name: str, ctx: MiddlewareContext
    ) -> NormalizedToolResult: ...


def passthrough_result(result: Any, execution_time_ms: float) -> NormalizedToolResult:
    """The raw result wrapped unchanged (positional: this runs on every tool call)."""
    return NormalizedToolResult(result, True, None, {}, execution_time_ms, time.time(), result)


class PassThroughMiddleware:
    """Wraps the raw result unchanged; used when a runtime has no normalizer."""

    def __init__(self, runtime_id: str = "praisonai") -> None:
        self._runtime_id = runtime_id

    @property
    def runtime_id(self) -> str:
        return self._runtime_id

    def normalize(self, result: Any, tool_name: str, ctx: MiddlewareContext
                  ) -> NormalizedToolResult:
        return passthrough_result(result, ctx.execution_time_ms)


_PASS_THROUGH = PassThroughMiddleware()


class NormalizerRegistry:
    """Thread-safe map of runtime id → tool-result normalizer, validated at registration.
    PraisonAI calls it ``MiddlewareRegistry`` (its normalizers are "tool-result
    middleware"); that name and otelmw's earlier ``RuntimeMiddlewareRegistry`` are
    aliases, as the contract's code is written against them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_runtime: dict[str, RuntimeToolResultMiddleware] = {}

    def register(self, runtime_id: str, middleware: RuntimeToolResultMiddleware) -> None:
        if not isinstance(runtime_id, str) or not runtime_id:
            raise ValueError(f"runtime_id must be a non-empty string, got {runtime_id!r}")
        if runtime_id in NATIVE_RUNTIME_IDS:
            raise ValueError(
                f"cannot register a tool-result normalizer for the native runtime "
                f"{runtime_id!r}: its results bypass normalization by design"
            )
        normalize = getattr(middleware, "normalize", None)
        if not callable(normalize):
            raise TypeError(
                f"tool-result middleware for {runtime_id!r} has no callable normalize(); "
                f"got {type(middleware).__name__}"
            )
        declared = getattr(middleware, "runtime_id", None)
        if declared != runtime_id:
            raise ValueError(
                f"tool-result middleware declares runtime_id={declared!r} but is being "
                f"registered for {runtime_id!r}"
            )
        with self._lock:
            replaced = self._by_runtime.get(runtime_id)
            self._by_runtime[runtime_id] = middleware
        if replaced is not None and replaced is not middleware:
            logger.warning(
                "otelmw: replacing tool-result middleware for runtime %r (%s → %s)",
                runtime_id, type(replaced).__name__, type(middleware).__name__,
            )

    def unregister(self, runtime_id: str) -> bool:
        with self._lock:
            return self._by_runtime.pop(runtime_id, None) is not None

    def get_middleware(self, runtime_id: str) -> RuntimeToolResultMiddleware:
        found = self._by_runtime.get(runtime_id)
        return found if found is not None else _PASS_THROUGH

    def lookup(self, runtime_id: str) -> RuntimeToolResultMiddleware | None:
        """The registered normalizer, or None (no pass-through allocation)."""
        return self._by_runtime.get(runtime_id)

    def has_middleware(self, runtime_id: str) -> bool:
        return runtime_id in self._by_runtime

    def list_runtimes(self) -> list[str]:
        with self._lock:
            return list(self._by_runtime)

    def clear(self) -> None:
        with self._lock:
            self._by_runtime.clear()


MiddlewareRegistry = NormalizerRegistry  # PraisonAI's name (the contract's)
RuntimeMiddlewareRegistry = NormalizerRegistry  # otelmw's earlier name, kept

_default_registry = NormalizerRegistry()


def get_default_middleware_registry() -> NormalizerRegistry:
    return _default_registry


def register_middleware(runtime_id: str, middleware: RuntimeToolResultMiddleware) -> None:
    _default_registry.register(runtime_id, middleware)


def get_middleware(runtime_id: str) -> RuntimeToolResultMiddleware:
    return _default_registry.get_middleware(runtime_id)


def is_bypassed(runtime_id: str | None) -> bool:
    """Native runtime or no runtime id: results are not normalized."""
    return runtime_id is None or runtime_id in NATIVE_RUNTIME_IDS


def normalize_result(
    registry: NormalizerRegistry,
    failures: FailureLog,
    result: Any,
    tool_name: str,
    ctx: MiddlewareContext,
) -> NormalizedToolResult:
    """Run the runtime's normalizer; on failure fall back to pass-through (warn once)."""
    normalizer = registry.lookup(ctx.runtime_id)
    if normalizer is None:
        return passthrough_result(result, ctx.execution_time_ms)
    try:
        out = normalizer.normalize(result, tool_name, ctx)
    except Exception as exc:
        failures.record(NORMALIZE, ctx.runtime_id, type(normalizer).__name__,
                        f"normalizer raised: {describe(exc)}", exc)
    else:
        if isinstance(out, NormalizedToolResult):
            try:
                _settle(out)
            except Exception as exc:
                failures.record(NORMALIZE, ctx.runtime_id, type(normalizer).__name__,
                                f"normalizer returned an unusable NormalizedToolResult: "
                                f"{describe(exc)}", exc, signature=("unusable",))
            else:
                if not out.execution_time_ms:
                    out.execution_time_ms = ctx.execution_time_ms
                return out
            return passthrough_result(result, ctx.execution_time_ms)
        failures.record(NORMALIZE, ctx.runtime_id, type(normalizer).__name__,
                        f"normalizer returned {type(out).__name__}, not NormalizedToolResult",
                        signature=("shape", type(out).__name__))
    return passthrough_result(result, ctx.execution_time_ms)


def _settle(out: NormalizedToolResult) -> None:
    """Make ``success`` a real bool and ``error_message`` a plain ``str`` (or None), so
    ``model_text()`` and every reader downstream cannot raise; raises when impossible."""
    if type(out.success) is not bool:
        out.success = bool(out.success)
    message = out.error_message
    if message is not None and type(message) is not str:
        text = f"{message}"
        if type(text) is not str:
            raise TypeError(f"error_message formats as {type(text).__name__}, not str")
        out.error_message = text


def failure_from_exception(exc: BaseException, execution_time_ms: float) -> NormalizedToolResult:
    """A tool that raised, as a normalized failure (hooks and telemetry still see it)."""
    try:
        message = str(exc) or type(exc).__name__
    except Exception:  # hostile __str__
        message = type(exc).__name__
    return NormalizedToolResult(
        content=None,
        success=False,
        error_message=message,
        metadata={"error.type": error_type(exc)},
        execution_time_ms=execution_time_ms,
        raw_result=exc,
    )


# Memory adapters: where normalized tool results are recorded after the hooks.

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

"""The LLM-call and tool-call pipelines that tie contract, chain, results and hooks.

LLM call:  request → ``llm_request`` → ``pre_api_request`` → ``llm_execution``
           chain → base call → ``post_api_request`` | ``api_request_error``
Tool call: parse/coerce args → ``tool_request`` → ``pre_tool_call`` (block) →
           ``tool_execution`` chain → base call → normalize → ``post_tool_call``
           → memory adapters → ``transform_tool_result``

With nothing registered and no observer installed, a call is the base call plus
a few attribute reads (and, for tools, a try/except that turns an exception
into ``"Tool Error: …"``).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from . import contract as c
from .contract import current_llm_call
from .embedding_calls import EmbeddingCalls
from .failures import FailureLog
from .llm_calls import LLMCalls
from .registry import LayerRegistry
from .results import MemoryAdapter, NormalizerRegistry, get_default_middleware_registry
from .seam import PipelineObserver
from .tool_calls import ToolArgumentsError, ToolCalls, parse_arguments

__all__ = ["Pipeline", "ToolArgumentsError", "Turn", "current_llm_call", "get_pipeline",
           "parse_arguments"]


class Pipeline(LLMCalls, ToolCalls, EmbeddingCalls):
    """One set of registrations, normalizers, memory adapters and an observer."""

    def __init__(self, registry: LayerRegistry | None = None,
                 normalizers: NormalizerRegistry | None = None,
                 failures: FailureLog | None = None) -> None:
        self.registry = registry if registry is not None else LayerRegistry()
        self.normalizers = normalizers if normalizers is not None else (
            get_default_middleware_registry())
        self.failures = failures if failures is not None else FailureLog()
        self.observer: PipelineObserver | None = None
        self.memory_adapters: tuple[MemoryAdapter, ...] = ()

    def add_memory_adapter(self, adapter: MemoryAdapter) -> None:
        if not callable(getattr(adapter, "record_tool_result", None)):
            raise TypeError(f"{type(adapter).__name__} has no record_tool_result(normalized, ctx)")
        self.memory_adapters = (*self.memory_adapters, adapter)

    def remove_memory_adapter(self, adapter: MemoryAdapter) -> None:
        self.memory_adapters = tuple(a for a in self.memory_adapters if a is not adapter)

    def turn(self, agent_name: str | None = None, *, session_id: str | None = None,
             task_id: str | None = None, turn_id: str | None = None,
             runtime_id: str | None = None) -> Turn:
        """An agent turn (``with pipeline.turn("weather-agent"): ...``)."""
        outer = c.leave_finished_turns()
        return Turn(self, {
            "agent_name": agent_name, "session_id": session_id, "task_id": task_id,
            "turn_id": turn_id or f"{session_id or outer.session_id or 'turn'}:"
                                  f"{c.new_request_id().removeprefix('req-')}",
            "runtime_id": runtime_id})

    # ------------------------------------------------------------------ LLM

class Turn:
    """One agent turn: sets the runtime context (a fresh ``turn_id``) and lets the
    observer open an ``invoke_agent`` span. Use as a (sync or async) context
    manager, or call ``start()``/``finish()`` from host adapters."""

    __slots__ = ("_ctx", "_mark", "_pipeline", "_token", "failed", "fields")

    def __init__(self, pipeline: Pipeline, fields: dict[str, Any]) -> None:
        self._pipeline, self.fields = pipeline, fields
        self._mark: c.TurnMark | None = None
        self._token: Any = None
        self._ctx: c.RuntimeContext | None = None
        self.failed = False

    def mark_failed(self) -> None:
        """The host swallowed an error (e.g. returned None): the turn is an error."""
        self.failed = True

    def start(self) -> c.RuntimeContext:
        outer = c.leave_finished_turns()
        mark = self._mark = c.TurnMark(outer)
        self._ctx = c.derive_context(outer, self.fields, mark)
        mark.token = c.enter_runtime_context(self._ctx)
        obs = self._pipeline.observer
        if obs is not None:
            token = self._token = obs.turn_started(self._ctx)
            if token is not None:
                mark.on_leave = partial(obs.turn_left, token)
        return self._ctx

    def finish(self, error: BaseException | None = None) -> None:
        """End the turn; from any thread. A context other than the caller's that
        still holds the turn (the starter's thread, when finished elsewhere)
        leaves it at its next pipeline call."""
        mark = self._mark
        if mark is None:
            return
        self._mark = None
        mark.closed = True
        obs = self._pipeline.observer
        if obs is not None and self._token is not None:
            obs.turn_finished(self._token, error, self.failed)
        self._token = None
        if c.current_call_context().runtime.turn is mark:  # the caller's context holds it
            mark.leave_runtime()

    def __enter__(self) -> Turn:
        self.start()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.finish(exc)

    async def __aenter__(self) -> Turn:
        self.start()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.finish(exc)


_default_pipeline = Pipeline()


def get_pipeline() -> Pipeline:
    """The process-wide pipeline used by decorators, plugins and instrumentors."""
    return _default_pipeline

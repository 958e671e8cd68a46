"""Embeddings requests: observed (an ``embeddings {model}`` span and metrics), never
rewritten — the middleware contract's LLM stages are for chat requests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import contract as c
from .seam import PipelineObserver
from .steps import adrive, drive, finished_steps, host_call_steps, isawaitable


class EmbeddingCalls:
    """Mixin of ``Pipeline``: ``run_embeddings`` / ``arun_embeddings``."""

    observer: PipelineObserver | None

    @staticmethod
    def _embeddings_call(request: Any, provider: str | None,
                         server: tuple[str | None, int | None]) -> c.CallInfo:
        rc = c.leave_finished_turns()
        model = request.get("model") if isinstance(request, dict) else None
        return c.CallInfo.for_embeddings(
            rc, provider=provider, model=model if isinstance(model, str) else None,
            server=server)

    def run_embeddings(self, request: Any, execute: Callable[[Any], Any], *,
                       provider: str | None = None, server_address: str | None = None,
                       server_port: int | None = None) -> Any:
        """Run one embeddings request (``execute(request)``) under the observer."""
        obs = self.observer
        if obs is None:
            return execute(request)
        call = self._embeddings_call(request, provider, (server_address, server_port))
        call.observation = obs.call_started(call, request)
        return drive(finished_steps, obs, call, host_call_steps(execute, request, False))

    async def arun_embeddings(self, request: Any, execute: Callable[[Any], Any], *,
                              provider: str | None = None, server_address: str | None = None,
                              server_port: int | None = None) -> Any:
        """``run_embeddings`` in an async call; ``execute`` may return an awaitable."""
        obs = self.observer
        if obs is None:
            r = execute(request)
            return await r if isawaitable(r) else r
        call = self._embeddings_call(request, provider, (server_address, server_port))
        call.observation = obs.call_started(call, request)
        return await adrive(finished_steps, obs, call, host_call_steps(execute, request, True))

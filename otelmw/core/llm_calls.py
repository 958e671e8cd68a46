"""The LLM-call pipeline: request → ``llm_request`` → ``pre_api_request`` →
``llm_execution`` chain → base call → ``post_api_request`` | ``api_request_error``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from . import contract as c
from .callstate import (
    _current_llm_call,
    _last_api_request_id,
    allm_terminal_for,
    isawaitable,
    llm_terminal_for,
    reset_current_llm_call,
)
from .execution import arun_execution, run_execution
from .failures import FailureLog, safe_str
from .hooks import afire_hooks, all_hook_events, fire_hooks
from .memory import MemoryAdapter
from .payloads import freeze
from .registry import Layer, MiddlewareRegistry
from .results import (
    RuntimeMiddlewareRegistry,
)
from .rewrites import arun_rewrites, run_rewrites
from .seam import PipelineObserver


def _execution_kwargs(mkw: dict[str, Any], original: Any, call: c.CallInfo) -> dict[str, Any]:
    """The middleware kwargs with what ``llm_execution`` callbacks get on top of the
    request stage's: the original and the trace of the rewrites that ran."""
    mkw["original_request"] = original
    mkw["middleware_trace"] = call.trace_view()
    return mkw


class LLMCalls:
    """Mixin of ``Pipeline``: ``run_llm`` / ``arun_llm``."""

    registry: MiddlewareRegistry
    normalizers: RuntimeMiddlewareRegistry
    failures: FailureLog
    observer: PipelineObserver | None
    memory_adapters: tuple[MemoryAdapter, ...]

    def _llm_call(self, request: Any, provider: str | None, model: str | None,
                  api_mode: str | None, api_request_id: str | None,
                  server: tuple[str | None, int | None] = (None, None)) -> c.CallInfo:
        rc = c.current_runtime_context()
        if model is None and isinstance(request, dict):
            m = dict.get(request, "model")  # dict's own: a subclass's .get is host code
            model = m if isinstance(m, str) else None
        call = c.CallInfo.for_chat(
            rc, api_request_id=api_request_id or c.new_request_id(rc.turn_id),
            provider=provider, model=model, api_mode=api_mode, server=server)
        _last_api_request_id.set(call.api_request_id)
        return call


    def _api_payload(self, call: c.CallInfo, kw: dict[str, Any], effective: Any,
                     started: float) -> dict[str, Any]:
        return {**kw, "request": effective, "middleware_trace": call.trace_view(),
                "started_at": started}

    def run_llm(self, request: Any, execute: Callable[[Any], Any], *,
                provider: str | None = None, model: str | None = None,
                api_mode: str | None = None, api_request_id: str | None = None,
                server_address: str | None = None, server_port: int | None = None,
                call: c.CallInfo | None = None) -> Any:
        """Run one provider request through the LLM pipeline (sync).

        ``call``: a call a host adapter already opened (``observer.call_started``
        reported) so its span could start before the host's own request stage;
        the pipeline then runs and finishes it instead of opening a new one.
        """
        obs = self.observer
        if call is None:
            if obs is None and not self.registry.llm_active:
                if api_request_id is not None:
                    _last_api_request_id.set(api_request_id)
                return execute(request)
            call = self._llm_call(request, provider, model, api_mode, api_request_id,
                                  (server_address, server_port))
            if obs is not None:
                obs.call_started(call, request)
        elif obs is not None:  # opened before the host's own request stage: the
            obs.request_rewritten(call, request)  # request now is the one it sends
        token = _current_llm_call.set(call)
        try:
            if self.registry.llm_active or all_hook_events(obs):
                # Middleware and hooks run outside the request: a model call they make
                # is its own (``llm_terminal_for`` makes ``call`` current again).
                _current_llm_call.set(None)
                result = self._run_llm(call, request, execute)
                _last_api_request_id.set(call.api_request_id)  # not a nested call's id
            else:  # observer only (the SDK instrumentors' usual case): just the base call
                result = execute(request)
        except BaseException as exc:
            if obs is not None:
                obs.call_finished(call, None, exc)
            raise
        finally:
            reset_current_llm_call(token)
        return obs.call_finished(call, result, None) if obs is not None else result

    # ``_run_llm`` and ``_arun_llm`` are twins that differ only where the async one
    # awaits (a stage, a hook point, the base call); what lies between is shared.
    def _run_llm(self, call: c.CallInfo, request: Any, execute: Callable[[Any], Any]) -> Any:
        obs, failures = self.observer, self.failures
        mw, hk = self.registry.tables()
        original, kw, mkw, hooked = self._llm_prepare(call, request, hk)
        effective = original
        if mw[c.LLM_REQUEST]:
            effective = run_rewrites(c.LLM_REQUEST, mw[c.LLM_REQUEST], call,
                                     original, original, mkw, obs, failures)
            if effective is not original and obs is not None:
                obs.request_rewritten(call, effective)
        payload = self._api_payload(call, kw, effective, time.time()) if hooked else None
        if payload is not None:
            fire_hooks(hk[c.PRE_API_REQUEST], call, c.PRE_API_REQUEST, payload, obs,
                       failures)
        terminal = llm_terminal_for(execute, request, original, call, obs)
        layers = mw[c.LLM_EXECUTION]
        try:
            if layers:
                result = run_execution(layers, call, "request", effective,
                                       _execution_kwargs(mkw, original, call), terminal,
                                       obs, failures)
            else:
                result = terminal(effective)
        except Exception as exc:
            if payload is not None:
                fire_hooks(hk[c.API_REQUEST_ERROR], call, c.API_REQUEST_ERROR,
                           self._error_payload(payload, exc), obs, failures)
            raise
        if payload is not None:
            fire_hooks(hk[c.POST_API_REQUEST], call, c.POST_API_REQUEST,
                       self._response_payload(payload, result), obs, failures)
        return result

    def _llm_prepare(self, call: c.CallInfo, request: Any, hk: dict[str, tuple[Layer, ...]]
                     ) -> tuple[Any, dict[str, Any], dict[str, Any], bool]:
        """(the original as middleware sees it, base kwargs, middleware kwargs, whether
        hook payloads are built)."""
        hooked = bool(hk[c.PRE_API_REQUEST] or hk[c.POST_API_REQUEST]
                      or hk[c.API_REQUEST_ERROR]) or all_hook_events(self.observer)
        # Frozen original only when middleware can see it (hook events alone do not).
        original = freeze(request) if self.registry.llm_active else request
        kw = call.as_kwargs()
        # Middleware kwargs, shared by both stages (callees get copies; guarded by
        # tests/test_core_pipeline.py); ``kw`` itself when no hook payload is built.
        return original, kw, dict(kw) if hooked else kw, hooked

    @staticmethod
    def _error_payload(payload: dict[str, Any], exc: BaseException) -> dict[str, Any]:
        now, started = time.time(), payload["started_at"]
        return {**payload, "error": exc, "error_type": type(exc).__qualname__,
                "error_message": safe_str(exc), "ended_at": now, "api_duration": now - started}

    @staticmethod
    def _response_payload(payload: dict[str, Any], result: Any) -> dict[str, Any]:
        now, started = time.time(), payload["started_at"]
        out = {**payload, "response": result, "ended_at": now, "api_duration": now - started}
        return out

    async def arun_llm(self, request: Any, execute: Callable[[Any], Any], *,
                       provider: str | None = None, model: str | None = None,
                       api_mode: str | None = None, api_request_id: str | None = None,
                       server_address: str | None = None, server_port: int | None = None
                       ) -> Any:
        """Async twin of ``run_llm``; ``execute`` may return an awaitable."""
        obs = self.observer
        if obs is None and not self.registry.llm_active:
            if api_request_id is not None:
                _last_api_request_id.set(api_request_id)
            r = execute(request)
            return await r if isawaitable(r) else r
        call = self._llm_call(request, provider, model, api_mode, api_request_id,
                              (server_address, server_port))
        if obs is not None:
            obs.call_started(call, request)
        token = _current_llm_call.set(call)
        try:
            if self.registry.llm_active or all_hook_events(obs):
                _current_llm_call.set(None)  # as in run_llm
                result = await self._arun_llm(call, request, execute)
                _last_api_request_id.set(call.api_request_id)
            else:  # observer only: just the base call
                result = execute(request)
                if isawaitable(result):
                    result = await result
        except BaseException as exc:
            if obs is not None:
                obs.call_finished(call, None, exc)
            raise
        finally:
            reset_current_llm_call(token)
        return obs.call_finished(call, result, None) if obs is not None else result

    async def _arun_llm(self, call: c.CallInfo, request: Any,
                        execute: Callable[[Any], Any]) -> Any:
        obs, failures = self.observer, self.failures
        mw, hk = self.registry.tables()
        original, kw, mkw, hooked = self._llm_prepare(call, request, hk)
        effective = original
        if mw[c.LLM_REQUEST]:
            effective = await arun_rewrites(c.LLM_REQUEST, mw[c.LLM_REQUEST], call,
                                            original, original, mkw, obs, failures)
            if effective is not original and obs is not None:
                obs.request_rewritten(call, effective)
        payload = self._api_payload(call, kw, effective, time.time()) if hooked else None
        if payload is not None:
            await afire_hooks(hk[c.PRE_API_REQUEST], call, c.PRE_API_REQUEST, payload,
                              obs, failures)
        terminal = allm_terminal_for(execute, request, original, call, obs)
        layers = mw[c.LLM_EXECUTION]
        try:
            if layers:
                result = await arun_execution(layers, call, "request", effective,
                                              _execution_kwargs(mkw, original, call),
                                              terminal, obs, failures)
            else:
                result = await terminal(effective)
        except Exception as exc:
            if payload is not None:
                await afire_hooks(hk[c.API_REQUEST_ERROR], call, c.API_REQUEST_ERROR,
                                  self._error_payload(payload, exc), obs, failures)
            raise
        if payload is not None:
            await afire_hooks(hk[c.POST_API_REQUEST], call, c.POST_API_REQUEST,
                              self._response_payload(payload, result), obs, failures)
        return result

    # ----------------------------------------------------------------- tools

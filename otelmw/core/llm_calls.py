"""The LLM-call pipeline: request → ``llm_request`` → ``pre_api_request`` →
``llm_execution`` chain → base call → ``post_api_request`` | ``api_request_error``,
one definition for sync and async calls (``steps.py``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

from . import contract as c
from .contract import link_model_call, reset_current_llm_call, set_current_llm_call
from .failures import FailureLog, safe_str
from .payloads import freeze
from .registry import Layer, LayerRegistry
from .results import (
    MemoryAdapter,
    NormalizerRegistry,
)
from .seam import PipelineObserver
from .steps import (
    Steps,
    adrive,
    all_hook_events,
    drive,
    execution_steps,
    hook_steps,
    host_call_steps,
    isawaitable,
    llm_base_steps,
    own_driver,
    rewrite_steps,
)


def _execution_kwargs(kw: dict[str, Any], original: Any, call: c.CallInfo) -> dict[str, Any]:
    """The ``llm_execution`` chain's own kwargs: the call's, the original and the trace
    of the rewrites that ran."""
    return {**kw, "original_request": original, "middleware_trace": call.trace_view()}


class LLMCalls:
    """Mixin of ``Pipeline``: ``run_llm`` / ``arun_llm``."""

    registry: LayerRegistry
    normalizers: NormalizerRegistry
    failures: FailureLog
    observer: PipelineObserver | None
    memory_adapters: tuple[MemoryAdapter, ...]

    def _llm_call(self, request: Any, provider: str | None, model: str | None,
                  api_mode: str | None, api_request_id: str | None,
                  server: tuple[str | None, int | None] = (None, None)) -> c.CallInfo:
        rc = c.leave_finished_turns()
        if model is None and isinstance(request, dict):
            m = dict.get(request, "model")  # dict's own: a subclass's .get is host code
            model = m if isinstance(m, str) else None
        call = c.CallInfo.for_chat(
            rc, api_request_id=api_request_id or c.new_request_id(rc.turn_id),
            provider=provider, model=model, api_mode=api_mode, server=server)
        link_model_call(rc, call.api_request_id)
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
            if obs is None and not self.registry.llm_active:  # nothing to run but the call
                if api_request_id is not None:
                    link_model_call(c.current_runtime_context(), api_request_id)
                return execute(request)
            call = self._llm_call(request, provider, model, api_mode, api_request_id,
                                  (server_address, server_port))
            if obs is not None:
                call.observation = obs.call_started(call, request)
        else:  # opened before the host's own request stage: the request now is the one
            call.request_sent(request)  # it sends
            if obs is not None:
                obs.request_rewritten(call, request)
        if obs is not None and not self.registry.llm_active and obs.hook_events != "all":
            # Observer only (the SDK instrumentors' usual case): ``_llm_call_steps``
            # with its generator frames saved (tests/test_core_steps.py compares them).
            token = set_current_llm_call(call)
            try:
                result = execute(request)
            except BaseException as exc:
                obs.call_finished(call, None, exc)
                raise
            finally:
                reset_current_llm_call(token)
            return obs.call_finished(call, result, None)
        return drive(self._llm_call_steps, call, request, execute, False)

    async def arun_llm(self, request: Any, execute: Callable[[Any], Any], *,
                       provider: str | None = None, model: str | None = None,
                       api_mode: str | None = None, api_request_id: str | None = None,
                       server_address: str | None = None, server_port: int | None = None,
                       call: c.CallInfo | None = None) -> Any:
        """``run_llm`` in an async call; ``execute`` may return an awaitable."""
        obs = self.observer
        if call is None:
            if obs is None and not self.registry.llm_active:
                if api_request_id is not None:
                    link_model_call(c.current_runtime_context(), api_request_id)
                r = execute(request)
                return await r if isawaitable(r) else r
            call = self._llm_call(request, provider, model, api_mode, api_request_id,
                                  (server_address, server_port))
            if obs is not None:
                call.observation = obs.call_started(call, request)
        else:
            call.request_sent(request)
            if obs is not None:
                obs.request_rewritten(call, request)
        return await adrive(self._llm_call_steps, call, request, execute, True)

    def _llm_call_steps(self, call: c.CallInfo, request: Any, execute: Callable[[Any], Any],
                        awaits: bool) -> Steps[Any]:
        """An opened LLM call, to the observer's ``call_finished``."""
        obs = self.observer
        token = set_current_llm_call(call)
        try:
            if self.registry.llm_active or all_hook_events(obs):
                # Middleware and hooks run outside the request: a model call they make
                # is its own (``llm_base_steps`` makes ``call`` current again).
                set_current_llm_call(None)
                result = yield from self._llm_steps(call, request, execute, awaits)
                # The turn's tool calls belong to this call, not to one a layer made.
                link_model_call(c.current_runtime_context(), call.api_request_id)
            else:  # observer only: just the base call
                result = yield from host_call_steps(execute, request, awaits)
        except BaseException as exc:
            if obs is not None:
                obs.call_finished(call, None, exc)
            raise
        finally:
            reset_current_llm_call(token)
        return obs.call_finished(call, result, None) if obs is not None else result

    def _llm_steps(self, call: c.CallInfo, request: Any, execute: Callable[[Any], Any],
                   awaits: bool) -> Steps[Any]:
        """The request stage, ``pre_api_request``, the execution chain around the base
        call, ``post_api_request`` | ``api_request_error``."""
        obs, failures = self.observer, self.failures
        mw, hk = self.registry.tables()
        original, kw, hooked = self._llm_prepare(call, request, hk)
        effective = original
        if mw[c.LLM_REQUEST]:
            effective = yield from own_driver(awaits, rewrite_steps, c.LLM_REQUEST,
                                              mw[c.LLM_REQUEST], call, original, original,
                                              kw, obs, failures, awaits)
            if effective is not original:
                call.request_sent(effective)
                if obs is not None:
                    obs.request_rewritten(call, effective)
        payload = self._api_payload(call, kw, effective, time.time()) if hooked else None
        if payload is not None:
            yield from hook_steps(hk[c.PRE_API_REQUEST], call, c.PRE_API_REQUEST, payload,
                                  obs, failures, None, awaits)
        layers = mw[c.LLM_EXECUTION]
        try:
            if layers:
                terminal = partial(adrive if awaits else drive, llm_base_steps, execute,
                                   request, original, call, obs, awaits)
                result = yield from execution_steps(
                    layers, call, "request", effective, _execution_kwargs(kw, original, call),
                    terminal, obs, failures, awaits)
            else:
                result = yield from llm_base_steps(execute, request, original, call, obs,
                                                   awaits, effective)
        except Exception as exc:
            if payload is not None:
                yield from hook_steps(hk[c.API_REQUEST_ERROR], call, c.API_REQUEST_ERROR,
                                      self._error_payload(payload, exc), obs, failures, None,
                                      awaits)
            raise
        if payload is not None:
            yield from hook_steps(hk[c.POST_API_REQUEST], call, c.POST_API_REQUEST,
                                  self._response_payload(payload, result), obs, failures,
                                  None, awaits)
        return result

    def _llm_prepare(self, call: c.CallInfo, request: Any, hk: dict[str, tuple[Layer, ...]]
                     ) -> tuple[Any, dict[str, Any], bool]:
        """(the original as middleware sees it, the call's kwargs — each stage and hook
        payload builds its own dict from them —, whether hook payloads are built)."""
        hooked = bool(hk[c.PRE_API_REQUEST] or hk[c.POST_API_REQUEST]
                      or hk[c.API_REQUEST_ERROR]) or all_hook_events(self.observer)
        # Frozen original only when middleware can see it (hook events alone do not).
        original = freeze(request) if self.registry.llm_active else request
        return original, call.as_kwargs(), hooked

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

    # ----------------------------------------------------------------- tools

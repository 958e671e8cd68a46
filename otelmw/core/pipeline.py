"""The pipeline: one set of registrations, normalizers, memory adapters and an observer
(``Pipeline``), and the calls it runs — LLM calls, tool calls, embeddings calls — and
turns. In code order: the LLM call, the tool call, the embeddings call, the pipeline
that runs them, its turns.

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

import time
from collections.abc import Callable, Collection
from functools import partial
from typing import Any

from . import calls, calls_sync
from .calls import (
    BLOCKED_KEY,
    RefusedArguments,
    ToolArgumentsError,
    isawaitable,
    parse_arguments,
)
from .contract import (
    NATIVE_RUNTIME_IDS,
    CallInfo,
    RuntimeContext,
    TurnMark,
    current_call_context,
    current_llm_call,
    current_runtime_context,
    derive_context,
    enter_runtime_context,
    leave_finished_turns,
    link_model_call,
    linked_api_request_id,
    new_request_id,
    reset_current_llm_call,
    set_current_llm_call,
)
from .failures import MEMORY, FailureLog, describe, safe_str
from .payloads import freeze
from .registry import LayerRegistry
from .results import (
    MemoryAdapter,
    MiddlewareContext,
    NormalizedToolResult,
    NormalizerRegistry,
    failure_from_exception,
    get_default_middleware_registry,
    is_bypassed,
    normalize_result,
    passthrough_result,
)
from .seam import PipelineObserver

__all__ = ["BLOCKED_KEY", "Pipeline", "ToolArgumentsError", "Turn", "current_llm_call",
           "get_pipeline", "parse_arguments"]


# --------------------------------------------------------------------------------------
# The LLM call
#
# The LLM-call pipeline: request → ``llm_request`` → ``pre_api_request`` →
# ``llm_execution`` chain → base call → ``post_api_request`` | ``api_request_error``,
# one definition for sync and async calls (the stages in ``calls.py``).
# --------------------------------------------------------------------------------------


class LLMCalls:
    """Mixin of ``Pipeline``: ``run_llm`` / ``arun_llm``."""

    registry: LayerRegistry
    normalizers: NormalizerRegistry
    failures: FailureLog
    observer: PipelineObserver | None
    memory_adapters: tuple[MemoryAdapter, ...]

    def _llm_call(self, request: Any, provider: str | None, model: str | None,
                  api_mode: str | None, api_request_id: str | None,
                  server: tuple[str | None, int | None] = (None, None)) -> CallInfo:
        rc = leave_finished_turns()
        if model is None and isinstance(request, dict):
            m = dict.get(request, "model")  # dict's own: a subclass's .get is host code
            model = m if isinstance(m, str) else None
        call = CallInfo.for_chat(
            rc, api_request_id=api_request_id or new_request_id(rc.turn_id),
            provider=provider, model=model, api_mode=api_mode, server=server)
        link_model_call(rc, call.api_request_id)
        return call

    @staticmethod
    def _observed(obs: PipelineObserver, call: CallInfo, request: Any,
                  on_host_span: bool) -> object | None:
        """The call reported opened: on the host's own span (``call_adopted``, when the
        observer has it), else on a span of the observer's."""
        adopt = getattr(obs, "call_adopted", None) if on_host_span else None
        return (adopt or obs.call_started)(call, request)

    def _api_payload(self, call: CallInfo, kw: dict[str, Any], effective: Any,
                     started: float) -> dict[str, Any]:
        return {**kw, "request": effective, "middleware_trace": call.trace_view(),
                "started_at": started}

    def run_llm(self, request: Any, execute: Callable[[Any], Any], *,
                provider: str | None = None, model: str | None = None,
                api_mode: str | None = None, api_request_id: str | None = None,
                server_address: str | None = None, server_port: int | None = None,
                call: CallInfo | None = None, on_host_span: bool = False,
                host_measured: bool = False) -> Any:
        """Run one provider request through the LLM pipeline (sync).

        ``call``: a call a host adapter already opened (``observer.call_started``
        reported) so its span could start before the host's own request stage;
        the pipeline then runs and finishes it instead of opening a new one.
        ``on_host_span``: the host's own tracing already opened this model call's span
        and it is current here (Strands' ``chat`` span): the call is recorded on that
        span, which the host ends, instead of on a second one (as ``host.open_call``).
        ``host_measured``: the host records this call's duration and token usage points
        itself, under otelmw's metric names (``CallInfo.host_measured``). With ``call``
        given it is not read (the observer saw the call when it opened): set the call's
        ``host_measured`` before ``host.open_call``.
        """
        obs = self.observer
        if call is None:
            if obs is None and not self.registry.llm_active:  # nothing to run but the call
                if api_request_id is not None:
                    link_model_call(current_runtime_context(), api_request_id)
                return execute(request)
            call = self._llm_call(request, provider, model, api_mode, api_request_id,
                                  (server_address, server_port))
            call.host_measured = host_measured
            if obs is not None:
                call.observation = self._observed(obs, call, request, on_host_span)
        else:  # opened before the host's own request stage: the request now is the one
            call.request_sent(request)  # it sends
            if obs is not None:
                obs.request_rewritten(call, request)
        if obs is not None and not self.registry.llm_active and obs.hook_events != "all":
            # Observer only (the SDK instrumentors' usual case): ``calls_sync.llm_call``
            # with its frames saved (tests/test_core_steps.py compares the two).
            token = set_current_llm_call(call)
            try:
                result = execute(request)
            except BaseException as exc:
                obs.call_finished(call, None, exc)
                raise
            finally:
                reset_current_llm_call(token)
            return obs.call_finished(call, result, None)
        return calls_sync.llm_call(self, call, request, execute)

    async def arun_llm(self, request: Any, execute: Callable[[Any], Any], *,
                       provider: str | None = None, model: str | None = None,
                       api_mode: str | None = None, api_request_id: str | None = None,
                       server_address: str | None = None, server_port: int | None = None,
                       call: CallInfo | None = None, on_host_span: bool = False,
                       host_measured: bool = False) -> Any:
        """``run_llm`` in an async call; ``execute`` may return an awaitable."""
        obs = self.observer
        if call is None:
            if obs is None and not self.registry.llm_active:
                if api_request_id is not None:
                    link_model_call(current_runtime_context(), api_request_id)
                r = execute(request)
                return await r if isawaitable(r) else r
            call = self._llm_call(request, provider, model, api_mode, api_request_id,
                                  (server_address, server_port))
            call.host_measured = host_measured
            if obs is not None:
                call.observation = self._observed(obs, call, request, on_host_span)
        else:
            call.request_sent(request)
            if obs is not None:
                obs.request_rewritten(call, request)
        return await calls.llm_call(self, call, request, execute)

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


# --------------------------------------------------------------------------------------
# The tool call
#
# The tool-call pipeline: parse/coerce args → ``tool_request`` → ``pre_tool_call``
# (block) → ``tool_execution`` chain → base call → normalize → ``post_tool_call`` →
# memory adapters → ``transform_tool_result``; one definition for sync and async calls
# (the stages in ``calls.py``).
# --------------------------------------------------------------------------------------

_NATIVE = NATIVE_RUNTIME_IDS


class ToolCalls:
    """Mixin of ``Pipeline``: ``run_tool`` / ``arun_tool``."""

    registry: LayerRegistry
    normalizers: NormalizerRegistry
    failures: FailureLog
    observer: PipelineObserver | None
    memory_adapters: tuple[MemoryAdapter, ...]

    def _tool_active(self, runtime_id: str | None) -> bool:
        return bool(self.observer is not None or self.registry.tool_active
                    or self.memory_adapters
                    or not (runtime_id is None or runtime_id in _NATIVE))

    def run_tool(self, tool_name: str, args: Any, execute: Callable[[Any], Any], *,
                 tool_call_id: str | None = None, runtime_id: str | None = None,
                 raise_errors: bool = False, api_request_id: str | None = None,
                 call: CallInfo | None = None, skip_plugins: Collection[str] = ()) -> Any:
        """Run one tool call; returns what the model should see.

        ``execute(args)`` runs the tool. A tool that raises becomes a normalized
        failure; the caller gets ``"Tool Error: <message>"`` (or the original
        exception re-raised after the hooks when ``raise_errors`` is true).
        ``api_request_id``: the model call that asked for this tool call, when the host
        knows it (default: the latest model call of the turn).
        ``call``: an already-opened call (see ``run_llm``).
        ``skip_plugins``: plugins whose layers (middleware and hooks) do not run on this
        call, because another process already ran them on it (an MCP server honouring
        its client's word, ``otelmw_mcp``); every other plugin runs as usual.
        """
        call = self._opened_tool_call(call, tool_name, args, tool_call_id, runtime_id,
                                      api_request_id)
        if call is None:
            try:
                return execute(args)
            except Exception as exc:
                if raise_errors:
                    raise
                return failure_from_exception(exc, 0.0).model_text()
        return calls_sync.tool_call(self, call, args, execute, raise_errors, skip_plugins)

    def _opened_tool_call(self, call: CallInfo | None, tool_name: str, args: Any,
                          tool_call_id: str | None, runtime_id: str | None,
                          api_request_id: str | None) -> CallInfo | None:
        """The tool call to run through the pipeline (``call`` if the host opened it),
        or ``None`` when nothing observes or changes it and its arguments are already
        parsed: then the tool just runs."""
        if call is not None:
            return call
        if runtime_id is None:
            runtime_id = current_runtime_context().runtime_id
        if type(args) is dict and not self._tool_active(runtime_id):
            return None
        call = self._tool_call(tool_name, tool_call_id, runtime_id, api_request_id)
        if self.observer is not None:
            call.observation = self.observer.call_started(call, args)
        return call

    def _tool_call(self, tool_name: str, tool_call_id: str | None, runtime_id: str | None,
                   api_request_id: str | None) -> CallInfo:
        """The call's ``api_request_id``: the model call that asked for it — the host's
        word, else the latest model call of the turn (``ModelCallLink``), else a new id."""
        rc = leave_finished_turns()
        return CallInfo.for_tool(
            rc, api_request_id=(api_request_id or linked_api_request_id(rc)
                                or new_request_id(rc.turn_id)),
            tool_name=tool_name, tool_call_id=tool_call_id, runtime_id=runtime_id)

    def _tool_prepare(self, call: CallInfo, args: Any) -> tuple[Any, Any, dict[str, Any]]:
        """(parsed args, frozen original, base kwargs) — raises ToolArgumentsError."""
        parsed = parse_arguments(args)
        return parsed, freeze(parsed), call.as_kwargs()

    def _normalize(self, call: CallInfo, raw: Any, error: BaseException | None,
                   ms: float) -> NormalizedToolResult:
        if error is not None:
            return failure_from_exception(error, ms)
        if is_bypassed(call.runtime_id):
            return passthrough_result(raw, ms)
        ctx = self._memory_ctx(call, ms)
        return normalize_result(self.normalizers, self.failures, raw, call.tool_name or "", ctx)

    @staticmethod
    def _memory_ctx(call: CallInfo, ms: float) -> MiddlewareContext:
        return MiddlewareContext(
            tool_name=call.tool_name or "", runtime_id=call.runtime_id or "praisonai",
            agent_id=call.agent_name, session_id=call.session_id, execution_time_ms=ms,
            metadata={"tool_call_id": call.tool_call_id, "turn_id": call.turn_id},
        )

    @staticmethod
    def _pre_payload(call: CallInfo, kw: dict[str, Any], effective: Any) -> dict[str, Any]:
        return {**kw, "args": effective, "middleware_trace": call.trace_view()}

    def _outcome(self, call: CallInfo, raw: Any, error: BaseException | None,
                 seconds: float) -> tuple[NormalizedToolResult, str, BaseException | None]:
        """The normalized result of the base call, its status (``ok``/``error``) and
        what it raised."""
        normalized = self._normalize(call, raw, error, seconds * 1000.0)
        return normalized, "ok" if normalized.success else "error", error

    def _post_payload(self, call: CallInfo, kw: dict[str, Any], effective: Any,
                      model_result: Any, normalized: NormalizedToolResult, status: str
                      ) -> dict[str, Any]:
        err = normalized.raw_result if isinstance(normalized.raw_result, BaseException) else None
        return {**kw, "args": effective, "result": model_result, "normalized": normalized,
                "duration_ms": normalized.execution_time_ms, "status": status,
                "error_type": type(err).__qualname__ if err is not None else (
                    "plugin_block" if status == "blocked" else None),
                "error_message": normalized.error_message,
                "middleware_trace": call.trace_view()}

    def _record_memory(self, call: CallInfo, normalized: NormalizedToolResult) -> None:
        if not self.memory_adapters:
            return
        ctx = self._memory_ctx(call, normalized.execution_time_ms)
        for adapter in self.memory_adapters:
            try:
                adapter.record_tool_result(normalized, ctx)
            except Exception as exc:
                self.failures.record(MEMORY, "record_tool_result", type(adapter).__name__,
                                     f"memory adapter raised: {describe(exc)}", exc)

    def _finish_tool(self, call: CallInfo, normalized: NormalizedToolResult,
                     status: str) -> Any:
        """Report the result to the observer; return what the model sees."""
        if self.observer is not None:
            self.observer.tool_result(call, normalized, status)
        return normalized.content if status == "blocked" else normalized.model_text()


    def _bad_arguments(self, call: CallInfo, args: Any, exc: ToolArgumentsError
                       ) -> RefusedArguments:
        """Unparseable arguments: the tool does not run."""
        normalized = failure_from_exception(exc, 0.0)
        model_result = self._finish_tool(call, normalized, "error")
        return RefusedArguments(model_result, normalized, self._post_payload(
            call, call.as_kwargs(), args, model_result, normalized, "error"))

    async def arun_tool(self, tool_name: str, args: Any, execute: Callable[[Any], Any], *,
                        tool_call_id: str | None = None, runtime_id: str | None = None,
                        raise_errors: bool = False, api_request_id: str | None = None,
                        call: CallInfo | None = None, skip_plugins: Collection[str] = ()
                        ) -> Any:
        """``run_tool`` in an async call; ``execute`` may return an awaitable.
        ``call``, ``skip_plugins``: see ``run_tool``."""
        call = self._opened_tool_call(call, tool_name, args, tool_call_id, runtime_id,
                                      api_request_id)
        if call is None:
            try:
                r = execute(args)
                return await r if isawaitable(r) else r
            except Exception as exc:
                if raise_errors:
                    raise
                return failure_from_exception(exc, 0.0).model_text()
        return await calls.tool_call(self, call, args, execute, raise_errors, skip_plugins)


# --------------------------------------------------------------------------------------
# The embeddings call
#
# Embeddings requests: observed (an ``embeddings {model}`` span and metrics), never
# rewritten — the middleware contract's LLM stages are for chat requests.
# --------------------------------------------------------------------------------------

class EmbeddingCalls:
    """Mixin of ``Pipeline``: ``run_embeddings`` / ``arun_embeddings``."""

    observer: PipelineObserver | None

    @staticmethod
    def _embeddings_call(request: Any, provider: str | None,
                         server: tuple[str | None, int | None]) -> CallInfo:
        rc = leave_finished_turns()
        model = request.get("model") if isinstance(request, dict) else None
        return CallInfo.for_embeddings(
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
        return calls_sync.observed_call(obs, call, request, execute)

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
        return await calls.observed_call(obs, call, request, execute)


# --------------------------------------------------------------------------------------
# The pipeline and its turns
#
# One set of registrations, normalizers, memory adapters and an observer, and the
# agent turns it opens.
# --------------------------------------------------------------------------------------

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
             runtime_id: str | None = None, host_measured: bool = False) -> Turn:
        """An agent turn (``with pipeline.turn("weather-agent"): ...``).
        ``host_measured``: the host records the turn's duration point itself, under
        otelmw's metric name (``TurnMark.host_measured``)."""
        outer = leave_finished_turns()
        return Turn(self, {
            "agent_name": agent_name, "session_id": session_id, "task_id": task_id,
            "turn_id": turn_id or f"{session_id or outer.session_id or 'turn'}:"
                                  f"{new_request_id().removeprefix('req-')}",
            "runtime_id": runtime_id}, host_measured)


class Turn:
    """One agent turn: sets the runtime context (a fresh ``turn_id``) and lets the
    observer open an ``invoke_agent`` span. Use as a (sync or async) context
    manager, or call ``start()``/``finish()`` from host adapters."""

    __slots__ = ("_ctx", "_mark", "_pipeline", "_token", "failed", "fields", "host_measured")

    def __init__(self, pipeline: Pipeline, fields: dict[str, Any],
                 host_measured: bool = False) -> None:
        self._pipeline, self.fields = pipeline, fields
        self.host_measured = host_measured
        self._mark: TurnMark | None = None
        self._token: Any = None
        self._ctx: RuntimeContext | None = None
        self.failed = False

    def mark_failed(self) -> None:
        """The host swallowed an error (e.g. returned None): the turn is an error."""
        self.failed = True

    def start(self) -> RuntimeContext:
        outer = leave_finished_turns()
        mark = self._mark = TurnMark(outer, self.host_measured)
        self._ctx = derive_context(outer, self.fields, mark)
        mark.token = enter_runtime_context(self._ctx)
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
        if current_call_context().runtime.turn is mark:  # the caller's context holds it
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

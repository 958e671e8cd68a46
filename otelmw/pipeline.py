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

import contextvars
import json
import time
from collections.abc import Callable
from typing import Any

from . import contract as c
from .chain import arun_execution, arun_rewrites, run_execution, run_rewrites
from .failures import MEMORY, FailureLog, describe
from .hooks import afire_hooks, block_directive, fire_hooks, first_string
from .memory import MemoryAdapter
from .observe import PipelineObserver
from .payloads import FrozenDict, freeze, thaw
from .registry import MiddlewareRegistry
from .results import (
    MiddlewareContext,
    NormalizedToolResult,
    RuntimeMiddlewareRegistry,
    failure_from_exception,
    get_default_middleware_registry,
    is_bypassed,
    normalize_result,
)

_NATIVE = c.NATIVE_RUNTIME_IDS
# The id of the latest LLM request in this task/thread, given to the tool calls
# it produced (``api_request_id`` in tool middleware and hook payloads).
_last_api_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "otelmw_last_api_request_id", default=None
)


# The LLM call in flight in this context: a nested layer (the SDK under a host
# adapter) enriches it instead of opening a second ``chat`` span.
_current_llm_call: contextvars.ContextVar[c.CallInfo | None] = contextvars.ContextVar(
    "otelmw_current_llm_call", default=None
)


def current_llm_call() -> c.CallInfo | None:
    """The pipeline LLM call running in this context, if any."""
    return _current_llm_call.get()


def _reset(var: contextvars.ContextVar[Any], token: contextvars.Token[Any]) -> None:
    try:
        var.reset(token)
    except ValueError:  # token from another context: leave the var as the caller has it
        pass


class ToolArgumentsError(ValueError):
    """Tool arguments that are not a JSON object (or malformed JSON)."""


def parse_arguments(args: Any) -> dict[str, Any]:
    """Coerce model-provided tool arguments to a dict (JSON strings included)."""
    if isinstance(args, dict):
        return args
    if args is None or args == "" or args == b"":
        return {}
    if isinstance(args, bytes | bytearray):
        args = bytes(args).decode("utf-8", errors="replace")
    if isinstance(args, str):
        try:
            value = json.loads(args)
        except ValueError as exc:
            raise ToolArgumentsError(f"tool arguments are not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ToolArgumentsError(
                f"tool arguments must be a JSON object, got {type(value).__name__}")
        return value
    try:
        return dict(args)
    except (TypeError, ValueError):
        raise ToolArgumentsError(
            f"tool arguments must be a mapping or JSON object string, got {type(args).__name__}"
        ) from None


class Pipeline:
    """One set of registrations, normalizers, memory adapters and an observer."""

    def __init__(self, registry: MiddlewareRegistry | None = None,
                 normalizers: RuntimeMiddlewareRegistry | None = None,
                 failures: FailureLog | None = None) -> None:
        self.registry = registry if registry is not None else MiddlewareRegistry()
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
        outer = c.current_runtime_context()
        return Turn(self, {
            "agent_name": agent_name, "session_id": session_id, "task_id": task_id,
            "turn_id": turn_id or f"{session_id or outer.session_id or 'turn'}:"
                                  f"{c.new_request_id().removeprefix('req-')}",
            "runtime_id": runtime_id})

    # ------------------------------------------------------------------ LLM
    def _llm_active(self) -> bool:
        return self.registry.llm_active

    def _llm_call(self, request: Any, provider: str | None, model: str | None,
                  api_mode: str | None, api_request_id: str | None,
                  server: tuple[str | None, int | None] = (None, None)) -> c.CallInfo:
        rc = c.current_runtime_context()
        if model is None and isinstance(request, dict):
            m = request.get("model")
            model = m if isinstance(m, str) else None
        call = c.CallInfo("chat", rc.session_id, rc.task_id, rc.turn_id,
                          api_request_id or c.new_request_id(rc.turn_id), provider, model,
                          api_mode, runtime_id=rc.runtime_id, agent_name=rc.agent_name,
                          server_address=server[0], server_port=server[1])
        _last_api_request_id.set(call.api_request_id)
        return call

    def _llm_prepare(self, call: c.CallInfo, request: Any) -> tuple[Any, dict[str, Any]]:
        """Frozen original + base kwargs (only when middleware or hooks exist)."""
        original = freeze(request) if self._llm_active() else request
        return original, call.as_kwargs()

    @staticmethod
    def _terminal(execute: Callable[[Any], Any], request: Any, original: Any,
                  effective: Any) -> Callable[[Any], Any]:
        def terminal(p: Any) -> Any:
            if p is original:  # nothing rewritten (or a wrapper restored the original)
                return execute(request)
            if isinstance(p, FrozenDict) or (isinstance(p, dict) and p is not request):
                p = thaw(p)  # the host gets plain, mutable structures back
            return execute(p)
        return terminal

    def _api_payload(self, call: c.CallInfo, kw: dict[str, Any], effective: Any,
                     started: float) -> dict[str, Any]:
        return {**kw, "request": effective, "middleware_trace": freeze(call.middleware_trace),
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
            if obs is None and not self._llm_active():
                if api_request_id is not None:
                    _last_api_request_id.set(api_request_id)
                return execute(request)
            call = self._llm_call(request, provider, model, api_mode, api_request_id,
                                  (server_address, server_port))
            if obs is not None:
                obs.call_started(call, request)
        token = _current_llm_call.set(call)
        try:
            result = self._run_llm(call, request, execute)
        except BaseException as exc:
            if obs is not None:
                obs.call_finished(call, None, exc)
            raise
        finally:
            _reset(_current_llm_call, token)
        return obs.call_finished(call, result, None) if obs is not None else result

    def _run_llm(self, call: c.CallInfo, request: Any, execute: Callable[[Any], Any]) -> Any:
        reg, obs, failures = self.registry, self.observer, self.failures
        original, kw = self._llm_prepare(call, request)
        effective = original
        if reg.middleware(c.LLM_REQUEST):
            effective = run_rewrites(c.LLM_REQUEST, reg.middleware(c.LLM_REQUEST), call,
                                     original, original, dict(kw), obs, failures)
        started = time.time()
        payload = self._api_payload(call, kw, effective, started)
        fire_hooks(reg.hooks(c.PRE_API_REQUEST), call, c.PRE_API_REQUEST, payload, obs, failures)
        terminal = self._terminal(execute, request, original, effective)
        layers = reg.middleware(c.LLM_EXECUTION)
        try:
            if layers:
                ekw = {**kw, "original_request": original,
                       "middleware_trace": payload["middleware_trace"]}
                result = run_execution(layers, call, "request", effective, ekw, terminal,
                                       obs, failures)
            else:
                result = terminal(effective)
        except Exception as exc:
            fire_hooks(reg.hooks(c.API_REQUEST_ERROR), call, c.API_REQUEST_ERROR,
                       self._error_payload(payload, exc, started), obs, failures)
            raise
        fire_hooks(reg.hooks(c.POST_API_REQUEST), call, c.POST_API_REQUEST,
                   self._response_payload(payload, result, started), obs, failures)
        return result

    @staticmethod
    def _error_payload(payload: dict[str, Any], exc: BaseException, started: float
                       ) -> dict[str, Any]:
        now = time.time()
        return {**payload, "error": exc, "error_type": type(exc).__qualname__,
                "error_message": _safe_str(exc), "ended_at": now, "api_duration": now - started}

    @staticmethod
    def _response_payload(payload: dict[str, Any], result: Any, started: float
                          ) -> dict[str, Any]:
        now = time.time()
        out = {**payload, "response": result, "ended_at": now, "api_duration": now - started}
        return out

    async def arun_llm(self, request: Any, execute: Callable[[Any], Any], *,
                       provider: str | None = None, model: str | None = None,
                       api_mode: str | None = None, api_request_id: str | None = None,
                       server_address: str | None = None, server_port: int | None = None
                       ) -> Any:
        """Async twin of ``run_llm``; ``execute`` may return an awaitable."""
        obs = self.observer
        if obs is None and not self._llm_active():
            if api_request_id is not None:
                _last_api_request_id.set(api_request_id)
            r = execute(request)
            return await r if _isawaitable(r) else r
        call = self._llm_call(request, provider, model, api_mode, api_request_id,
                              (server_address, server_port))
        if obs is not None:
            obs.call_started(call, request)
        token = _current_llm_call.set(call)
        try:
            result = await self._arun_llm(call, request, execute)
        except BaseException as exc:
            if obs is not None:
                obs.call_finished(call, None, exc)
            raise
        finally:
            _reset(_current_llm_call, token)
        return obs.call_finished(call, result, None) if obs is not None else result

    async def _arun_llm(self, call: c.CallInfo, request: Any,
                        execute: Callable[[Any], Any]) -> Any:
        reg, obs, failures = self.registry, self.observer, self.failures
        original, kw = self._llm_prepare(call, request)
        effective = original
        if reg.middleware(c.LLM_REQUEST):
            effective = await arun_rewrites(c.LLM_REQUEST, reg.middleware(c.LLM_REQUEST), call,
                                            original, original, dict(kw), obs, failures)
        started = time.time()
        payload = self._api_payload(call, kw, effective, started)
        await afire_hooks(reg.hooks(c.PRE_API_REQUEST), call, c.PRE_API_REQUEST, payload, obs,
                          failures)
        terminal = self._terminal(execute, request, original, effective)
        layers = reg.middleware(c.LLM_EXECUTION)
        try:
            if layers:
                ekw = {**kw, "original_request": original,
                       "middleware_trace": payload["middleware_trace"]}
                result = await arun_execution(layers, call, "request", effective, ekw, terminal,
                                              obs, failures)
            else:
                result = terminal(effective)
                if _isawaitable(result):
                    result = await result
        except Exception as exc:
            await afire_hooks(reg.hooks(c.API_REQUEST_ERROR), call, c.API_REQUEST_ERROR,
                              self._error_payload(payload, exc, started), obs, failures)
            raise
        await afire_hooks(reg.hooks(c.POST_API_REQUEST), call, c.POST_API_REQUEST,
                          self._response_payload(payload, result, started), obs, failures)
        return result

    # ----------------------------------------------------------------- tools
    def _tool_active(self, runtime_id: str | None) -> bool:
        return bool(self.observer is not None or self.registry.tool_active
                    or self.memory_adapters
                    or not (runtime_id is None or runtime_id in _NATIVE))

    def run_tool(self, tool_name: str, args: Any, execute: Callable[[Any], Any], *,
                 tool_call_id: str | None = None, runtime_id: str | None = None,
                 raise_errors: bool = False, call: c.CallInfo | None = None) -> Any:
        """Run one tool call; returns what the model should see.

        ``execute(args)`` runs the tool. A tool that raises becomes a normalized
        failure; the caller gets ``"Tool Error: <message>"`` (or the original
        exception re-raised after the hooks when ``raise_errors`` is true).
        ``call``: an already-opened call (see ``run_llm``).
        """
        obs = self.observer
        if call is None:
            if runtime_id is None:
                runtime_id = c.current_runtime_context().runtime_id
            if type(args) is dict and not self._tool_active(runtime_id):
                try:
                    return execute(args)
                except Exception as exc:
                    if raise_errors:
                        raise
                    return failure_from_exception(exc, 0.0).model_text()
            call = self._tool_call(tool_name, tool_call_id, runtime_id)
            if obs is not None:
                obs.call_started(call, args)
        try:
            result = self._run_tool(call, args, execute, raise_errors)
        except BaseException as exc:
            if obs is not None:
                obs.call_finished(call, None, exc)
            raise
        return obs.call_finished(call, result, None) if obs is not None else result

    def _tool_call(self, tool_name: str, tool_call_id: str | None,
                   runtime_id: str | None) -> c.CallInfo:
        rc = c.current_runtime_context()
        return c.CallInfo("execute_tool", rc.session_id, rc.task_id, rc.turn_id,
                          _last_api_request_id.get() or c.new_request_id(rc.turn_id),
                          tool_name=tool_name,
                          tool_call_id=tool_call_id, runtime_id=runtime_id,
                          agent_name=rc.agent_name)

    def _tool_prepare(self, call: c.CallInfo, args: Any) -> tuple[Any, Any, dict[str, Any]]:
        """(parsed args, frozen original, base kwargs) — raises ToolArgumentsError."""
        parsed = parse_arguments(args)
        return parsed, freeze(parsed), call.as_kwargs()

    def _normalize(self, call: c.CallInfo, raw: Any, error: BaseException | None,
                   ms: float) -> NormalizedToolResult:
        if error is not None:
            return failure_from_exception(error, ms)
        if is_bypassed(call.runtime_id):
            return NormalizedToolResult(content=raw, execution_time_ms=ms, raw_result=raw)
        ctx = self._memory_ctx(call, ms)
        return normalize_result(self.normalizers, self.failures, raw, call.tool_name or "", ctx)

    @staticmethod
    def _memory_ctx(call: c.CallInfo, ms: float) -> MiddlewareContext:
        return MiddlewareContext(
            tool_name=call.tool_name or "", runtime_id=call.runtime_id or "praisonai",
            agent_id=call.agent_name, session_id=call.session_id, execution_time_ms=ms,
            metadata={"tool_call_id": call.tool_call_id, "turn_id": call.turn_id},
        )

    def _post_payload(self, call: c.CallInfo, kw: dict[str, Any], effective: Any,
                      model_result: Any, normalized: NormalizedToolResult, status: str
                      ) -> dict[str, Any]:
        err = normalized.raw_result if isinstance(normalized.raw_result, BaseException) else None
        return {**kw, "args": effective, "result": model_result, "normalized": normalized,
                "duration_ms": normalized.execution_time_ms, "status": status,
                "error_type": type(err).__qualname__ if err is not None else (
                    "plugin_block" if status == "blocked" else None),
                "error_message": normalized.error_message,
                "middleware_trace": freeze(call.middleware_trace)}

    def _record_memory(self, call: c.CallInfo, normalized: NormalizedToolResult) -> None:
        if not self.memory_adapters:
            return
        ctx = self._memory_ctx(call, normalized.execution_time_ms)
        for adapter in self.memory_adapters:
            try:
                adapter.record_tool_result(normalized, ctx)
            except Exception as exc:
                self.failures.record(MEMORY, "record_tool_result", type(adapter).__name__,
                                     f"memory adapter raised: {describe(exc)}", exc)

    def _finish_tool(self, call: c.CallInfo, normalized: NormalizedToolResult,
                     status: str) -> tuple[Any, str]:
        if self.observer is not None:
            self.observer.tool_result(call, normalized)
        if status == "blocked":
            return normalized.content, status
        return normalized.model_text(), status

    def _run_tool(self, call: c.CallInfo, args: Any, execute: Callable[[Any], Any],
                  raise_errors: bool) -> Any:
        reg, obs, failures = self.registry, self.observer, self.failures
        try:
            parsed, original, kw = self._tool_prepare(call, args)
        except ToolArgumentsError as exc:
            return self._bad_arguments(call, args, exc, raise_errors)
        effective = original
        if reg.middleware(c.TOOL_REQUEST):
            effective = run_rewrites(c.TOOL_REQUEST, reg.middleware(c.TOOL_REQUEST), call,
                                     original, original, {**kw}, obs, failures)
        trace = freeze(call.middleware_trace)
        pre = fire_hooks(reg.hooks(c.PRE_TOOL_CALL), call, c.PRE_TOOL_CALL,
                         {**kw, "args": effective, "middleware_trace": trace}, obs, failures)
        blocked = block_directive(pre)
        error: BaseException | None = None
        if blocked is not None:
            normalized = NormalizedToolResult(content=blocked, success=False,
                                              error_message=blocked,
                                              metadata={"otelmw.blocked": True})
            status = "blocked"
        else:
            base = self._terminal(execute, parsed, original, effective)
            elapsed = [0.0]

            def terminal(p: Any) -> Any:  # execution_time_ms: the base call only
                t0 = time.perf_counter()
                try:
                    return base(p)
                finally:
                    elapsed[0] += time.perf_counter() - t0

            layers = reg.middleware(c.TOOL_EXECUTION)
            raw: Any = None
            try:
                if layers:
                    raw = run_execution(layers, call, "args", effective,
                                        {**kw, "original_args": original}, terminal, obs,
                                        failures)
                else:
                    raw = terminal(effective)
            except Exception as exc:
                error = exc
            ms = elapsed[0] * 1000.0
            normalized = self._normalize(call, raw, error, ms)
            status = "ok" if normalized.success else "error"
        model_result, status = self._finish_tool(call, normalized, status)
        payload = self._post_payload(call, kw, effective, model_result, normalized, status)
        fire_hooks(reg.hooks(c.POST_TOOL_CALL), call, c.POST_TOOL_CALL, payload, obs, failures)
        self._record_memory(call, normalized)
        transformed = first_string(fire_hooks(reg.hooks(c.TRANSFORM_TOOL_RESULT), call,
                                              c.TRANSFORM_TOOL_RESULT, payload, obs, failures))
        if error is not None and raise_errors:
            raise error
        return transformed if transformed is not None else model_result

    def _bad_arguments(self, call: c.CallInfo, args: Any, exc: ToolArgumentsError,
                       raise_errors: bool) -> Any:
        normalized = failure_from_exception(exc, 0.0)
        model_result, status = self._finish_tool(call, normalized, "error")
        kw = call.as_kwargs()
        payload = self._post_payload(call, kw, args, model_result, normalized, status)
        fire_hooks(self.registry.hooks(c.POST_TOOL_CALL), call, c.POST_TOOL_CALL, payload,
                   self.observer, self.failures)
        self._record_memory(call, normalized)
        if raise_errors:
            raise exc
        return model_result

    async def arun_tool(self, tool_name: str, args: Any, execute: Callable[[Any], Any], *,
                        tool_call_id: str | None = None, runtime_id: str | None = None,
                        raise_errors: bool = False) -> Any:
        """Async twin of ``run_tool``: identical normalization and hooks."""
        if runtime_id is None:
            runtime_id = c.current_runtime_context().runtime_id
        if type(args) is dict and not self._tool_active(runtime_id):
            try:
                r = execute(args)
                return await r if _isawaitable(r) else r
            except Exception as exc:
                if raise_errors:
                    raise
                return failure_from_exception(exc, 0.0).model_text()
        call = self._tool_call(tool_name, tool_call_id, runtime_id)
        obs = self.observer
        if obs is not None:
            obs.call_started(call, args)
        try:
            result = await self._arun_tool(call, args, execute, raise_errors)
        except BaseException as exc:
            if obs is not None:
                obs.call_finished(call, None, exc)
            raise
        return obs.call_finished(call, result, None) if obs is not None else result

    async def _arun_tool(self, call: c.CallInfo, args: Any, execute: Callable[[Any], Any],
                         raise_errors: bool) -> Any:
        reg, obs, failures = self.registry, self.observer, self.failures
        try:
            parsed, original, kw = self._tool_prepare(call, args)
        except ToolArgumentsError as exc:
            normalized = failure_from_exception(exc, 0.0)
            model_result, status = self._finish_tool(call, normalized, "error")
            payload = self._post_payload(call, call.as_kwargs(), args, model_result, normalized,
                                         status)
            await afire_hooks(reg.hooks(c.POST_TOOL_CALL), call, c.POST_TOOL_CALL, payload,
                              obs, failures)
            self._record_memory(call, normalized)
            if raise_errors:
                raise
            return model_result
        effective = original
        if reg.middleware(c.TOOL_REQUEST):
            effective = await arun_rewrites(c.TOOL_REQUEST, reg.middleware(c.TOOL_REQUEST),
                                            call, original, original, {**kw}, obs, failures)
        trace = freeze(call.middleware_trace)
        pre = await afire_hooks(reg.hooks(c.PRE_TOOL_CALL), call, c.PRE_TOOL_CALL,
                                {**kw, "args": effective, "middleware_trace": trace}, obs,
                                failures)
        blocked = block_directive(pre)
        error: BaseException | None = None
        if blocked is not None:
            normalized = NormalizedToolResult(content=blocked, success=False,
                                              error_message=blocked,
                                              metadata={"otelmw.blocked": True})
            status = "blocked"
        else:
            base = self._terminal(execute, parsed, original, effective)
            elapsed = [0.0]

            async def terminal(p: Any) -> Any:  # execution_time_ms: the base call only
                t0 = time.perf_counter()
                try:
                    r = base(p)
                    return (await r) if _isawaitable(r) else r
                finally:
                    elapsed[0] += time.perf_counter() - t0

            layers = reg.middleware(c.TOOL_EXECUTION)
            raw: Any = None
            try:
                if layers:
                    raw = await arun_execution(layers, call, "args", effective,
                                               {**kw, "original_args": original}, terminal,
                                               obs, failures)
                else:
                    raw = await terminal(effective)
            except Exception as exc:
                error = exc
            ms = elapsed[0] * 1000.0
            normalized = self._normalize(call, raw, error, ms)
            status = "ok" if normalized.success else "error"
        model_result, status = self._finish_tool(call, normalized, status)
        payload = self._post_payload(call, kw, effective, model_result, normalized, status)
        await afire_hooks(reg.hooks(c.POST_TOOL_CALL), call, c.POST_TOOL_CALL, payload, obs,
                          failures)
        self._record_memory(call, normalized)
        transformed = first_string(await afire_hooks(
            reg.hooks(c.TRANSFORM_TOOL_RESULT), call, c.TRANSFORM_TOOL_RESULT, payload, obs,
            failures))
        if error is not None and raise_errors:
            raise error
        return transformed if transformed is not None else model_result


class Turn:
    """One agent turn: sets the runtime context (a fresh ``turn_id``) and lets the
    observer open an ``invoke_agent`` span. Use as a (sync or async) context
    manager, or call ``start()``/``finish()`` from host adapters."""

    __slots__ = ("_cm", "_ctx", "_pipeline", "_token", "failed", "fields")

    def __init__(self, pipeline: Pipeline, fields: dict[str, Any]) -> None:
        self._pipeline, self.fields = pipeline, fields
        self._cm: Any = None
        self._token: Any = None
        self._ctx: c.RuntimeContext | None = None
        self.failed = False

    def mark_failed(self) -> None:
        """The host swallowed an error (e.g. returned None): the turn is an error."""
        self.failed = True

    def start(self) -> c.RuntimeContext:
        self._cm = c.runtime_context(**self.fields)
        self._ctx = self._cm.__enter__()
        obs = self._pipeline.observer
        if obs is not None:
            self._token = obs.turn_started(self._ctx)
        return self._ctx

    def finish(self, error: BaseException | None = None) -> None:
        obs = self._pipeline.observer
        if obs is not None and self._token is not None:
            obs.turn_finished(self._token, error, self.failed)
        self._token = None
        if self._cm is not None:
            cm, self._cm = self._cm, None
            cm.__exit__(None, None, None)

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


def _isawaitable(value: Any) -> bool:
    return hasattr(value, "__await__")


def _safe_str(value: Any) -> str:
    try:
        return str(value)
    except Exception:
        return type(value).__name__


_default_pipeline = Pipeline()


def get_pipeline() -> Pipeline:
    """The process-wide pipeline used by decorators, plugins and instrumentors."""
    return _default_pipeline

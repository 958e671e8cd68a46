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

import json
import time
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

from . import contract as c
from .contract import (
    current_llm_call,
    link_model_call,
    linked_api_request_id,
    reset_current_llm_call,
    set_current_llm_call,
)
from .failures import MEMORY, FailureLog, describe, exported_from, safe_str
from .payloads import freeze
from .registry import Layer, LayerRegistry
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
from .steps import (
    Steps,
    ToolInFlight,
    adrive,
    all_hook_events,
    block_message,
    drive,
    execution_steps,
    finished_steps,
    first,
    hook_steps,
    host_call_steps,
    isawaitable,
    llm_base_steps,
    own_driver,
    plain_string,
    rewrite_steps,
    tool_base_steps,
)

__all__ = ["Pipeline", "ToolArgumentsError", "Turn", "current_llm_call", "get_pipeline",
           "parse_arguments"]


# --------------------------------------------------------------------------------------
# The LLM call
#
# The LLM-call pipeline: request → ``llm_request`` → ``pre_api_request`` →
# ``llm_execution`` chain → base call → ``post_api_request`` | ``api_request_error``,
# one definition for sync and async calls (its stages in ``steps.py``).
# --------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------
# The tool call
#
# The tool-call pipeline: parse/coerce args → ``tool_request`` → ``pre_tool_call``
# (block) → ``tool_execution`` chain → base call → normalize → ``post_tool_call`` →
# memory adapters → ``transform_tool_result``; one definition for sync and async calls
# (its stages in ``steps.py``).
# --------------------------------------------------------------------------------------

_NATIVE = c.NATIVE_RUNTIME_IDS


@exported_from("otelmw.tool_calls")
class ToolArgumentsError(ValueError):
    """Tool arguments that are not a JSON object (or malformed JSON)."""


def parse_arguments(args: Any) -> dict[str, Any]:
    """Coerce model-provided tool arguments to a dict (JSON strings included)."""
    # Identity and type checks only: a model's or host's value may compare
    # element-wise (a pandas object: ``args == ""`` is a Series, ``bool()`` raises).
    if isinstance(args, dict):
        return args
    if args is None:
        return {}
    if isinstance(args, bytes | bytearray):
        args = bytes(args).decode("utf-8", errors="replace")
    if isinstance(args, str):
        args = str.__str__(args)  # a plain str, whatever a subclass overrides
        if not args:
            return {}
        try:
            value = json.loads(args)
        except (ValueError, RecursionError) as exc:  # RecursionError: absurdly deep JSON
            raise ToolArgumentsError(f"tool arguments are not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ToolArgumentsError(
                f"tool arguments must be a JSON object, got {type(value).__name__}")
        return value
    try:
        return dict(args)
    except Exception:  # not a mapping, or one whose keys()/[] raise
        raise ToolArgumentsError(
            f"tool arguments must be a mapping or JSON object string, got {type(args).__name__}"
        ) from None



# Metadata mark on a result a ``pre_tool_call`` block directive produced, so memory
# adapters (which get only the NormalizedToolResult) can tell it apart.
BLOCKED_KEY = "otelmw.blocked"


def _hook_points_wanted(hk: dict[str, tuple[Layer, ...]], obs: PipelineObserver | None
                        ) -> tuple[bool, bool]:
    """Whether the ``pre_tool_call`` and the ``post_tool_call``/``transform_tool_result``
    payloads are built: the hook point has callbacks, or hook events are ``all``."""
    every = all_hook_events(obs)
    return (every or bool(hk[c.PRE_TOOL_CALL]),
            every or bool(hk[c.POST_TOOL_CALL] or hk[c.TRANSFORM_TOOL_RESULT]))


def _blocked(message: str) -> NormalizedToolResult:
    """A call stopped by a ``pre_tool_call`` block directive."""
    return NormalizedToolResult(content=message, success=False, error_message=message,
                                metadata={BLOCKED_KEY: True})


class _RefusedArguments(NamedTuple):
    """A call whose arguments did not parse: the tool did not run."""

    model_result: Any
    normalized: NormalizedToolResult
    payload: dict[str, Any]  # of ``post_tool_call``


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
                 call: c.CallInfo | None = None) -> Any:
        """Run one tool call; returns what the model should see.

        ``execute(args)`` runs the tool. A tool that raises becomes a normalized
        failure; the caller gets ``"Tool Error: <message>"`` (or the original
        exception re-raised after the hooks when ``raise_errors`` is true).
        ``api_request_id``: the model call that asked for this tool call, when the host
        knows it (default: the latest model call of the turn).
        ``call``: an already-opened call (see ``run_llm``).
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
        return drive(finished_steps, self.observer, call,
                     self._tool_steps(call, args, execute, raise_errors, False))

    def _opened_tool_call(self, call: c.CallInfo | None, tool_name: str, args: Any,
                          tool_call_id: str | None, runtime_id: str | None,
                          api_request_id: str | None) -> c.CallInfo | None:
        """The tool call to run through the pipeline (``call`` if the host opened it),
        or ``None`` when nothing observes or changes it and its arguments are already
        parsed: then the tool just runs."""
        if call is not None:
            return call
        if runtime_id is None:
            runtime_id = c.current_runtime_context().runtime_id
        if type(args) is dict and not self._tool_active(runtime_id):
            return None
        call = self._tool_call(tool_name, tool_call_id, runtime_id, api_request_id)
        if self.observer is not None:
            call.observation = self.observer.call_started(call, args)
        return call

    def _tool_call(self, tool_name: str, tool_call_id: str | None, runtime_id: str | None,
                   api_request_id: str | None) -> c.CallInfo:
        """The call's ``api_request_id``: the model call that asked for it — the host's
        word, else the latest model call of the turn (``ModelCallLink``), else a new id."""
        rc = c.leave_finished_turns()
        return c.CallInfo.for_tool(
            rc, api_request_id=(api_request_id or linked_api_request_id(rc)
                                or c.new_request_id(rc.turn_id)),
            tool_name=tool_name, tool_call_id=tool_call_id, runtime_id=runtime_id)

    def _tool_prepare(self, call: c.CallInfo, args: Any) -> tuple[Any, Any, dict[str, Any]]:
        """(parsed args, frozen original, base kwargs) — raises ToolArgumentsError."""
        parsed = parse_arguments(args)
        return parsed, freeze(parsed), call.as_kwargs()

    def _normalize(self, call: c.CallInfo, raw: Any, error: BaseException | None,
                   ms: float) -> NormalizedToolResult:
        if error is not None:
            return failure_from_exception(error, ms)
        if is_bypassed(call.runtime_id):
            return passthrough_result(raw, ms)
        ctx = self._memory_ctx(call, ms)
        return normalize_result(self.normalizers, self.failures, raw, call.tool_name or "", ctx)

    @staticmethod
    def _memory_ctx(call: c.CallInfo, ms: float) -> MiddlewareContext:
        return MiddlewareContext(
            tool_name=call.tool_name or "", runtime_id=call.runtime_id or "praisonai",
            agent_id=call.agent_name, session_id=call.session_id, execution_time_ms=ms,
            metadata={"tool_call_id": call.tool_call_id, "turn_id": call.turn_id},
        )

    @staticmethod
    def _pre_payload(call: c.CallInfo, kw: dict[str, Any], effective: Any) -> dict[str, Any]:
        return {**kw, "args": effective, "middleware_trace": call.trace_view()}

    def _outcome(self, call: c.CallInfo, raw: Any, error: BaseException | None,
                 seconds: float) -> tuple[NormalizedToolResult, str, BaseException | None]:
        """The normalized result of the base call, its status (``ok``/``error``) and
        what it raised."""
        normalized = self._normalize(call, raw, error, seconds * 1000.0)
        return normalized, "ok" if normalized.success else "error", error

    def _post_payload(self, call: c.CallInfo, kw: dict[str, Any], effective: Any,
                      model_result: Any, normalized: NormalizedToolResult, status: str
                      ) -> dict[str, Any]:
        err = normalized.raw_result if isinstance(normalized.raw_result, BaseException) else None
        return {**kw, "args": effective, "result": model_result, "normalized": normalized,
                "duration_ms": normalized.execution_time_ms, "status": status,
                "error_type": type(err).__qualname__ if err is not None else (
                    "plugin_block" if status == "blocked" else None),
                "error_message": normalized.error_message,
                "middleware_trace": call.trace_view()}

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
                     status: str) -> Any:
        """Report the result to the observer; return what the model sees."""
        if self.observer is not None:
            self.observer.tool_result(call, normalized, status)
        return normalized.content if status == "blocked" else normalized.model_text()

    def _tool_steps(self, call: c.CallInfo, args: Any, execute: Callable[[Any], Any],
                    raise_errors: bool, awaits: bool) -> Steps[Any]:
        """Parse, the request stage, ``pre_tool_call`` (block), the execution chain
        around the tool, normalize, ``post_tool_call``, memory, ``transform_tool_result``."""
        mw, hk = self.registry.tables()
        obs, failures = self.observer, self.failures
        try:
            parsed, original, kw = self._tool_prepare(call, args)
        except ToolArgumentsError as exc:
            refused = self._bad_arguments(call, args, exc)
            yield from hook_steps(hk[c.POST_TOOL_CALL], call, c.POST_TOOL_CALL,
                                  refused.payload, obs, failures, None, awaits)
            self._record_memory(call, refused.normalized)
            if raise_errors:
                raise
            return refused.model_result
        pre_hooked, post_hooked = _hook_points_wanted(hk, obs)
        effective = original
        if mw[c.TOOL_REQUEST]:
            effective = yield from own_driver(awaits, rewrite_steps, c.TOOL_REQUEST,
                                              mw[c.TOOL_REQUEST], call, original, original,
                                              kw, obs, failures, awaits)
        blocked = None
        if pre_hooked:
            blocked = first((yield from hook_steps(
                hk[c.PRE_TOOL_CALL], call, c.PRE_TOOL_CALL,
                self._pre_payload(call, kw, effective), obs, failures, block_message, awaits)))
        if blocked is not None:
            normalized, status, error = _blocked(blocked), "blocked", None
        else:
            elapsed = [0.0]  # execution_time_ms: the base call only
            in_flight = ToolInFlight(call, obs)
            layers = mw[c.TOOL_EXECUTION]
            try:
                if layers:
                    terminal = partial(adrive if awaits else drive, tool_base_steps, execute,
                                       parsed, original, elapsed, in_flight, awaits)
                    raw = yield from execution_steps(
                        layers, call, "args", effective, {**kw, "original_args": original},
                        terminal, obs, failures, awaits)
                else:
                    raw = yield from tool_base_steps(execute, parsed, original, elapsed,
                                                     in_flight, awaits, effective)
            except Exception as exc:
                normalized, status, error = self._outcome(call, None, exc, elapsed[0])
            else:
                normalized, status, error = self._outcome(call, raw, None, elapsed[0])
        model_result = self._finish_tool(call, normalized, status)
        payload: dict[str, Any] | None = None
        if post_hooked:
            payload = self._post_payload(call, kw, effective, model_result, normalized, status)
            yield from hook_steps(hk[c.POST_TOOL_CALL], call, c.POST_TOOL_CALL, payload, obs,
                                  failures, None, awaits)
        self._record_memory(call, normalized)
        transformed = None if payload is None else first((yield from hook_steps(
            hk[c.TRANSFORM_TOOL_RESULT], call, c.TRANSFORM_TOOL_RESULT, payload, obs,
            failures, plain_string, awaits)))
        if error is not None and raise_errors:
            raise error
        return transformed if transformed is not None else model_result

    def _bad_arguments(self, call: c.CallInfo, args: Any, exc: ToolArgumentsError
                       ) -> _RefusedArguments:
        """Unparseable arguments: the tool does not run."""
        normalized = failure_from_exception(exc, 0.0)
        model_result = self._finish_tool(call, normalized, "error")
        return _RefusedArguments(model_result, normalized, self._post_payload(
            call, call.as_kwargs(), args, model_result, normalized, "error"))

    async def arun_tool(self, tool_name: str, args: Any, execute: Callable[[Any], Any], *,
                        tool_call_id: str | None = None, runtime_id: str | None = None,
                        raise_errors: bool = False, api_request_id: str | None = None,
                        call: c.CallInfo | None = None) -> Any:
        """``run_tool`` in an async call; ``execute`` may return an awaitable.
        ``call``: an already-opened call (see ``run_llm``)."""
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
        return await adrive(finished_steps, self.observer, call,
                            self._tool_steps(call, args, execute, raise_errors, True))


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
             runtime_id: str | None = None) -> Turn:
        """An agent turn (``with pipeline.turn("weather-agent"): ...``)."""
        outer = c.leave_finished_turns()
        return Turn(self, {
            "agent_name": agent_name, "session_id": session_id, "task_id": task_id,
            "turn_id": turn_id or f"{session_id or outer.session_id or 'turn'}:"
                                  f"{c.new_request_id().removeprefix('req-')}",
            "runtime_id": runtime_id})


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

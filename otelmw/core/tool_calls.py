"""The tool-call pipeline: parse/coerce args → ``tool_request`` → ``pre_tool_call``
(block) → ``tool_execution`` chain → base call → normalize → ``post_tool_call`` →
memory adapters → ``transform_tool_result``; one definition for sync and async calls
(``steps.py``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

from . import contract as c
from .contract import linked_api_request_id
from .failures import MEMORY, FailureLog, describe, exported_from
from .payloads import freeze
from .registry import Layer, LayerRegistry
from .results import (
    MemoryAdapter,
    MiddlewareContext,
    NormalizedToolResult,
    NormalizerRegistry,
    failure_from_exception,
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
    isawaitable,
    own_driver,
    plain_string,
    rewrite_steps,
    tool_base_steps,
)

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
            call = self._tool_call(tool_name, tool_call_id, runtime_id, api_request_id)
            if obs is not None:
                call.observation = obs.call_started(call, args)
        return drive(finished_steps, obs, call,
                     self._tool_steps(call, args, execute, raise_errors, False))

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
        obs = self.observer
        if call is None:
            if runtime_id is None:
                runtime_id = c.current_runtime_context().runtime_id
            if type(args) is dict and not self._tool_active(runtime_id):
                try:
                    r = execute(args)
                    return await r if isawaitable(r) else r
                except Exception as exc:
                    if raise_errors:
                        raise
                    return failure_from_exception(exc, 0.0).model_text()
            call = self._tool_call(tool_name, tool_call_id, runtime_id, api_request_id)
            if obs is not None:
                call.observation = obs.call_started(call, args)
        return await adrive(finished_steps, obs, call,
                            self._tool_steps(call, args, execute, raise_errors, True))

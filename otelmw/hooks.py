"""Observer hooks: read-only notifications with two sanctioned return values.

Hooks are fail-open: a hook that raises, times out its own work or returns
something unexpected never breaks the call. ``pre_tool_call`` may return a block
directive and ``transform_tool_result`` a replacement string; the first valid
one wins (as in Hermes). Sync calls close a coroutine returned by a hook (it
cannot be awaited there) and count it as a failure.
"""

from __future__ import annotations

import inspect
from typing import Any

from .contract import CallInfo
from .failures import HOOK, FailureLog, describe, signature_mismatch_hint
from .observe import PipelineObserver
from .registry import Layer


def _record(failures: FailureLog, layer: Layer, message: str, exc: BaseException | None,
            payload: dict[str, Any]) -> None:
    if exc is not None:
        hint = signature_mismatch_hint(exc, payload)
        message = f"{message}: {describe(exc)}" + (f" ({hint})" if hint else "")
    failures.record(HOOK, layer.kind, layer.name, message, exc)


_NO_RESULTS: list[Any] = []


def _emit(obs: PipelineObserver | None, layers: tuple[Layer, ...]) -> bool:
    """Whether the observer hears about this firing: ``hook_events`` is
    ``registered`` (default: hook points with callbacks), ``all`` or ``none``."""
    if obs is None:
        return False
    mode = getattr(obs, "hook_events", "registered")
    return mode == "all" or (mode == "registered" and bool(layers))


def all_hook_events(obs: PipelineObserver | None) -> bool:
    """Whether the observer wants every hook point, even those without callbacks.
    Payloads are built only when a hook point has callbacks or this is true."""
    return obs is not None and getattr(obs, "hook_events", "") == "all"


def fire_hooks(layers: tuple[Layer, ...], call: CallInfo, hook_name: str,
               payload: dict[str, Any], obs: PipelineObserver | None,
               failures: FailureLog) -> list[Any]:
    """Call every hook for ``hook_name``; return their non-None results in order."""
    if not layers:
        if _emit(obs, layers):
            obs.hook_fired(call, hook_name, payload, 0)  # type: ignore[union-attr]
        return _NO_RESULTS
    results: list[Any] = []
    failed = 0
    for layer in layers:
        try:
            ret = layer.callback(**payload)
        except Exception as exc:
            failed += 1
            _record(failures, layer, "hook raised", exc, payload)
            continue
        if inspect.isawaitable(ret):
            close = getattr(ret, "close", None)
            if close is not None:
                close()
            failed += 1
            _record(failures, layer, "hook returned an awaitable in a synchronous call; "
                    "it was not run", None, payload)
            continue
        if ret is not None:
            results.append(ret)
    if _emit(obs, layers):
        obs.hook_fired(call, hook_name, payload, failed)  # type: ignore[union-attr]
    return results


async def afire_hooks(layers: tuple[Layer, ...], call: CallInfo, hook_name: str,
                      payload: dict[str, Any], obs: PipelineObserver | None,
                      failures: FailureLog) -> list[Any]:
    if not layers:
        if _emit(obs, layers):
            obs.hook_fired(call, hook_name, payload, 0)  # type: ignore[union-attr]
        return _NO_RESULTS
    results: list[Any] = []
    failed = 0
    for layer in layers:
        try:
            ret = layer.callback(**payload)
            if inspect.isawaitable(ret):
                ret = await ret
        except Exception as exc:
            failed += 1
            _record(failures, layer, "hook raised", exc, payload)
            continue
        if ret is not None:
            results.append(ret)
    if _emit(obs, layers):
        obs.hook_fired(call, hook_name, payload, failed)  # type: ignore[union-attr]
    return results


def block_directive(results: list[Any]) -> str | None:
    """The message of the first ``{"action": "block", ...}`` directive, if any."""
    for r in results:
        if isinstance(r, dict) and r.get("action") == "block":
            msg = r.get("message")
            return msg if isinstance(msg, str) and msg else "tool call blocked by a plugin"
    return None


def first_string(results: list[Any]) -> str | None:
    for r in results:
        if isinstance(r, str):
            return r
    return None

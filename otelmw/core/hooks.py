"""Observer hooks: read-only notifications with two sanctioned return values.

Hooks are fail-open: a hook that raises, times out its own work or returns
something unexpected never breaks the call. ``pre_tool_call`` may return a block
directive and ``transform_tool_result`` a replacement string; the first valid
one wins (as in Hermes); a directive whose action is a near miss of ``block``
(``"Block"``, ``"blokc"``) and a non-string replacement are ignored, counted and
warned once (the call goes on: fail-open). Sync calls close a coroutine returned by a hook (it
cannot be awaited there) and count it as a failure.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from typing import Any

from .callstate import discard_awaitable
from .contract import CallInfo
from .failures import HOOK, FailureLog, describe, signature_mismatch_hint
from .registry import Layer
from .seam import PipelineObserver
from .steps import Steps


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
    mode = obs.hook_events
    return mode == "all" or (mode == "registered" and bool(layers))


def all_hook_events(obs: PipelineObserver | None) -> bool:
    """Whether the observer wants every hook point, even those without callbacks.
    Payloads are built only when a hook point has callbacks or this is true."""
    return obs is not None and obs.hook_events == "all"


class _Firing:
    """One hook point's firing: the values kept and the callbacks that failed."""

    __slots__ = ("failed", "failures", "payload", "pick", "results")

    def __init__(self, failures: FailureLog, payload: dict[str, Any],
                 pick: Pick | None) -> None:
        self.failures, self.payload, self.pick = failures, payload, pick
        self.results: list[Any] = []
        self.failed = 0

    def failed_with(self, layer: Layer, message: str, exc: BaseException | None) -> None:
        self.failed += 1
        _record(self.failures, layer, message, exc, self.payload)

    def steps(self, layer: Layer, awaits: bool) -> Steps[None]:
        """Run one callback; in an asynchronous call (``awaits``) it may be ``async def``
        (in a synchronous one, ``take`` refuses an awaitable it returns)."""
        try:
            ret = layer.callback(**self.payload)
            if awaits and inspect.isawaitable(ret):
                ret = yield ret
        except Exception as exc:
            self.failed_with(layer, "hook raised", exc)
            return
        if ret is not None:
            self.take(layer, ret, not awaits)

    def take(self, layer: Layer, ret: Any, in_sync_call: bool) -> None:
        """What a callback returned (not None): kept if the hook point accepts it.
        Looked at inside a guard: an object whose attribute lookups, ``__class__``,
        ``close()`` or ``__eq__`` raise."""
        try:
            if in_sync_call and inspect.isawaitable(ret):
                discard_awaitable(ret)
                self.failed_with(layer, "hook returned an awaitable in a synchronous call; "
                                 "it was not run", None)
                return
            if self.pick is not None:
                ret = self.pick(ret)
        except Exception as exc:
            self.failed_with(layer, "hook returned an unusable value", exc)
            return
        if ret is not None:
            self.results.append(ret)

    def done(self, obs: PipelineObserver | None, call: CallInfo, hook_name: str,
             layers: tuple[Layer, ...]) -> list[Any]:
        if _emit(obs, layers):
            obs.hook_fired(call, hook_name, self.payload, self.failed)  # type: ignore[union-attr]
        return self.results


def _no_callbacks(obs: PipelineObserver | None, call: CallInfo, hook_name: str,
                  payload: dict[str, Any]) -> list[Any]:
    """A hook point without callbacks: heard of only with hook events ``all``."""
    if _emit(obs, ()):
        obs.hook_fired(call, hook_name, payload, 0)  # type: ignore[union-attr]
    return _NO_RESULTS


def hook_steps(layers: tuple[Layer, ...], call: CallInfo, hook_name: str,
               payload: dict[str, Any], obs: PipelineObserver | None, failures: FailureLog,
               pick: Pick | None, awaits: bool) -> Steps[list[Any]]:
    """Call every hook for ``hook_name``; return their non-None results in order
    (``pick(result)`` of each, when given: what the hook point accepts, or None). In an
    asynchronous call (``awaits``) a callback may be ``async def``."""
    if not layers:
        return _no_callbacks(obs, call, hook_name, payload)
    firing = _Firing(failures, payload, pick)
    for layer in layers:
        yield from firing.steps(layer, awaits)
    return firing.done(obs, call, hook_name, layers)


Pick = Callable[[Any], Any]
BLOCKED_BY_PLUGIN = "tool call blocked by a plugin"


def block_message(ret: Any) -> str | None:
    """``pick`` of ``pre_tool_call``: the message of a ``{"action": "block", ...}``
    directive (a plain ``str``), else None. Type checks and ``dict``'s own lookups
    only: a hostile ``__eq__`` or ``.get`` of the hook's value is never called."""
    if not isinstance(ret, dict):
        return None
    action = dict.get(ret, "action")
    if not isinstance(action, str):
        if action is None:
            return None
        raise TypeError(f"a directive's 'action' must be a str, got {type(action).__name__}")
    if not str.__eq__(action, "block"):
        if _looks_like_block(action):  # a guard with a typo: the tool runs, visibly
            raise ValueError(f"pre_tool_call returned {{'action': {str.__str__(action)[:40]!r}}}"
                             ", not a block directive (did you mean 'block'?); the tool ran")
        return None
    msg = dict.get(ret, "message")
    return str.__str__(msg) if isinstance(msg, str) and str.__len__(msg) else BLOCKED_BY_PLUGIN


def _looks_like_block(action: str) -> bool:
    word = str.__str__(action)[:40].strip().lower()
    return word == "block" or bool(difflib.get_close_matches(word, ["block"], n=1, cutoff=0.7))


def plain_string(ret: Any) -> str | None:
    """``pick`` of ``transform_tool_result``: a replacement string as a plain ``str``.
    Anything else is refused (counted, warned once): the result stays as it was."""
    if isinstance(ret, str):
        return str.__str__(ret)
    raise TypeError(f"transform_tool_result must return a str or None, got "
                    f"{type(ret).__name__}; the result was kept")


def first(results: list[Any]) -> Any:
    """The first valid result wins (as in Hermes)."""
    return results[0] if results else None

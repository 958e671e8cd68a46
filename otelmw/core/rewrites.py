"""The request-rewrite stage (``llm_request``/``tool_request``), one definition for sync
and async calls (``steps.py``).

Rules (from the plugin-middleware contract, tightened):

* Request callbacks run in registration order and see the effective payload so
  far plus the untouched original, both as read-only views. ``{"request": ...}``
  / ``{"args": ...}`` (+ optional ``source``/``reason``) replaces the payload and
  adds a trace entry; ``None`` is no change; anything else is a failure.
* Every failure is fail-open, counted and warned once (``FailureLog``).
"""

from __future__ import annotations

import inspect
from typing import Any

from . import seam as o
from .callstate import discard_awaitable
from .contract import ORIGINAL_KEY, PAYLOAD_KEY, CallInfo, make_trace_entry
from .failures import (
    AsyncMiddlewareInSyncCallError,
    FailureLog,
    describe,
    record_middleware_failure,
    safe_str,
)
from .payloads import changed_keys, freeze
from .registry import Layer
from .seam import PipelineObserver
from .steps import Steps

_TRACE_KEYS = frozenset({"source", "reason", "name"})
_NO_KEYS: list[str] = []  # changed keys of an unchanged rewrite (never mutated)


def _check_rewrite(kind: str, key: str, ret: Any) -> str | None:
    """None when ``ret`` is a valid complete replacement, else why it is not."""
    # ``dict``'s own methods, not the returned object's: a dict subclass's
    # overrides are middleware code that must not run (or raise) here.
    if not isinstance(ret, dict):
        return f"returned {type(ret).__name__}; expected None or {{{key!r}: {{...}}}}"
    if not dict.__contains__(ret, key):
        return f"returned a dict without {key!r} (partial patches are not accepted)"
    extra = [k for k in dict.keys(ret)
             if not (type(k) is str and (k == key or k in _TRACE_KEYS))]
    if extra:
        return f"returned unexpected keys {sorted(map(safe_str, extra))} (partial patch?)"
    value = dict.__getitem__(ret, key)
    if not isinstance(value, dict):
        return f"{key!r} must be a dict, got {type(value).__name__}"
    return None


def _trace_text(ret: dict[str, Any], key: str) -> str | None:
    value = dict.get(ret, key)
    return str.__str__(value) if isinstance(value, str) else None


class RewriteStep:
    """Bookkeeping of a request stage: what each callback's return or failure does
    to the payload, the trace and the observer (a stage whose callbacks all return
    ``None`` never builds one)."""

    __slots__ = ("call", "current", "failures", "key", "kind", "kw", "obs")

    def __init__(self, kind: str, key: str, call: CallInfo, current: Any,
                 kw: dict[str, Any], obs: PipelineObserver | None,
                 failures: FailureLog) -> None:
        self.kind, self.key, self.call, self.current, self.kw, self.obs, self.failures = (
            kind, key, call, current, kw, obs, failures)

    def finish(self, layer: Layer, token: Any, ret: Any, exc: BaseException | None) -> None:
        outcome, keys, source, reason = o.UNCHANGED, _NO_KEYS, None, None
        if exc is not None:
            outcome = o.FAILED
            record_middleware_failure(
                self.failures, layer, "raise", exc, "request middleware raised", self.kw)
        elif ret is not None:
            try:
                problem = _check_rewrite(self.kind, self.key, ret)
                if problem is None:
                    new = freeze(dict.__getitem__(ret, self.key))
                    source, reason = _trace_text(ret, "source"), _trace_text(ret, "reason")
            except Exception as e:  # a key whose __eq__/__hash__/__str__ raises
                problem = f"unusable return value: {describe(e)}"
            if problem is not None:
                outcome = o.FAILED
                record_middleware_failure(
                    self.failures, layer, "shape", None, f"bad return shape: {problem}")
            else:
                keys = changed_keys(self.current, new)
                self.current = self.kw[self.key] = new
                outcome = o.REWRITTEN
                self.call.middleware_trace.append(
                    make_trace_entry(self.kind, layer.name, layer.plugin, source, reason))
        if self.obs is not None:
            self.obs.rewrite_finished(self.call, token, outcome, keys, source, reason, exc,
                                      self.current)


def _interrupted(obs: PipelineObserver | None, call: CallInfo, token: Any,
                 exc: BaseException) -> None:
    """A request callback raised a BaseException (interrupt, exit, cancellation):
    not a middleware failure, it propagates; the layer's span still ends."""
    if obs is not None:
        obs.rewrite_finished(call, token, o.ERROR, _NO_KEYS, None, None, exc)


def rewrite_steps(kind: str, layers: tuple[Layer, ...], call: CallInfo, payload: Any,
                  original: Any, call_kw: dict[str, Any], obs: PipelineObserver | None,
                  failures: FailureLog, awaits: bool) -> Steps[Any]:
    """Apply request middleware; returns the effective (frozen) payload. ``call_kw``: the
    call's own kwargs (not changed here); the stage's kwargs are a dict of its own, with
    the payload keys (each callee gets a copy). In an asynchronous call (``awaits``) a
    callback may be ``async def``."""
    key = PAYLOAD_KEY[kind]
    kw = {**call_kw, ORIGINAL_KEY[key]: original, key: payload}
    step: RewriteStep | None = None
    for pos, layer in enumerate(layers):
        token = obs.rewrite_started(call, layer, pos, kw[key]) if obs is not None else None
        err: BaseException | None = None
        try:
            ret = layer.callback(**kw)
            if ret is not None and inspect.isawaitable(ret):
                if awaits:
                    ret = yield ret
                else:
                    discard_awaitable(ret)
                    raise AsyncMiddlewareInSyncCallError(
                        "async request middleware cannot run in a synchronous call")
        except Exception as exc:
            ret, err = None, exc
        except BaseException as exc:  # interrupt, exit, cancellation: propagate, end the span
            _interrupted(obs, call, token, exc)
            raise
        if ret is None and err is None:  # unchanged: only the observer needs to hear it
            if obs is not None:
                obs.rewrite_finished(call, token, o.UNCHANGED, _NO_KEYS, None, None, None)
            continue
        if step is None:
            step = RewriteStep(kind, key, call, payload, kw, obs, failures)
        step.finish(layer, token, ret, err)
    return payload if step is None else step.current

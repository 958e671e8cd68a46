"""Context plumbing: safe attach/detach and carrying context across threads.

asyncio tasks copy contextvars by themselves; thread pools and bare threads do
not, which is how naive instrumentation produces orphan spans (Hermes runs its
provider call on a plain worker thread). ``carry`` binds a callable to the
caller's context; ``instrument_threads`` makes ``ThreadPoolExecutor.submit`` and
``threading.Thread`` do that for every callable.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import wrapt
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import _RUNTIME_CONTEXT

T = TypeVar("T")

# The runtime context's own detach: unlike ``opentelemetry.context.detach`` it
# raises instead of logging an error when the token belongs to another context.
# Bound once here, the one place otelmw reaches for OpenTelemetry's private API;
# per-layer code calls it inline (``spans.layer``) to save ``safe_detach``'s call.
raw_detach = _RUNTIME_CONTEXT.detach


def safe_detach(token: object) -> None:
    """Detach without raising or logging when the token belongs to another
    context (a generator finalised elsewhere, a span ended on another thread)."""
    if token is None:
        return
    try:
        raw_detach(token)  # type: ignore[arg-type]
    except Exception:
        pass


def restore_context(token: Any) -> None:
    """Undo the ``attach`` that returned ``token`` in the calling context. A copy
    of the attaching context (a thread or task it was carried into) cannot
    detach the token: it gets the context from before the attach instead."""
    try:
        raw_detach(token)
        return
    except Exception:
        pass
    old = getattr(token, "old_value", None)
    otel_context.attach(old if isinstance(old, otel_context.Context) else otel_context.Context())


def end_current(token: Any, span: Any) -> None:
    """Detach ``token`` when ending ``span``: in the attaching context, or in a
    copy of it whose current span is still ``span``; other contexts (a turn
    finished on an unrelated thread) are left as they are."""
    try:
        raw_detach(token)
    except Exception:
        if trace.get_current_span() is span:
            restore_context(token)


def carry(fn: Callable[..., T], ctx: contextvars.Context | None = None) -> Callable[..., T]:
    """Return ``fn`` bound to ``ctx`` (default: a copy of the caller's context).

    Use it where a host hands work to a bare thread:
    ``threading.Thread(target=otelmw.telemetry.carry(work)).start()``.
    """
    bound = ctx if ctx is not None else contextvars.copy_context()

    def run(*args: Any, **kwargs: Any) -> T:
        # A Context can be entered by one thread at a time; copy it per call so
        # the same carried callable can run concurrently.
        return bound.copy().run(fn, *args, **kwargs)

    run.__wrapped__ = fn  # type: ignore[attr-defined]
    return run


# What ``instrument_threads`` carries: OpenTelemetry's current context and
# otelmw's own variables (named ``otelmw_*``: runtime context, call state, host
# adapters' turn state) — never the host's other ContextVars, which a worker
# thread must see at their defaults as it would without otelmw.
_OTEL_VAR: contextvars.ContextVar[Any] | None = getattr(_RUNTIME_CONTEXT, "_current_context",
                                                         None)
_OWN_PREFIX = "otelmw_"
Carried = list[tuple[contextvars.ContextVar[Any], Any]]


def telemetry_context() -> Carried:
    """The caller's OpenTelemetry and otelmw context variables, to re-enter in a
    worker (``run_carried``)."""
    return [(var, value) for var, value in contextvars.copy_context().items()
            if var is _OTEL_VAR or var.name.startswith(_OWN_PREFIX)]


def _enter(carried: Carried, fn: Callable[..., T], args: Any, kwargs: Any) -> T:
    for var, value in carried:
        var.set(value)
    return fn(*args, **kwargs)


def run_carried(carried: Carried, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a fresh Context holding only ``carried``."""
    return contextvars.Context().run(_enter, carried, fn, args, kwargs)


def _submit(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    if args:
        return wrapped(run_carried, telemetry_context(), *args, **kwargs)
    return wrapped(*args, **kwargs)


def _thread_start(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    if getattr(instance, "_otelmw_ctx", None) is None:
        instance._otelmw_ctx = telemetry_context()
    return wrapped(*args, **kwargs)


def _thread_run(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    carried = getattr(instance, "_otelmw_ctx", None)
    if carried is None:
        return wrapped(*args, **kwargs)
    return run_carried(carried, wrapped, *args, **kwargs)


# Process-wide runtime state, not a setting: whether the thread patches are in place
# (``threads_instrumented()``), and the lock that makes installing them idempotent.
_lock = threading.Lock()
_installed = False
# Enter the carried context around what calls ``run()``, so Thread subclasses
# that override ``run`` are covered too (wrapping ``Thread.run`` misses them).
_THREAD_RUN = "_bootstrap_inner" if hasattr(threading.Thread, "_bootstrap_inner") else "run"


def instrument_threads() -> None:
    """Propagate OpenTelemetry's context and otelmw's own context variables (not
    the host's other ContextVars) into ``ThreadPoolExecutor`` tasks and
    ``threading.Thread`` targets. Idempotent. A thread keeps what it was started
    with; a turn that has finished meanwhile is left at the thread's next
    pipeline call (``contract.TurnMark``)."""
    global _installed
    with _lock:
        if _installed:
            return
        wrapt.wrap_function_wrapper(ThreadPoolExecutor, "submit", _submit)
        wrapt.wrap_function_wrapper(threading.Thread, "start", _thread_start)
        wrapt.wrap_function_wrapper(threading.Thread, _THREAD_RUN, _thread_run)
        _installed = True


def uninstrument_threads() -> None:
    global _installed
    with _lock:
        if not _installed:
            return
        for owner, name in ((ThreadPoolExecutor, "submit"), (threading.Thread, "start"),
                            (threading.Thread, _THREAD_RUN)):
            current = owner.__dict__.get(name)
            original = getattr(current, "__wrapped__", None)
            if original is not None:
                setattr(owner, name, original)
        _installed = False


def threads_instrumented() -> bool:
    """Whether ``instrument_threads`` is in effect (by whoever installed it)."""
    return _installed

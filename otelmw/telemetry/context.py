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
from opentelemetry.context import _RUNTIME_CONTEXT

T = TypeVar("T")

# The runtime context's own detach: unlike ``opentelemetry.context.detach`` it
# raises instead of logging an error when the token belongs to another context.
# Bound once here, the one place otelmw reaches for OpenTelemetry's private API;
# per-layer code calls it inline (``layer_spans``) to save ``safe_detach``'s call.
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


def _submit(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    if args:
        return wrapped(contextvars.copy_context().run, *args, **kwargs)
    return wrapped(*args, **kwargs)


def _thread_start(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    if not getattr(instance, "_otelmw_ctx", None):
        instance._otelmw_ctx = contextvars.copy_context()
    return wrapped(*args, **kwargs)


def _thread_run(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    ctx = getattr(instance, "_otelmw_ctx", None)
    if ctx is None:
        return wrapped(*args, **kwargs)
    return ctx.run(wrapped, *args, **kwargs)


_lock = threading.Lock()
_installed = False
# Enter the carried context around what calls ``run()``, so Thread subclasses
# that override ``run`` are covered too (wrapping ``Thread.run`` misses them).
_THREAD_RUN = "_bootstrap_inner" if hasattr(threading.Thread, "_bootstrap_inner") else "run"


def instrument_threads() -> None:
    """Propagate contextvars (OTel context + otelmw runtime context) into
    ``ThreadPoolExecutor`` tasks and ``threading.Thread`` targets. Idempotent."""
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

"""Failure accounting: warn once per distinct failure, count every one.

A callback that fails the same way on every call would otherwise flood the log
(Hermes logs a WARNING per failure). The first occurrence of a failure
signature is logged at WARNING, identical repeats at DEBUG; every occurrence is
counted. ``reset()`` (called on plugin reload) forgets what was reported.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from .registry import Layer

logger = logging.getLogger("otelmw")

# Failure categories; the telemetry layer maps them onto its counters.
MIDDLEWARE = "middleware"
HOOK = "hook"
NORMALIZE = "normalize"
MEMORY = "memory"
INSTRUMENTATION = "instrumentation"
PLUGIN = "plugin"

FailureListener = Callable[[str, str, str, BaseException | None], None]


def safe_str(value: Any) -> str:
    """``str(value)`` that never raises (hostile ``__str__``)."""
    try:
        return str(value)
    except Exception:
        try:
            return f"<{type(value).__qualname__}>"
        except Exception:
            return "<unprintable>"


def signature_mismatch_hint(exc: BaseException, provided: Iterable[str]) -> str | None:
    """If ``exc`` is a call-signature TypeError, name the fields otelmw provides."""
    if type(exc) is not TypeError:
        return None
    text = safe_str(exc)
    if "argument" not in text or not (
        "unexpected keyword" in text or "missing" in text or "positional" in text
    ):
        return None
    return "the callback's signature does not match; fields provided: " + ", ".join(
        sorted(provided)
    )


class FailureLog:
    """Thread-safe warn-once memory plus per-(category, kind, name) counters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: set[tuple[Any, ...]] = set()
        self.counts: Counter[tuple[str, str, str]] = Counter()
        self._listeners: list[FailureListener] = []

    def add_listener(self, listener: FailureListener) -> None:
        with self._lock:
            self._listeners = [*self._listeners, listener]

    def remove_listener(self, listener: FailureListener) -> None:
        with self._lock:
            self._listeners = [x for x in self._listeners if x is not listener]

    def reset(self) -> None:
        """Forget what was reported (plugin reload). Counts are kept."""
        with self._lock:
            self._seen.clear()

    def total(self, category: str | None = None) -> int:
        with self._lock:
            return sum(v for k, v in self.counts.items() if category is None or k[0] == category)

    def record(
        self,
        category: str,
        kind: str,
        name: str,
        message: str,
        exc: BaseException | None = None,
        *,
        signature: Any = None,
    ) -> None:
        """Count a failure; log at WARNING the first time its signature is seen."""
        if signature is None:
            signature = (type(exc).__name__, safe_str(exc)[:200]) if exc is not None else message
        key = (category, kind, name, signature)
        with self._lock:
            self.counts[(category, kind, name)] += 1
            first = key not in self._seen
            if first:
                if len(self._seen) > 10_000:  # bounded: a pathological stream of unique errors
                    self._seen.clear()
                self._seen.add(key)
            listeners = self._listeners
        level = logging.WARNING if first else logging.DEBUG
        if logger.isEnabledFor(level):
            suffix = "" if first else " (repeat)"
            logger.log(level, "otelmw %s %s %r: %s%s", category, kind, name, message, suffix)
        for listener in listeners:
            try:
                listener(category, kind, name, exc)
            except Exception:  # a broken listener must not break the call path
                pass


# otelmw's own errors by the home they are exported from in ``error.type`` (the module
# users imported them from before ``otelmw/core/`` existed: dashboards group by it).
_EXPORTED_HOMES: dict[type[BaseException], str] = {}

_E = TypeVar("_E", bound=type[BaseException])


def exported_from(home: str) -> Callable[[_E], _E]:
    """Class decorator: an otelmw error whose ``error.type`` names ``home`` (an old module
    path kept importable by ``otelmw.STABLE_MODULES``) instead of its defining module."""

    def register(cls: _E) -> _E:
        _EXPORTED_HOMES[cls] = f"{home}.{cls.__qualname__}"
        return cls

    return register


def exported_type_name(t: type) -> str:
    """The fully qualified name of type ``t`` as otelmw exports it: an otelmw error's
    stable home (``exported_from``), else its module and qualified name."""
    return _EXPORTED_HOMES.get(t) or f"{t.__module__}.{t.__qualname__}"


def error_type(exc: BaseException) -> str:
    """The fully qualified type of ``exc`` as exported in ``error.type``."""
    return exported_type_name(type(exc))


def describe(exc: BaseException) -> str:
    return f"{error_type(exc)}: {safe_str(exc)}"


@exported_from("otelmw.chain")
class AsyncMiddlewareInSyncCallError(TypeError):
    """An ``async def`` callback was registered but the host call is synchronous."""


def record_middleware_failure(
    failures: FailureLog, layer: Layer, phase: str, exc: BaseException | None, msg: str,
    provided: Any = (),
) -> None:
    """Count and warn once: a middleware callback failed (fail-open)."""
    if exc is not None:
        hint = signature_mismatch_hint(exc, provided)
        msg = f"{msg}: {describe(exc)}" + (f" ({hint})" if hint else "")
    failures.record(MIDDLEWARE, layer.kind, layer.name, msg, exc,
                    signature=(phase, type(exc).__name__ if exc else msg, safe_str(exc)[:200]))

"""How a process ends: telemetry flushed on SIGTERM/SIGINT and in multiprocessing children.

* **Signals.** ``install_signal_flush(flush)`` puts otelmw's handler in front of
  SIGTERM and SIGINT. On a signal it flushes (``flush(final)``; ``final`` when the
  default action will end the process, so otelmw shuts down completely), then runs
  whatever the program would have run: its own handler — also one it installs
  *after* otelmw, since ``signal.signal``/``signal.getsignal`` keep showing the
  program its own handlers while otelmw's stays in front — or the default action
  (the process dies by the signal, exit status 143 / ``-15``). Python's own SIGINT
  handler (``KeyboardInterrupt``) is chained without a flush: the exception unwinds
  the program and the exit flush runs. A signal the process inherited as ignored
  stays ignored; a second signal during the flush skips straight to the handler;
  a signal arriving while the process is already shutting telemetry down waits
  for that shutdown (within its budget), then takes its course.
* **multiprocessing children.** Children started by ``multiprocessing`` with the
  ``fork`` method (``Process``, ``Pool`` workers) leave through ``os._exit`` and never
  run ``atexit``; otelmw registers its shutdown as a multiprocessing exit finalizer
  in every such child (the SDK's batch processors restart their worker threads
  after a fork themselves). ``Pool.terminate()`` stops workers with SIGTERM: the
  signal flush covers those.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

logger = logging.getLogger("otelmw")

FLUSH_SIGNALS = (signal.SIGTERM, signal.SIGINT)

Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None

# Process-wide runtime state, not settings (signal dispositions belong to the process):
# the real ``signal`` functions, the current telemetry's flush once otelmw fronts the
# signals, the program's handlers behind otelmw's, whether a flush is under way and the
# signals held back during the main thread's shutdown.
_real_signal = signal.signal
_real_getsignal = signal.getsignal
_flush: Callable[[bool], object] | None = None
_chained: dict[int, Handler] = {}  # per otelmw-fronted signal: what the program set
_flushing = False
_deferred: list[int] | None = None  # signals that arrived during the main thread's shutdown


@contextmanager
def signals_deferred() -> Iterator[None]:
    """While the main thread shuts telemetry down (atexit, a multiprocessing child's
    exit), a SIGTERM/SIGINT waits for it to finish, then takes its course: dying
    half-way through would lose what the shutdown was about to export."""
    global _deferred
    if _deferred is not None or threading.current_thread() is not threading.main_thread():
        yield
        return
    _deferred = []
    try:
        yield
    finally:
        pending, _deferred = _deferred, None
        for signum in dict.fromkeys(pending):
            _on_signal(signum, None)


def _on_signal(signum: int, frame: FrameType | None) -> Any:
    global _flushing
    if _deferred is not None:
        _deferred.append(signum)
        return None
    handler = _chained.get(signum, signal.SIG_DFL)
    if handler is not signal.default_int_handler and not _flushing and _flush is not None:
        _flushing = True
        try:
            _flush(handler is signal.SIG_DFL)
        except Exception:  # never let the flush stand between the signal and its action
            logger.debug("otelmw: flush on signal %d failed", signum, exc_info=True)
        finally:
            _flushing = False
    if callable(handler):
        return handler(signum, frame)
    _real_signal(signum, signal.SIG_DFL)  # the default action, as if otelmw were not here
    signal.raise_signal(signum)
    return None


def _signal(signalnum: Any, handler: Any) -> Any:
    """``signal.signal`` as the program sees it: for SIGTERM/SIGINT it records the
    program's handler and puts otelmw's back in front (ignoring is passed through)."""
    previous = _real_signal(signalnum, handler)  # validates thread, number and handler
    sig = int(signalnum)
    if sig not in FLUSH_SIGNALS or _flush is None:
        return previous
    if sig in _chained:
        previous = _chained[sig]
    _chained[sig] = _real_getsignal(sig)
    if _chained[sig] is not signal.SIG_IGN:
        _real_signal(signalnum, _on_signal)
    return previous


def _getsignal(signalnum: Any) -> Any:
    sig = int(signalnum)
    return _chained[sig] if sig in _chained else _real_getsignal(signalnum)


def install_signal_flush(flush: Callable[[bool], object]) -> bool:
    """Front SIGTERM and SIGINT with ``flush``; False when not on the main thread
    (Python allows signal handlers only there) — the exit flush still runs."""
    global _flush
    if threading.current_thread() is not threading.main_thread():
        logger.info("otelmw: configure() not on the main thread; no flush on SIGTERM/SIGINT")
        return False
    _flush = flush
    for sig in FLUSH_SIGNALS:
        if sig in _chained:
            continue
        current = _real_getsignal(sig)
        if current is None or current is signal.SIG_IGN:
            continue  # ignored (nohup, a supervisor) or set from C: leave it alone
        _real_signal(sig, _on_signal)
        _chained[sig] = current
    signal.signal = _signal  # type: ignore[assignment]
    signal.getsignal = _getsignal
    return True


def flush_in_multiprocessing_children(shutdown: Callable[[], object]) -> None:
    """Run ``shutdown`` when a ``multiprocessing`` child leaves (``os._exit`` skips
    ``atexit``). Armed when ``multiprocessing.util`` is imported, which every
    multiprocessing start does, so programs that never use it pay nothing."""
    import wrapt

    def arm(util: Any) -> None:
        def in_child(_owner: object) -> None:
            # Lowest priority: after the program's own exit finalizers, which may
            # still produce spans.
            util.Finalize(None, shutdown, exitpriority=-(2**31))

        util.register_after_fork(_owner_token, in_child)

    wrapt.register_post_import_hook(arm, "multiprocessing.util")


class _Owner:
    """Keeps the after-fork registration alive (the registry holds it weakly)."""


_owner_token = _Owner()

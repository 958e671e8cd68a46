"""Running work on several threads at once and collecting what the threads raised."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

__all__ = ["run_in_threads"]


def run_in_threads(targets: Iterable[Callable[[], object]], *,
                   timeout: float | None = None) -> list[BaseException]:
    """Start one ``threading.Thread`` per target, join them all, return what they raised.

    An exception in a thread is otherwise only printed; returning it lets the test assert
    ``== []``. A thread still running after ``timeout`` seconds adds a ``TimeoutError``.
    ``threading.Thread`` is looked up at call time, so ``instrument_threads`` applies.
    """
    errors: list[BaseException] = []

    def guarded(target: Callable[[], object]) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except BaseException as exc:  # handed to the caller, which asserts on it
                errors.append(exc)
        return run

    threads = [threading.Thread(target=guarded(target)) for target in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    errors.extend(TimeoutError(f"{t.name} still running after {timeout}s")
                  for t in threads if t.is_alive())
    return errors

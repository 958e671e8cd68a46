"""The embedded default store: OTLP-JSON lines on local disk, rotated by size.

Files are ``<signal>-<UTC time>-<pid>-<n>.jsonl`` under ``OTELMW_DATA_DIR``
(default ``./.otelmw``); a file rolls over at ``OTELMW_DATA_MAX_BYTES`` (16 MiB)
and only the newest ``OTELMW_DATA_MAX_FILES`` (20) per signal are kept — except files
another live process is still writing, which are never deleted (see ``RotatingLines``).
Each line is one export request in OTLP/JSON (``otlp_json``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from ...config import settings as cfg

try:  # POSIX: the lock that keeps a live writer's file from being pruned
    import fcntl
except ImportError:  # pragma: no cover - Windows: pruning by age alone
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger("otelmw")

#: The store's subdirectory where what an unreachable endpoint refused is kept
#: (``export.spool`` writes it, ``replay`` sends it).
SPOOL_SUBDIR = "spool"


def data_dir(settings: cfg.Settings | None = None) -> Path:
    """The store directory, ``OTELMW_DATA_DIR`` (default ``./.otelmw``) of ``settings``,
    else of the environment's (loaded here: a bad ``OTELMW_DATA_DIR`` raises
    ``ValueError``)."""
    s = settings if settings is not None else cfg.load(strict=[cfg.DATA_DIR])
    return s[cfg.DATA_DIR]


_write_errors: dict[str, str] = {}  # "<path>: <OS error>" → signal, first failure each
_write_errors_lock = threading.Lock()


def _write_failed(signal: str, exc: OSError, where: Any) -> None:
    """One WARNING per distinct store write error, naming the path and the OS error
    (the failed batch is counted as dropped by the exporter's caller)."""
    problem = f"{exc.filename or where}: {exc.strerror or exc}"
    with _write_errors_lock:
        first = problem not in _write_errors
        _write_errors.setdefault(problem, signal)
    if first:
        logger.warning("otelmw: cannot write the embedded store: %s (%s and anything else "
                       "written there is not stored)", problem, signal)


def store_write_errors() -> list[str]:
    """Every distinct store write error of this process, ``"<path>: <OS error>"``."""
    with _write_errors_lock:
        return list(_write_errors)


def file_order(path: Path) -> tuple[float, str]:
    """Oldest first: modification time, then name (the counter is zero-padded)."""
    try:
        return (path.stat().st_mtime, path.name)
    except OSError:  # removed meanwhile by another writer's pruning
        return (0.0, path.name)


class RotatingLines:
    """Append-only JSON lines per signal, rotated by size, bounded file count.

    Each line goes out with unbuffered ``os.write`` calls on an ``O_APPEND`` file, and
    the size of the file up to its last whole line is known: a write that fails
    halfway (disk full, file-size limit) is cut back to that line boundary, so no torn
    line stays behind to be merged with the next one, and writing goes on once there is
    room again. The file being written is held under an advisory lock (``flock``), and
    pruning never deletes a locked file: another process's live file survives however
    old its modification time. A forked child writes its own file."""

    def __init__(self, signal: str, directory: Path | None = None,
                 settings: cfg.Settings | None = None) -> None:
        """``settings``: already validated ones (``configure()``); else the
        environment's, and an invalid limit raises ``ValueError``."""
        self.signal = signal
        s = settings if settings is not None else cfg.load(
            strict=[cfg.DATA_DIR, cfg.DATA_MAX_BYTES, cfg.DATA_MAX_FILES])
        self.dir = directory if directory is not None else s[cfg.DATA_DIR]
        self.max_bytes = s[cfg.DATA_MAX_BYTES]
        self.max_files = s[cfg.DATA_MAX_FILES]
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._path: Path | None = None
        self._size = 0  # bytes up to the end of the last whole line
        self._torn = False  # a failed write could not be cut back yet
        self._n = 0
        _writers.add(self)

    def _open(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        while True:
            self._n += 1
            # zero-padded counter: names sort in write order when mtimes tie (coarse clock)
            path = self.dir / f"{self.signal}-{stamp}-{os.getpid()}-{self._n:06d}.jsonl"
            try:  # exclusive: never append to another writer's (possibly torn) file
                fd = os.open(path, _OPEN_FLAGS, 0o644)
            except FileExistsError:
                continue
            if _hold(fd, path):
                break
            os.close(fd)  # pruned by another writer between create and lock: next name
        self._fd, self._path, self._size, self._torn = fd, path, 0, False
        self._prune(path)

    def _prune(self, current: Path) -> None:
        """Delete the oldest files beyond ``max_files``, skipping every file a live
        writer holds (so with more live writers than that, all their files stay)."""
        files = sorted((p for p in self.dir.glob(f"{self.signal}-*.jsonl") if p != current),
                       key=file_order)
        excess = len(files) + 1 - self.max_files
        for old in files:
            if excess <= 0:
                break
            if _delete_unless_held(old):
                excess -= 1

    def _cut_back(self) -> bool:
        """Cut the file back to its last whole line; True when it ends on one."""
        if self._fd is None:
            return True
        try:
            os.ftruncate(self._fd, self._size)
        except OSError:
            self._torn = True
            return False
        self._torn = False
        return True

    def _close_file(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.close(fd)  # releases the lock

    def write(self, line: str) -> None:
        data = (line + "\n").encode("utf-8", "surrogatepass")
        with self._lock:
            try:
                if (self._fd is None or self._size >= self.max_bytes
                        or (self._torn and not self._cut_back())):
                    self._close_file()  # a torn tail that cannot be cut: start afresh
                    self._open()
                assert self._fd is not None
                view, done = memoryview(data), 0
                while done < len(data):
                    done += os.write(self._fd, view[done:])
            except OSError as exc:
                self._cut_back()
                _write_failed(self.signal, exc, self._path or self.dir)
                raise
            self._size += len(data)

    def close(self) -> None:
        with self._lock:
            self._close_file()

    def _after_fork_in_child(self) -> None:
        # The parent's file (and its lock) are the parent's: the child starts its own.
        self._lock = threading.Lock()
        self._close_file()
        self._path, self._size, self._torn, self._n = None, 0, False, 0


_OPEN_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND
               | getattr(os, "O_CLOEXEC", 0))
_writers: weakref.WeakSet[RotatingLines] = weakref.WeakSet()


def _children_write_their_own_files() -> None:
    for writer in list(_writers):
        writer._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_children_write_their_own_files)


def _hold(fd: int, path: Path) -> bool:
    """Lock the file just created for as long as it is written; False when ``path`` is
    no longer that file (another writer pruned it before the lock was taken)."""
    if fcntl is not None:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except OSError:
        return False


def _delete_unless_held(path: Path) -> bool:
    """Delete ``path`` unless a live writer holds its lock; True when it is gone."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # being written by a live process
            except OSError:
                pass  # no locks on this file system: prune by age alone
        try:
            os.unlink(path)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return True
    finally:
        os.close(fd)



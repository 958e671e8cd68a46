"""Running the real ``otelmw`` command in tests: in a subprocess with pipes, or on
a pseudo-terminal of a chosen size; and reading its waterfalls back."""

from __future__ import annotations

import fcntl
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

TIMEOUT = 90
TRACE_LINE = re.compile(r"^trace ([0-9a-f]{32})$")
# A waterfall row: START TOOK, then tree glyphs and the span's name, then its bar.
SPAN_ROW = re.compile(r"^ *(?P<start>[0-9.]+m?s|\d+m\d\ds) +(?P<took>[0-9.]+m?s|\d+m\d\ds)  "
                      r"(?P<tree>[│├└─ ]*)(?P<name>[^│├└─ ].*?)(?P<error> \[ERROR\])? *│")
SGR = re.compile(r"\x1b\[[0-9;]*m")


def otelmw_cmd() -> list[str]:
    beside = Path(sys.executable).with_name("otelmw")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("otelmw")
    return [found] if found else [sys.executable, "-m", "otelmw.cli"]


def otelmw(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*otelmw_cmd(), *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=TIMEOUT)


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def waterfall_rows(text: str) -> list[tuple[int, str]]:
    """(depth, span name) for each waterfall row of ``text`` (no colour codes)."""
    rows = []
    for line in text.splitlines():
        m = SPAN_ROW.match(line)
        if m:
            rows.append((len(m.group("tree")) // 3, m.group("name").rstrip()))
    return rows


def in_pty(*args: str, env: dict[str, str], cwd: Path, columns: int, lines: int = 50,
           timeout: float = TIMEOUT) -> tuple[int, str]:
    """Run ``otelmw ARGS`` with a pseudo-terminal of ``columns`` x ``lines`` as its
    stdout and stderr; returns (exit status, everything it wrote)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
    env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen([*otelmw_cmd(), *args], env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    try:
        out = read_terminal(master, proc, timeout)
        if out is None:
            proc.send_signal(signal.SIGKILL)
            raise AssertionError(f"otelmw {args} did not finish in {timeout}s")
        status = proc.wait(timeout=10)
    finally:
        os.close(master)
    return status, out


def read_terminal(master: int, proc: subprocess.Popen[Any], timeout: float) -> str | None:
    """Everything ``proc`` writes to the pseudo-terminal ``master`` until it closes its
    side or exits (the terminal's \r\n turned back into \n); ``None`` when it is still
    writing after ``timeout`` seconds."""
    out = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if select.select([master], [], [], 0.2)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed its side
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    else:
        return None
    return out.decode("utf-8", errors="replace").replace("\r\n", "\n")


def pythonpath(*dirs: os.PathLike[str] | str) -> str:
    """``dirs`` first, then this process' own PYTHONPATH (a worktree's code under test)."""
    return os.pathsep.join(filter(None, [*map(str, dirs), os.environ.get("PYTHONPATH")]))

"""A real Arize Phoenix on 127.0.0.1 for backend round-trip tests, read back by its REST API.

Phoenix runs from its own virtual environment (``components.phoenix_python()``: it pins
a dependency set of its own that cannot share a matrix environment) in a temporary
working directory (sqlite database, pid files: ``TMPDIR`` points there too), with its
telemetry, external resources, agent assistant and MCP server off. It takes OTLP/HTTP
traces on its UI port at ``/v1/traces``. Its OTLP/gRPC receiver would bind ``[::]``
whatever ``PHOENIX_HOST`` says, so the launcher does not start it (nothing here sends
gRPC); :meth:`PhoenixServer.grpc_listening` lets a test check that.

It stops by itself: :meth:`PhoenixServer.stop` (or the ``with`` block) ends it, and if
the test process dies first its stdin pipe closes and the launcher exits. Nothing but
the process it started is ever signalled.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from _support import Service, free_port

__all__ = ["PhoenixServer", "PhoenixSpan", "PhoenixStartError"]

HOST = "127.0.0.1"
STARTUP_TIMEOUT_S = 240.0  # imports alone take 15 s of CPU; much more on a busy machine
STOP_TIMEOUT_S = 15.0

# Run by Phoenix's interpreter. The gRPC receiver is switched off through the
# ``disabled`` flag its server class has for read-only mode (HTTP ingestion stays on);
# a Phoenix whose class lost the flag fails here rather than binding [::].
LAUNCHER = """
import inspect, os, sys, threading
from phoenix.server import grpc_server

if "disabled" not in inspect.signature(grpc_server.GrpcServer.__init__).parameters:
    sys.exit("phoenix.server.grpc_server.GrpcServer has no 'disabled' flag any more")
_init = grpc_server.GrpcServer.__init__

def _init_disabled(self, *args, **kwargs):
    kwargs["disabled"] = True
    _init(self, *args, **kwargs)

grpc_server.GrpcServer.__init__ = _init_disabled

def _exit_with_parent():  # stdin is a pipe from the test process: EOF means it is gone
    sys.stdin.buffer.read()
    os._exit(0)

threading.Thread(target=_exit_with_parent, daemon=True).start()
from phoenix.server.main import main
sys.argv = ["phoenix", "serve", "--no-ui"]
main()
"""


class PhoenixStartError(RuntimeError):
    """Phoenix did not come up; the message ends with its log's tail."""


@dataclass(frozen=True, slots=True)
class PhoenixSpan:
    """One span as Phoenix's REST API returns it: the attributes otelmw sent plus the
    OpenInference ones Phoenix derived from them (flattened, dotted keys)."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    span_kind: str  # Phoenix's classification: AGENT, LLM, TOOL, CHAIN, ..., UNKNOWN
    status_code: str  # OK | ERROR | UNSET
    status_message: str
    start_time: datetime
    attributes: dict[str, Any]

    @classmethod
    def from_json(cls, item: dict[str, Any]) -> PhoenixSpan:
        context = item["context"]
        return cls(trace_id=context["trace_id"], span_id=context["span_id"],
                   parent_id=item.get("parent_id"), name=item["name"],
                   span_kind=item["span_kind"], status_code=item["status_code"],
                   status_message=item.get("status_message") or "",
                   start_time=datetime.fromisoformat(item["start_time"]),
                   attributes=dict(item.get("attributes") or {}))

    def messages(self, direction: str) -> list[dict[str, Any]]:
        """The ``input`` or ``output`` messages Phoenix shows for an LLM span
        (``llm.<direction>_messages.<i>.message.<field>``), in order, each as
        ``{field: value}`` with nested keys left dotted (``tool_calls.0.tool_call.id``)."""
        prefix = f"llm.{direction}_messages."
        by_index: dict[int, dict[str, Any]] = {}
        for key, value in self.attributes.items():
            if not key.startswith(prefix):
                continue
            index, _, rest = key.removeprefix(prefix).partition(".")
            by_index.setdefault(int(index), {})[rest.removeprefix("message.")] = value
        return [by_index[i] for i in sorted(by_index)]


class PhoenixServer(Service):
    """``with PhoenixServer(python, workdir) as phoenix:``, a Phoenix on free ports."""

    def __init__(self, python: str, workdir: Path,
                 startup_timeout: float = STARTUP_TIMEOUT_S) -> None:
        self.python = python
        self.workdir = workdir
        self.startup_timeout = startup_timeout
        self.port = free_port()
        self.grpc_port = free_port()  # configured, never bound (see LAUNCHER)
        self.log_path = workdir / "phoenix.log"
        self.started_in_s: float | None = None  # wall time from spawn to REST answering
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def traces_endpoint(self) -> str:
        """Where OTLP/HTTP traces go: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``."""
        return f"{self.url}/v1/traces"

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PHOENIX_", "OTEL_", "OTELMW_", "PYTHON", "VIRTUAL_ENV"))}
        env.update(
            PHOENIX_HOST=HOST, PHOENIX_PORT=str(self.port), PHOENIX_GRPC_PORT=str(self.grpc_port),
            PHOENIX_WORKING_DIR=str(self.workdir), TMPDIR=str(self.workdir),
            PHOENIX_ALLOW_EXTERNAL_RESOURCES="false", PHOENIX_TELEMETRY_ENABLED="false",
            PHOENIX_DISABLE_AGENT_ASSISTANT="true", PHOENIX_AGENTS_DISABLE_BASH="true",
            PHOENIX_ENABLE_MCP_SERVER="false", PHOENIX_LOG_MIGRATIONS="false",
            PYTHONUNBUFFERED="1")
        return env

    def start(self) -> PhoenixServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("wb")
        began = time.monotonic()
        self._proc = subprocess.Popen([self.python, "-c", LAUNCHER], env=self.environment(),
                                      cwd=self.workdir, stdin=subprocess.PIPE,
                                      stdout=self._log, stderr=subprocess.STDOUT)
        deadline = began + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self.stop()
                raise PhoenixStartError(f"Phoenix exited with {self._proc.returncode}\n"
                                        + self.log_tail())
            with contextlib.suppress(OSError):
                self._get("/v1/projects", timeout=2.0)
                self.started_in_s = time.monotonic() - began
                return self
            time.sleep(0.25)
        self.stop()
        raise PhoenixStartError(f"Phoenix did not answer on {self.url} within "
                                f"{self.startup_timeout:.0f}s\n" + self.log_tail())

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=STOP_TIMEOUT_S)
            if proc.stdin is not None:
                proc.stdin.close()
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, lines: int = 40) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return "(no log)"

    def grpc_listening(self) -> bool:
        """Whether anything accepts connections on the configured gRPC port."""
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(1.0)
            return sock.connect_ex((HOST, self.grpc_port)) == 0

    # ------------------------------------------------------------------ REST API
    def _get(self, path: str, timeout: float = 10.0) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=timeout) as response:
            return json.load(response)

    def projects(self) -> list[str]:
        return [p["name"] for p in self._get("/v1/projects")["data"]]

    def spans(self, project: str) -> list[PhoenixSpan]:
        """Every span of ``project`` (none while Phoenix has not seen the project)."""
        spans: list[PhoenixSpan] = []
        cursor: str | None = None
        while True:
            query = {"limit": "1000", "sort": "start_time", "order": "asc"}
            if cursor:
                query["cursor"] = cursor
            path = (f"/v1/projects/{urllib.parse.quote(project, safe='')}/spans?"
                    + urllib.parse.urlencode(query))
            try:
                page = self._get(path)
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    return spans
                raise
            spans.extend(PhoenixSpan.from_json(item) for item in page["data"])
            cursor = page.get("next_cursor")
            if not cursor:
                return spans

    def wait_for_spans(self, project: str, count: int, timeout: float = 30.0,
                       settle: float = 0.5) -> list[PhoenixSpan]:
        """``project``'s spans once there are at least ``count`` and no more arrive
        for ``settle`` seconds (Phoenix inserts in batches, off the request path)."""
        deadline = time.monotonic() + timeout
        seen: list[PhoenixSpan] = []
        while time.monotonic() < deadline:
            now = self.spans(project)
            if len(now) >= count and len(now) == len(seen):
                return now
            seen = now
            time.sleep(settle)
        raise AssertionError(f"Phoenix project {project!r} has {len(seen)} spans after "
                             f"{timeout:.0f}s, expected at least {count}")

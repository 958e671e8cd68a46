"""The real observability stack on 127.0.0.1: our collector distribution, Jaeger v2 and
Prometheus, as processes the stack tests start, query and stop.

Binaries: ``collector/build.sh`` builds the collector (``collector/builder-config.yaml``)
and Jaeger (``collector/jaeger/go.mod``) into ``.cache/stack/<name>-<key>/``;
scripts/test-all.sh hands them over as ``OTELMW_OTELCOL_BIN`` / ``OTELMW_JAEGER_BIN``.
A plain ``pytest`` after one build finds the newest completed build itself. Missing:
a failure under ``CI``, a skip elsewhere (``components.unavailable``).

Configs: the repository's collector configs are run as shipped, with only what is
host-specific substituted (:func:`render_collector_config`): listeners ``0.0.0.0:N``
become ``127.0.0.1:<free port>``, the compose service names and container paths become
the test's. Every process binds 127.0.0.1, writes its output to a log file in the
test's temporary directory and dies with the test process (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from _support import ReceivedLog, ReceivedSpan, decode_otlp, free_port, hex_ids_to_base64
from _support.components import REPO, unavailable

HOST = "127.0.0.1"
OTELCOL_BIN = "OTELMW_OTELCOL_BIN"
JAEGER_BIN = "OTELMW_JAEGER_BIN"
COLLECTOR_DIR = REPO / "collector"
LOCAL_CONFIG = COLLECTOR_DIR / "otelcol-config.yaml"
AGENT_CONFIG = COLLECTOR_DIR / "gateway.yaml"
GATEWAY_CONFIG = COLLECTOR_DIR / "gateway-tier.yaml"
JAEGER_CONFIG = COLLECTOR_DIR / "jaeger" / "config.yaml"
STARTUP_TIMEOUT_S = 60.0


# ------------------------------------------------------------------------ binaries
def stack_binary(variable: str, name: str, binary: str) -> str:
    """``$variable`` as scripts/test-all.sh exports it, else the newest completed
    ``.cache/stack/<name>-*/<binary>``; missing: fail under CI, skip elsewhere."""
    named = os.environ.get(variable, "").strip()
    if named:
        if not os.access(named, os.X_OK):
            import pytest

            pytest.fail(f"{variable}={named} is not an executable", pytrace=False)
        return named
    built = sorted((d for d in (REPO / ".cache" / "stack").glob(f"{name}-*")
                    if (d / ".complete").exists() and os.access(d / binary, os.X_OK)),
                   key=lambda d: (d / ".complete").stat().st_mtime)
    if built:
        return str(built[-1] / binary)
    unavailable(f"{name} ({variable}, or `collector/build.sh {name}`)")


def otelcol_bin() -> str:
    return stack_binary(OTELCOL_BIN, "otelcol", "otelcol-otelmw")


def jaeger_bin() -> str:
    return stack_binary(JAEGER_BIN, "jaeger", "jaeger")


def prometheus_bin() -> str:
    path = shutil.which("prometheus") or (
        "/usr/bin/prometheus" if os.access("/usr/bin/prometheus", os.X_OK) else None)
    if path is None:
        unavailable("`prometheus`")
    return path


# ------------------------------------------------------------------------ processes
def _die_with_parent() -> None:  # preexec_fn: SIGTERM the child when the test dies
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


_PREEXEC: Callable[[], None] | None = _die_with_parent if sys.platform == "linux" else None


def http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()


def wait_until(what: str, check: Callable[[], bool], timeout: float = STARTUP_TIMEOUT_S,
               procs: Iterable[Process] = (), interval: float = 0.2) -> None:
    """Poll ``check`` (connection errors count as False) until it holds; fails with the
    logs of ``procs`` when one of them exits or the time is up."""
    procs = list(procs)
    deadline = time.monotonic() + timeout
    while True:
        for proc in procs:
            if proc.popen is not None and proc.popen.poll() is not None:
                raise AssertionError(f"{what}: {proc.name} exited with "
                                     f"{proc.popen.returncode}\n{proc.tail()}")
        with contextlib.suppress(OSError, ValueError, KeyError, IndexError):
            if check():
                return
        if time.monotonic() > deadline:
            tails = "\n".join(p.tail() for p in procs)
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n{tails}")
        time.sleep(interval)


@dataclass
class Process:
    """One long-running program with its output in ``log``; restartable."""

    name: str
    argv: list[str]
    log: Path
    env: dict[str, str] | None = None
    cwd: Path | None = None
    stdin_pipe: bool = False  # a pipe held open until stop (programs that exit on EOF)
    popen: subprocess.Popen[bytes] | None = None
    starts: int = 0

    def start(self) -> None:
        assert self.popen is None or self.popen.poll() is not None, f"{self.name} is running"
        self.starts += 1
        with self.log.open("ab") as out:
            out.write(f"\n===== start {self.starts}: {' '.join(self.argv)}\n".encode())
            out.flush()
            self.popen = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE if self.stdin_pipe else subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT,
                env=self.env, cwd=self.cwd, preexec_fn=_PREEXEC)

    def stop(self, timeout: float = 15.0) -> None:
        proc = self.popen
        if proc is None or proc.poll() is not None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    @property
    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tail(self, chars: int = 4000) -> str:
        return f"--- {self.name} ({self.log}) ---\n{self.text()[-chars:]}"


# ------------------------------------------------------------------------ configs
def _yaml() -> Any:
    try:
        import yaml
    except ImportError:
        unavailable("PyYAML")
    return yaml


def load_yaml(path: Path) -> Any:
    return _yaml().safe_load(path.read_text(encoding="utf-8"))


def dump_yaml(data: Any, path: Path) -> Path:
    path.write_text(_yaml().safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@dataclass
class Ports:
    """Container port -> a free 127.0.0.1 port, allocated on first use."""

    mapping: dict[int, int] = field(default_factory=dict)

    def __getitem__(self, port: int) -> int:
        if port not in self.mapping:
            self.mapping[port] = free_port()
        return self.mapping[port]


def render_collector_config(path: Path, ports: Ports, replace: Mapping[str, str]) -> Any:
    """The config at ``path`` with only host-specific values substituted: every
    ``0.0.0.0:N`` listener becomes ``127.0.0.1:ports[N]`` (the telemetry reader's
    ``host``/``port`` too), and each string starting with a key of ``replace`` (a compose
    service address, a container path) gets that prefix replaced."""
    config = load_yaml(path)

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        if isinstance(node, str):
            if node.startswith("0.0.0.0:"):
                return f"{HOST}:{ports[int(node.rsplit(':', 1)[1])]}"
            for old, new in replace.items():
                if node == old or node.startswith(old.rstrip("/") + "/"):
                    return new + node[len(old):]
        return node

    rendered = walk(config)
    for reader in rendered["service"]["telemetry"]["metrics"]["readers"]:
        prometheus = reader["pull"]["exporter"]["prometheus"]
        assert prometheus["host"] == "0.0.0.0", prometheus
        prometheus["host"], prometheus["port"] = HOST, ports[int(prometheus["port"])]
    return rendered


# ------------------------------------------------------------------------ OTLP JSON
def spans_of(traces_data: Mapping[str, Any]) -> list[ReceivedSpan]:
    """Spans of an OTLP/JSON TracesData (``resourceSpans``), hex ids as OTLP/JSON has them."""
    request = json_format.ParseDict(hex_ids_to_base64(dict(traces_data)),
                                    ExportTraceServiceRequest(), ignore_unknown_fields=True)
    return list(decode_otlp("traces", request))


def logs_of(logs_data: Mapping[str, Any]) -> list[ReceivedLog]:
    request = json_format.ParseDict(hex_ids_to_base64(dict(logs_data)),
                                    ExportLogsServiceRequest(), ignore_unknown_fields=True)
    return list(decode_otlp("logs", request))


def read_store(data_dir: Path, signal_name: str) -> list[Any]:
    """Everything otelmw's embedded store holds for ``signal_name`` (traces, logs), from
    its OTLP-JSON lines files (not the spool)."""
    items: list[Any] = []
    for path in sorted(data_dir.glob(f"{signal_name}-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                doc = json.loads(line)
                items += spans_of(doc) if signal_name == "traces" else logs_of(doc)
    return items


def read_jsonl_logs(path: Path) -> list[ReceivedLog]:
    """Log records of a collector ``file`` exporter's output (one LogsData per line)."""
    records: list[ReceivedLog] = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                records += logs_of(json.loads(line))
    return records


# ------------------------------------------------------------------------ Jaeger
@dataclass
class Jaeger:
    """Jaeger v2 (in-memory storage) started with ``collector/jaeger/config.yaml``;
    its ports come from the environment that config reads."""

    process: Process
    ports: dict[str, int]

    @property
    def otlp_grpc(self) -> str:
        return f"{HOST}:{self.ports['JAEGER_OTLP_GRPC_PORT']}"

    @property
    def query_url(self) -> str:
        return f"http://{HOST}:{self.ports['JAEGER_QUERY_HTTP_PORT']}"

    def start(self) -> None:
        self.process.start()
        wait_until("Jaeger to be healthy", lambda: http_get(
            f"http://{HOST}:{self.ports['JAEGER_HEALTH_PORT']}/status")[0] == 200,
            procs=[self.process])

    def get(self, path: str, **params: str) -> tuple[int, Any]:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        status, body = http_get(f"{self.query_url}{path}{query}")
        try:
            return status, json.loads(body) if body else None
        except ValueError:
            return status, body.decode("utf-8", "replace")

    def trace(self, trace_id: str) -> list[ReceivedSpan]:
        """``/api/v3/traces/{id}`` decoded; [] when Jaeger answers 404."""
        status, doc = self.get(f"/api/v3/traces/{trace_id}")
        if status == 404:
            return []
        assert status == 200, (status, doc)
        return spans_of(doc["result"])

    def wait_for_trace(self, trace_id: str, spans: int, timeout: float = 60.0
                       ) -> list[ReceivedSpan]:
        """The trace once Jaeger holds at least ``spans`` spans of it, after one more
        batch interval without growth (so a count above ``spans`` shows too)."""
        found: list[ReceivedSpan] = []

        def complete() -> bool:
            found[:] = self.trace(trace_id)
            return len(found) >= spans

        wait_until(f"{spans} spans of trace {trace_id} in Jaeger", complete, timeout,
                   [self.process], interval=0.5)
        return found

    def services(self) -> list[str]:
        status, doc = self.get("/api/v3/services")
        assert status == 200, (status, doc)
        return list(doc.get("services") or [])

    def operations(self, service: str) -> list[dict[str, str]]:
        status, doc = self.get("/api/v3/operations", service=service)
        assert status == 200, (status, doc)
        return list(doc.get("operations") or [])

    def legacy_trace(self, trace_id: str) -> dict[str, Any] | None:
        """``/api/traces/{id}`` (what Grafana's Jaeger data source calls): the one trace
        of its ``data``, or None on 404."""
        status, doc = self.get(f"/api/traces/{trace_id}")
        if status == 404:
            return None
        assert status == 200, (status, doc)
        (trace,) = doc["data"]
        return dict(trace)

    def search(self, service: str, since_s: float = 3600.0) -> list[ReceivedSpan]:
        """Every span of ``service``'s traces of the last ``since_s`` seconds
        (``/api/v3/traces`` search); [] when none."""
        now = time.time()

        def rfc3339(t: float) -> str:
            return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e9):09d}Z"

        status, doc = self.get("/api/v3/traces", **{
            "query.service_name": service, "query.start_time_min": rfc3339(now - since_s),
            "query.start_time_max": rfc3339(now + 60), "query.num_traces": "10000"})
        if status == 404:
            return []
        assert status == 200, (status, doc)
        return spans_of(doc["result"])


def jaeger(tmp: Path, extra_env: Mapping[str, str] | None = None,
           extra_config: Path | None = None) -> Jaeger:
    """A (not yet started) Jaeger on free ports, its log in ``tmp``."""
    names = ("JAEGER_OTLP_GRPC_PORT", "JAEGER_OTLP_HTTP_PORT", "JAEGER_QUERY_HTTP_PORT",
             "JAEGER_QUERY_GRPC_PORT", "JAEGER_HEALTH_PORT")
    ports = {name: free_port() for name in names}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "JAEGER_"))}
    env.update({k: str(v) for k, v in ports.items()}, JAEGER_LISTEN_HOST=HOST)
    env.update(extra_env or {})
    argv = [jaeger_bin(), "--config", f"file:{JAEGER_CONFIG}"]
    if extra_config is not None:
        argv += ["--config", f"file:{extra_config}"]
    return Jaeger(Process("jaeger", argv, tmp / "jaeger.log", env=env, cwd=tmp), ports)


@contextlib.contextmanager
def running_jaeger(tmp: Path, extra_env: Mapping[str, str] | None = None,
                   extra_config: Path | None = None) -> Iterator[Jaeger]:
    server = jaeger(tmp, extra_env, extra_config)
    server.start()
    try:
        yield server
    finally:
        server.process.stop()


# ------------------------------------------------------------------------ collector
@dataclass
class Collector:
    """One collector process of our distribution, on a rendered config."""

    process: Process
    config: Any
    config_path: Path
    ports: Ports

    @property
    def otlp_grpc(self) -> str:
        return f"http://{HOST}:{self.ports[4317]}"

    @property
    def otlp_http(self) -> str:
        return f"http://{HOST}:{self.ports[4318]}"

    @property
    def health_url(self) -> str:
        return f"http://{HOST}:{self.ports[13133]}/"

    def healthy(self) -> bool:
        return http_get(self.health_url, timeout=2)[0] == 200

    def start(self, timeout: float = STARTUP_TIMEOUT_S) -> None:
        self.process.start()
        wait_until(f"collector {self.config_path.name} to be healthy", self.healthy,
                   timeout, [self.process])

    def stop(self) -> None:
        self.process.stop()

    def restart(self) -> None:
        self.stop()
        self.start()

    def metric(self, name: str, **labels: str) -> float:
        """The sum of the collector's own metric ``name`` (``_total`` or not) over the
        series whose labels include ``labels``, read from its telemetry on ``:8888``;
        0 when there is none yet."""
        status, body = http_get(f"http://{HOST}:{self.ports[8888]}/metrics")
        assert status == 200, body[:500]
        total = 0.0
        sample = re.compile(rf"^{re.escape(name)}(?:_total)?(?:\{{([^}}]*)\}})? (\S+)")
        for line in body.decode().splitlines():
            m = sample.match(line)
            if m is None:
                continue
            have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
            if all(have.get(k) == v for k, v in labels.items()):
                total += float(m.group(2))
        return total


def collector(tmp: Path, source: Path, name: str, ports: Ports | None = None,
              replace: Mapping[str, str] | None = None,
              edit: Callable[[Any], None] | None = None) -> Collector:
    """A (not yet started) collector running ``source`` rendered for this host;
    ``edit`` may change the rendered config further (a test's stated substitution)."""
    ports = ports or Ports()
    config = render_collector_config(source, ports, replace or {})
    if edit is not None:
        edit(config)
    path = dump_yaml(config, tmp / f"{name}.yaml")
    process = Process(name, [otelcol_bin(), "--config", f"file:{path}"], tmp / f"{name}.log",
                      env={k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
                      cwd=tmp)
    return Collector(process, config, path, ports)


def validate(config_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([otelcol_bin(), "validate", "--config", f"file:{config_path}"],
                          capture_output=True, text=True, timeout=120, check=False)


# ------------------------------------------------------------------------ TLS
@dataclass(frozen=True)
class TLSFiles:
    """A throwaway CA and a server certificate it signed for 127.0.0.1 / localhost."""

    ca: Path
    cert: Path
    key: Path


def make_tls(directory: Path) -> TLSFiles:
    """``openssl`` (missing: fail under CI, skip elsewhere) makes ``ca.pem`` and a
    server key pair in ``directory``: what the gateway tier's ``tls.ca_file`` expects."""
    openssl = shutil.which("openssl")
    if openssl is None:
        unavailable("`openssl`")
    directory.mkdir(parents=True, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    ext = directory / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n", encoding="utf-8")
    steps = [
        ["req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
         "-subj", "/CN=otelmw test CA"],
        ["req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"],
        ["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
         "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", str(ext)],
    ]
    for step in steps:
        subprocess.run([openssl, *step], cwd=directory, check=True, capture_output=True,
                       timeout=60)
    return TLSFiles(directory / "ca.pem", directory / "server.pem", directory / "server.key")


def jaeger_tls_config(tmp: Path, tls: TLSFiles) -> Path:
    """A config merged over collector/jaeger/config.yaml: Jaeger's OTLP/gRPC receiver
    serves TLS with ``tls``'s server certificate (as the gateway tier expects)."""
    return dump_yaml({"receivers": {"otlp": {"protocols": {"grpc": {"tls": {
        "cert_file": str(tls.cert), "key_file": str(tls.key)}}}}}}, tmp / "jaeger-tls.yaml")

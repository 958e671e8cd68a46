"""Every dashboard panel's PromQL against a real Prometheus scraping real otelmw traffic.

`tests/stack_scripts/live_traffic.py` runs the demo pipeline (plus a failing
LLM provider, middleware, hook and normalizer) with ``configure()`` and
``OTEL_METRICS_EXPORTER=prometheus``: opentelemetry-exporter-prometheus'
PrometheusMetricReader behind prometheus_client's HTTP server on 127.0.0.1
and a free port. A real ``prometheus`` process (bound to 127.0.0.1, free
port, temporary storage) scrapes it every second. Each panel query of
``dashboards/*.json`` (from ``_support.stack_queries.dashboard_queries()``, Grafana
macros rendered) then runs through Prometheus' HTTP API, one test per panel:

* panels over otelmw's own metrics must return ``success`` and a non-empty
  vector with a finite value (a typo, a drifted metric name or a label the
  code never sets fails the panel's test by name);
* panels over collector-only series (span metrics) must parse (``success``);
* against a second, healthy run (``LIVE_TRAFFIC_HEALTHY=1``: the demo turns
  only, so no hook and no normalizer ever fails and those counters have no
  series) every own panel still returns a value, 0 for the failure counters.

The ``prometheus`` binary is required when ``CI`` is set (missing: the tests
FAIL) and optional elsewhere (skipped). Both processes are stopped by the
module fixtures; they also die with the test process (stdin closed /
``PR_SET_PDEATHSIG`` on Linux).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _support.components import unavailable
from _support.stack_queries import SDK_SERIES, DashboardQuery, dashboard_queries, metric_names

ROOT = Path(__file__).resolve().parent.parent
TRAFFIC_SCRIPT = Path(__file__).resolve().parent / "stack_scripts" / "live_traffic.py"
HOST = "127.0.0.1"
SCRAPES_BEFORE_QUERIES = 5  # samples per series before any panel query runs
STARTUP_TIMEOUT_S = 30.0

pytestmark = pytest.mark.timeout(120)


def _prometheus_binary() -> str:
    path = shutil.which("prometheus")
    if path is None and os.access("/usr/bin/prometheus", os.X_OK):
        path = "/usr/bin/prometheus"
    if path is None:
        unavailable("`prometheus`")
    assert path is not None
    return path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # preexec_fn: SIGTERM the child when pytest dies
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


_PREEXEC: Callable[[], None] | None = _die_with_parent if sys.platform == "linux" else None


def _stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:  # 400/422 still carry a JSON body
        return int(exc.code), exc.read()


def _wait_for(what: str, check: Callable[[], bool], procs: list[subprocess.Popen[Any]],
              logs: list[Path], timeout: float = STARTUP_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                pytest.fail(f"{what}: {proc.args[0]!r} exited with {proc.returncode}\n"
                            + _tails(logs))
        with contextlib.suppress(OSError, ValueError, KeyError, IndexError):
            if check():
                return
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}\n" + _tails(logs))


def _tails(logs: list[Path]) -> str:
    out = []
    for log in logs:
        text = log.read_text(errors="replace") if log.exists() else ""
        out.append(f"--- {log.name} (tail) ---\n{text[-3000:]}")
    return "\n".join(out)


# --------------------------------------------------------------------- processes
class Traffic(NamedTuple):
    proc: subprocess.Popen[Any]
    port: int
    log: Path


class PrometheusServer(NamedTuple):
    proc: subprocess.Popen[Any]
    url: str
    log: Path

    def query(self, expr: str) -> tuple[int, dict[str, Any]]:
        status, body = _http_get(
            f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        return status, json.loads(body)

    def vector(self, expr: str) -> list[dict[str, Any]]:
        status, doc = self.query(expr)
        assert status == 200 and doc.get("status") == "success", (expr, status, doc)
        return list(doc["data"]["result"])


@pytest.fixture(scope="module")
def prometheus_bin() -> str:
    return _prometheus_binary()


# Counters that only get a series at their first failure: absent from a healthy run.
FAILURE_ONLY_SERIES = frozenset({"otelmw_hook_failures_total",
                                 "otelmw_normalize_failures_total"})


def _start_traffic(tmp: Path, healthy: bool) -> Iterator[Traffic]:
    try:
        import opentelemetry.exporter.prometheus  # noqa: F401
        import prometheus_client  # noqa: F401
    except ImportError:
        unavailable("opentelemetry-exporter-prometheus / prometheus_client")
    log = tmp / "traffic.log"
    port = _free_port()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "OTELMW_"))}
    env.update({
        "OTEL_METRICS_EXPORTER": "prometheus",
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_EXPORTER_PROMETHEUS_HOST": HOST,
        "OTEL_EXPORTER_PROMETHEUS_PORT": str(port),
        "OTELMW_DATA_DIR": str(tmp / "store"),
        "LIVE_TRAFFIC_INTERVAL": "0.25",
        "LIVE_TRAFFIC_MAX_SECONDS": "240",
        "LIVE_TRAFFIC_HEALTHY": "1" if healthy else "0",
        "PYTHONUNBUFFERED": "1",
    })
    expected = SDK_SERIES - FAILURE_ONLY_SERIES if healthy else SDK_SERIES
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(TRAFFIC_SCRIPT)], cwd=str(ROOT), env=env,
            stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
            preexec_fn=_PREEXEC)
    try:
        def exposes_contract() -> bool:
            status, body = _http_get(f"http://{HOST}:{port}/metrics", timeout=2)
            text = body.decode("utf-8", "replace")
            return status == 200 and all(name in text for name in expected)

        _wait_for("the traffic process to expose every otelmw series", exposes_contract,
                  [proc], [log])
        yield Traffic(proc, port, log)
    finally:
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()  # the script exits when its stdin closes
        _stop(proc)


def _start_prometheus(tmp: Path, prometheus_bin: str, traffic: Traffic,
                      scraped_series: str) -> Iterator[PrometheusServer]:
    config = tmp / "prometheus.yml"
    config.write_text(
        "global:\n"
        "  scrape_interval: 1s\n"
        "  evaluation_interval: 1s\n"
        "  scrape_timeout: 1s\n"
        "scrape_configs:\n"
        "  - job_name: otelmw\n"
        "    honor_labels: true\n"
        "    static_configs:\n"
        f"      - targets: ['{HOST}:{traffic.port}']\n",
        encoding="utf-8")
    log = tmp / "prometheus.log"
    port = _free_port()
    url = f"http://{HOST}:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [prometheus_bin, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'data'}",
             f"--web.listen-address={HOST}:{port}", "--web.enable-lifecycle",
             "--storage.tsdb.retention.time=1h", "--log.level=warn"],
            cwd=str(tmp), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            preexec_fn=_PREEXEC)
    server = PrometheusServer(proc, url, log)
    procs, logs = [proc, traffic.proc], [log, traffic.log]
    try:
        _wait_for("Prometheus to be ready", lambda: _http_get(f"{url}/-/ready")[0] == 200,
                  procs, logs)

        def target_up() -> bool:
            result = server.vector('up{job="otelmw"}')
            return bool(result) and result[0]["value"][1] == "1"

        _wait_for("the otelmw target to be up", target_up, procs, logs)

        # Enough scrapes of the still-running traffic that every rate() /
        # increase() window holds several samples of a growing counter.
        def scraped_enough() -> bool:
            result = server.vector(f"min(count_over_time({scraped_series}[5m]))")
            return bool(result) and float(result[0]["value"][1]) >= SCRAPES_BEFORE_QUERIES

        _wait_for(f"{SCRAPES_BEFORE_QUERIES} scrapes of the otelmw series", scraped_enough,
                  procs, logs)
        yield server
    finally:
        _stop(proc)


@pytest.fixture(scope="module")
def traffic(tmp_path_factory: pytest.TempPathFactory, prometheus_bin: str) -> Iterator[Traffic]:
    yield from _start_traffic(tmp_path_factory.mktemp("live-traffic"), healthy=False)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory, prometheus_bin: str,
               traffic: Traffic) -> Iterator[PrometheusServer]:
    yield from _start_prometheus(tmp_path_factory.mktemp("live-prometheus"), prometheus_bin,
                                 traffic, "otelmw_hook_failures_total")


@pytest.fixture(scope="module")
def healthy_prometheus(tmp_path_factory: pytest.TempPathFactory, prometheus_bin: str
                       ) -> Iterator[PrometheusServer]:
    """A demo run in which no hook and no normalizer ever fails, scraped."""
    for traffic in _start_traffic(tmp_path_factory.mktemp("healthy-traffic"), healthy=True):
        yield from _start_prometheus(tmp_path_factory.mktemp("healthy-prometheus"),
                                     prometheus_bin, traffic,
                                     "gen_ai_client_operation_duration_seconds_count")


# ------------------------------------------------------------------------ tests
def _panel_ids(queries: list[DashboardQuery]) -> list[str]:
    """Panel titles; panels with several targets get ``#n`` per target."""
    totals = Counter((q.dashboard_file, q.panel_title) for q in queries)
    seen: Counter[tuple[str, str]] = Counter()
    multi_file = len({q.dashboard_file for q in queries}) > 1
    ids = []
    for q in queries:
        key = (q.dashboard_file, q.panel_title)
        seen[key] += 1
        title = f"{q.dashboard_file}:{q.panel_title}" if multi_file else q.panel_title
        ids.append(f"{title} #{seen[key]}" if totals[key] > 1 else title)
    return ids


QUERIES = dashboard_queries()
OWN_QUERIES = [q for q in QUERIES if not q.needs_collector]
COLLECTOR_QUERIES = [q for q in QUERIES if q.needs_collector]


def test_dashboards_have_queries_of_both_kinds() -> None:
    assert OWN_QUERIES, "no dashboard panel queries otelmw's own metrics"
    assert COLLECTOR_QUERIES, "no dashboard panel queries the collector's span metrics"


# What the traffic must produce for the panels to prove anything: every series
# of the contract, including the failure paths.
TRAFFIC_SELECTORS = [
    *sorted(SDK_SERIES),
    'gen_ai_client_operation_duration_seconds_count{error_type=""}',
    'gen_ai_client_operation_duration_seconds_count{error_type!=""}',
    'gen_ai_client_token_usage_count{gen_ai_token_type="input"}',
    'gen_ai_client_token_usage_count{gen_ai_token_type="output"}',
    'gen_ai_execute_tool_duration_seconds_count{error_type=""}',
    'gen_ai_execute_tool_duration_seconds_count{error_type!=""}',
    'otelmw_tool_results_total{otelmw_result_success="true"}',
    'otelmw_tool_results_total{otelmw_result_success="false"}',
    'otelmw_normalize_failures_total{otelmw_runtime_id="live_broken_runtime"}',
    'otelmw_middleware_duration_seconds_count{otelmw_middleware_outcome="rewritten"}',
    'otelmw_middleware_duration_seconds_count{otelmw_middleware_outcome="failed_before_next"}',
    'otelmw_middleware_failures_total{otelmw_middleware_name="live-failures.failing_guard"}',
    'otelmw_rewrites_total{otelmw_rewrite_source="demo-router"}',
    'otelmw_hook_failures_total{otelmw_hook_name="post_api_request"}',
    "gen_ai_invoke_agent_duration_seconds_count",
]


@pytest.mark.parametrize("selector", TRAFFIC_SELECTORS)
def test_traffic_feeds_every_contract_series(prometheus: PrometheusServer,
                                             selector: str) -> None:
    result = prometheus.vector(f"sum(increase({selector}[5m]))")
    assert result, f"Prometheus has no samples for {selector}"
    assert float(result[0]["value"][1]) > 0, f"{selector} did not grow while scraped"


def accepted(prometheus: PrometheusServer, query: DashboardQuery) -> dict[str, Any]:
    """Prometheus's answer to a panel's query, which it must have accepted."""
    status, doc = prometheus.query(query.expr)
    assert status == 200 and doc.get("status") == "success", (
        f"panel {query.panel_title!r} ({query.dashboard_file}): Prometheus rejected\n"
        f"  {query.expr}\n  -> {doc.get('errorType')}: {doc.get('error')}")
    return doc


@pytest.mark.parametrize("query", OWN_QUERIES, ids=_panel_ids(OWN_QUERIES))
def test_panel_returns_data(prometheus: PrometheusServer, query: DashboardQuery) -> None:
    doc = accepted(prometheus, query)
    result = doc["data"]["result"]
    assert doc["data"]["resultType"] == "vector"
    assert result, (
        f"panel {query.panel_title!r} ({query.dashboard_file}) returns no data from live "
        f"otelmw metrics:\n  {query.expr}")
    values = [float(sample["value"][1]) for sample in result]
    assert any(math.isfinite(v) for v in values), (
        f"panel {query.panel_title!r}: only NaN/Inf values {values} for\n  {query.expr}")


@pytest.mark.parametrize("query", COLLECTOR_QUERIES, ids=_panel_ids(COLLECTOR_QUERIES))
def test_collector_panel_parses(prometheus: PrometheusServer, query: DashboardQuery) -> None:
    accepted(prometheus, query)


def test_healthy_run_has_no_failure_series(healthy_prometheus: PrometheusServer) -> None:
    """The situation the panels must handle: the failure counters do not exist yet."""
    for series in sorted(FAILURE_ONLY_SERIES):
        assert healthy_prometheus.vector(series) == [], series


@pytest.mark.parametrize("query", OWN_QUERIES, ids=_panel_ids(OWN_QUERIES))
def test_panel_shows_a_value_before_the_first_failure(healthy_prometheus: PrometheusServer,
                                                      query: DashboardQuery) -> None:
    result = healthy_prometheus.vector(query.expr)
    assert result, (
        f"panel {query.panel_title!r} ({query.dashboard_file}) shows 'No data' on a "
        f"healthy run:\n  {query.expr}")
    values = [float(sample["value"][1]) for sample in result]
    assert any(math.isfinite(v) for v in values), (query.expr, values)
    if metric_names(query.expr) & FAILURE_ONLY_SERIES:
        assert values == [0.0], (query.expr, result)  # zero, not a spurious series

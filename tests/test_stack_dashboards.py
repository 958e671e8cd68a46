"""The dashboards on real data: otelmw -> our collector -> Prometheus, exemplars -> Jaeger;
and the dashboard files against Grafana's published schema.

Live (one stack per module): ``stack_scripts/live_traffic.py`` (demo turns plus a failing
provider, middleware, hook and normalizer, as in test_stack_live_prometheus.py) exports
traces and metrics by OTLP to a collector running ``collector/otelcol-config.yaml``
(rendered for 127.0.0.1), whose traces go to Jaeger and whose ``prometheus`` exporter
(application metrics and the ``span_metrics`` connector's series) and own telemetry are
scraped by Debian's Prometheus 2.42 with ``prometheus/prometheus.yml`` (targets and a 1 s
interval substituted; exemplar storage on, as in compose). Then:

* every panel query of every dashboard, the span-metrics panels included, returns a
  non-empty vector with a finite value (one test per panel query);
* every exemplar of every panel query that shows exemplars carries a ``trace_id`` that
  Jaeger resolves at ``/api/traces/{id}`` (the call behind Grafana's exemplar link).

Schema: each dashboard, as a TypeScript literal, must satisfy ``@grafana/schema`` at the
compose file's Grafana version (``_support.grafana_schema``, ``tsc --strict``), and a
dashboard with a wrong enum value and an unknown key must not (the check can fail).

Needs the built collector and Jaeger, ``prometheus``, ``npm``/``node`` (missing: fail
under CI, skip elsewhere).
"""

from __future__ import annotations

import copy
import json
import math
import sys
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _support import grafana_schema, stack
from _support.components import clean_env
from _support.stack_queries import (
    DashboardQuery,
    dashboard_files,
    dashboard_queries,
    iter_panels,
    load_dashboard,
    render_expr,
)

pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).resolve().parent.parent
TRAFFIC_SCRIPT = Path(__file__).resolve().parent / "stack_scripts" / "live_traffic.py"
PROMETHEUS_CONFIG = ROOT / "prometheus" / "prometheus.yml"
COMPOSE = ROOT / "docker-compose.yml"
DATA_TIMEOUT_S = 150.0  # span metrics flush every 15 s: rate() needs two flushes


@dataclass
class Prometheus:
    process: stack.Process
    url: str

    def query(self, expr: str) -> dict[str, Any]:
        status, body = stack.http_get(
            f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        doc: dict[str, Any] = json.loads(body)
        assert status == 200 and doc.get("status") == "success", (expr, status, doc)
        return doc

    def exemplars(self, expr: str, since_s: float = 600.0) -> list[dict[str, Any]]:
        now = time.time()
        params = {"query": expr, "start": f"{now - since_s:.3f}", "end": f"{now:.3f}"}
        status, body = stack.http_get(
            f"{self.url}/api/v1/query_exemplars?" + urllib.parse.urlencode(params))
        doc = json.loads(body)
        assert status == 200 and doc.get("status") == "success", (expr, status, doc)
        return [e for series in doc["data"] for e in series["exemplars"]]


@dataclass
class LiveStack:
    jaeger: stack.Jaeger
    collector: stack.Collector
    prometheus: Prometheus
    traffic: stack.Process


def _values(doc: dict[str, Any]) -> list[float]:
    return [float(sample["value"][1]) for sample in doc["data"]["result"]]


QUERIES = dashboard_queries()


def _exemplar_queries() -> list[DashboardQuery]:
    out = []
    for path in dashboard_files():
        for panel in iter_panels(load_dashboard(path).get("panels") or []):
            for target in panel.get("targets") or []:
                if target.get("exemplar") and target.get("expr"):
                    out.append(DashboardQuery(path.name, str(panel.get("title", "")),
                                              render_expr(target["expr"]), False))
    return out


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveStack]:
    tmp = tmp_path_factory.mktemp("live-stack")
    prometheus_bin = stack.prometheus_bin()
    with stack.running_jaeger(tmp) as jaeger:
        collector = stack.collector(tmp, stack.LOCAL_CONFIG, "local", replace={
            "jaeger:4317": jaeger.otlp_grpc, "/data/otelmw": str(tmp / "no-store"),
            "/var/lib/otelcol": str(tmp / "state")})
        collector.start()
        env = clean_env(tmp)
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=collector.otlp_grpc,
                   OTEL_EXPORTER_OTLP_PROTOCOL="grpc", OTEL_TRACES_EXPORTER="otlp",
                   OTEL_METRICS_EXPORTER="otlp", OTEL_LOGS_EXPORTER="otlp",
                   OTEL_METRIC_EXPORT_INTERVAL="1000", OTEL_BSP_SCHEDULE_DELAY="200",
                   OTEL_SERVICE_NAME="otelmw-dashboards", OTELMW_DATA_DIR=str(tmp / "store"),
                   LIVE_TRAFFIC_INTERVAL="0.5", LIVE_TRAFFIC_MAX_SECONDS="400")
        traffic = stack.Process("traffic", [sys.executable, str(TRAFFIC_SCRIPT)],
                                tmp / "traffic.log", env=env, cwd=ROOT, stdin_pipe=True)
        # The repository's scrape config, with the compose names replaced by local
        # addresses and a 1 s interval (so the test takes seconds, not minutes).
        config = stack.load_yaml(PROMETHEUS_CONFIG)
        config["global"].update(scrape_interval="1s", evaluation_interval="1s",
                                scrape_timeout="1s")
        port = stack.free_port()
        targets = {"collector:8889": f"{stack.HOST}:{collector.ports[8889]}",
                   "collector:8888": f"{stack.HOST}:{collector.ports[8888]}",
                   "localhost:9090": f"{stack.HOST}:{port}"}
        for job in config["scrape_configs"]:
            for static in job["static_configs"]:
                static["targets"] = [targets[t] for t in static["targets"]]
        url = f"http://{stack.HOST}:{port}"
        prometheus = Prometheus(stack.Process("prometheus", [
            prometheus_bin, f"--config.file={stack.dump_yaml(config, tmp / 'prometheus.yml')}",
            f"--storage.tsdb.path={tmp / 'tsdb'}", f"--web.listen-address={stack.HOST}:{port}",
            "--enable-feature=exemplar-storage", "--log.level=warn"],
            tmp / "prometheus.log", cwd=tmp), url)
        traffic.start()
        prometheus.process.start()
        procs = [collector.process, traffic, prometheus.process]
        try:
            stack.wait_until("Prometheus to be ready",
                             lambda: stack.http_get(f"{url}/-/ready")[0] == 200, procs=procs)

            # A number, not only a series: the span_metrics connector flushes every 15 s,
            # and until its second flush each of its counters has a single value in
            # Prometheus, so rate() is 0 and histogram_quantile() of all-zero rates NaN.
            def all_panels_have_data() -> bool:
                return all(any(math.isfinite(v) for v in _values(prometheus.query(q.expr)))
                           for q in QUERIES)

            # No failure here on timeout: the per-panel tests name the empty ones.
            with_deadline = time.monotonic() + DATA_TIMEOUT_S
            while time.monotonic() < with_deadline and not all_panels_have_data():
                for proc in procs:
                    assert proc.running, proc.tail()
                time.sleep(2)
            yield LiveStack(jaeger, collector, prometheus, traffic)
        finally:
            traffic.stop()
            prometheus.process.stop()
            collector.stop()


def _ids(queries: list[DashboardQuery]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for q in queries:
        seen[q.panel_title] = seen.get(q.panel_title, 0) + 1
        out.append(f"{q.panel_title} #{seen[q.panel_title]}")
    return out


def test_prometheus_scrapes_every_collector_target(live: LiveStack) -> None:
    up = {s["metric"]["job"]: s["value"][1] for s in live.prometheus.query("up")["data"]["result"]}
    assert up == {"otelmw": "1", "otel-collector": "1", "prometheus": "1"}, up


@pytest.mark.parametrize("query", QUERIES, ids=_ids(QUERIES))
def test_panel_returns_data_from_the_collector(live: LiveStack, query: DashboardQuery) -> None:
    values = _values(live.prometheus.query(query.expr))
    assert values, (f"panel {query.panel_title!r} ({query.dashboard_file}) has no data "
                    f"from the collector:\n  {query.expr}")
    assert any(math.isfinite(v) for v in values), (query.expr, values)


EXEMPLAR_QUERIES = _exemplar_queries()


def test_some_panels_show_exemplars() -> None:
    assert any("traces_span_metrics" in q.expr for q in EXEMPLAR_QUERIES), EXEMPLAR_QUERIES


@pytest.mark.parametrize("query", EXEMPLAR_QUERIES, ids=_ids(EXEMPLAR_QUERIES))
def test_exemplar_trace_ids_resolve_in_jaeger(live: LiveStack, query: DashboardQuery) -> None:
    exemplars = live.prometheus.exemplars(query.expr)
    assert exemplars, f"panel {query.panel_title!r}: no exemplar for {query.expr}"
    trace_ids = {e["labels"]["trace_id"] for e in exemplars}
    for trace_id in sorted(trace_ids)[:20]:
        def resolves(trace_id: str = trace_id) -> bool:
            return live.jaeger.legacy_trace(trace_id) is not None

        stack.wait_until(f"exemplar trace {trace_id} in Jaeger", resolves, timeout=30,
                         procs=[live.jaeger.process])
        trace = live.jaeger.legacy_trace(trace_id)
        assert trace is not None and trace["traceID"] == trace_id
        span_ids = {s["spanID"] for s in trace["spans"]}
        owners = {e["labels"].get("span_id") for e in exemplars
                  if e["labels"]["trace_id"] == trace_id}
        assert owners <= span_ids, (trace_id, owners - span_ids)


# ------------------------------------------------------------------------ schema
def test_schema_version_is_the_compose_grafana() -> None:
    image = stack.load_yaml(COMPOSE)["services"]["grafana"]["image"]
    assert image == f"grafana/grafana:{grafana_schema.GRAFANA_SCHEMA_VERSION}"


@pytest.mark.parametrize("path", dashboard_files(), ids=lambda p: p.name)
def test_dashboard_satisfies_grafana_schema(path: Path, tmp_path: Path) -> None:
    proc = grafana_schema.type_check(load_dashboard(path), tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_schema_check_rejects_a_wrong_dashboard(tmp_path: Path) -> None:
    (path, *_) = dashboard_files()
    dashboard = load_dashboard(path)
    for mutate, error in (
        (lambda d: d.update(refreshEvery="30s"), "refreshEvery"),
        (lambda d: next(p for p in iter_panels(d["panels"]) if p["type"] == "timeseries")[
            "options"]["legend"].update(displayMode="sideways"), "sideways"),
        (lambda d: d.update(schemaVersion="41"), "not assignable to type 'number'"),
        (lambda d: d["panels"][1].update(bogusKey=1), "bogusKey"),
    ):
        wrong = copy.deepcopy(dashboard)
        mutate(wrong)
        proc = grafana_schema.type_check(wrong, tmp_path)
        assert proc.returncode != 0 and error in proc.stdout, proc.stdout


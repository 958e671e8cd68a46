"""Static checks of the observability stack: collector, compose, Prometheus, Grafana.

Nothing here starts a container. External validators (`docker-compose` or `docker compose`,
`promtool`) and PyYAML are required in CI (env CI set: a missing one FAILS the
test) and optional elsewhere (the test is skipped).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _support.components import unavailable
from _support.stack import dump_yaml, load_yaml
from _support.stack_queries import (
    COLLECTOR_SERIES,
    SDK_INSTRUMENTS,
    SDK_SERIES,
    SPAN_METRICS_DIMENSIONS,
    dashboard_files,
    dashboard_queries,
    iter_panels,
    label_names,
    load_dashboard,
    metric_names,
)

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
PROMETHEUS_CONFIG = ROOT / "prometheus" / "prometheus.yml"
COLLECTOR_LOCAL = ROOT / "collector" / "otelcol-config.yaml"
COLLECTOR_AGENT = ROOT / "collector" / "gateway.yaml"
COLLECTOR_GATEWAY = ROOT / "collector" / "gateway-tier.yaml"
COLLECTOR_CONFIGS = [COLLECTOR_LOCAL, COLLECTOR_AGENT, COLLECTOR_GATEWAY]
DATASOURCES = ROOT / "grafana" / "provisioning" / "datasources" / "datasources.yaml"
DASHBOARD_PROVIDERS = ROOT / "grafana" / "provisioning" / "dashboards" / "dashboards.yaml"


# Component types renamed (the old name a deprecated alias) or removed by the collector
# release the suite builds (collector/builder-config.yaml).
RENAMED_COMPONENTS = {
    ("receivers", "otlpjsonfile"): "otlp_json_file",
    ("exporters", "loadbalancing"): "load_balancing",
    ("exporters", "otlp"): "otlp_grpc",
    ("exporters", "otlphttp"): "otlp_http",
    ("exporters", "logging"): "debug",
    ("connectors", "spanmetrics"): "span_metrics",
    ("processors", "spanmetrics"): "span_metrics connector",
}


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        unavailable(f"`{name}`")
    assert path is not None
    return path


def _compose_command() -> list[str]:
    """Compose v1 (``docker-compose``) or v2 (``docker compose``), whichever is here."""
    v1 = shutil.which("docker-compose")
    if v1 is not None:
        return [v1]
    docker = shutil.which("docker")
    if docker is not None and subprocess.run([docker, "compose", "version"], capture_output=True,
                                             timeout=60, check=False).returncode == 0:
        return [docker, "compose"]
    unavailable("`docker-compose` or `docker compose`")


def _run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def _compose_env(tmp_path: Path, **extra: str) -> tuple[list[str], dict[str, str]]:
    """Environment and --env-file args that ignore a developer's local .env."""
    env = {k: v for k, v in os.environ.items() if k != "GRAFANA_ADMIN_PASSWORD"}
    env.update(extra)
    empty = tmp_path / "empty.env"
    empty.write_text("", encoding="utf-8")
    return ["--env-file", str(empty)], env


def _compose() -> dict[str, Any]:
    data: dict[str, Any] = load_yaml(COMPOSE_FILE)
    return data


def _services() -> dict[str, Any]:
    services: dict[str, Any] = _compose()["services"]
    return services


def _volumes(service: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """target -> (source, mode) for short-syntax volumes; sources may hold ${VAR:-x}."""
    out: dict[str, tuple[str, str]] = {}
    for volume in service.get("volumes") or []:
        parts = volume.rsplit(":", 2)
        if len(parts) == 3 and parts[2] in {"ro", "rw"} and parts[1].startswith("/"):
            source, target, mode = parts
        else:
            source, target = volume.rsplit(":", 1)
            mode = "rw"
        out[target] = (source, mode)
    return out


def _component_type(component_id: str) -> str:
    return component_id.split("/", 1)[0]


def _host(endpoint: str) -> str:
    if "://" in endpoint:
        return urlsplit(endpoint).hostname or ""
    return endpoint.rsplit(":", 1)[0]


def _endpoints(node: Any, path: str = "") -> list[tuple[str, str]]:
    """(path, value) of every `endpoint` key below node."""
    found: list[tuple[str, str]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            sub = f"{path}.{key}" if path else str(key)
            if key == "endpoint" and isinstance(value, str):
                found.append((sub, value))
            else:
                found.extend(_endpoints(value, sub))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found.extend(_endpoints(value, f"{path}[{i}]"))
    return found


# --------------------------------------------------------------------------- tools


def test_docker_compose_config_is_valid(tmp_path: Path) -> None:
    compose = _compose_command()
    env_args, env = _compose_env(tmp_path, GRAFANA_ADMIN_PASSWORD="not-a-real-password")
    result = _run([*compose, *env_args, "-f", str(COMPOSE_FILE), "config", "-q"], env)
    assert result.returncode == 0, result.stderr


def test_docker_compose_refuses_to_run_without_grafana_password(tmp_path: Path) -> None:
    compose = _compose_command()
    env_args, env = _compose_env(tmp_path)
    result = _run([*compose, *env_args, "-f", str(COMPOSE_FILE), "config", "-q"], env)
    assert result.returncode != 0
    assert "GRAFANA_ADMIN_PASSWORD" in result.stderr + result.stdout


def test_promtool_check_config() -> None:
    promtool = _tool("promtool")
    result = _run([promtool, "check", "config", str(PROMETHEUS_CONFIG)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_dashboard_queries_are_valid_promql(tmp_path: Path) -> None:
    """promtool parses every (rendered) panel query as a recording rule expression."""
    promtool = _tool("promtool")
    queries = dashboard_queries()
    assert queries
    rules = [
        {"record": f"otelmw:dashboard_query:{i}", "expr": q.expr} for i, q in enumerate(queries)
    ]
    rules_file = tmp_path / "dashboard_queries.rules.yml"
    dump_yaml({"groups": [{"name": "dashboards", "rules": rules}]}, rules_file)
    result = _run([promtool, "check", "rules", str(rules_file)])
    assert result.returncode == 0, result.stdout + result.stderr


# --------------------------------------------------------------------------- collector


@pytest.fixture(params=COLLECTOR_CONFIGS, ids=lambda p: p.name)
def collector_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    data: dict[str, Any] = load_yaml(request.param)
    return data


def test_collector_pipeline_components_are_defined(collector_config: dict[str, Any]) -> None:
    service = collector_config["service"]
    pipelines = service["pipelines"]
    assert pipelines
    connectors = set(collector_config.get("connectors") or {})
    for name, pipeline in pipelines.items():
        for section, key in (
            ("receivers", "receivers"),
            ("processors", "processors"),
            ("exporters", "exporters"),
        ):
            defined = set(collector_config.get(section) or {})
            if section in ("receivers", "exporters"):
                defined |= connectors
            for component in pipeline.get(key) or []:
                assert component in defined, f"pipeline {name}: {component} is not defined"
    for extension in service.get("extensions") or []:
        assert extension in (collector_config.get("extensions") or {}), extension


def test_collector_defined_components_are_used(collector_config: dict[str, Any]) -> None:
    pipelines = collector_config["service"]["pipelines"].values()
    used = {
        key: {c for p in pipelines for c in p.get(key) or []}
        for key in ("receivers", "processors", "exporters")
    }
    for section in ("receivers", "processors", "exporters"):
        for component in collector_config.get(section) or {}:
            assert component in used[section], f"{section}: {component} is defined but unused"
    for connector in collector_config.get("connectors") or {}:
        assert connector in used["exporters"], f"connector {connector} never fed"
        assert connector in used["receivers"], f"connector {connector} never read"
    for extension in collector_config.get("extensions") or {}:
        assert extension in (collector_config["service"].get("extensions") or []), extension


def test_collector_memory_limiter_first(collector_config: dict[str, Any]) -> None:
    for name, pipeline in collector_config["service"]["pipelines"].items():
        processors = pipeline.get("processors") or []
        assert processors, f"pipeline {name} has no processors"
        assert _component_type(processors[0]) == "memory_limiter", name
        assert _component_type(processors[-1]) == "batch", name


def test_collector_servers_bind_all_interfaces(collector_config: dict[str, Any]) -> None:
    """In a container a localhost listener is unreachable; all servers bind 0.0.0.0."""
    servers: list[tuple[str, str]] = []
    servers += _endpoints(collector_config.get("receivers") or {}, "receivers")
    servers += _endpoints(collector_config.get("extensions") or {}, "extensions")
    for exporter_id, exporter in (collector_config.get("exporters") or {}).items():
        if _component_type(exporter_id) == "prometheus":
            servers.append((f"exporters.{exporter_id}.endpoint", exporter["endpoint"]))
    assert servers
    for path, endpoint in servers:
        assert _host(endpoint) == "0.0.0.0", f"{path} = {endpoint}"
    for reader in collector_config["service"]["telemetry"]["metrics"]["readers"]:
        prometheus = reader["pull"]["exporter"]["prometheus"]
        assert prometheus["host"] == "0.0.0.0"
        assert prometheus["port"] == 8888


def test_collector_uses_current_component_names(collector_config: dict[str, Any]) -> None:
    for (section, old), new in RENAMED_COMPONENTS.items():
        for component in collector_config.get(section) or {}:
            assert _component_type(component) != old, f"{section}.{component}: use {new}"


def test_collector_has_health_check(collector_config: dict[str, Any]) -> None:
    assert collector_config["extensions"]["health_check"]["endpoint"] == "0.0.0.0:13133"


def test_local_collector_pipelines() -> None:
    config = load_yaml(COLLECTOR_LOCAL)
    pipelines = config["service"]["pipelines"]
    traces, metrics, logs = pipelines["traces"], pipelines["metrics"], pipelines["logs"]
    assert "otlp" in traces["receivers"]
    assert any(_component_type(r) == "otlp_json_file" for r in traces["receivers"])
    assert set(traces["exporters"]) == {"otlp_grpc", "span_metrics"}
    assert {"otlp", "span_metrics"} <= set(metrics["receivers"])
    assert metrics["exporters"] == ["prometheus"]
    assert set(logs["exporters"]) == {"file", "debug"}
    assert config["exporters"]["debug"]["verbosity"] == "basic"

    otlp = config["receivers"]["otlp"]["protocols"]
    assert otlp["grpc"]["endpoint"] == "0.0.0.0:4317"
    assert otlp["http"]["endpoint"] == "0.0.0.0:4318"

    prometheus = config["exporters"]["prometheus"]
    assert prometheus["endpoint"] == "0.0.0.0:8889"
    assert prometheus["resource_to_telemetry_conversion"]["enabled"] is True
    assert prometheus["enable_open_metrics"] is True

    jaeger = config["exporters"]["otlp_grpc"]
    assert jaeger["endpoint"] == "jaeger:4317"
    assert jaeger["tls"]["insecure"] is True

    span_metrics = config["connectors"]["span_metrics"]
    assert span_metrics["histogram"]["unit"] == "s"
    assert [d["name"] for d in span_metrics["dimensions"]] == list(SPAN_METRICS_DIMENSIONS)


def test_local_collector_reads_the_otelmw_store() -> None:
    config = load_yaml(COLLECTOR_LOCAL)
    files = {
        rid: r for rid, r in config["receivers"].items() if _component_type(rid) == "otlp_json_file"
    }
    assert files
    signals = {"traces", "metrics", "logs"}
    for pipeline_name, pipeline in config["service"]["pipelines"].items():
        for receiver in pipeline["receivers"]:
            if receiver not in files:
                continue
            # One signal per receiver: a traces receiver cannot parse a logs line.
            for pattern in files[receiver]["include"]:
                assert pattern.startswith("/data/otelmw/"), pattern
                basename = pattern.rsplit("/", 1)[-1]
                assert basename == f"{pipeline_name}-*.jsonl", (pipeline_name, pattern)
            signals.discard(pipeline_name)
    assert not signals, f"no otlp_json_file receiver for {signals}"


def test_local_collector_targets_are_compose_services() -> None:
    config = load_yaml(COLLECTOR_LOCAL)
    services = set(_services())
    outbound = [
        endpoint
        for exporter_id, exporter in config["exporters"].items()
        if _component_type(exporter_id) not in {"prometheus", "debug", "file"}
        for _path, endpoint in _endpoints(exporter)
    ]
    assert outbound
    for endpoint in outbound:
        assert _host(endpoint) in services, endpoint


def test_local_collector_paths_are_mounted() -> None:
    config = load_yaml(COLLECTOR_LOCAL)
    collector = _services()["collector"]
    targets = _volumes(collector)
    command = " ".join(collector["command"])
    config_path = re.search(r"--config[= ](\S+)", command)
    assert config_path is not None
    assert targets[config_path.group(1)][0] == "./collector/otelcol-config.yaml"
    assert targets["/data/otelmw"][1] == "ro", "the otelmw store must be mounted read-only"
    writable = [t for t, (_s, mode) in targets.items() if mode != "ro"]
    assert config["exporters"]["file"]["path"].startswith(tuple(w + "/" for w in writable))


def test_agent_tier_routes_by_trace_id() -> None:
    config = load_yaml(COLLECTOR_AGENT)
    lb = config["exporters"]["load_balancing"]
    assert lb["routing_key"] == "traceID"
    assert lb["resolver"]["dns"]["hostname"]
    assert "endpoint" not in lb["protocol"]["otlp"]
    pipelines = config["service"]["pipelines"]
    assert "load_balancing" in pipelines["traces"]["exporters"]
    # traceID routing is only valid for traces and logs.
    assert "load_balancing" not in pipelines.get("metrics", {}).get("exporters", [])


def test_gateway_tier_tail_sampling() -> None:
    config = load_yaml(COLLECTOR_GATEWAY)
    sampling = config["processors"]["tail_sampling"]
    assert sampling["decision_wait"]
    policies = {p["type"]: p for p in sampling["policies"]}
    assert policies["status_code"]["status_code"]["status_codes"] == ["ERROR"]
    assert policies["latency"]["latency"]["threshold_ms"] == 5000
    assert policies["probabilistic"]["probabilistic"]["sampling_percentage"] == 10
    traces = config["service"]["pipelines"]["traces"]
    assert traces["processors"] == ["memory_limiter", "tail_sampling", "batch"]
    assert any(_component_type(e) == "otlp_grpc" for e in traces["exporters"])


# --------------------------------------------------------------------------- compose


def _published_ports(service: dict[str, Any]) -> list[str | dict[str, Any]]:
    ports: list[str | dict[str, Any]] = service.get("ports") or []
    return ports


def test_compose_ports_bound_to_loopback() -> None:
    published = 0
    for name, service in _services().items():
        assert service.get("network_mode") != "host", name
        for port in _published_ports(service):
            published += 1
            if isinstance(port, dict):
                assert port.get("host_ip") == "127.0.0.1", (name, port)
            else:
                assert str(port).startswith("127.0.0.1:"), (name, port)
    assert published


def test_compose_grafana_password_has_no_default() -> None:
    grafana = _services()["grafana"]
    assert "env_file" not in grafana
    env = grafana["environment"]
    assert isinstance(env, dict), "use the mapping form for grafana.environment"
    value = env["GF_SECURITY_ADMIN_PASSWORD"]
    # ${VAR:?message} or ${VAR?message}: required, no default (no :- / -).
    assert re.fullmatch(r"\$\{[A-Z_][A-Z0-9_]*:?\?[^}]*\}", value), value
    for key in env:
        assert not key.startswith("GF_SECURITY_ADMIN_PASSWORD__"), key


def test_compose_grafana_access() -> None:
    env = _services()["grafana"]["environment"]
    assert str(env["GF_AUTH_ANONYMOUS_ENABLED"]).lower() == "true"
    assert env["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    assert str(env["GF_USERS_ALLOW_SIGN_UP"]).lower() == "false"


def test_compose_images_pinned() -> None:
    # The collector and Jaeger pins equal the releases the suite builds and runs:
    # tests/test_stack_build.py derives them from collector/builder-config.yaml and
    # collector/jaeger/go.mod.
    expected = {
        "prometheus": r"prom/prometheus:v3\.\d+\.\d+",
        "grafana": r"grafana/grafana:13\.\d+\.\d+",
    }
    services = _services()
    for name, pattern in expected.items():
        assert re.fullmatch(pattern, services[name]["image"]), services[name]["image"]
    for name, service in services.items():
        image = service["image"]
        assert ":" in image and not image.endswith(":latest"), (name, image)


def test_compose_healthchecks() -> None:
    services = _services()
    for name in ("jaeger", "prometheus", "grafana"):
        test = services[name]["healthcheck"]["test"]
        assert test[0] == "CMD", (name, test)
    assert "/-/healthy" in services["prometheus"]["healthcheck"]["test"][-1]
    assert "/api/health" in services["grafana"]["healthcheck"]["test"][-1]
    # The collector image is FROM scratch: no shell to run a healthcheck with.
    assert "healthcheck" not in services["collector"]
    assert "127.0.0.1:13133:13133" in services["collector"]["ports"]


def test_compose_prometheus() -> None:
    prometheus = _services()["prometheus"]
    assert "--enable-feature=exemplar-storage" in prometheus["command"]
    assert "./prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in prometheus["volumes"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]


def test_prometheus_scrapes_the_collector() -> None:
    config = load_yaml(PROMETHEUS_CONFIG)
    services = set(_services())
    targets = {
        target
        for job in config["scrape_configs"]
        for static in job.get("static_configs", [])
        for target in static["targets"]
    }
    assert {"collector:8889", "collector:8888"} <= targets
    for target in targets:
        host = target.rsplit(":", 1)[0]
        assert host in services or host == "localhost", target


def test_compose_grafana_mounts() -> None:
    mounts = {target: source for target, (source, _m) in _volumes(_services()["grafana"]).items()}
    assert mounts["/etc/grafana/provisioning"] == "./grafana/provisioning"
    providers = load_yaml(DASHBOARD_PROVIDERS)["providers"]
    assert providers
    for provider in providers:
        assert provider["type"] == "file"
        assert mounts[provider["options"]["path"]] == "./dashboards"


# --------------------------------------------------------------------------- grafana


def _provisioned_datasources() -> dict[str, dict[str, Any]]:
    datasources = load_yaml(DATASOURCES)["datasources"]
    return {d["uid"]: d for d in datasources}


def test_grafana_datasources() -> None:
    datasources = _provisioned_datasources()
    services = set(_services())
    prometheus = datasources["otelmw-prometheus"]
    jaeger = datasources["otelmw-jaeger"]
    assert prometheus["type"] == "prometheus"
    assert jaeger["type"] == "jaeger"
    assert jaeger["url"] == "http://jaeger:16686"
    assert prometheus["jsonData"]["exemplarTraceIdDestinations"] == [
        {"name": "trace_id", "datasourceUid": "otelmw-jaeger"}
    ]
    for datasource in datasources.values():
        assert urlsplit(datasource["url"]).hostname in services, datasource["url"]


def test_dashboards_parse_and_use_provisioned_datasources() -> None:
    uids = set(_provisioned_datasources())
    files = dashboard_files()
    assert files
    seen_uids: set[str] = set()
    for path in files:
        dashboard = load_dashboard(path)
        assert dashboard.get("uid"), path.name
        assert dashboard["uid"] not in seen_uids, f"duplicate uid {dashboard['uid']}"
        seen_uids.add(dashboard["uid"])
        assert dashboard.get("schemaVersion", 0) >= 39, path.name
        for variable in dashboard.get("templating", {}).get("list", []):
            if "datasource" in variable:
                assert variable["datasource"]["uid"] in uids, (path.name, variable["name"])
        panels = [p for p in iter_panels(dashboard["panels"]) if p.get("type") != "row"]
        assert panels, path.name
        for panel in panels:
            where = (path.name, panel.get("title"))
            assert panel["datasource"]["uid"] in uids, where
            targets = panel.get("targets") or []
            assert any(t.get("expr") for t in targets), where
            for target in targets:
                if "datasource" in target:
                    assert target["datasource"]["uid"] in uids, where


def test_dashboard_queries_use_known_series() -> None:
    queries = dashboard_queries()
    used: set[str] = set()
    for query in queries:
        names = metric_names(query.expr)
        assert names, query
        unknown = names - SDK_SERIES - set(COLLECTOR_SERIES)
        assert not unknown, (query.panel_title, unknown)
        used |= names
        assert query.needs_collector == bool(names & set(COLLECTOR_SERIES)), query
    # Every instrument of the telemetry contract is on a dashboard.
    for name, *_ in SDK_INSTRUMENTS:
        prefix = name.replace(".", "_")
        assert any(u.startswith(prefix) for u in used), name
    assert any(q.needs_collector for q in queries)


def _series_labels() -> dict[str, set[str]]:
    """Label names per series family, from the real Python Prometheus exporter."""
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from opentelemetry.sdk.metrics import MeterProvider
        from prometheus_client import CollectorRegistry, generate_latest
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        unavailable("opentelemetry-exporter-prometheus")

    registry = CollectorRegistry()
    try:
        reader = PrometheusMetricReader(registry=registry)
    except TypeError:  # older exporter without the registry argument
        from prometheus_client import REGISTRY

        registry = REGISTRY
        reader = PrometheusMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    try:
        meter = provider.get_meter("otelmw.test_stack_config")
        for name, kind, unit, attributes in SDK_INSTRUMENTS:
            attrs = {key: "x" for key in attributes}
            if kind == "histogram":
                meter.create_histogram(name, unit=unit).record(1.0, attrs)
            else:
                meter.create_counter(name, unit=unit).add(1, attrs)
        text = generate_latest(registry).decode()
    finally:
        provider.shutdown()
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)
    return labels


def test_sdk_exporter_produces_the_dashboard_series_and_labels() -> None:
    """The names and labels the dashboards use are those the Python exporter writes."""
    produced = _series_labels()
    assert set(SDK_SERIES) <= set(produced), sorted(set(SDK_SERIES) - set(produced))
    for query in dashboard_queries():
        families = metric_names(query.expr)
        if len(families) != 1:
            continue
        (family,) = families
        available = produced.get(family) or set(COLLECTOR_SERIES.get(family, ()))
        # Labels the collector adds from resources / span data are also fine.
        available = available | {"le", "job", "instance", "service_name"}
        used = label_names(query.expr)
        assert used <= available, (query.panel_title, used - available)

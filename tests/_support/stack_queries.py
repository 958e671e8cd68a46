"""The PromQL the shipped Grafana dashboards run, for static and live tests.

`dashboard_queries()` lists every panel query of every dashboard under
``dashboards/`` with Grafana's template variables and interval macros
replaced, so the expression can be sent to a Prometheus server as is (or
checked with ``promtool``). ``needs_collector`` marks queries over series
that only the OpenTelemetry Collector produces (the ``span_metrics``
connector); the others work with otelmw's own Prometheus exporter as well.

This module only needs the standard library.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

REPO_ROOT = Path(__file__).resolve().parents[2]
DASHBOARD_DIR = REPO_ROOT / "dashboards"

# Instruments of the telemetry contract (docs: DESIGN "Telemetry contract"), as
# (OpenTelemetry name, kind, unit, attribute keys). The Prometheus names below
# were read from `prometheus_client.generate_latest()` after recording these
# instruments through `opentelemetry-exporter-prometheus` 0.66b2's
# PrometheusMetricReader: dots become underscores, the unit "s" becomes a
# `_seconds` suffix, annotation units like "{token}" are dropped, counters
# get `_total`, histograms `_bucket` / `_sum` / `_count`. The collector's
# prometheus exporter uses the same translation.
SDK_INSTRUMENTS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    (
        "gen_ai.client.operation.duration",
        "histogram",
        "s",
        ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "error.type"),
    ),
    (
        "gen_ai.client.token.usage",
        "histogram",
        "{token}",
        (
            "gen_ai.operation.name",
            "gen_ai.provider.name",
            "gen_ai.request.model",
            "gen_ai.token.type",
        ),
    ),
    ("gen_ai.execute_tool.duration", "histogram", "s", ("gen_ai.tool.name", "error.type")),
    ("gen_ai.invoke_agent.duration", "histogram", "s", ("gen_ai.agent.name", "error.type")),
    (
        "otelmw.middleware.duration",
        "histogram",
        "s",
        ("otelmw.middleware.kind", "otelmw.middleware.name", "otelmw.middleware.outcome"),
    ),
    (
        "otelmw.middleware.failures",
        "counter",
        "",
        ("otelmw.middleware.kind", "otelmw.middleware.name"),
    ),
    ("otelmw.rewrites", "counter", "", ("otelmw.rewrite.source",)),
    ("otelmw.tool.results", "counter", "", ("otelmw.result.success", "otelmw.runtime.id")),
    ("otelmw.normalize.failures", "counter", "", ("otelmw.runtime.id",)),
    ("otelmw.hook.failures", "counter", "", ("otelmw.hook.name",)),
)

# Prometheus series families produced for SDK_INSTRUMENTS (verified, see above).
SDK_SERIES: frozenset[str] = frozenset(
    {
        "gen_ai_client_operation_duration_seconds_bucket",
        "gen_ai_client_operation_duration_seconds_sum",
        "gen_ai_client_operation_duration_seconds_count",
        "gen_ai_client_token_usage_bucket",
        "gen_ai_client_token_usage_sum",
        "gen_ai_client_token_usage_count",
        "gen_ai_execute_tool_duration_seconds_bucket",
        "gen_ai_execute_tool_duration_seconds_sum",
        "gen_ai_execute_tool_duration_seconds_count",
        "gen_ai_invoke_agent_duration_seconds_bucket",
        "gen_ai_invoke_agent_duration_seconds_sum",
        "gen_ai_invoke_agent_duration_seconds_count",
        "otelmw_middleware_duration_seconds_bucket",
        "otelmw_middleware_duration_seconds_sum",
        "otelmw_middleware_duration_seconds_count",
        "otelmw_middleware_failures_total",
        "otelmw_rewrites_total",
        "otelmw_tool_results_total",
        "otelmw_normalize_failures_total",
        "otelmw_hook_failures_total",
    }
)

# Dimensions configured on the collector's span_metrics connector
# (collector/otelcol-config.yaml), as Prometheus label names.
SPAN_METRICS_DIMENSIONS: tuple[str, ...] = (
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.tool.name",
    "otelmw.middleware.kind",
    "otelmw.middleware.name",
    "otelmw.middleware.outcome",
)
_SPAN_METRICS_LABELS = frozenset(
    {"service_name", "span_name", "span_kind", "status_code", "le"}
    | {d.replace(".", "_") for d in SPAN_METRICS_DIMENSIONS}
)

# Series only the collector produces (span_metrics connector, default namespace
# "traces.span.metrics", histogram unit "s"), with the labels they carry.
COLLECTOR_SERIES: dict[str, frozenset[str]] = {
    "traces_span_metrics_calls_total": _SPAN_METRICS_LABELS - {"le"},
    "traces_span_metrics_duration_seconds_bucket": _SPAN_METRICS_LABELS,
    "traces_span_metrics_duration_seconds_sum": _SPAN_METRICS_LABELS - {"le"},
    "traces_span_metrics_duration_seconds_count": _SPAN_METRICS_LABELS - {"le"},
}

_METRIC_RE = re.compile(r"\b((?:gen_ai|otelmw|traces_span_metrics)_[a-z0-9_]+)\b")
# `by (a, b)` / `without (a)` groupings and `label op "value"` matchers.
_GROUPING_RE = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
_MATCHER_RE = re.compile(r'\b([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"')

# Values substituted for Grafana template variables and macros.
_SUBSTITUTIONS: tuple[tuple[str, str], ...] = (
    ("$__rate_interval", "5m"),
    ("$__interval", "1m"),
    ("$__range", "1h"),
)
_VAR_RE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


class DashboardQuery(NamedTuple):
    dashboard_file: str
    panel_title: str
    expr: str
    needs_collector: bool


def dashboard_files() -> list[Path]:
    return sorted(DASHBOARD_DIR.glob("*.json"))


def load_dashboard(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


def iter_panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every panel, including those nested in (collapsed) rows."""
    for panel in panels:
        yield panel
        yield from iter_panels(panel.get("panels") or [])


def render_expr(expr: str) -> str:
    """Replace Grafana macros with fixed durations and variables with ``.*``."""
    for macro, value in _SUBSTITUTIONS:
        expr = expr.replace(macro, value)
    return _VAR_RE.sub(".*", expr)


def metric_names(expr: str) -> set[str]:
    """Names of the otelmw / GenAI / span-metrics series an expression reads."""
    stripped = _MATCHER_RE.sub("", _GROUPING_RE.sub("", expr))
    return set(_METRIC_RE.findall(stripped))


def label_names(expr: str) -> set[str]:
    """Label names an expression groups by or matches on."""
    labels = set(_MATCHER_RE.findall(expr))
    for group in _GROUPING_RE.findall(expr):
        labels |= {label.strip() for label in group.split(",") if label.strip()}
    return labels


def needs_collector(expr: str) -> bool:
    return any(name in COLLECTOR_SERIES for name in metric_names(expr))


def dashboard_queries(render: bool = True) -> list[DashboardQuery]:
    """(dashboard_file, panel_title, expr, needs_collector) for every panel target.

    With ``render`` (the default) the expression is ready to run on Prometheus:
    ``$__rate_interval`` becomes ``5m`` and template variables match anything.
    ``dashboard_file`` is the file name relative to ``dashboards/``.
    """
    out: list[DashboardQuery] = []
    for path in dashboard_files():
        dashboard = load_dashboard(path)
        for panel in iter_panels(dashboard.get("panels") or []):
            for target in panel.get("targets") or []:
                expr = target.get("expr")
                if not expr:
                    continue
                out.append(
                    DashboardQuery(
                        path.name,
                        str(panel.get("title", "")),
                        render_expr(expr) if render else expr,
                        needs_collector(expr),
                    )
                )
    return out

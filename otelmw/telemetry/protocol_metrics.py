"""The MCP operation-duration metrics (``mcp.client.operation.duration``,
``mcp.server.operation.duration``), recorded by the ``otelmw_mcp`` host adapter
around each ``tools/call`` round trip it sees on the wire. Never raises."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import Histogram
from opentelemetry.semconv._incubating.metrics import mcp_metrics

from ..version import __version__

MCP_CLIENT_OPERATION_DURATION = mcp_metrics.MCP_CLIENT_OPERATION_DURATION
MCP_SERVER_OPERATION_DURATION = mcp_metrics.MCP_SERVER_OPERATION_DURATION
# The MCP conventions' advice (gen-ai/mcp.md)
MCP_DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0,
                        120.0, 300.0)

_lock = threading.Lock()
_histograms: dict[tuple[int, str], Histogram] = {}


def _histogram(provider: Any, name: str) -> Histogram:
    # one per meter provider (the global one may be set after the host is imported)
    key = (id(provider), name)
    found = _histograms.get(key)
    if found is None:
        with _lock:
            found = _histograms.get(key)
            if found is None:
                meter = metrics.get_meter("otelmw", __version__, provider)
                found = meter.create_histogram(
                    name, unit="s", description=(
                        "MCP request duration as observed on the "
                        + ("client" if "client" in name else "server")),
                    explicit_bucket_boundaries_advisory=list(MCP_DURATION_BUCKETS))
                _histograms[key] = found
    return found


def record_mcp_operation(side: str, seconds: float, attributes: Mapping[str, Any]) -> None:
    """One MCP request's duration on ``side`` (``client`` or ``server``)."""
    try:
        name = MCP_CLIENT_OPERATION_DURATION if side == "client" else (
            MCP_SERVER_OPERATION_DURATION)
        _histogram(metrics.get_meter_provider(), name).record(
            seconds, {k: v for k, v in attributes.items() if isinstance(v, str | int)})
    except Exception:  # telemetry never raises into the host's call
        pass

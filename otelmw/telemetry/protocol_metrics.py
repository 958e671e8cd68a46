"""The tool protocols' operation-duration metrics on the observer's meter: MCP's
``mcp.client.operation.duration`` and ``mcp.server.operation.duration``, one point per
request a host adapter saw on the wire (``host.record_protocol_operation`` → the
observer's ``protocol_operation``). Never raises."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.metrics import Histogram, Meter
from opentelemetry.semconv._incubating.metrics import mcp_metrics

MCP_CLIENT_OPERATION_DURATION = mcp_metrics.MCP_CLIENT_OPERATION_DURATION
MCP_SERVER_OPERATION_DURATION = mcp_metrics.MCP_SERVER_OPERATION_DURATION
# The MCP conventions' advice (gen-ai/mcp.md)
MCP_DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0,
                        120.0, 300.0)


class ProtocolMetrics:
    """The histograms, made once on the observer's meter; ``record`` is the
    observer's ``protocol_operation``."""

    __slots__ = ("_by_side", "_on_error")

    def __init__(self, meter: Meter, on_error: Callable[[str, Exception], None]) -> None:
        self._on_error = on_error

        def histogram(name: str, side: str) -> Histogram:
            return meter.create_histogram(
                name, unit="s", description=f"MCP request duration as observed on the {side}",
                explicit_bucket_boundaries_advisory=list(MCP_DURATION_BUCKETS))

        self._by_side: dict[tuple[str, str], Histogram] = {
            ("mcp", "client"): histogram(MCP_CLIENT_OPERATION_DURATION, "client"),
            ("mcp", "server"): histogram(MCP_SERVER_OPERATION_DURATION, "server")}

    def record(self, protocol: str, side: str, seconds: float,
               attributes: Mapping[str, Any]) -> None:
        """One request of ``protocol`` (``mcp``) on ``side`` (``client``, ``server``)
        took ``seconds``; a protocol or side without a metric records nothing."""
        try:
            histogram = self._by_side.get((protocol, side))
            if histogram is not None:
                histogram.record(seconds, {k: v for k, v in attributes.items()
                                           if isinstance(v, str | int)})
        except Exception as exc:  # telemetry never raises into the host's call
            self._on_error("protocol_operation", exc)

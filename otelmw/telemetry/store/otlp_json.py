"""OTLP/JSON as the store writes it: one export request per line.

The encoding the Collector's ``file`` exporter writes and its ``otlpjsonfile``
receiver reads: lowerCamelCase fields, trace/span ids as hex, enums as numbers.
"""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId"})
REQUEST_TYPES: dict[str, type[Message]] = {
    "traces": ExportTraceServiceRequest,
    "logs": ExportLogsServiceRequest,
    "metrics": ExportMetricsServiceRequest,
}


def _ids_to_hex(node: Any, b64: bool) -> Any:
    """Convert id fields between protobuf-JSON base64 and OTLP-JSON hex."""
    import base64

    if isinstance(node, dict):
        for k, v in node.items():
            if k in _ID_KEYS and isinstance(v, str) and v:
                node[k] = base64.b64decode(v).hex() if b64 else base64.b64encode(
                    bytes.fromhex(v)).decode()
            else:
                _ids_to_hex(v, b64)
    elif isinstance(node, list):
        for x in node:
            _ids_to_hex(x, b64)
    return node


def to_otlp_json(message: Message) -> str:
    d = json_format.MessageToDict(message, use_integers_for_enums=True)  # OTLP/JSON: enums as ints
    return json.dumps(_ids_to_hex(d, True), separators=(",", ":"))


def from_otlp_json(signal: str, line: str) -> Message:
    d = _ids_to_hex(json.loads(line), False)
    msg = REQUEST_TYPES[signal]()
    json_format.ParseDict(d, msg, ignore_unknown_fields=True)
    return msg



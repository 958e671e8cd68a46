"""A record of every span, log record and metric the suite sees, to diff two code versions.

Set ``OTELMW_TELEMETRY_SNAPSHOT=<dir>`` and run the suite: each test writes
``<dir>/<matrix env>/<test id>.jsonl``, the sorted, normalized telemetry it produced in process
(every span any SDK ``TracerProvider`` ends, every log record any ``LoggerProvider``
emits) and every span, log record and metric the suite's OTLP receivers took in
from the programs the test ran. Values that differ from run to run (ids,
timestamps, durations, temporary paths, ports, keyed digests) are masked, so a
refactor that changes nothing exported leaves ``diff -r`` of two snapshots empty.

It is a tool for changing the code safely, not a test: nothing asserts on it.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any

import pytest

ENV = "OTELMW_TELEMETRY_SNAPSHOT"

_HEX = re.compile(r"\b[0-9a-f]{8,}\b")
_NUM = re.compile(r"\d{5,}")
_TMP = re.compile(r"(/tmp|/var/tmp|/private)[^\s\"',:)]*")
_PORT = re.compile(r"127\.0\.0\.1:\d+|localhost:\d+")
_DIGEST = re.compile(r"(blake2b-keyed[a-z-]*|sha256[a-z-]*):[0-9a-zA-Z+/=_-]+")
_NOISY_KEYS = ("duration", "time", "pid", "thread", "_ns", ".port", "latency")


def _text(value: str) -> str:
    value = _DIGEST.sub(r"\1:<digest>", value)
    value = _TMP.sub("<path>", value)
    value = _PORT.sub("<addr>", value)
    value = _HEX.sub("<hex>", value)
    return _NUM.sub("<n>", value)


def _value(key: str, value: Any) -> Any:
    if any(part in key for part in _NOISY_KEYS) and isinstance(value, (int, float)):
        return f"<{type(value).__name__}>"
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        return "<float>"
    if isinstance(value, int):
        return value if abs(value) < 10**9 else "<bigint>"
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, bytes):
        return f"<bytes {len(value)}>"
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: str(kv[0]))
        return {str(k): _value(str(k), v) for k, v in items}
    if isinstance(value, (list, tuple)):
        return [_value(key, v) for v in value]
    return _text(repr(value))


def _attrs(attrs: Any) -> dict[str, Any]:
    return {str(k): _value(str(k), v) for k, v in sorted(dict(attrs or {}).items())}


class _Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.records: list[str] = []

    def add(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, sort_keys=True, default=repr)
        with self.lock:
            self.records.append(line)

    def take(self) -> list[str]:
        with self.lock:
            out, self.records = sorted(self.records), []
        return out


RECORDER = _Recorder()


def _sdk_span(span: Any) -> dict[str, Any]:
    return {"signal": "span", "name": span.name, "kind": str(span.kind),
            "status": str(span.status.status_code),
            "status_message": _text(span.status.description or ""),
            "has_parent": span.parent is not None,
            "attributes": _attrs(span.attributes),
            "events": [{"name": e.name, "attributes": _attrs(e.attributes)} for e in span.events],
            "links": len(span.links), "scope": getattr(span.instrumentation_scope, "name", "")}


def _sdk_log(data: Any) -> dict[str, Any]:
    rec = getattr(data, "log_record", data)
    return {"signal": "log", "event_name": str(getattr(rec, "event_name", "") or ""),
            "severity": str(getattr(rec, "severity_number", "")),
            "body": _value("body", getattr(rec, "body", None)),
            "attributes": _attrs(getattr(rec, "attributes", None))}


def _record_before(cls: Any, method: str, record: Any) -> None:
    """Make ``cls.method(self, item)`` add ``record(item)`` to the snapshot first."""
    original = getattr(cls, method)

    def recording(self: Any, item: Any) -> None:
        try:
            RECORDER.add(record(item))
        except Exception as exc:  # the record must never break a test
            RECORDER.add({"signal": "snapshot-error", "error": repr(exc)})
        original(self, item)

    setattr(cls, method, recording)


def _install_sdk_patches() -> None:
    from opentelemetry.sdk import _logs, trace

    for cls in (trace.SynchronousMultiSpanProcessor, trace.ConcurrentMultiSpanProcessor):
        _record_before(cls, "on_end", _sdk_span)
    for lcls in (_logs.SynchronousMultiLogRecordProcessor, _logs.ConcurrentMultiLogRecordProcessor):
        _record_before(lcls, "on_emit", _sdk_log)


def _install_receiver_patch() -> None:
    from _support import otlp_receiver

    original = otlp_receiver.OtlpReceiver._record

    def _record(self: Any, signal: str, protocol: str, msg: Any, headers: Any) -> None:
        original(self, signal, protocol, msg, headers)
        try:
            for item in otlp_receiver.decode_otlp(signal, msg):
                RECORDER.add(_received(signal, item))
        except Exception as exc:
            RECORDER.add({"signal": "snapshot-error", "error": repr(exc)})

    otlp_receiver.OtlpReceiver._record = _record  # type: ignore[method-assign]


def _received(signal: str, item: Any) -> dict[str, Any]:
    if signal == "traces":
        return {"signal": "otlp-span", "name": item.name, "kind": item.kind,
                "status": item.status_code, "status_message": _text(item.status_message),
                "has_parent": item.parent_span_id is not None,
                "attributes": _attrs(item.attributes),
                "events": [{"name": e.name, "attributes": _attrs(e.attributes)}
                           for e in item.events],
                "resource_keys": sorted(item.resource), "scope": item.scope_name}
    if signal == "logs":
        return {"signal": "otlp-log", "event_name": item.event_name,
                "severity": item.severity_number, "body": _value("body", item.body),
                "attributes": _attrs(item.attributes)}
    return {"signal": "otlp-metric", "name": item.name, "unit": item.unit, "kind": item.kind,
            "point_attribute_sets": sorted({json.dumps(_attrs(p.attributes), sort_keys=True)
                                            for p in item.data_points})}


def install(config: pytest.Config) -> None:
    """Called from conftest when ``OTELMW_TELEMETRY_SNAPSHOT`` is set."""
    out = Path(os.environ[ENV]) / os.environ.get("OTELMW_TEST_ENV", "default")
    out.mkdir(parents=True, exist_ok=True)
    _install_sdk_patches()
    _install_receiver_patch()
    config.pluginmanager.register(_Writer(out), "otelmw-telemetry-snapshot")


class _Writer:
    def __init__(self, out: Path) -> None:
        self.out = out

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        records = RECORDER.take()
        if records:
            name = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid)[:200]
            (self.out / f"{name}.jsonl").write_text("\n".join(records) + "\n")

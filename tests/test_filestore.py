"""The embedded OTLP-JSON lines store: format, rotation, pruning, torn lines."""

from __future__ import annotations

import json
import os
import re
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from _support.otlp_receiver import OtlpReceiver
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from otelmw.telemetry.store import exporters, otlp_json, readers
from otelmw.telemetry.store import files as store_files

HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")
CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")
RESOURCE = Resource.create({"service.name": "filestore-test"})


@pytest.fixture(autouse=True)
def _store_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("OTELMW_DATA_"):
            monkeypatch.delenv(name)


def _files(directory: Path, signal: str) -> list[Path]:
    return sorted(directory.glob(f"{signal}-*.jsonl"))


def _lines(directory: Path, signal: str) -> list[str]:
    out: list[str] = []
    for path in _files(directory, signal):
        out.extend(x for x in path.read_text(encoding="utf-8").splitlines() if x.strip())
    return out


def _walk_keys(node: Any, path: str = "") -> list[tuple[str, str, Any]]:
    """Every (path, key, value) of every dict in the tree."""
    found: list[tuple[str, str, Any]] = []
    if isinstance(node, dict):
        for k, v in node.items():
            found.append((path, k, v))
            found.extend(_walk_keys(v, f"{path}.{k}"))
    elif isinstance(node, list):
        for x in node:
            found.extend(_walk_keys(x, path))
    return found


def _assert_otlp_json(line: str) -> dict[str, Any]:
    doc = json.loads(line)
    for where, key, value in _walk_keys(doc):
        assert CAMEL.match(key), f"non-lowerCamelCase key {key!r} at {where}"
        if key == "traceId":
            assert isinstance(value, str) and HEX32.match(value), (where, value)
        if key in ("spanId", "parentSpanId"):
            assert isinstance(value, str) and HEX16.match(value), (where, key, value)
        if key in ("kind", "severityNumber", "aggregationTemporality") or (
                key == "code" and where.endswith(".status")):
            assert isinstance(value, int), f"enum {key} at {where} not a number: {value!r}"
    return doc


def _make_spans(directory: Path) -> list[Any]:
    memory = InMemorySpanExporter()
    tp = TracerProvider(resource=RESOURCE, shutdown_on_exit=False)
    tp.add_span_processor(SimpleSpanProcessor(exporters.FileSpanExporter(directory)))
    tp.add_span_processor(SimpleSpanProcessor(memory))
    tracer = tp.get_tracer("filestore-test", "1.0")
    with tracer.start_as_current_span("invoke_agent t", kind=SpanKind.INTERNAL) as root:
        with tracer.start_as_current_span(
                "chat m", kind=SpanKind.CLIENT,
                attributes={"gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 3,
                            "gen_ai.response.finish_reasons": ["stop"], "ratio": 0.5,
                            "ok": True}) as chat:
            chat.add_event("retry", {"attempt": 1})
        with tracer.start_as_current_span(
                "execute_tool t", links=[Link(root.get_span_context(), {"why": "x"})]) as tool:
            tool.set_status(Status(StatusCode.ERROR, "boom"))
    tp.shutdown()
    return list(memory.get_finished_spans())


def test_span_lines_are_otlp_json_with_hex_ids(tmp_path: Path) -> None:
    spans = _make_spans(tmp_path)
    lines = _lines(tmp_path, "traces")
    assert len(lines) == len(spans) == 3  # SimpleSpanProcessor: one request per span
    seen = {}
    for line in lines:
        doc = _assert_otlp_json(line)
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    seen[s["spanId"]] = s
        # the converted document is a valid ExportTraceServiceRequest (strict parse)
        strict = otlp_json.REQUEST_TYPES["traces"]()
        json_format.ParseDict(otlp_json._ids_to_hex(json.loads(line), False), strict)
        parsed = otlp_json.from_otlp_json("traces", line)
        assert parsed == strict
        assert otlp_json.to_otlp_json(parsed) == line  # lossless round trip

    by_name = {s.name: s for s in spans}
    for s in spans:
        sid = format(s.context.span_id, "016x")
        stored = seen[sid]
        assert stored["traceId"] == format(s.context.trace_id, "032x")
        assert stored["name"] == s.name
        if s.parent is not None:
            assert stored["parentSpanId"] == format(s.parent.span_id, "016x")
        else:
            assert "parentSpanId" not in stored
    assert seen[format(by_name["chat m"].context.span_id, "016x")]["kind"] == 3  # CLIENT
    tool = seen[format(by_name["execute_tool t"].context.span_id, "016x")]
    assert tool["status"]["code"] == 2
    assert tool["links"][0]["spanId"] == format(by_name["invoke_agent t"].context.span_id, "016x")
    # Everything stored equals what the SDK's own OTLP encoder produces.
    combined = otlp_json.REQUEST_TYPES["traces"]()
    for line in lines:
        combined.MergeFrom(otlp_json.from_otlp_json("traces", line))
    expected = encode_spans(sorted(spans, key=lambda s: s.end_time))
    assert sorted(s.span_id for rs in combined.resource_spans for ss in rs.scope_spans
                  for s in ss.spans) == sorted(s.span_id for rs in expected.resource_spans
                                               for ss in rs.scope_spans for s in ss.spans)


def test_log_and_metric_lines_are_otlp_json(tmp_path: Path) -> None:
    tp = TracerProvider(resource=RESOURCE, shutdown_on_exit=False)
    lp = LoggerProvider(resource=RESOURCE, shutdown_on_exit=False)
    logs_memory = InMemoryLogRecordExporter()
    lp.add_log_record_processor(SimpleLogRecordProcessor(exporters.FileLogExporter(tmp_path)))
    lp.add_log_record_processor(SimpleLogRecordProcessor(logs_memory))
    reader = PeriodicExportingMetricReader(exporters.FileMetricExporter(tmp_path),
                                           export_interval_millis=3_600_000)
    mp = MeterProvider(resource=RESOURCE, metric_readers=[reader], shutdown_on_exit=False)
    meter = mp.get_meter("filestore-test")
    meter.create_histogram("gen_ai.client.operation.duration", unit="s").record(
        0.25, {"gen_ai.operation.name": "chat"})
    meter.create_counter("otelmw.rewrites").add(2, {"k": "v"})
    with tp.get_tracer("t").start_as_current_span("parent") as span:
        lp.get_logger("otelmw").emit(event_name="otelmw.hook.pre_tool_call",
                                     attributes={"otelmw.tool.call.id": "c1"}, body="b")
    mp.force_flush()
    mp.shutdown()
    lp.shutdown()

    log_lines = _lines(tmp_path, "logs")
    assert len(log_lines) == 1
    doc = _assert_otlp_json(log_lines[0])
    record = doc["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]
    assert record["eventName"] == "otelmw.hook.pre_tool_call"
    assert record["traceId"] == format(span.get_span_context().trace_id, "032x")
    assert record["spanId"] == format(span.get_span_context().span_id, "016x")
    msg = otlp_json.from_otlp_json("logs", log_lines[0])
    rec = msg.resource_logs[0].scope_logs[0].log_records[0]
    assert rec.trace_id == span.get_span_context().trace_id.to_bytes(16, "big")
    encoded = encode_logs(list(logs_memory.get_finished_logs()))
    assert rec.span_id == encoded.resource_logs[0].scope_logs[0].log_records[0].span_id

    metric_lines = _lines(tmp_path, "metrics")
    assert metric_lines
    names = set()
    for line in metric_lines:
        mdoc = _assert_otlp_json(line)
        otlp_json.from_otlp_json("metrics", line)
        for rm in mdoc["resourceMetrics"]:
            for sm in rm["scopeMetrics"]:
                names.update(m["name"] for m in sm["metrics"])
    assert {"gen_ai.client.operation.duration", "otelmw.rewrites"} <= names


def test_stored_lines_are_accepted_by_an_otlp_json_receiver(tmp_path: Path) -> None:
    """An independent OTLP/JSON decoder (the receiver's HTTP JSON path) reads our lines
    the way the Collector's otlpjsonfile receiver would."""
    spans = _make_spans(tmp_path)
    with OtlpReceiver() as rx:
        for line in _lines(tmp_path, "traces"):
            req = urllib.request.Request(rx.http_url("traces"), data=line.encode(),
                                         method="POST",
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=10) as resp:
                assert resp.status == 200
        got = rx.wait_for_spans(len(spans), timeout=10)
    expected = {(format(s.context.trace_id, "032x"), format(s.context.span_id, "016x"),
                 format(s.parent.span_id, "016x") if s.parent else None, s.name)
                for s in spans}
    assert {(s.trace_id, s.span_id, s.parent_span_id, s.name) for s in got} == expected
    chat = next(s for s in got if s.name == "chat m")
    assert chat.kind == 3
    assert chat.attributes["gen_ai.usage.input_tokens"] == 3
    assert chat.resource["service.name"] == "filestore-test"


def test_rotation_by_max_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTELMW_DATA_MAX_BYTES", "1000")
    monkeypatch.setenv("OTELMW_DATA_MAX_FILES", "100")
    out = store_files.RotatingLines("traces", tmp_path)
    line_len = 0
    for i in range(25):
        line = json.dumps({"resourceSpans": [], "n": i, "pad": "é" * 90})
        line_len = len(line.encode()) + 1
        out.write(line)
    out.close()
    files = _files(tmp_path, "traces")
    assert len(files) > 1
    for path in files:
        # a file rolls over once it reached the limit: at most one line beyond it
        assert path.stat().st_size < 1000 + line_len
    assert [r["n"] for r in readers.read_requests("traces", tmp_path)] == list(range(25))


def test_pruning_keeps_newest_max_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Files of an older run (older mtimes) are pruned first; other signals untouched.
    old = tmp_path / "traces-20000101T000000-1-000001.jsonl"
    old.write_text(json.dumps({"n": -1}) + "\n")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    other = tmp_path / "logs-20000101T000000-1-000001.jsonl"
    other.write_text(json.dumps({"n": -2}) + "\n")
    monkeypatch.setenv("OTELMW_DATA_MAX_BYTES", "200")
    monkeypatch.setenv("OTELMW_DATA_MAX_FILES", "3")
    out = store_files.RotatingLines("traces", tmp_path)
    for i in range(40):  # ~120 bytes a line: about two lines per file, ~20 files written
        out.write(json.dumps({"n": i, "pad": "x" * 100}))
    out.close()
    files = _files(tmp_path, "traces")
    assert len(files) == 3
    assert not old.exists()
    assert other.exists()
    got = [r["n"] for r in readers.read_requests("traces", tmp_path)]
    assert got and got[-1] == 39  # the newest data survives, in order
    assert got == list(range(got[0], 40))


def test_exporter_rotates_through_env_limits(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTELMW_DATA_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("OTELMW_DATA_MAX_BYTES", "1500")
    monkeypatch.setenv("OTELMW_DATA_MAX_FILES", "2")
    assert store_files.data_dir() == tmp_path / "store"
    tp = TracerProvider(resource=RESOURCE, shutdown_on_exit=False)
    tp.add_span_processor(SimpleSpanProcessor(exporters.FileSpanExporter()))
    tracer = tp.get_tracer("t")
    for i in range(30):
        with tracer.start_as_current_span(f"span-{i}"):
            pass
    tp.shutdown()
    files = _files(tmp_path / "store", "traces")
    assert len(files) == 2
    names = [s["name"] for req in readers.read_requests("traces") for rs in req["resourceSpans"]
             for ss in rs["scopeSpans"] for s in ss["spans"]]
    assert names[-1] == "span-29"
    assert names == [f"span-{i}" for i in range(30 - len(names), 30)]


def test_torn_last_line_is_skipped(tmp_path: Path) -> None:
    spans = _make_spans(tmp_path)
    [path] = _files(tmp_path, "traces")
    good = path.read_text(encoding="utf-8").splitlines()
    assert len(good) == len(spans)
    # a crashed writer left half a line (cut inside a multi-byte character) at the end
    torn = (good[0][: len(good[0]) // 2] + "é").encode("utf-8")[:-1]
    with open(path, "ab") as fh:
        fh.write(torn)
    requests = list(readers.read_requests("traces", tmp_path))
    assert [json.dumps(r, separators=(",", ":")) for r in requests] == good
    # and a later writer (another process) still produces readable data
    later = store_files.RotatingLines("traces", tmp_path)
    later.write(json.dumps({"resourceSpans": [], "later": True}))
    later.close()
    requests = list(readers.read_requests("traces", tmp_path))
    assert len(requests) == len(good) + 1
    assert requests[-1] == {"resourceSpans": [], "later": True}


def test_torn_line_in_the_middle_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "logs-20240101T000000-1-000001.jsonl"
    path.write_text('{"a":1}\n\n{"b":\n   \n{"c":3}\n[1,2]\n', encoding="utf-8")
    assert list(readers.read_requests("logs", tmp_path)) == [{"a": 1}, {"c": 3}]
    assert list(readers.read_requests("logs", tmp_path / "missing")) == []


@pytest.mark.parametrize(("name", "value"), [("OTELMW_DATA_MAX_BYTES", "lots"),
                                             ("OTELMW_DATA_MAX_FILES", "0"),
                                             ("OTELMW_DATA_MAX_BYTES", "-5")])
def test_invalid_limits_raise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name):
        store_files.RotatingLines("traces", tmp_path)


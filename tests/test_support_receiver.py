"""Self-tests for the OTLP test receiver, driven by the stock OpenTelemetry SDK exporters."""

from __future__ import annotations

import gzip
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from _support.otlp_receiver import OtlpReceiver, ReceivedSpan, free_port
from _support.threads import run_in_threads
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
    OTLPMetricExporter as GrpcMetricExporter,
)
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
    OTLPMetricExporter as HttpMetricExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    InMemoryLogRecordExporter,
    LogRecordExportResult,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, Status, StatusCode

RESOURCE = Resource.create({"service.name": "rx-selftest", "deployment.environment": "test"})
# The attributes of the self-test's child span, of every OTLP value type.
CHILD_ATTRIBUTES: dict[str, Any] = {
    "gen_ai.request.model": "gpt-x",
    "gen_ai.usage.input_tokens": 42,
    "gen_ai.request.temperature": 0.25,
    "gen_ai.request.stream": True,
    "gen_ai.response.finish_reasons": ["tool_calls", "stop"],
    "int.list": [1, 2, 3],
}



# The OTLP exporter classes by signal: (gRPC, HTTP).
EXPORTERS: dict[str, tuple[Any, Any]] = {
    "traces": (GrpcSpanExporter, HttpSpanExporter),
    "logs": (GrpcLogExporter, HttpLogExporter),
    "metrics": (GrpcMetricExporter, HttpMetricExporter),
}


def _exporter(rx: OtlpReceiver, signal: str, protocol: str, **kw: Any) -> Any:
    """The SDK's own OTLP exporter of ``signal`` over ``protocol``, pointed at ``rx``."""
    grpc_exporter, http_exporter = EXPORTERS[signal]
    if protocol == "grpc":
        return grpc_exporter(endpoint=rx.grpc_endpoint, insecure=True, **kw)
    return http_exporter(endpoint=rx.http_url(signal), **kw)


def _span_exporter(rx: OtlpReceiver, protocol: str, **kw: Any) -> SpanExporter:
    exporter: SpanExporter = _exporter(rx, "traces", protocol, **kw)
    return exporter


def _finished_spans(tracer_provider: TracerProvider) -> list[ReadableSpan]:
    """Produce a parent/child pair with every attribute type, an event and an error status."""
    tracer = tracer_provider.get_tracer("rx.selftest.scope")
    made: list[ReadableSpan] = []
    with tracer.start_as_current_span(
        "invoke_agent demo", kind=SpanKind.INTERNAL, attributes={"gen_ai.agent.name": "demo"}
    ) as parent:
        with tracer.start_as_current_span("chat gpt-x", kind=SpanKind.CLIENT) as child:
            child.set_attributes(CHILD_ATTRIBUTES)
            child.add_event("gen_ai.choice", {"index": 0, "finish_reason": "stop"})
            child.set_status(Status(StatusCode.ERROR, "boom"))
        made.extend([child, parent])  # type: ignore[list-item]
    return made


@pytest.mark.parametrize(
    ("protocol", "kw"),
    [("grpc", {}), ("http", {}), ("http", {"compression": Compression.Gzip})],
    ids=["grpc", "http", "http-gzip"],
)
def test_span_exporter_roundtrip(rx: OtlpReceiver, protocol: str, kw: dict[str, Any]) -> None:
    tp = TracerProvider(resource=RESOURCE)
    tp.add_span_processor(SimpleSpanProcessor(_span_exporter(rx, protocol, **kw)))
    child, parent = _finished_spans(tp)
    tp.shutdown()

    spans = rx.wait_for_spans(2)
    assert [s.name for s in spans] == ["chat gpt-x", "invoke_agent demo"]
    by_name = {s.name: s for s in spans}
    got_child, got_parent = by_name["chat gpt-x"], by_name["invoke_agent demo"]

    assert got_parent.trace_id == format(parent.context.trace_id, "032x")
    assert got_parent.span_id == format(parent.context.span_id, "016x")
    assert got_parent.parent_span_id is None
    assert got_child.trace_id == got_parent.trace_id
    assert got_child.span_id == format(child.context.span_id, "016x")
    assert got_child.parent_span_id == got_parent.span_id

    assert got_parent.attributes == {"gen_ai.agent.name": "demo"}
    assert got_child.attributes == CHILD_ATTRIBUTES
    assert got_child.kind == 3 and got_parent.kind == 1  # CLIENT / INTERNAL in OTLP numbering
    assert (got_child.status_code, got_child.status_message) == (2, "boom")
    assert got_parent.status_code == 0
    assert [(e.name, e.attributes) for e in got_child.events] == [
        ("gen_ai.choice", {"index": 0, "finish_reason": "stop"})
    ]
    assert got_child.scope_name == "rx.selftest.scope"
    assert got_child.resource["service.name"] == "rx-selftest"
    assert got_child.resource["deployment.environment"] == "test"
    assert got_child.start_ns == child.start_time and got_child.end_ns == child.end_time
    assert got_child.duration_ns > 0

    assert rx.request_count("traces", protocol) == 2  # SimpleSpanProcessor: one call per span
    assert rx.accepted_count("traces", protocol) == 2
    assert rx.request_count("traces", "grpc" if protocol == "http" else "http") == 0
    if kw:
        raw = rx.raw_requests("traces")[0]
        assert raw.headers.get("content-encoding") == "gzip"


def test_http_json_and_raw_gzip_payloads(rx: OtlpReceiver) -> None:
    trace_id, parent_id, span_id = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b173", "ab" * 8
    payload = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "j"}}]
                },
                "scopeSpans": [
                    {
                        "scope": {"name": "json-scope"},
                        "spans": [
                            {
                                "traceId": trace_id,
                                "spanId": span_id,
                                "parentSpanId": parent_id,
                                "name": "json span",
                                "kind": 3,
                                "startTimeUnixNano": "1000",
                                "endTimeUnixNano": "2500",
                                "attributes": [
                                    {"key": "i", "value": {"intValue": "7"}},
                                    {"key": "kv", "value": {"kvlistValue": {"values": [
                                        {"key": "a", "value": {"doubleValue": 1.5}}]}}},
                                    {"key": "b", "value": {"bytesValue": "AAE="}},
                                ],
                                "status": {"code": 2, "message": "bad"},
                            }
                        ],
                    }
                ],
            }
        ]
    }  # fmt: skip
    resp = httpx.post(rx.http_url("traces"), json=payload)
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "application/json"
    (span,) = rx.wait_for_spans(1)
    assert (span.trace_id, span.span_id, span.parent_span_id) == (trace_id, span_id, parent_id)
    assert span.attributes == {"i": 7, "kv": {"a": 1.5}, "b": b"\x00\x01"}
    assert (span.kind, span.status_code, span.status_message) == (3, 2, "bad")
    assert (span.start_ns, span.end_ns, span.scope_name) == (1000, 2500, "json-scope")
    assert span.resource == {"service.name": "j"}

    # gzip'd protobuf built by the SDK encoder, sent by hand.
    raw = rx.raw_requests("traces")[0].message.SerializeToString()
    resp = httpx.post(
        rx.http_url("traces"),
        content=gzip.compress(raw),
        headers={"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"},
    )
    assert resp.status_code == 200 and resp.headers["content-type"] == "application/x-protobuf"
    assert [s.span_id for s in rx.wait_for_spans(2)] == [span_id, span_id]

    assert httpx.post(rx.http_url("traces"), content=b"\xff\x00garbage").status_code == 400
    assert httpx.post(f"{rx.http_endpoint}/v1/nope", content=b"").status_code == 404


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_log_exporter_roundtrip(rx: OtlpReceiver, protocol: str) -> None:
    exporter = _exporter(rx, "logs", protocol)
    lp = LoggerProvider(resource=RESOURCE)
    lp.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    tp = TracerProvider(resource=RESOURCE)
    with tp.get_tracer("t").start_as_current_span("parent") as span:
        lp.get_logger("rx.logs").emit(
            event_name="gen_ai.client.inference.operation.details",
            body={"messages": [{"role": "user", "content": "hi"}], "n": 2},
            attributes={"gen_ai.operation.name": "chat", "flag": False},
            severity_number=SeverityNumber.INFO,
            severity_text="INFO",
        )
    lp.get_logger("rx.logs").emit(body="plain text", severity_number=SeverityNumber.WARN)
    lp.shutdown()

    logs = rx.wait_for_logs(2)
    first, second = logs
    assert first.event_name == "gen_ai.client.inference.operation.details"
    assert first.body == {"messages": [{"role": "user", "content": "hi"}], "n": 2}
    assert first.attributes == {"gen_ai.operation.name": "chat", "flag": False}
    assert (first.severity_number, first.severity_text) == (9, "INFO")
    assert first.trace_id == format(span.get_span_context().trace_id, "032x")
    assert first.span_id == format(span.get_span_context().span_id, "016x")
    assert first.resource["service.name"] == "rx-selftest" and first.scope_name == "rx.logs"
    assert (second.body, second.event_name, second.severity_number) == ("plain text", "", 13)
    assert second.trace_id is None and second.span_id is None
    assert rx.logs(event_name="gen_ai.client.inference.operation.details") == [first]
    assert rx.accepted_count("logs", protocol) == 2


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_metric_exporter_roundtrip(rx: OtlpReceiver, protocol: str) -> None:
    exporter = _exporter(rx, "metrics", protocol)
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=3_600_000)
    mp = MeterProvider(resource=RESOURCE, metric_readers=[reader])
    meter = mp.get_meter("rx.metrics")
    tokens = meter.create_counter("gen_ai.client.token.usage.total", unit="{token}")
    tokens.add(10, {"gen_ai.token.type": "input"})
    tokens.add(5, {"gen_ai.token.type": "input"})
    tokens.add(3, {"gen_ai.token.type": "output"})
    duration = meter.create_histogram("gen_ai.client.operation.duration", unit="s")
    for value in (0.5, 1.5, 4.0):
        duration.record(value, {"gen_ai.operation.name": "chat"})
    meter.create_gauge("queue.depth").set(7.5, {"q": "a"})
    assert mp.force_flush()

    rx.wait_for_metric("gen_ai.client.operation.duration")
    (counter,) = rx.metrics("gen_ai.client.token.usage.total")
    assert (counter.kind, counter.unit, counter.is_monotonic) == ("sum", "{token}", True)
    assert sorted((p.attributes["gen_ai.token.type"], p.value) for p in counter.data_points) == [
        ("input", 15),
        ("output", 3),
    ]
    (hist,) = rx.metrics("gen_ai.client.operation.duration")
    assert (hist.kind, hist.unit, hist.scope_name) == ("histogram", "s", "rx.metrics")
    ((attrs, value),) = hist.data_points
    assert attrs == {"gen_ai.operation.name": "chat"}
    assert (value["count"], value["sum"], value["min"], value["max"]) == (3, 6.0, 0.5, 4.0)
    assert sum(value["bucket_counts"]) == 3
    assert len(value["bucket_counts"]) == len(value["explicit_bounds"]) + 1
    (gauge,) = rx.metrics("queue.depth")
    assert gauge.kind == "gauge" and gauge.data_points == [({"q": "a"}, 7.5)]
    assert counter.resource["service.name"] == "rx-selftest"
    assert rx.request_count("metrics", protocol) == 1
    mp.shutdown()


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_error_mode_makes_exporter_fail(protocol: str) -> None:
    with OtlpReceiver(mode="error") as rx:
        exporter = _span_exporter(rx, protocol, timeout=2)
        tp = TracerProvider(resource=RESOURCE)
        (span,) = _finished_spans(tp)[:1]
        assert exporter.export([span]) == SpanExportResult.FAILURE
        assert rx.request_count("traces", protocol) >= 1  # it did reach us, and was refused
        assert rx.accepted_count() == 0 and rx.spans() == []

        rx.mode = "ok"  # recovery: same exporter succeeds now
        assert exporter.export([span]) == SpanExportResult.SUCCESS
        assert [s.name for s in rx.wait_for_spans(1)] == ["chat gpt-x"]
        exporter.shutdown()


def test_error_mode_log_exporter_fails_with_custom_http_status() -> None:
    with OtlpReceiver(mode="error", http_error_status=400) as rx:  # 400: not retryable
        memory = InMemoryLogRecordExporter()
        lp = LoggerProvider()
        lp.add_log_record_processor(SimpleLogRecordProcessor(memory))
        lp.get_logger("x").emit(body="lost")
        exporter = HttpLogExporter(endpoint=rx.http_url("logs"), timeout=5)
        assert exporter.export(memory.get_finished_logs()) == LogRecordExportResult.FAILURE
        assert rx.request_count("logs", "http") == 1  # no retries on a 400
        assert rx.logs() == []
        rx.mode = "ok"
        assert exporter.export(memory.get_finished_logs()) == LogRecordExportResult.SUCCESS
        assert [log.body for log in rx.wait_for_logs(1)] == ["lost"]
        lp.shutdown()


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_blackhole_mode_exporter_times_out(protocol: str) -> None:
    with OtlpReceiver(mode="blackhole") as rx:
        exporter = _span_exporter(rx, protocol, timeout=1)
        (span,) = _finished_spans(TracerProvider())[:1]
        started = time.monotonic()
        assert exporter.export([span]) == SpanExportResult.FAILURE
        elapsed = time.monotonic() - started
        assert 0.9 <= elapsed < 4.0, elapsed
        assert rx.request_count("traces", protocol) >= 1 and rx.spans() == []

        rx.mode = "ok"
        exporter2 = _span_exporter(rx, protocol, timeout=5)
        assert exporter2.export([span]) == SpanExportResult.SUCCESS
        assert len(rx.wait_for_spans(1)) == 1
        exporter.shutdown()
        exporter2.shutdown()


def test_blackhole_is_released_by_stop() -> None:
    rx = OtlpReceiver(mode="blackhole").start()
    outcome: list[object] = []

    def post() -> None:
        try:
            outcome.append(httpx.post(rx.http_url("traces"), content=b"", timeout=30))
        except httpx.HTTPError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=post)
    worker.start()
    rx.wait_for(lambda: rx.request_count("traces") >= 1, timeout=5)
    time.sleep(0.3)
    assert worker.is_alive()  # parked: no answer while blackholed
    started = time.monotonic()
    rx.stop()  # must not hang on the parked request
    worker.join(timeout=10)
    assert time.monotonic() - started < 6
    assert len(outcome) == 1 and isinstance(outcome[0], httpx.HTTPError)  # never answered


def test_slow_mode_delays_then_accepts() -> None:
    with OtlpReceiver(mode="slow", slow_seconds=0.6) as rx:
        exporter = _span_exporter(rx, "grpc", timeout=5)
        (span,) = _finished_spans(TracerProvider())[:1]
        started = time.monotonic()
        assert exporter.export([span]) == SpanExportResult.SUCCESS
        assert time.monotonic() - started >= 0.55
        assert rx.accepted_count("traces", "grpc") == 1
        exporter.shutdown()


def test_accessors_clear_wait_and_lifecycle() -> None:
    rx = OtlpReceiver()
    with pytest.raises(RuntimeError):
        _ = rx.grpc_endpoint
    with pytest.raises(ValueError):
        rx.mode = "flaky"
    with rx:
        assert rx.grpc_endpoint.startswith("http://127.0.0.1:")
        assert rx.http_endpoint.startswith("http://127.0.0.1:")
        assert rx.grpc_endpoint != rx.http_endpoint
        tp = TracerProvider()
        tp.add_span_processor(SimpleSpanProcessor(_span_exporter(rx, "http")))
        _finished_spans(tp)
        assert {s.name for s in rx.wait_for_spans(2)} == {"chat gpt-x", "invoke_agent demo"}
        assert [s.name for s in rx.spans("invoke_agent demo")] == ["invoke_agent demo"]
        assert rx.request_counts == {("traces", "http"): 2}
        with pytest.raises(TimeoutError, match="2 spans"):
            rx.wait_for_spans(3, timeout=0.2)
        rx.clear()
        assert rx.spans() == [] and rx.request_count() == 0
        port = int(rx.http_endpoint.rsplit(":", 1)[1])
        tp.shutdown()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass
    assert isinstance(free_port(), int)


def _names(spans: list[ReceivedSpan]) -> list[str]:
    return sorted(s.name for s in spans)


def test_concurrent_exports_are_all_recorded(rx: OtlpReceiver) -> None:
    def emit(protocol: str, idx: int) -> Callable[[], None]:
        def run() -> None:
            tp = TracerProvider()
            tp.add_span_processor(SimpleSpanProcessor(_span_exporter(rx, protocol)))
            with tp.get_tracer("c").start_as_current_span(f"{protocol}-{idx}"):
                pass
            tp.shutdown()

        return run

    assert run_in_threads(emit(p, i) for p in ("grpc", "http") for i in range(8)) == []
    spans = rx.wait_for_spans(16)
    assert _names(spans) == sorted(f"{p}-{i}" for p in ("grpc", "http") for i in range(8))
    assert rx.request_counts == {("traces", "grpc"): 8, ("traces", "http"): 8}


def test_interpreter_exit_releases_parked_grpc_call(tmp_path: Any) -> None:
    """A receiver never stopped explicitly must not hang interpreter exit (blackholed call)."""
    script = tmp_path / "exit_check.py"
    script.write_text(
        "import threading\n"
        "from _support.otlp_receiver import OtlpReceiver\n"
        "from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "rx = OtlpReceiver(mode='blackhole').start()\n"
        "exp = OTLPSpanExporter(endpoint=rx.grpc_endpoint, insecure=True, timeout=60)\n"
        "tp = TracerProvider()\n"
        "tp.add_span_processor(SimpleSpanProcessor(exp))\n"
        "def run():\n"
        "    with tp.get_tracer('x').start_as_current_span('s'):\n"
        "        pass\n"
        "threading.Thread(target=run, daemon=True).start()\n"
        "rx.wait_for(lambda: rx.request_count() >= 1, 10)\n"
        "print('parked', flush=True)\n"
    )
    tests_dir = str(Path(__file__).parent)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([tests_dir, os.environ.get("PYTHONPATH", "")]),
    }
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "parked"
    assert time.monotonic() - started < 15

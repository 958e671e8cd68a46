"""docs/telemetry.md documents every key, event and metric the code emits."""

from __future__ import annotations

import tempfile
from pathlib import Path

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otelmw import PluginManager
from otelmw.demo import ScriptedProvider, build_demo_pipeline, register_demo_plugins, run_agent
from otelmw.telemetry import attributes as a
from otelmw.telemetry.content.policy import SPAN_AND_EVENT, ContentPolicy
from otelmw.telemetry.setup.observer import TelemetryObserver

DOC = (Path(__file__).resolve().parent.parent / "docs" / "telemetry.md").read_text()


def _documented(key: str) -> bool:
    if key.startswith(a.OTELMW_RESULT_METADATA_PREFIX):
        return "`otelmw.result.metadata.<key>`" in DOC
    return f"`{key}`" in DOC


def test_every_attribute_constant_is_documented() -> None:
    keys = [v for k, v in vars(a).items()
            if k.isupper() and isinstance(v, str) and "." in v and not k.startswith("M_")
            and k != "OTELMW_RESULT_METADATA_PREFIX"]
    assert len(keys) > 40
    missing = [k for k in keys if not _documented(k)]
    assert not missing, f"undocumented attribute keys: {missing}"


def test_every_metric_name_is_documented() -> None:
    names = [v for k, v in vars(a).items() if k.startswith("M_")]
    missing = [n for n in names if f"`{n}`" not in DOC]
    assert len(names) == 12 and not missing, missing


def test_every_key_emitted_by_a_demo_run_is_documented() -> None:
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(spans))
    lp = LoggerProvider()
    lp.add_log_record_processor(SimpleLogRecordProcessor(logs))
    reader = InMemoryMetricReader()
    pipeline, _ = build_demo_pipeline()
    pipeline.observer = TelemetryObserver(tp, MeterProvider(metric_readers=[reader]), lp,
                                          content=ContentPolicy(SPAN_AND_EVENT, 512),
                                          failures=pipeline.failures)
    with tempfile.TemporaryDirectory() as home:
        PluginManager(pipeline, home=Path(home)).add_plugin("demo", register_demo_plugins)
    with pipeline.turn("docs-agent", session_id="s"):
        run_agent(pipeline, ScriptedProvider(), "hello")

    emitted: set[str] = set()
    for s in spans.get_finished_spans():
        emitted.update(s.attributes or {})
    events = set()
    for rec in logs.get_finished_logs():
        emitted.update(rec.log_record.attributes or {})
        events.add(rec.log_record.event_name)
    metric_attrs: set[str] = set()
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                for dp in m.data.data_points:
                    metric_attrs.update(dp.attributes or {})
    assert {"otelmw.result.raw.digest", "otelmw.middleware.outcome"} <= emitted
    missing = sorted(k for k in emitted | metric_attrs if not _documented(k))
    assert not missing, f"emitted but undocumented: {missing}"
    assert events and all(f"`{e}`" in DOC for e in events), events

"""``otelmw demo``: two turns of the built-in offline demo agent (``otelmw.demo``), run
with telemetry configured from the environment, and their traces drawn as waterfalls."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..core.plugins import PluginManager
from ..demo import (
    DEMO_RUNTIME,
    TURNS,
    ScriptedProvider,
    build_demo_pipeline,
    register_demo_plugins,
    run_agent,
)
from ._shared import color_options, command
from .terminal import BOLD, Style


def run(args: argparse.Namespace) -> int:
    return run_demo(quiet=args.quiet, style=Style.for_stream(sys.stdout, args.color))


def run_demo(quiet: bool = False, style: Style | None = None) -> int:
    """Run two demo turns with telemetry configured from the environment, then
    print their traces as waterfalls (and where the embedded store put them)."""
    import logging
    import sys
    import tempfile
    from pathlib import Path

    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import (
        InMemoryLogRecordExporter,
        SimpleLogRecordProcessor,
    )
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ..telemetry.setup.configuration import configure, exporter_choice
    from ..telemetry.store.files import data_dir, store_write_errors

    log = logging.getLogger("otelmw")
    if not log.handlers and not logging.getLogger().handlers:
        # The demo fails once on purpose: show that warning plainly (on stderr).
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[log %(levelname)s] %(message)s"))
        log.addHandler(handler)
    pipeline, memory = build_demo_pipeline()
    telemetry = configure("otelmw-demo", pipeline=pipeline)
    shown_spans = InMemorySpanExporter()
    shown_events = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    if isinstance(telemetry.tracer_provider, TracerProvider):
        telemetry.tracer_provider.add_span_processor(SimpleSpanProcessor(shown_spans))
    if isinstance(telemetry.logger_provider, LoggerProvider):
        telemetry.logger_provider.add_log_record_processor(
            SimpleLogRecordProcessor(shown_events))
    with tempfile.TemporaryDirectory() as home:
        PluginManager(pipeline, home=Path(home)).add_plugin("demo", register_demo_plugins)
    providers = []
    answer = ""
    for question, _ in TURNS:
        provider = ScriptedProvider()
        providers.append(provider)
        with pipeline.turn("demo-agent", session_id="demo-session", runtime_id=DEMO_RUNTIME):
            reply = run_agent(pipeline, provider, question)
        answer = answer or reply
    telemetry.force_flush()
    print(f"answer: {answer}")
    if not quiet:
        _print_traces(shown_spans.get_finished_spans(), shown_events.get_finished_logs(),
                      style or Style())
    failures = pipeline.failures.total()
    calls = sum(len(p.calls) for p in providers)
    print(f"\nran {len(TURNS)} turns: {calls} provider calls, {len(memory.records)} tool "
          f"calls, {failures} middleware failure{'s' if failures != 1 else ''} "
          "absorbed (fail-open)")
    if "file" in exporter_choice("traces"):
        failed = store_write_errors()
        if failed:
            print(f"not stored: {'; '.join(failed)}")
            return 1
        else:
            print(f"stored in {data_dir().resolve()} — `otelmw traces list` shows them")
    return 0


def _print_traces(spans: Any, events: Any, style: Style) -> None:
    """The demo's traces, drawn as ``otelmw traces show`` draws them."""
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from ..telemetry.store.otlp_json import to_otlp_json
    from .views import (
        events_from_requests,
        group_traces,
        render_trace,
        spans_from_requests,
    )

    if not spans:
        return
    span_requests = [json.loads(to_otlp_json(encode_spans(spans)))]
    event_requests = [json.loads(to_otlp_json(encode_logs(events)))] if events else []
    traces = group_traces(spans_from_requests(span_requests),
                          events_from_requests(event_requests))
    for (tid, roots), (_, why) in zip(traces.items(), TURNS, strict=False):
        print(f"\n{style.paint(why, BOLD)}")
        print(render_trace(tid, roots, style))


_DEMO_DESCRIPTION = """\
Runs two turns of a scripted agent (tool calls, a rewrite, a cache, a failing
guard, a normalized vendor error) fully offline and prints their traces.
Telemetry goes where the environment says (the local store by default)."""
_DEMO_EXAMPLES = """\
  otelmw demo
  otelmw demo --quiet
  otelmw demo --color never
  OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 otelmw demo"""


def add_command(sub: Any) -> None:
    d = command(sub, "demo", "run the built-in offline demo agent and show its traces",
                _DEMO_DESCRIPTION, _DEMO_EXAMPLES,
                parents=[color_options()])
    d.add_argument("--quiet", action="store_true", help="print the answer and summary only")
    d.set_defaults(func=run)

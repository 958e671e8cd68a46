"""Heavy tool spans for tests/test_stack_faults.py (against a real collector) and
tests/test_reliability_export.py (against the suite's receiver at a collector's limit): N
tool calls whose normalizer returns metadata at otelmw's documented bounds (32 keys of 64
characters, values of 256), so an unbounded batch of 512 spans would be above a
collector's default 4 MiB receive limit.

    python heavy_tool_spans.py N [oversized]

``oversized``: then one span of ~64 MB (128 events x 128 attributes x 4 KB). Exports with
``configure()`` (the environment's OTLP settings); prints ``DROPS`` and otelmw's drop
counts as JSON at the end.
"""
import json
import sys

from otelmw import Pipeline, RuntimeMiddlewareRegistry
from otelmw.core.results import NormalizedToolResult
from otelmw.telemetry.export import guard
from otelmw.telemetry.setup.configuration import configure

pipe = Pipeline(normalizers=RuntimeMiddlewareRegistry())
tel = configure("export-bound", pipeline=pipe)

class Vendor:  # metadata at the documented bounds: 32 keys of 64, values of 256 chars
    runtime_id = "vendor"
    def normalize(self, result, tool_name, ctx):
        meta = {f"k{i:02d}".ljust(64, "k"): chr(97 + i % 26) * 256 for i in range(32)}
        return NormalizedToolResult(content=result, metadata=meta, raw_result=result)

pipe.normalizers.register("vendor", Vendor())
n = int(sys.argv[1])
for i in range(n):
    pipe.run_tool("heavy", {"i": i}, lambda a: {"ok": a["i"]}, tool_call_id=f"h{i}",
                  runtime_id="vendor", raise_errors=True)
if sys.argv[2:] == ["oversized"]:
    from opentelemetry import trace
    span = trace.get_tracer("app").start_span("oversized")
    for e in range(128):
        span.add_event(f"e{e}", {f"a{j}": "x" * 4096 for j in range(128)})
    span.end()
tel.shutdown()
print("DROPS", json.dumps({f"{s}/{r}": v for (s, r), v in guard.drop_counts().items()}))

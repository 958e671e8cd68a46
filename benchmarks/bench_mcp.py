"""Benchmark — one MCP ``tools/call`` round trip (``mcp`` 2.x, in process:
``mcp.Client(server)``), per call, in CPU time.

Contenders, each in a fresh process: ``bare`` (no tracer provider: the SDK's own spans
are no-ops), ``sdk`` (an SDK ``TracerProvider`` + ``BatchSpanProcessor`` onto a dropping
exporter: the SDK's own server spans recorded), ``otelmw`` (the same provider, otelmw's
``MCPInstrumentor`` with its observer: the client tool call, the enriched server span,
the normalizer, the MCP metrics), and ``openllmetry`` (``opentelemetry-instrumentation-mcp``)
when it is importable in the running interpreter (it is not an otelmw dependency: run
this module with a python that has it to get that row). Overhead = contender − bare.

Usage: ``python benchmarks/bench_mcp.py [calls]``
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

CALLS = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 2000
CONTENDERS = ("bare", "sdk", "otelmw", "openllmetry")


def measure(contender: str, calls: int) -> float:
    """CPU seconds per round trip of ``contender`` (run in this process)."""
    import asyncio

    from mcp import Client
    from mcp.server.mcpserver import MCPServer

    if contender != "bare":
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )

        class Dropping(SpanExporter):
            def export(self, spans: object) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Dropping()))
        trace.set_tracer_provider(provider)
    if contender == "otelmw":
        from otelmw.instrumentation.mcp import MCPInstrumentor

        MCPInstrumentor().instrument()
    elif contender == "openllmetry":
        from opentelemetry.instrumentation.mcp import McpInstrumentor

        McpInstrumentor().instrument()

    server = MCPServer("bench")

    @server.tool()
    def get_weather(city: str) -> str:
        return f"sunny in {city}"

    async def run() -> float:
        async with Client(server) as client:
            for _ in range(200):  # warm up
                await client.call_tool("get_weather", {"city": "Oslo"})
            start = time.process_time()
            for _ in range(calls):
                await client.call_tool("get_weather", {"city": "Oslo"})
            return (time.process_time() - start) / calls

    return asyncio.run(run())


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[2] == "--one":
        print(json.dumps(measure(sys.argv[3], CALLS)))
        return
    rows = {}
    for contender in CONTENDERS:
        proc = subprocess.run([sys.executable, __file__, str(CALLS), "--one", contender],
                              capture_output=True, text=True,
                              env={**os.environ, "OTEL_SDK_DISABLED": "false"})
        if proc.returncode != 0:
            rows[contender] = None
            continue
        rows[contender] = json.loads(proc.stdout.strip().splitlines()[-1])
    bare = rows["bare"] or 0.0
    print(f"MCP tools/call round trip (in process, {CALLS} calls), CPU time per call")
    print(f"{'contender':<12} {'µs/call':>10} {'overhead µs':>12}")
    for contender, seconds in rows.items():
        if seconds is None:
            print(f"{contender:<12} {'n/a (not installed)':>23}")
            continue
        print(f"{contender:<12} {seconds * 1e6:>10.1f} {(seconds - bare) * 1e6:>12.1f}")


if __name__ == "__main__":
    main()

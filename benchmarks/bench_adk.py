"""Benchmark 7 (Google ADK row) — one ADK turn, bare, under ADK's own tracing and under
otelmw, in process CPU time.

Google ADK cannot join benchmark 7's bench virtualenv (``bench_hosts.py``): it takes
google-genai < 3 and opentelemetry <= 1.44, the ``hosts`` venv has google-genai 3 and
opentelemetry 1.45. This one runs with the interpreter of the ``google-adk`` matrix
environment (``scripts/envs/google-adk.txt``, otelmw installed from this checkout).

The turn: ``InMemoryRunner.run_async`` of an ``LlmAgent`` with one function tool on ADK's
native ``Gemini`` model, whose google-genai client answers from an in-memory transport
(``httpx.MockTransport``: first a function call, then text once the function's answer
is in the request): 2 model requests, 1 tool call, a new session per turn.

Contenders, each in a process of its own: ``bare`` (no tracer provider: ADK's spans are
non-recording); ``adk-tracing`` (the peer: ADK's own spans, a global SDK
``TracerProvider`` with a ``BatchSpanProcessor`` onto an exporter that drops them, its
schedule an hour); ``floor`` (``bare`` plus an ADK ``BasePlugin`` whose model and tool
callbacks return None: what ADK charges any plugin of its own); ``otelmw-plain``
(``adk-tracing`` plus otelmw's ``otelmw_google_adk`` and ``otelmw_google_genai`` with a
``TelemetryObserver`` on the same provider, no plugin: what ``otelmw run`` installs,
ADK's own spans included) and ``otelmw`` (the same with the full contract: an
``llm_request`` rewrite, a ``tool_request`` rewrite, a pass-through ``tool_execution``
wrapper). ``ROUNDS`` rounds, interleaved; in each, a contender's process warms up, then
times ``TURNS`` turns; the median over rounds of its per-turn CPU time is reported.

Target (the hosts' rule): otelmw's overhead over bare ≤ 0.5 × the best peer's. Under
otelmw ADK's own tracing is on too (otelmw installs the global provider ADK traces
with), so otelmw's rows include the peer's cost.

    /path/to/google-adk-venv/bin/python benchmarks/bench_adk.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import med, table

CONTENDERS = ("bare", "adk-tracing", "floor", "otelmw-plain", "otelmw")
LABELS = {"bare": "bare (no tracer provider)", "adk-tracing": "ADK's own tracing (peer)",
          "floor": "an ADK BasePlugin, pass-through (floor)",
          "otelmw-plain": "otelmw, no plugin (+ ADK's own spans)",
          "otelmw": "otelmw, full contract (+ ADK's own spans)"}
TURNS, ROUNDS, WARMUP = {"full": 60, "quick": 20}, {"full": 5, "quick": 3}, 10
ANSWER = "Sunny in Paris."


def _answer(request: Any) -> Any:
    import httpx

    body = json.loads(request.content)
    answered = any("functionResponse" in part for content in body["contents"]
                   for part in content.get("parts", ()))
    part = {"text": ANSWER} if answered else {
        "functionCall": {"id": "fc_1", "name": "get_weather", "args": {"city": "Paris"}}}
    return httpx.Response(200, json={
        "candidates": [{"content": {"role": "model", "parts": [part]},
                        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                          "totalTokenCount": 15},
        "modelVersion": "bench-model", "responseId": "r-1"})


def _tracer_provider() -> Any:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop(), schedule_delay_millis=3_600_000))
    trace.set_tracer_provider(provider)
    return provider


def _otelmw(provider: Any, contract: bool) -> None:
    from otelmw.core import get_pipeline
    from otelmw.core.plugins import get_plugin_manager
    from otelmw.instrumentation.google_adk import GoogleADKInstrumentor
    from otelmw.instrumentation.google_genai import GoogleGenAIInstrumentor
    from otelmw.telemetry import TelemetryObserver

    pipe = get_pipeline()
    pipe.observer = TelemetryObserver(tracer_provider=provider, failures=pipe.failures)
    GoogleADKInstrumentor().instrument()
    GoogleGenAIInstrumentor().instrument()
    if not contract:
        return

    def plugin(ctx: Any) -> None:
        def pin_temperature(**kw: Any) -> Any:
            request = dict(kw["request"])
            request["config"] = request["config"].model_copy(update={"temperature": 0.1})
            return {"request": request}

        ctx.register_middleware("llm_request", pin_temperature)
        ctx.register_middleware("tool_request", lambda **kw: {"args": dict(kw["args"])})
        ctx.register_middleware("tool_execution", lambda **kw: kw["next_call"](kw["args"]))

    get_plugin_manager().add_plugin("bench-contract", plugin)


def _floor_plugin() -> Any:
    from google.adk.plugins.base_plugin import BasePlugin

    class PassThrough(BasePlugin):  # type: ignore[misc]  # (ADK untyped where absent)
        async def before_model_callback(self, **kw: Any) -> Any:
            return None

        async def after_model_callback(self, **kw: Any) -> Any:
            return None

        async def before_tool_callback(self, **kw: Any) -> Any:
            return None

        async def after_tool_callback(self, **kw: Any) -> Any:
            return None

    return PassThrough(name="pass-through")


def one(contender: str, turns: int) -> float:
    """Per-turn CPU time (s) of ``turns`` turns of ``contender``, in this process."""
    os.environ.setdefault("GOOGLE_API_KEY", "bench")
    if contender in ("adk-tracing", "otelmw-plain", "otelmw"):
        provider = _tracer_provider()
        if contender != "adk-tracing":
            _otelmw(provider, contract=contender == "otelmw")
    import httpx
    from google import genai
    from google.adk.agents import LlmAgent
    from google.adk.models.google_llm import Gemini
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    def get_weather(city: str) -> dict[str, str]:
        """Current weather for a city."""
        return {"city": city, "sky": "sunny"}

    client = genai.Client(api_key="bench", http_options=types.HttpOptions(
        base_url="http://model.invalid",
        httpx_async_client=httpx.AsyncClient(transport=httpx.MockTransport(_answer))))
    agent = LlmAgent(name="weather", model=Gemini(model="bench-model", client=client),
                     instruction="Answer briefly.", tools=[get_weather])
    runner = InMemoryRunner(agent=agent, app_name="bench",
                            plugins=[_floor_plugin()] if contender == "floor" else [])
    message = types.Content(role="user", parts=[types.Part(text="Weather in Paris?")])

    async def turn() -> None:
        session = await runner.session_service.create_session(app_name="bench", user_id="u")
        last = None
        async for event in runner.run_async(user_id="u", session_id=session.id,
                                            new_message=message):
            last = event
        assert last is not None and last.content is not None and last.content.parts
        assert last.content.parts[0].text == ANSWER

    async def timed() -> float:
        for _ in range(WARMUP):
            await turn()
        gc.collect()
        started = time.process_time()
        for _ in range(turns):
            await turn()
        return (time.process_time() - started) / turns

    return asyncio.run(timed())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--turns", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, args.turns)))
        return
    size = "quick" if args.quick else "full"
    per_turn: dict[str, list[float]] = {c: [] for c in CONTENDERS}
    for r in range(ROUNDS[size]):
        order = CONTENDERS[r % len(CONTENDERS):] + CONTENDERS[:r % len(CONTENDERS)]
        for contender in order if r % 2 == 0 else tuple(reversed(order)):
            proc = subprocess.run([sys.executable, __file__, "--one", contender,
                                   "--turns", str(TURNS[size])], capture_output=True,
                                  text=True, timeout=900, check=False)
            if proc.returncode != 0:
                raise SystemExit(f"{contender}: {proc.stderr[-3000:]}")
            per_turn[contender].append(float(proc.stdout.strip().splitlines()[-1]))
    ms = {c: med(v) * 1000 for c, v in per_turn.items()}
    over = {c: ms[c] - ms["bare"] for c in CONTENDERS}
    rows = [[LABELS[c], ms[c], over[c] if c != "bare" else None] for c in CONTENDERS]
    print("Google ADK 2.13.0 turn (Gemini model, in-memory transport): 2 model requests, "
          f"1 tool call; median of {ROUNDS[size]} rounds x {TURNS[size]} turns")
    print(table(["contender", "CPU ms / turn", "over bare (ms)"], rows))
    peer = over["adk-tracing"]
    worst = max(over["otelmw"], over["otelmw-plain"])
    ok = peer > 0 and worst <= 0.5 * peer
    print(f"target: otelmw's overhead ≤ 0.5 × ADK's own tracing's ({0.5 * peer:.2f} ms): "
          f"{'met' if ok else 'MISSED'} (otelmw {worst:.2f} ms)")


if __name__ == "__main__":
    main()

"""Benchmark — a pydantic-ai agent turn: otelmw's cost beside pydantic-ai's own
instrumentation and OpenInference's span processor (issue 25, item 5).

One turn is ``agent.run(...)`` of a real pydantic-ai ``Agent`` with one tool: a model
request that calls the tool, the tool, a model request that answers; the real
``OpenAIChatModel`` talks through a real ``openai.AsyncOpenAI`` whose HTTP layer is an
in-memory ``MockTransport``. Spans go through an SDK ``BatchSpanProcessor`` onto an
exporter that drops them. Contenders:

* ``bare``: no instrumentation;
* ``otelmw``: ``otelmw_pydantic_ai`` + ``otelmw_openai`` (the full contract on: the
  capability, one ``invoke_agent``, two ``chat``, one ``execute_tool`` span; no plugin);
* ``pydantic-ai``: pydantic-ai's own instrumentation (``Agent.instrument_all`` with
  ``InstrumentationSettings(tracer_provider=...)``, its defaults: content included);
* ``openinference``: the same plus OpenInference's ``OpenInferenceSpanProcessor``
  (``openinference-instrumentation-pydantic-ai``), which rewrites those spans.

Cost is process CPU per turn (``_harness.sample``), each contender in its own
process, rounds interleaved. Overhead is measured paired inside each contender's
process (short batches alternate with the instrumentation switched off and on:
``uninstrument()``/``instrument()``, ``Agent.instrument_all(False)``/``(settings)``), the
ratio a per-round median; the contender's turn minus the bare process's turn is a
cross-check. A ``floor`` contender is a pass-through capability of otelmw's shape
(``wrap_run``, a model wrapper, ``wrap_tool_execute``, no telemetry): what pydantic-ai
itself charges any capability that wraps a run. Target: otelmw's overhead ≤ 0.5 × the
best peer's. The peers are not otelmw dependencies: the benchmark re-runs itself in a
separate virtualenv made on first use (``~/.cache/otelmw-bench/pydantic-ai``: otelmw
editable, the current environment's pydantic-ai-slim and shared packages, the peer).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _harness as h

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "otelmw-bench" / \
    "pydantic-ai"
PEER = "openinference-instrumentation-pydantic-ai"
SHARED = ["pydantic-ai-slim", "openai", "httpx", "httpx2", "pydantic", "wrapt",
          "opentelemetry-api", "opentelemetry-sdk", "opentelemetry-instrumentation",
          "opentelemetry-semantic-conventions", "opentelemetry-proto",
          "opentelemetry-exporter-otlp-proto-grpc", "opentelemetry-exporter-otlp-proto-http",
          "opentelemetry-exporter-otlp-proto-common", "orjson"]
CONFIGS = ("bare", "floor", "otelmw", "pydantic-ai", "openinference")
PEERS = ("pydantic-ai", "openinference")
LABELS = {"bare": "uninstrumented",
          "floor": "floor: a pass-through capability (wrap_run, model wrapper, wrap_tool_execute)",
          "otelmw": "otelmw (pydantic-ai + openai instrumentors)",
          "pydantic-ai": "pydantic-ai's own instrumentation (defaults)",
          "openinference": "pydantic-ai's own + OpenInference span processor"}
PARAMS = {"full": {"n": 30, "batches": 3, "warmup": 20, "rounds": 3, "pairs": 24,
                   "pair_n": 8},
          "quick": {"n": 10, "batches": 3, "warmup": 10, "rounds": 2, "pairs": 10,
                    "pair_n": 5}}


def requirements() -> list[str]:
    out = [PEER]
    for name in SHARED:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        out.append(f"{name}[openai]=={version}" if name == "pydantic-ai-slim"
                   else f"{name}=={version}")
    return out


def ensure_venv(log: Any = print) -> Path:
    """The peers' venv (made once; remade when the requirements change): its python."""
    py = VENV / "bin" / "python"
    stamp = VENV / "otelmw-bench.json"
    reqs = requirements()
    if py.exists() and stamp.exists() and json.loads(stamp.read_text()) == {
            "requirements": reqs, "otelmw": str(ROOT)}:
        return py
    if not py.exists():
        log(f"[setup] creating the pydantic-ai peers venv at {VENV} (one time)")
        VENV.parent.mkdir(parents=True, exist_ok=True)
        venv.EnvBuilder(with_pip=True, system_site_packages=False, clear=True).create(VENV)
    cmd = [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
           "-e", str(ROOT), *reqs]
    log("[setup] " + " ".join(cmd))
    subprocess.run(cmd, check=True)
    stamp.write_text(json.dumps({"requirements": reqs, "otelmw": str(ROOT)}))
    return py


def _reply(body: dict[str, Any]) -> dict[str, Any]:
    last = body["messages"][-1]
    if last.get("role") == "tool":
        message: dict[str, Any] = {"role": "assistant", "content": "Sunny in Paris."}
        finish = "stop"
    else:
        message = {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}
        finish = "tool_calls"
    return {"id": "chatcmpl-bench", "object": "chat.completion", "created": 1_700_000_000,
            "model": "gpt-4o-mini", "choices": [{"index": 0, "finish_reason": finish,
                                                 "message": message, "logprobs": None}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}}


def setup(config: str) -> tuple[Any, Any, Any, Any]:
    """``config`` installed and one turn run: (turn, exporter, tracer provider,
    ``switch(on)`` that takes the instrumentation off and puts it back)."""
    import asyncio

    import openai
    from _otel import dropping_provider

    httpx: Any
    if int(openai.__version__.split(".")[0]) >= 3:
        import httpx2 as httpx
    else:
        import httpx
    tp, exporter = dropping_provider()
    switch: Any = None
    if config == "otelmw":
        from otelmw.core.pipeline import get_pipeline
        from otelmw.instrumentation.openai import OpenAIInstrumentor
        from otelmw.instrumentation.pydantic_ai import PydanticAIInstrumentor
        from otelmw.telemetry.observer import TelemetryObserver

        pipe = get_pipeline()
        pipe.observer = TelemetryObserver(tracer_provider=tp, failures=pipe.failures)
        instrumentors = (PydanticAIInstrumentor(), OpenAIInstrumentor())
        for inst in instrumentors:
            inst.instrument(tracer_provider=tp)

        def switch(on: bool) -> None:
            for inst in instrumentors:
                if on:
                    inst.instrument(tracer_provider=tp)
                else:
                    inst.uninstrument()
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    if config == "floor":  # what pydantic-ai itself charges for a capability that
        # wraps the run, each model request and each tool call (its task hand-off in
        # wrap_run, the model wrapper entered per attempt): no telemetry at all
        from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering
        from pydantic_ai.models.wrapper import WrapperModel

        class PassThrough(AbstractCapability[Any]):
            def get_ordering(self) -> CapabilityOrdering:
                return CapabilityOrdering(position="innermost")

            async def wrap_run(self, ctx: Any, *, handler: Any) -> Any:
                return await handler()

            def get_wrapper_model(self, model: Any) -> Any:
                return WrapperModel(model)

            async def wrap_tool_execute(self, ctx: Any, *, call: Any, tool_def: Any,
                                        args: Any, handler: Any) -> Any:
                return await handler(args)

        original_iter = Agent.iter

        def iter_with(self: Any, *args: Any, **kwargs: Any) -> Any:
            given = list(kwargs.pop("capabilities", None) or ())
            return original_iter(self, *args, capabilities=[*given, PassThrough()], **kwargs)

        Agent.iter = iter_with  # type: ignore[method-assign]

        def switch(on: bool) -> None:
            Agent.iter = iter_with if on else original_iter  # type: ignore[method-assign]
    if config == "openinference":
        from openinference.instrumentation.pydantic_ai import OpenInferenceSpanProcessor

        tp.add_span_processor(OpenInferenceSpanProcessor())
    if config in PEERS:
        settings = InstrumentationSettings(tracer_provider=tp)
        Agent.instrument_all(settings)

        def switch(on: bool) -> None:
            Agent.instrument_all(settings if on else False)

    def handler(request: Any) -> Any:
        return httpx.Response(200, json=_reply(json.loads(request.content)))

    client = openai.AsyncOpenAI(api_key="sk-bench", max_retries=0, http_client=httpx.AsyncClient(
        transport=httpx.MockTransport(handler)))
    model = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=client))
    agent = Agent(model, name="Weather", instructions="Answer briefly.")

    @agent.tool_plain
    def get_weather(city: str) -> dict[str, str]:
        """Current weather for a city."""
        return {"city": city, "sky": "sunny"}

    loop = asyncio.new_event_loop()

    def turn() -> Any:
        return loop.run_until_complete(agent.run("Weather in Paris?")).output

    assert turn() == "Sunny in Paris."
    return turn, exporter, tp, switch


def worker(config: str, _round: int, params: dict[str, int]) -> dict[str, Any]:
    """The contender's turn, plus its overhead measured *paired* in the same process:
    short batches alternate with the instrumentation switched off and on, so the
    machine's drift (turns of ≈ 15 ms on a shared machine) cancels out."""
    turn, exporter, tp, switch = setup(config)
    res = h.sample(turn, n=params["n"], batches=params["batches"], warmup=params["warmup"])
    tp.force_flush()
    res["spans_per_turn"] = exporter.spans / (params["warmup"] + params["n"] *
                                              params["batches"] + 1)
    if switch is not None:
        diffs = []
        for _ in range(params["pairs"]):
            switch(False)
            bare = h.sample(turn, n=params["pair_n"], batches=1, warmup=2)["cpu"]
            switch(True)
            inst = h.sample(turn, n=params["pair_n"], batches=1, warmup=2)["cpu"]
            diffs.append(inst - bare)
        res["paired_overhead"] = h.med(diffs)
    return res


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args, _, rounds, raw = h.run_rounds(argv, __doc__.splitlines()[0], PARAMS,
                                        list(CONFIGS), worker)
    base = [r["cpu"] for r in raw["bare"]]
    ov = {c: [r["paired_overhead"] for r in raw[c]] for c in CONFIGS[1:]}
    ov_abs = {c: [r["cpu"] - b for r, b in zip(raw[c], base, strict=True)]
              for c in CONFIGS[1:]}
    best = [min(ov[p][i] for p in PEERS) for i in range(rounds)]
    ratio = h.med(o / b for o, b in zip(ov["otelmw"], best, strict=True))
    # otelmw's own cost: above what pydantic-ai charges any capability of that shape
    own = [o - f for o, f in zip(ov["otelmw"], ov["floor"], strict=True)]
    own_ratio = h.med((o - f) / (b - f) if b > f else float("nan") for o, f, b in zip(
        ov["otelmw"], ov["floor"], best, strict=True))
    rows = [[LABELS["bare"], h.med(base), None, None, None,
             h.med(r["spans_per_turn"] for r in raw["bare"]),
             f"±{100 * h.spread(base):.0f}%"]]
    for c in CONFIGS[1:]:
        rows.append([LABELS[c], h.med(r["cpu"] for r in raw[c]), h.med(ov[c]),
                     h.med(o / b for o, b in zip(ov[c], best, strict=True)),
                     h.med(ov_abs[c]),
                     h.med(r["spans_per_turn"] for r in raw[c]),
                     f"±{100 * h.spread(r['cpu'] for r in raw[c]):.0f}%"])
    print(f"\n### pydantic-ai agent turn ({rounds} rounds, medians; process CPU µs per "
          "turn: 2 model requests + 1 tool call)\n")
    print(h.table(["configuration", "turn µs", "overhead µs (paired)",
                   "overhead / best peer", "overhead µs (vs bare process)", "spans/turn",
                   "spread"], rows))
    ok = ratio <= 0.5
    print(f"\notelmw overhead / best peer = {ratio:.2f} (target ≤ 0.50: {h.verdict(ok)}); "
          "per-round medians of the paired overheads.")
    print(f"Above the floor (what pydantic-ai charges a pass-through capability of the same "
          f"shape): otelmw {h.med(own):,.0f} µs, / best peer above the floor = {own_ratio:.2f}.")
    result = {"raw": raw, "overhead": {c: h.med(ov[c]) for c in ov}, "ratio_best_peer": ratio,
              "otelmw_above_floor": h.med(own), "ratio_above_floor": own_ratio,
              "targets": {"otelmw ≤ 0.5 × best peer": ok},
              "versions": h.versions(["pydantic-ai-slim", "openai", PEER, "opentelemetry-sdk",
                                      "otelmw"])}
    h.write_json(args.json, result)
    return result


if __name__ == "__main__":
    try:
        import openinference.instrumentation.pydantic_ai  # noqa: F401
    except ImportError:  # not in the peers' venv: run there
        py = ensure_venv(lambda s: print(s, file=sys.stderr, flush=True))
        sys.exit(subprocess.run([str(py), os.path.abspath(__file__), *sys.argv[1:]]).returncode)
    main()

"""Benchmark — an OpenAI Agents SDK turn (model asks for a tool, the tool runs, the model
answers): its cost bare and under each instrumentation, in process CPU time per turn.

A real ``agents.Runner.run`` of an ``Agent`` with one sync ``@function_tool`` (run by
the SDK on a worker thread), its default ``OpenAIResponsesModel`` over an
``AsyncOpenAI`` whose HTTP layer is an in-memory ``httpx2.MockTransport`` answering
the Responses API (a ``function_call``, then text once the tool's output comes back);
an SDK ``TracerProvider`` + ``BatchSpanProcessor`` onto an exporter that drops what it
gets. The SDK's own tracing is on for every contender (the peers are processors of
it) with its exporter removed (``set_trace_processors([])``). Contenders:

* ``bare``: no instrumentation;
* ``otelmw``: ``otelmw_openai_agents`` + ``otelmw_openai`` (turn, chat and tool
  spans), no plugin;
* ``otelmw-contract``: the same with a plugin on every stage the turn passes
  (``llm_request`` and ``tool_request`` returning no change, pass-through
  ``llm_execution`` and ``tool_execution`` wrappers): the full contract;
* ``official``: ``opentelemetry-instrumentation-genai-openai-agents`` 1.3b0 (agent and
  tool spans) + ``opentelemetry-instrumentation-genai-openai`` 1.3b0 (the chat spans it
  leaves to it);
* ``openinference``: ``openinference-instrumentation-openai-agents`` 2.6.0 (agent, LLM
  and tool spans from the SDK's own).

Each contender runs in its own forked process, rounds interleaved (``_harness``). The
peers are not otelmw dependencies: the benchmark makes its own virtualenv on first use
(``ensure_venv``, ``~/.cache/otelmw-bench/agents-peers``) and re-runs itself there.

Target (issue 25): otelmw's overhead, full contract on, ≤ 0.5 × the best peer's.
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
VENV = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "otelmw-bench" / (
    "agents-peers")
PEERS = {"opentelemetry-instrumentation-genai-openai-agents": "1.3b0",
         "opentelemetry-instrumentation-genai-openai": "1.3b0",
         "opentelemetry-util-genai": "1.3b0",
         "openinference-instrumentation-openai-agents": "2.6.0"}
# Shared by every contender: pinned to what the environment running the runner has.
SHARED = ["openai-agents", "openai", "httpx", "httpx2", "pydantic", "wrapt",
          "opentelemetry-api", "opentelemetry-sdk", "opentelemetry-instrumentation",
          "opentelemetry-semantic-conventions", "opentelemetry-proto", "orjson"]
CONFIGS = ("bare", "otelmw", "otelmw-contract", "official", "openinference")
PEER_CONFIGS = ("official", "openinference")
LABELS = {"bare": "uninstrumented",
          "otelmw": "otelmw (openai_agents + openai)",
          "otelmw-contract": "otelmw, full contract (a plugin on every stage)",
          "official": "official genai-openai-agents + genai-openai 1.3b0",
          "openinference": "OpenInference openai-agents 2.6.0"}
PARAMS = {"full": {"n": 40, "batches": 3, "warmup": 30, "rounds": 4},
          "quick": {"n": 15, "batches": 3, "warmup": 10, "rounds": 2}}


# ------------------------------------------------------------------ environment
def requirements() -> list[str]:
    pins = []
    for name in SHARED:
        try:
            pins.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pins.append(name)
    return [*(f"{k}=={v}" for k, v in PEERS.items()), *pins]


def ensure_venv(path: Path = VENV, log: Any = print) -> Path:
    """The peers' virtualenv (made once, refreshed when the wanted pins change)."""
    reqs = requirements()
    py = path / "bin" / "python"
    stamp = path / "otelmw-bench.json"
    wanted = {"requirements": reqs, "otelmw": str(ROOT)}
    if py.exists() and stamp.exists():
        try:
            if json.loads(stamp.read_text()) == wanted:
                return py
        except ValueError:
            pass
    if not py.exists():
        log(f"[setup] creating the Agents SDK peers venv at {path} (one time, ~1 min)")
        path.parent.mkdir(parents=True, exist_ok=True)
        venv.EnvBuilder(with_pip=True, system_site_packages=False, clear=True).create(path)
    cmd = [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
           "-e", str(ROOT), *reqs]
    log("[setup] " + " ".join(cmd))
    subprocess.run(cmd, check=True)
    stamp.write_text(json.dumps(wanted, indent=1))
    return py


def peers_installed() -> bool:
    try:
        return all(metadata.version(name) == v for name, v in PEERS.items())
    except metadata.PackageNotFoundError:
        return False


# ------------------------------------------------------------------ the turn
def _response(body: dict[str, Any], n: int) -> bytes:
    items = body.get("input") or []
    answered = bool(items) and isinstance(items[-1], dict) and (
        items[-1].get("type") == "function_call_output")
    if answered:
        output = [{"type": "message", "id": f"msg_{n}", "status": "completed",
                   "role": "assistant", "content": [
                       {"type": "output_text", "text": "Sunny in Paris.", "annotations": [],
                        "logprobs": []}]}]
    else:
        output = [{"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}",
                   "name": "get_weather", "arguments": "{\"city\": \"Paris\"}",
                   "status": "completed"}]
    return json.dumps({
        "id": f"resp_{n}", "object": "response", "created_at": 1_700_000_000,
        "status": "completed", "model": "gpt-4o-mini", "output": output, "error": None,
        "incomplete_details": None, "instructions": body.get("instructions"),
        "metadata": {}, "parallel_tool_calls": True, "temperature": 1.0, "top_p": 1.0,
        "text": {"format": {"type": "text"}}, "tools": body.get("tools") or [],
        "tool_choice": "auto",
        "usage": {"input_tokens": 40, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": 9, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": 49}}).encode()


def install(config: str, tp: Any) -> None:
    from agents import set_trace_processors

    set_trace_processors([])  # the SDK's tracing on, its export to the platform off
    if config == "bare":
        return
    if config.startswith("otelmw"):
        from otelmw.core.pipeline import get_pipeline
        from otelmw.core.plugins import get_plugin_manager
        from otelmw.instrumentation.openai import OpenAIInstrumentor
        from otelmw.instrumentation.openai_agents import OpenAIAgentsInstrumentor
        from otelmw.telemetry.observer import TelemetryObserver

        pipe = get_pipeline()
        pipe.observer = TelemetryObserver(tracer_provider=tp, failures=pipe.failures)
        OpenAIInstrumentor().instrument(tracer_provider=tp)
        OpenAIAgentsInstrumentor().instrument(tracer_provider=tp)
        if config == "otelmw-contract":
            def register(ctx: Any) -> None:
                ctx.register_middleware("llm_request", lambda **kw: None)
                ctx.register_middleware("tool_request", lambda **kw: None)
                ctx.register_middleware("llm_execution",
                                        lambda request, next_call, **kw: next_call(request))
                ctx.register_middleware("tool_execution",
                                        lambda args, next_call, **kw: next_call(args))

            get_plugin_manager().add_plugin("bench", register)
    elif config == "official":
        from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
        from opentelemetry.instrumentation.genai.openai_agents import OpenAIAgentsInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=tp)
        OpenAIAgentsInstrumentor().instrument(tracer_provider=tp)
    elif config == "openinference":
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

        OpenAIAgentsInstrumentor().instrument(tracer_provider=tp)
    else:
        raise ValueError(config)


def setup(config: str) -> tuple[Any, Any, Any]:
    """``config`` installed and one turn made: (turn, exporter, tracer provider)."""
    import asyncio

    import httpx2
    from _otel import dropping_provider
    from openai import AsyncOpenAI

    tp, exporter = dropping_provider()
    install(config, tp)
    from agents import Agent, Runner, function_tool, set_default_openai_client

    count = [0]

    def handler(request: httpx2.Request) -> httpx2.Response:
        count[0] += 1
        return httpx2.Response(200, content=_response(json.loads(request.content), count[0]),
                               headers={"content-type": "application/json"})

    client = AsyncOpenAI(api_key="sk-bench", max_retries=0, base_url="http://bench.invalid/v1",
                         http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)))
    set_default_openai_client(client, use_for_tracing=False)

    @function_tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"sunny in {city}"

    agent = Agent(name="Weather", instructions="Answer briefly.", tools=[get_weather],
                  model="gpt-4o-mini")
    loop = asyncio.new_event_loop()

    def turn() -> Any:
        return loop.run_until_complete(Runner.run(agent, "Weather in Paris?")).final_output

    assert turn() == "Sunny in Paris.", "canned turn not parsed"
    return turn, exporter, tp


def worker(config: str, _round: int, params: dict[str, int]) -> dict[str, Any]:
    turn, exporter, tp = setup(config)
    res = h.sample(turn, n=params["n"], batches=params["batches"], warmup=params["warmup"])
    turns = params["warmup"] + params["n"] * params["batches"] + 1
    tp.force_flush()
    res["spans_per_turn"] = exporter.spans / turns
    return res


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args, _, rounds, raw = h.run_rounds(argv, __doc__.splitlines()[0], PARAMS,
                                        list(CONFIGS), worker)
    base = [r["cpu"] for r in raw["bare"]]
    inst = [c for c in CONFIGS if c != "bare"]
    over = {c: [r["cpu"] - b for r, b in zip(raw[c], base, strict=True)] for c in inst}
    best_peer = [min(over[p][i] for p in PEER_CONFIGS) for i in range(rounds)]
    ratio = {c: h.med(o / b for o, b in zip(over[c], best_peer, strict=True))
             for c in ("otelmw", "otelmw-contract")}
    rows = [[LABELS["bare"], h.med(base), None, None, 0.0,
             f"±{100 * h.spread(base):.0f}%"]]
    for c in inst:
        rows.append([LABELS[c], h.med(r["cpu"] for r in raw[c]), h.med(over[c]),
                     h.med(o / b for o, b in zip(over[c], best_peer, strict=True)),
                     h.med(r["spans_per_turn"] for r in raw[c]),
                     f"±{100 * h.spread(r['cpu'] for r in raw[c]):.0f}%"])
    print(f"\n### OpenAI Agents SDK turn ({rounds} rounds, medians; process CPU µs per "
          "turn: 2 model calls + 1 tool call)\n")
    print(h.table(["configuration", "turn µs", "overhead µs", "overhead / best peer",
                   "spans/turn", "spread"], rows))
    ok = ratio["otelmw-contract"] <= 0.5
    print(f"\notelmw overhead / best peer = {ratio['otelmw']:.2f}; with the full contract "
          f"= {ratio['otelmw-contract']:.2f} (target ≤ 0.50: {h.verdict(ok)}). Ratios are "
          "per-round medians.")
    result = {"raw": raw, "overhead": {c: h.med(over[c]) for c in inst},
              "ratio_best_peer": ratio, "targets": {"otelmw (full contract) ≤ 0.5 × best peer":
                                                    ok},
              "versions": h.versions(["openai-agents", "openai", "opentelemetry-sdk",
                                      *PEERS, "otelmw"])}
    h.write_json(args.json, result)
    return result


if __name__ == "__main__":
    if peers_installed():
        main()
    else:  # re-run in the peers' venv
        py = ensure_venv()
        sys.exit(subprocess.run([str(py), __file__, *sys.argv[1:]]).returncode)

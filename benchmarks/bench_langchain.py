"""Benchmark — a scripted LangChain agent turn: per-turn CPU overhead over the bare turn.

A real ``langchain.agents.create_agent`` agent with one tool; its model is an
in-process scripted ``BaseChatModel`` (asks for the tool, then answers: two model
calls, one tool call per turn, no HTTP), so what is measured is the framework's own
work and each instrumentation's. An SDK ``TracerProvider`` + ``BatchSpanProcessor``
onto an exporter that drops what it gets. Contenders, each in its own process:

* ``bare``: no instrumentation;
* ``floor``: no instrumentation, one pass-through ``AgentMiddleware`` (``wrap_model_call``,
  ``wrap_tool_call``) in the agent: what LangChain itself charges for any middleware
  (each hook is wrapped in LangSmith's ``traceable``, also with tracing off), which
  otelmw's own middleware pays too;
* ``otelmw``: ``LangChainInstrumentor`` with a ``TelemetryObserver`` on that provider
  (the full contract on: its middleware in the agent, turns, seams; no plugins);
* ``official``: ``opentelemetry-instrumentation-genai-langchain`` 1.3b0;
* ``openinference``: ``openinference-instrumentation-langchain`` 0.1.80;
* ``openllmetry``: OpenLLMetry's ``opentelemetry-instrumentation-langchain`` 0.62.4.

Each process runs ``WARMUP`` turns, then ``ROUNDS`` × ``TURNS`` turns timed with
``time.process_time`` (the best round counts); the bare process runs before and
after the others and its best figure is the baseline. Overhead = contender − bare.

The peers are not otelmw dependencies: the first run creates a separate virtualenv
(``$OTELMW_BENCH_LANGCHAIN_VENV``, default ``~/.cache/otelmw-bench/langchain``) with
otelmw from this checkout (editable), the LangChain releases of the ``current``
matrix environment and the three peers, and runs every contender with its python.

Target (issue 26): otelmw's overhead ≤ 0.5 × the best peer's.

    python benchmarks/bench_langchain.py            # the table
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import venv
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(os.environ.get("OTELMW_BENCH_LANGCHAIN_VENV", Path(os.environ.get(
    "XDG_CACHE_HOME", Path.home() / ".cache")) / "otelmw-bench" / "langchain"))
PEERS = {"openinference-instrumentation-langchain": "0.1.80",
         "opentelemetry-instrumentation-langchain": "0.62.4",  # OpenLLMetry
         "opentelemetry-instrumentation-genai-langchain": "1.3b0"}  # official
# Pinned as the ``current`` matrix environment has them, so figures are comparable.
SHARED = ["langchain", "langchain-core", "langchain-openai", "langgraph", "langgraph-prebuilt",
          "langgraph-checkpoint", "langsmith", "openai", "pydantic", "wrapt",
          "opentelemetry-api", "opentelemetry-sdk", "opentelemetry-instrumentation",
          "opentelemetry-semantic-conventions"]
CONTENDERS = ("bare", "floor", "otelmw", "official", "openinference", "openllmetry")
LABELS = {"bare": "no instrumentation",
          "floor": "floor: a pass-through AgentMiddleware, no telemetry",
          "otelmw": "otelmw LangChainInstrumentor",
          "official": "official genai-langchain 1.3b0",
          "openinference": "OpenInference langchain 0.1.80",
          "openllmetry": "OpenLLMetry langchain 0.62.4"}
PEER_NAMES = ("official", "openinference", "openllmetry")
WARMUP, TURNS, ROUNDS = 30, 150, 5


# ----------------------------------------------------------------- the turn
def scripted_agent(floor: bool = False) -> Any:
    from langchain.agents import create_agent
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool

    class ScriptedModel(BaseChatModel):
        """Asks for ``get_weather`` unless the last message is its result."""

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                      **kwargs: Any) -> ChatResult:
            last = messages[-1]
            if isinstance(last, ToolMessage):
                answer = AIMessage(content=f"done: {last.content}",
                                   usage_metadata={"input_tokens": 20, "output_tokens": 4,
                                                   "total_tokens": 24})
            else:
                answer = AIMessage(content="", tool_calls=[
                    {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1"}],
                    usage_metadata={"input_tokens": 10, "output_tokens": 6,
                                    "total_tokens": 16})
            return ChatResult(generations=[ChatGeneration(message=answer)])

    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"sunny in {city}"

    middleware: list[Any] = []
    if floor:
        from langchain.agents.middleware import AgentMiddleware

        class PassThrough(AgentMiddleware):  # type: ignore[misc]
            def wrap_model_call(self, request: Any, handler: Any) -> Any:
                return handler(request)

            def wrap_tool_call(self, request: Any, handler: Any) -> Any:
                return handler(request)

        middleware.append(PassThrough())
    return create_agent(ScriptedModel(), tools=[get_weather], name="bench",
                        middleware=middleware)


def instrument(contender: str, tp: Any) -> None:
    if contender == "otelmw":
        from otelmw.core import get_pipeline
        from otelmw.instrumentation.langchain import LangChainInstrumentor
        from otelmw.telemetry.observer import TelemetryObserver

        pipe = get_pipeline()
        pipe.observer = TelemetryObserver(tracer_provider=tp, failures=pipe.failures)
        LangChainInstrumentor().instrument(tracer_provider=tp)
    elif contender == "official":
        from opentelemetry.instrumentation.genai.langchain import (  # type: ignore[import-not-found]
            LangChainInstrumentor as Official,
        )

        Official().instrument(tracer_provider=tp)
    elif contender == "openinference":
        from openinference.instrumentation.langchain import (  # type: ignore[import-not-found]
            LangChainInstrumentor as OpenInference,
        )

        OpenInference().instrument(tracer_provider=tp)
    elif contender == "openllmetry":
        from opentelemetry.instrumentation.langchain import (  # type: ignore[import-not-found]
            LangchainInstrumentor as OpenLLMetry,
        )

        OpenLLMetry().instrument(tracer_provider=tp)


def measure(contender: str) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _otel import dropping_provider

    tp, exporter = dropping_provider()
    instrument(contender, tp)
    agent = scripted_agent(floor=contender == "floor")
    question = {"messages": [{"role": "user", "content": "What is the weather in Paris?"}]}
    for _ in range(WARMUP):
        answer = agent.invoke(question)
    assert answer["messages"][-1].content == "done: sunny in Paris", answer
    best = float("inf")
    for _ in range(ROUNDS):
        t0 = time.process_time()
        for _ in range(TURNS):
            agent.invoke(question)
        best = min(best, (time.process_time() - t0) / TURNS)
    tp.force_flush()
    return {"contender": contender, "us_per_turn": best * 1e6,
            "spans_per_turn": exporter.spans / (WARMUP + ROUNDS * TURNS)}


# ----------------------------------------------------------------- the table
def _current_pins() -> list[str]:
    from importlib import metadata

    out = []
    for name in SHARED:
        try:
            out.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            out.append(name)
    return out


def ensure_venv() -> Path:
    python = VENV / "bin" / "python"
    if (VENV / ".complete").exists():
        return python
    if not python.exists():
        venv.create(VENV, with_pip=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "-e", str(ROOT),
                    *[f"{n}=={v}" for n, v in PEERS.items()], *_current_pins()], check=True)
    (VENV / ".complete").touch()
    return python


def run_contender(python: Path, contender: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OTELMW_"))}
    env.update(LANGSMITH_TRACING="false", PYTHONPATH=str(ROOT))
    proc = subprocess.run([str(python), __file__, "--contender", contender], env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{contender}: {proc.stderr[-2000:]}")
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def main() -> None:
    python = Path(sys.executable) if os.environ.get("OTELMW_BENCH_HERE") else ensure_venv()
    order = ["bare", *CONTENDERS[1:], "bare"]
    results: dict[str, list[float]] = {}
    spans: dict[str, float] = {}
    for contender in order:
        found = run_contender(python, contender)
        results.setdefault(contender, []).append(found["us_per_turn"])
        spans[contender] = found["spans_per_turn"]
    bare = min(results["bare"])
    overhead = {c: min(v) - bare for c, v in results.items() if c != "bare"}
    best_peer = min(overhead[p] for p in PEER_NAMES)
    print(f"LangChain agent turn (2 model calls, 1 tool call), best of {ROUNDS}×{TURNS} "
          f"turns, CPU µs per turn (bare: {bare:.0f} µs)")
    print("| contender | µs/turn | overhead µs | overhead ÷ best peer's | spans/turn |")
    print("|---|---|---|---|---|")
    for c in CONTENDERS[1:]:
        print(f"| {LABELS[c]} | {min(results[c]):.0f} | {overhead[c]:.0f} | "
              f"{overhead[c] / best_peer:.2f} | {spans[c]:.0f} |")
    ratio = overhead["otelmw"] / best_peer
    print(f"target otelmw ≤ 0.5 × best peer: {ratio:.2f} ({'met' if ratio <= 0.5 else 'missed'})")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--contender":
        print(json.dumps(measure(sys.argv[2])))
    else:
        main()

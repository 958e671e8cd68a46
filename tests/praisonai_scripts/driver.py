"""One PraisonAI scenario for ``tests/test_host_praisonai.py``, in a fresh process.

``argv[1]`` is a JSON spec; the last stdout line is ``RESULT <json>`` with what the test
checks besides the telemetry the OTLP receiver got. Real PraisonAI agents talk to the
scripted LLM server named by ``OPENAI_BASE_URL``; telemetry goes through
``otelmw.telemetry.configure()`` to ``OTEL_EXPORTER_OTLP_ENDPOINT``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the suite's _support
from _support.driver import instrumented, print_result
from _support.targets import current_targets

SPEC: dict[str, Any] = json.loads(sys.argv[1])
TOOL_CALLS: list[str] = []
NORMALIZED: list[str] = []
HOOKS_SEEN: list[str] = []
CANARY = "CANARY-RESULT-7f3a"


def get_weather(city: str) -> dict:
    """Current weather for a city."""
    TOOL_CALLS.append("get_weather")
    if SPEC.get("vendor") == "error":
        return {"status": "error", "message": "vendor said no"}
    return {"status": "ok", "data": f"sunny in {city}", "note": CANARY}


def broken(city: str) -> str:
    """A tool that always raises."""
    TOOL_CALLS.append("broken")
    raise ValueError("tool exploded")


def register_normalizers() -> None:
    from praisonaiagents.runtime import register_middleware as praison_register

    from otelmw.core.results import NormalizedToolResult, register_middleware

    class Acme:
        runtime_id = "acme"

        def normalize(self, result: Any, tool_name: str, ctx: Any) -> Any:
            NORMALIZED.append(f"otelmw:{tool_name}:{ctx.runtime_id}:{ctx.agent_id}")
            if result.get("status") == "error":
                return NormalizedToolResult(content=None, success=False,
                                            error_message=result["message"],
                                            metadata={"vendor": "acme"}, raw_result=result)
            return NormalizedToolResult(content=result["data"], raw_result=result,
                                        metadata={"vendor": "acme", "cache_hit": True})

    class PraisonSide(Acme):  # the same id in PraisonAI's own registry: must not run too
        def normalize(self, result: Any, tool_name: str, ctx: Any) -> Any:
            NORMALIZED.append(f"praisonai:{tool_name}")
            return super().normalize(result, tool_name, ctx)

    register_middleware("acme", Acme())
    praison_register("acme", PraisonSide())


def hook_registry() -> Any:
    from praisonaiagents.hooks import HookEvent, HookRegistry

    reg = HookRegistry()
    for event in (HookEvent.BEFORE_AGENT, HookEvent.AFTER_AGENT, HookEvent.BEFORE_LLM,
                  HookEvent.AFTER_LLM, HookEvent.BEFORE_TOOL, HookEvent.AFTER_TOOL):
        reg.register_function(event, lambda inp, e=event.value: HOOKS_SEEN.append(e))
    return reg


def make_agent(name: str) -> Any:
    from praisonaiagents import Agent

    tools = [broken] if SPEC.get("tool") == "broken" else [get_weather]
    agent = Agent(name=name, instructions="Answer briefly.", llm="gpt-4o-mini", tools=tools,
                  output="silent", hooks=hook_registry() if SPEC.get("hooks") else None,
                  retry={"max_retries": 1, "base_delay": 0.05, "max_delay": 0.1})
    if SPEC.get("runtime_id"):
        agent._runtime_id = SPEC["runtime_id"]
    return agent


def drive(agent: Any, mode: str, prompt: str) -> Any:
    if mode == "chat":
        return agent.chat(prompt)
    if mode == "achat":
        return asyncio.run(agent.achat(prompt))
    if mode == "start":
        return agent.start(prompt, stream=False)
    if mode == "run":
        return agent.run(prompt)
    if mode == "start_stream":
        return "".join(agent.start(prompt, stream=True))
    if mode == "iter_stream":
        return "".join(agent.iter_stream(prompt))
    raise ValueError(mode)


def resolve_all(inst: Any) -> dict[str, Any]:
    from praisonaiagents.llm.openai_client import OpenAIClient

    out = current_targets(inst)
    for prop in ("sync_client", "async_client"):
        out[f"OpenAIClient.{prop}"] = vars(OpenAIClient)[prop]
    return out


def sdk_resources(agent: Any) -> list[Any]:
    client = agent._openai_client
    found = []
    for sdk in (client._sync_client, client._async_client):
        if sdk is not None:
            found += [sdk.chat.completions, sdk.responses]
    return found


def main() -> None:
    from otelmw.core.pipeline import Pipeline
    from otelmw.instrumentation.praisonai import PraisonAIInstrumentor

    inst = PraisonAIInstrumentor()
    originals = resolve_all(inst)
    tel = instrumented(SPEC, "praisonai-host-test", inst, ["praisonai"])
    if SPEC.get("normalizers"):
        register_normalizers()
    if SPEC.get("break_pipeline"):  # an otelmw bug: before the LLM call, after the tool
        def bad_llm(self: Any, request: Any, execute: Any, **kw: Any) -> Any:
            raise RuntimeError("otelmw bug before the call")

        async def bad_allm(self: Any, request: Any, execute: Any, **kw: Any) -> Any:
            raise RuntimeError("otelmw bug before the call")

        def bad_tool(self: Any, name: str, args: Any, execute: Any, **kw: Any) -> Any:
            execute(args)
            raise RuntimeError("otelmw bug after the call")

        Pipeline.run_llm, Pipeline.arun_llm = bad_llm, bad_allm  # type: ignore[method-assign]
        Pipeline.run_tool = bad_tool  # type: ignore[method-assign]

    out: dict[str, Any] = {"results": [], "errors": []}
    agent = make_agent(SPEC.get("name", "Weather"))
    for i in range(SPEC.get("turns", 1)):
        try:
            out["results"].append(drive(agent, SPEC.get("mode", "chat"), SPEC.get(
                "prompt", f"What is the weather in Paris? (turn {i})")))
        except Exception as exc:
            out["results"].append(None)
            out["errors"].append(f"{type(exc).__module__}.{type(exc).__qualname__}")
    if SPEC.get("uninstrument"):
        resources = sdk_resources(agent)
        out["patched_before"] = sum("create" in vars(r) for r in resources)
        inst.uninstrument()
        after = resolve_all(inst)
        out["not_restored"] = [k for k, v in originals.items() if after[k] is not v]
        out["patched_after"] = sum("create" in vars(r) for r in resources + sdk_resources(
            agent))
        out["after_result"] = drive(make_agent("After"), "chat", "And in Rome?")
    out["tool_calls"] = TOOL_CALLS
    out["normalized"] = NORMALIZED
    out["hooks_seen"] = HOOKS_SEEN
    if SPEC.get("has_hooks"):  # what PraisonAI's own registry answers after the turns
        from praisonaiagents.hooks import HookEvent

        registry = agent._hook_runner.registry
        out["has_hooks"] = {e: registry.has_hooks(HookEvent(e)) for e in (
            "before_agent", "before_llm", "before_tool", "after_tool", "after_llm",
            "after_agent")}
    print_result(out, tel)


if __name__ == "__main__":
    main()

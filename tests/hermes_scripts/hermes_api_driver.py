"""Instrument Hermes through otelmw's API, then run ``hermes_turns``.

Env ``HX_CONFIG`` (JSON): everything ``hermes_turns`` reads plus ``openai`` (also
instrument the OpenAI SDK), ``otelmw_plugin`` (add an otelmw plugin), ``sabotage`` (make
the instrumentor's helpers raise) and ``after_prompts`` (turns after ``uninstrument()``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import otelmw
import otelmw.telemetry
from otelmw.instrumentation.hermes import HermesInstrumentor
from otelmw.instrumentation.openai import OpenAIInstrumentor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hermes_turns

TARGETS = [("run_agent", "AIAgent", "run_conversation"),
           ("hermes_cli.middleware", None, "apply_llm_request_middleware"),
           ("hermes_cli.middleware", None, "run_llm_execution_middleware"),
           ("hermes_cli.middleware", None, "apply_tool_request_middleware"),
           ("hermes_cli.middleware", None, "run_tool_execution_middleware"),
           ("hermes_cli.middleware", None, "_run_execution_chain"),
           ("hermes_cli.plugins", "PluginManager", "invoke_hook"),
           ("hermes_cli.plugins", "PluginManager", "invoke_middleware"),
           ("model_tools", None, "_emit_post_tool_call_hook")]


def snapshot() -> dict[str, Any]:
    import importlib

    out = {}
    for module, owner, name in TARGETS:
        obj: Any = importlib.import_module(module)
        if owner:
            obj = getattr(obj, owner)
        out[f"{module}:{owner}.{name}"] = obj.__dict__[name]
    return out


def register_otelmw_probe(ctx: otelmw.PluginContext) -> None:
    """An otelmw plugin (otelmw's own API): must apply inside Hermes' calls."""

    def cap_tokens(**kw: Any) -> Any:
        return {"request": {**kw["request"], "max_tokens": 77}, "reason": "token budget"}

    def count_tool(**kw: Any) -> Any:
        return kw["next_call"](kw["args"])

    ctx.register_middleware("llm_request", cap_tokens)
    ctx.register_middleware("tool_execution", count_tool)


def main() -> int:
    cfg = json.loads(os.environ["HX_CONFIG"])
    tel = otelmw.telemetry.configure("hermes-test")
    if cfg.get("otelmw_plugin"):
        otelmw.PluginManager().add_plugin("otelmw-probe", register_otelmw_probe)
    # The uninstrument check imports Hermes first; otherwise Hermes is imported
    # after instrument() and wrapped on import.
    originals = snapshot() if cfg.get("after_prompts") is not None else {}
    hermes = HermesInstrumentor()
    hermes.instrument()
    if cfg.get("sabotage"):  # instrumentation internals that raise: Hermes must not notice
        import otelmw.instrumentation.hermes.calls as mod

        def boom(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("sabotaged instrumentation")

        for name in ("llm_call", "tool_call", "call_of", "open_call"):
            setattr(mod, name, boom)
    if cfg.get("openai"):
        OpenAIInstrumentor().instrument()
    wrapped_now = {k: v is not originals[k] for k, v in snapshot().items()} if originals else {}
    agent = hermes_turns.new_agent(cfg)
    turns = hermes_turns.run_turns(agent, cfg, cfg["prompts"])
    report: dict[str, Any] = {"turns": turns, "session_id": agent.session_id}
    if cfg.get("after_prompts") is not None:
        hermes.uninstrument()
        OpenAIInstrumentor().uninstrument()
        report["t_uninstrumented"] = time.time_ns()
        after = snapshot()
        report["wrapped_while_instrumented"] = wrapped_now
        report["restored"] = {k: after[k] is originals[k] for k in originals}
        agent2 = hermes_turns.new_agent(cfg)
        report["after_turns"] = hermes_turns.run_turns(agent2, cfg, cfg["after_prompts"])
        report["after_session_id"] = agent2.session_id
        hermes.instrument()  # a second round wraps again and unwinds again
        report["rewrapped"] = {k: v is not originals[k] for k, v in snapshot().items()}
        hermes.uninstrument()
        report["restored_again"] = {k: v is originals[k] for k, v in snapshot().items()}
    report["failures"] = {"/".join(k): v for k, v in
                          otelmw.get_pipeline().failures.counts.items()}
    report["flushed"] = tel.shutdown(10)
    print("RESULT " + json.dumps(report))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

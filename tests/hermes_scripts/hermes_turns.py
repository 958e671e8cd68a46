"""Drive real Hermes turns offline (no otelmw import: ``otelmw run`` instruments it).

Config: JSON in ``HX_CONFIG``: base_url, prompts (one turn each), system. Prints one
``RESULT {json}`` line: per-turn results and the agent's session id.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def new_agent(cfg: dict[str, Any]) -> Any:
    from run_agent import AIAgent

    return AIAgent(base_url=cfg["base_url"], api_key="x", model="scripted-model",
                   enabled_toolsets=["file"], quiet_mode=True, skip_context_files=True,
                   skip_memory=True)


def run_turns(agent: Any, cfg: dict[str, Any], prompts: list[str]) -> list[dict[str, Any]]:
    out = []
    for prompt in prompts:
        result = agent.run_conversation(prompt, system_message=cfg.get("system"))
        out.append({"final": result.get("final_response"), "completed": result.get("completed"),
                    "failed": bool(result.get("failed"))})
    return out


def main() -> int:
    cfg = json.loads(os.environ["HX_CONFIG"])
    agent = new_agent(cfg)
    turns = run_turns(agent, cfg, cfg["prompts"])
    from hermes_cli.plugins import has_hook, has_middleware

    # what Hermes' own registry answers after the turns (otelmw must not change it)
    gated = {name: has_hook(name) for name in (
        "pre_api_request", "post_api_request", "api_request_error", "post_tool_call",
        "transform_tool_result")}
    middleware = {kind: has_middleware(kind) for kind in (
        "llm_request", "llm_execution", "tool_request", "tool_execution")}
    print("RESULT " + json.dumps({"turns": turns, "session_id": agent.session_id,
                                  "t_end": time.time_ns(), "has_hook": gated,
                                  "has_middleware": middleware}))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

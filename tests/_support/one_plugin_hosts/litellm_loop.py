"""LiteLLM: its own tool loop, ``litellm.run_tool_loop``, with the tools dispatched by the
loop's ``execute_tool`` callback; the model is an ``openai/`` route to the scripted
server (LiteLLM's own OpenAI client)."""

from __future__ import annotations

import json
from typing import Any

import litellm

from . import PROMPT, SYSTEM, TOOLS, openai_tools


def execute_tool(call: Any) -> dict[str, Any]:
    result = TOOLS[call.function.name](**json.loads(call.function.arguments))
    return {"role": "tool", "tool_call_id": call.id, "content": str(result)}


def run_turn(server_url: str) -> dict[str, Any]:
    answer = litellm.run_tool_loop(
        execute_tool=execute_tool, model="openai/scripted-model",
        api_base=f"{server_url}/v1", api_key="sk-scripted", tools=openai_tools(),
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}])
    return {"final": str(answer)}

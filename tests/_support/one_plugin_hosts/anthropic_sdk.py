"""The plain anthropic SDK: a tool loop written by hand, made an agent turn and a tool
dispatcher (``sdk_dispatch``) with otelmw's decorators (as a user of the SDK does); the
``chat`` spans come from ``otelmw_anthropic``, which ``otelmw run`` installs."""

from __future__ import annotations

from typing import Any

from anthropic import Anthropic

from otelmw.decorators import agent_turn

from . import PARAMETERS, PROMPT, SYSTEM, TOOLS, description
from .sdk_dispatch import MODEL, dispatch


@agent_turn(name="weather-agent")
def ask(client: Anthropic, prompt: str) -> str:
    tools: Any = [{"name": name, "description": description(name),
                   "input_schema": PARAMETERS[name]} for name in TOOLS]
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    for _ in range(5):
        reply = client.messages.create(model=MODEL, max_tokens=256, system=SYSTEM,
                                       messages=messages, tools=tools)
        uses = [b for b in reply.content if b.type == "tool_use"]
        if not uses:
            return "".join(b.text for b in reply.content if b.type == "text")
        messages.append({"role": "assistant",
                         "content": [b.model_dump(exclude_none=True) for b in reply.content]})
        results = [{"type": "tool_result", "tool_use_id": use.id,
                    "content": str(dispatch(use.name, dict(use.input), tool_call_id=use.id))}
                   for use in uses]
        messages.append({"role": "user", "content": results})
    raise RuntimeError("no answer after 5 model requests")


def run_turn(server_url: str) -> dict[str, Any]:
    client = Anthropic(base_url=server_url, api_key="sk-scripted", max_retries=0)
    return {"final": ask(client, PROMPT)}

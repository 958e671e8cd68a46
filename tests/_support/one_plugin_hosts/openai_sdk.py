"""The plain openai SDK: a tool loop written by hand, made an agent turn and a tool
dispatcher (``sdk_dispatch``) with otelmw's decorators (as a user of the SDK does); the
``chat`` spans come from ``otelmw_openai``, which ``otelmw run`` installs."""

from __future__ import annotations

import json
from typing import Any

from openai import OpenAI

from otelmw.decorators import agent_turn

from . import PROMPT, SYSTEM, openai_tools
from .sdk_dispatch import MODEL, dispatch


@agent_turn(name="weather-agent")
def ask(client: OpenAI, prompt: str) -> str:
    tools = openai_tools()
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM},
                                      {"role": "user", "content": prompt}]
    for _ in range(5):
        reply = client.chat.completions.create(model=MODEL, messages=messages, tools=tools)
        message = reply.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = dispatch(call.function.name, json.loads(call.function.arguments),
                              tool_call_id=call.id)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": str(result)})
    raise RuntimeError("no answer after 5 model requests")


def run_turn(server_url: str) -> dict[str, Any]:
    client = OpenAI(base_url=f"{server_url}/v1", api_key="sk-scripted", max_retries=0)
    return {"final": ask(client, PROMPT)}

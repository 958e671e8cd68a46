"""A tool-calling agent on the plain openai SDK, unmodified: it never imports otelmw.

Run under ``otelmw run`` by tests/test_stack_jaeger.py; the model is whatever
``OPENAI_BASE_URL`` serves. Each argument is one question, answered in a loop of chat
calls that runs the tools the model asks for.
"""

import json
import sys
from typing import Any

from openai import OpenAI

MODEL = "gpt-4o-mini"
TOOLS: list[Any] = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}},
]


def get_weather(city: str) -> str:
    return f"sunny in {city}"


def ask(client: OpenAI, question: str) -> str:
    messages: list[Any] = [{"role": "user", "content": question}]
    for _ in range(4):
        response = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
        message = response.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = get_weather(**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return "(no answer)"


client = OpenAI(max_retries=0)
for question in sys.argv[1:]:
    print("ANSWER", ask(client, question))

"""A tool-calling agent on the real openai SDK, run under ``otelmw run``.

``otelmw run`` instruments its chat calls; otelmw's decorators mark its turns
(``agent_turn``) and its tool dispatch (``tool_dispatcher``). The model is whatever
``OPENAI_BASE_URL`` serves; each argument is one turn's question.
"""

import json
import sys
from typing import Any

from openai import OpenAI

from otelmw.decorators import agent_turn, tool_dispatcher

MODEL = "gpt-4o-mini"
TOOLS: list[Any] = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_stock", "description": "Latest price of a ticker.",
        "parameters": {"type": "object", "properties": {"ticker": {"type": "string"}},
                       "required": ["ticker"]}}},
]


def get_weather(city: str) -> str:
    return f"sunny in {city}"


def get_stock(ticker: str) -> str:
    raise LookupError("no such ticker")


FUNCTIONS = {"get_weather": get_weather, "get_stock": get_stock}


@tool_dispatcher(runtime_id="openai_tool_agent")
def dispatch(tool_name: str, args: dict[str, Any], tool_call_id: str) -> Any:
    return FUNCTIONS[tool_name](**args)


@agent_turn(name="Forecaster", runtime_id="openai_tool_agent")
def ask(client: OpenAI, question: str) -> str:
    messages: list[Any] = [{"role": "system", "content": "Answer briefly."},
                           {"role": "user", "content": question}]
    for _ in range(4):
        response = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
        message = response.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            result = dispatch(call.function.name, json.loads(call.function.arguments), call.id)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": str(result)})
    return "(no answer)"


client = OpenAI(max_retries=0)
for question in sys.argv[1:]:
    print("ANSWER", ask(client, question))

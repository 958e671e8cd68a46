"""The Google Gen AI SDK: ``models.generate_content`` with the tools as Python functions,
which the SDK calls itself (automatic function calling) until the model answers."""

from __future__ import annotations

from typing import Any

from google import genai
from google.genai import types

from . import PROMPT, SYSTEM, TOOLS


def run_turn(server_url: str) -> dict[str, Any]:
    client = genai.Client(api_key="scripted",
                          http_options=types.HttpOptions(base_url=server_url))
    config = types.GenerateContentConfig(system_instruction=SYSTEM, tools=list(TOOLS.values()))
    response = client.models.generate_content(model="scripted-model", contents=PROMPT,
                                              config=config)
    return {"final": response.text}

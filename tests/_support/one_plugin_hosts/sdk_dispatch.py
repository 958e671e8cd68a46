"""The tool dispatcher of the drivers written on a plain SDK (``openai_sdk``,
``anthropic_sdk``): a function of their user's, made otelmw's tool dispatcher with
``@tool_dispatcher``; and the model they ask."""

from __future__ import annotations

from typing import Any

from otelmw.decorators import tool_dispatcher

from . import TOOLS

MODEL = "scripted-model"


@tool_dispatcher
def dispatch(tool_name: str, args: dict[str, Any], tool_call_id: str | None = None) -> Any:
    return TOOLS[tool_name](**args)

"""A Hermes plugin providing the one-plugin test's tools (toolset ``weather``), through
Hermes' own ``ctx.register_tool``. It knows nothing of otelmw."""

from __future__ import annotations

from typing import Any

from _support.one_plugin_hosts import PARAMETERS, TOOLS, description


def _handler(name: str) -> Any:
    def handle(args: dict[str, Any], **kwargs: Any) -> str:
        return str(TOOLS[name](**args))

    return handle


def register(ctx: Any) -> None:
    for name in TOOLS:
        ctx.register_tool(name=name, toolset="weather",
                          schema={"name": name, "description": description(name),
                                  "parameters": PARAMETERS[name]},
                          handler=_handler(name), description=description(name))

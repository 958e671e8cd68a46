"""The host API's tool call without the plugins another process already ran on it:
``tool_plugins()`` (what a tool call runs now, each plugin's fingerprint) and
``run_tool``/``arun_tool(..., skip_plugins=...)`` (an MCP server honouring its client's
word, ``otelmw_mcp``)."""

from __future__ import annotations

import asyncio
from typing import Any

from otelmw.core import Pipeline, ToolPlugin, tool_plugins


def add_mark(**kw: Any) -> Any:
    return {"args": {**kw["args"], "city": kw["args"]["city"] + "-MW"}}


def add_guard_mark(**kw: Any) -> Any:
    return {"args": {**kw["args"], "city": kw["args"]["city"] + "+guard"}}


def build() -> tuple[Pipeline, list[str]]:
    pipeline, seen = Pipeline(), []
    pipeline.registry.add_middleware("tool_request", add_mark, plugin="shared")
    pipeline.registry.add_hook("post_tool_call",
                               lambda **kw: seen.append(f"shared:{kw['status']}"), "shared")
    pipeline.registry.add_middleware("tool_request", add_guard_mark, plugin="guard")
    pipeline.registry.add_hook("pre_api_request", lambda **kw: None, plugin="llm-only")
    return pipeline, seen


def test_tool_plugins_names_the_tool_call_plugins_with_a_fingerprint_of_their_layers() -> None:
    pipeline, _ = build()
    plugins = tool_plugins(pipeline)
    assert [p.name for p in plugins] == ["guard", "shared"]  # llm-only runs on no tool call
    assert all(isinstance(p, ToolPlugin) and len(p.fingerprint) == 16 for p in plugins)
    again, _ = build()  # the same registrations elsewhere: the same fingerprints
    assert tool_plugins(again) == plugins
    other = Pipeline()  # same name, another callback: another fingerprint
    other.registry.add_middleware("tool_request", add_guard_mark, plugin="shared")
    assert tool_plugins(other)[0].fingerprint != dict(
        (p.name, p.fingerprint) for p in plugins)["shared"]


def test_skipped_plugins_do_not_run_and_every_other_plugin_does() -> None:
    pipeline, seen = build()
    received: list[str] = []

    def tool(args: dict[str, Any]) -> str:
        received.append(args["city"])
        return "ok"

    assert pipeline.run_tool("get_weather", {"city": "Paris"}, tool,
                             skip_plugins=["shared"]) == "ok"
    assert received == ["Paris+guard"] and seen == []  # shared's middleware and hook skipped
    pipeline.run_tool("get_weather", {"city": "Paris"}, tool)
    assert received[-1] == "Paris-MW+guard" and seen == ["shared:ok"]

    async def atool(args: dict[str, Any]) -> str:
        received.append(args["city"])
        return "ok"

    asyncio.run(pipeline.arun_tool("get_weather", {"city": "Oslo"}, atool,
                                   skip_plugins={"shared", "guard"}))
    assert received[-1] == "Oslo" and seen == ["shared:ok"]

"""otelmw plugins the MCP tests register on the client or the server side: each makes
a visible change (what the server's tool receives, what the caller gets back)."""

from __future__ import annotations

import copy
import json
from typing import Any

SEEN: list[str] = []  # post_tool_call: what the hook saw (in process)


SHARED = "mcp-test-shared"  # "mw": the same plugin on either side (one name, one callback)


def add_mw(**kw: Any) -> Any:
    """Appends ``-MW`` to the city each time it runs: a second run shows (``-MW-MW``)."""
    if kw["tool_name"] == "get_weather":
        return {"args": {**kw["args"], "city": f"{kw['args']['city']}-MW"}}
    return None


def register(side: str, names: list[str]) -> None:
    from otelmw import get_pipeline

    registry = get_pipeline().registry
    plugin = f"mcp-test-{side}"
    if "mw" in names:
        registry.add_middleware("tool_request", add_mw, plugin=SHARED)
    if "rewrite" in names:
        def rewrite_city(**kw: Any) -> Any:
            args = kw["args"]
            # in one process both sides share the pipeline: the first side rewrites
            if kw["tool_name"] == "get_weather" and "+" not in args["city"]:
                return {"args": {**args, "city": f"{args['city']}+{side}"}}
            return None

        registry.add_middleware("tool_request", rewrite_city, plugin=plugin)
    if "cache" in names:
        cache: dict[str, Any] = {}

        async def cached(**kw: Any) -> Any:
            key = kw["tool_name"] + json.dumps(kw["args"], sort_keys=True, default=str)
            if key in cache:
                return copy.deepcopy(cache[key])  # answered without the server
            result = await kw["next_call"](kw["args"])
            cache[key] = copy.deepcopy(result)
            return result

        registry.add_middleware("tool_execution", cached, plugin=plugin)
    if "block" in names:
        def guard(**kw: Any) -> Any:
            if kw["tool_name"] == "forbidden":
                return {"action": "block", "message": f"forbidden by the {side} policy"}
            return None

        registry.add_hook("pre_tool_call", guard, plugin=plugin)
    if "observe" in names:
        def seen(**kw: Any) -> None:
            SEEN.append(f"{side}:{kw['tool_name']}:{kw['status']}")

        registry.add_hook("post_tool_call", seen, plugin=plugin)

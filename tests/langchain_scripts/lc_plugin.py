"""A user's otelmw plugin for the LangChain host tests (``register(ctx)``): which parts
act is read from ``LC_PLUGIN`` (comma-separated: ``rewrite``, ``wrap``, ``block``,
``observe``); what the callbacks saw goes as JSON lines to ``LC_NOTES`` when set."""

from __future__ import annotations

import json
import os
from typing import Any

REWRITTEN_CITY = "Rewritten-City"


def _on(feature: str) -> bool:
    return feature in os.environ.get("LC_PLUGIN", "").split(",")


def note(what: str, **facts: Any) -> None:
    path = os.environ.get("LC_NOTES")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"what": what, **facts}, default=repr) + "\n")


def pin_temperature(**kw: Any) -> Any:
    if not _on("rewrite"):
        return None
    request = dict(kw["request"])
    request["temperature"] = 0.25
    return {"request": request, "source": "lc-plugin", "reason": "deterministic"}


def rewrite_city(**kw: Any) -> Any:
    if not _on("rewrite") or "city" not in kw["args"]:
        return None
    return {"args": {**kw["args"], "city": REWRITTEN_CITY}, "source": "lc-plugin"}


def pass_through(**kw: Any) -> Any:
    result = kw["next_call"](kw["args"])
    if _on("wrap"):
        note("wrapped", tool=kw["tool_name"], args=dict(kw["args"]))
    return result


def block_weather(**kw: Any) -> Any:
    if _on("block") and kw["tool_name"] == "get_weather":
        return {"action": "block", "message": "get_weather is blocked by policy"}
    return None


def observe(**kw: Any) -> None:
    if _on("observe"):
        normalized = kw["normalized"]
        note("post_tool_call", tool=kw["tool_name"], success=normalized.success,
             error=normalized.error_message, status=kw["status"])


def register(ctx: Any) -> None:
    ctx.register_middleware("llm_request", pin_temperature)
    ctx.register_middleware("tool_request", rewrite_city)
    ctx.register_middleware("tool_execution", pass_through)
    ctx.register_hook("pre_tool_call", block_weather)
    ctx.register_hook("post_tool_call", observe)

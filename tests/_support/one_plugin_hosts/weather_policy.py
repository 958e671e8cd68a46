"""The one user plugin every host runs (``tests/test_one_plugin_every_host.py``).

Written as a user writes an otelmw plugin: a module with ``register(ctx)``, installed as
a distribution with an ``otelmw.plugins`` entry point (``weather_policy =
weather_policy:register``) and turned on with ``otelmw plugins enable weather_policy``.
It never imports otelmw. What it saw goes, one JSON line per event, to the file named by
``WEATHER_POLICY_AUDIT`` (an audit log, as a real policy plugin keeps one).
"""

from __future__ import annotations

import json
import os
from typing import Any

MAX_TOKENS = 200  # every model request is sent with this answer budget
CITY_NAMES = {"paris": "Paris, FR"}  # the model says "paris"; the tool gets "Paris, FR"
BLOCKED_TOOL = "delete_file"
BLOCK_MESSAGE = "delete_file is not allowed by weather_policy"


def _audit(event: str, **fields: Any) -> None:
    path = os.environ.get("WEATHER_POLICY_AUDIT")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"event": event, **fields}, default=repr) + "\n")


def cap_tokens(**kw: Any) -> Any:
    """llm_request: every model request is sent with the same answer budget (a Gemini
    request, ``contents`` and ``config``, has it in its config: ``max_output_tokens``)."""
    request = dict(kw["request"])
    if "contents" in request:
        request["config"] = _with_output_budget(request.get("config"))
    else:
        request["max_tokens"] = MAX_TOKENS
    return {"request": request, "source": "weather_policy", "reason": "answer budget"}


def _with_output_budget(config: Any) -> Any:
    """A copy of a ``GenerateContentConfig`` (or of its dict) with the budget."""
    if hasattr(config, "model_copy"):
        return config.model_copy(update={"max_output_tokens": MAX_TOKENS})
    return {**(config or {}), "max_output_tokens": MAX_TOKENS}


def canonical_city(**kw: Any) -> Any:
    """tool_request: the weather tool gets a canonical city name."""
    args = kw["args"]
    if kw["tool_name"] != "get_weather" or not isinstance(args, dict):
        return None
    city = str(args.get("city", ""))
    return {"args": {**args, "city": CITY_NAMES.get(city.lower(), city)},
            "reason": "canonical city name"}


def audit_tool(**kw: Any) -> Any:
    """tool_execution: passes the call through, noting what the tool is given."""
    _audit("tool_execution", tool=kw["tool_name"], tool_call_id=kw.get("tool_call_id"),
           args=dict(kw["args"]))
    return kw["next_call"](kw["args"])


def block_deletes(**kw: Any) -> Any:
    """pre_tool_call: no file deletion, whatever the model asks."""
    if kw["tool_name"] == BLOCKED_TOOL:
        return {"action": "block", "message": BLOCK_MESSAGE}
    return None


def observe_result(**kw: Any) -> None:
    """post_tool_call: note every result."""
    normalized = kw["normalized"]
    _audit("post_tool_call", tool=kw["tool_name"], tool_call_id=kw.get("tool_call_id"),
           status=kw["status"], success=normalized.success,
           content=None if normalized.content is None else str(normalized.content))


def register(ctx: Any) -> None:
    ctx.register_middleware("llm_request", cap_tokens)
    ctx.register_middleware("tool_request", canonical_city)
    ctx.register_middleware("tool_execution", audit_tool)
    ctx.register_hook("pre_tool_call", block_deletes)
    ctx.register_hook("post_tool_call", observe_result)

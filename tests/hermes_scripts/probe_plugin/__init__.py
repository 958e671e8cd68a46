"""A Hermes user plugin for otelmw's Hermes tests, registered through Hermes' own
plugin API (``register(ctx)`` with a ``PluginContext``). It never imports otelmw."""

from __future__ import annotations

from typing import Any


def pin_temperature(**kw: Any) -> Any:  # llm_request: rewrites
    request = dict(kw["request"])
    request["temperature"] = 0.25
    return {"request": request, "source": "probe-policy", "reason": "pinned temperature"}


def leave_request(**kw: Any) -> None:  # llm_request: unchanged
    return None


def broken_rewrite(**kw: Any) -> Any:  # llm_request: fails
    raise ValueError("probe rewrite failure")


def time_llm(**kw: Any) -> Any:  # llm_execution: wraps (outermost)
    return kw["next_call"](kw["request"])


def flaky_llm(**kw: Any) -> Any:  # llm_execution: fails before next_call
    raise RuntimeError("probe wrapper failure")


def limit_reads(**kw: Any) -> Any:  # tool_request: rewrites read_file args
    if kw.get("tool_name") != "read_file":
        return None
    args = dict(kw["args"])
    args["limit"] = 50
    return {"args": args, "source": "probe-policy", "reason": "bounded reads"}


def guard_tool(**kw: Any) -> Any:  # tool_execution: wraps
    return kw["next_call"](kw["args"])


def audit_after(**kw: Any) -> Any:  # tool_execution: fails after next_call
    kw["next_call"](kw["args"])
    raise KeyError("probe post-processing failure")


def on_pre_api(**kw: Any) -> None:
    return None


def on_post_api(**kw: Any) -> None:
    return None


def on_api_error(**kw: Any) -> None:
    return None


def on_pre_tool(**kw: Any) -> Any:  # blocks reads of a path containing "blocked"
    if "blocked" in str((kw.get("args") or {}).get("path", "")):
        return {"action": "block", "message": "probe policy: blocked path"}
    return None


def on_post_tool(**kw: Any) -> None:
    raise RuntimeError("probe hook failure")


def on_session_end(**kw: Any) -> None:
    return None


def register(ctx: Any) -> None:
    ctx.register_middleware("llm_request", pin_temperature)
    ctx.register_middleware("llm_request", leave_request)
    ctx.register_middleware("llm_request", broken_rewrite)
    ctx.register_middleware("llm_execution", time_llm)
    ctx.register_middleware("llm_execution", flaky_llm)
    ctx.register_middleware("tool_request", limit_reads)
    ctx.register_middleware("tool_execution", guard_tool)
    ctx.register_middleware("tool_execution", audit_after)
    ctx.register_hook("pre_api_request", on_pre_api)
    ctx.register_hook("post_api_request", on_post_api)
    ctx.register_hook("api_request_error", on_api_error)
    ctx.register_hook("pre_tool_call", on_pre_tool)
    ctx.register_hook("post_tool_call", on_post_tool)
    ctx.register_hook("on_session_end", on_session_end)

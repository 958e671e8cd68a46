"""The user's otelmw plugin of the Agents SDK tests (``register(ctx)``): loaded by the
driver from code, and by ``otelmw run`` from an installed ``otelmw.plugins`` entry
point. ``SEEN``: what ran, in order."""

from __future__ import annotations

from typing import Any

SEEN: list[str] = []


def plugin(ctx: Any) -> None:
    """The user's plugin: an ``llm_request`` rewrite, a ``tool_request`` rewrite of the
    arguments, a pass-through ``tool_execution`` wrapper, a ``pre_tool_call`` block of
    one tool and a ``post_tool_call`` observer."""

    def mark_instructions(request: Any, **kw: Any) -> Any:
        SEEN.append("llm_request")
        new = dict(request)
        new["instructions"] = f"{request.get('instructions')} [acme-rewritten]"
        new["temperature"] = 0.25
        return {"request": new, "source": "acme", "reason": "tag"}

    def to_rome(args: Any, **kw: Any) -> Any:
        SEEN.append("tool_request")
        if "city" not in args:
            return None
        return {"args": {**args, "city": "Rome-rewritten"}, "source": "acme"}

    def passthrough(args: Any, next_call: Any, **kw: Any) -> Any:
        SEEN.append("tool_execution")
        return next_call(args)

    def block_forbidden(tool_name: str, **kw: Any) -> Any:
        if tool_name == "forbidden":
            return {"action": "block", "message": "blocked by acme policy"}
        return None

    def observe(tool_name: str, status: str, **kw: Any) -> None:
        SEEN.append(f"post_tool_call:{tool_name}:{status}")

    ctx.register_middleware("llm_request", mark_instructions)
    ctx.register_middleware("tool_request", to_rome)
    ctx.register_middleware("tool_execution", passthrough)
    ctx.register_hook("pre_tool_call", block_forbidden)
    ctx.register_hook("post_tool_call", observe)

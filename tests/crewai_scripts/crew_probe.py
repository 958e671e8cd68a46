"""An installed otelmw plugin for the ``otelmw run`` test (``otelmw.plugins`` entry point
``crew_probe``): an ``llm_request`` rewrite, a ``tool_request`` rewrite of the tool's
arguments, a pass-through ``tool_execution`` wrapper."""

from typing import Any


def register(ctx: Any) -> None:
    def budget(**kw: Any) -> Any:
        return {"request": {**kw["request"], "max_tokens": 77}, "reason": "token budget"}

    def city(**kw: Any) -> Any:
        return {"args": {**kw["args"], "city": "Oslo"}, "reason": "city policy"}

    def passthrough(**kw: Any) -> Any:
        return kw["next_call"](kw["args"])

    ctx.register_middleware("llm_request", budget)
    ctx.register_middleware("tool_request", city)
    ctx.register_middleware("tool_execution", passthrough)

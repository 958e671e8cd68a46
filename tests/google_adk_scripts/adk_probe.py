"""An installed otelmw plugin for the ``otelmw run`` test (``otelmw.plugins`` entry point
``adk_probe``): an ``llm_request`` rewrite of the Gemini-shaped request ADK sends (its
``config``'s answer budget), a ``tool_request`` rewrite of the tool's arguments."""

from typing import Any


def register(ctx: Any) -> None:
    def budget(**kw: Any) -> Any:
        request = dict(kw["request"])
        request["config"] = request["config"].model_copy(update={"max_output_tokens": 55})
        return {"request": request, "reason": "token budget"}

    def city(**kw: Any) -> Any:
        return {"args": {**kw["args"], "city": "Oslo"}, "reason": "city policy"}

    ctx.register_middleware("llm_request", budget)
    ctx.register_middleware("tool_request", city)

"""A Hermes user plugin for otelmw's Hermes tests: an ``llm_request`` rewrite that routes
every request to another model, and an ``llm_execution`` wrapper that asks a judge model
(through the OpenAI SDK, at Hermes' own base URL) before passing the request on. It
registers no hook and never imports otelmw."""

from __future__ import annotations

from typing import Any

JUDGE_MODEL = "judge-model"
ROUTED_MODEL = "routed-model"


def route_model(**kw: Any) -> Any:  # llm_request: a model router
    return {"request": {**kw["request"], "model": ROUTED_MODEL}, "reason": "routing"}


def ask_judge(**kw: Any) -> Any:  # llm_execution: a guardrail model call, then next_call
    import openai

    client = openai.OpenAI(base_url=kw["base_url"], api_key="x", max_retries=0)
    client.chat.completions.create(model=JUDGE_MODEL,
                                   messages=[{"role": "user", "content": "Is this safe?"}])
    return kw["next_call"](kw["request"])


def register(ctx: Any) -> None:
    ctx.register_middleware("llm_request", route_model)
    ctx.register_middleware("llm_execution", ask_judge)

"""A Hermes user plugin for otelmw's Hermes contract tests, registered through Hermes'
own plugin API (``register(ctx)``); it never imports otelmw.

Each turn's user message starts with a scenario tag (``[chain]``, ``[shapes]``,
``[downstream]``, ``[warn]``, ``[skip]``, ``[twice]``), read by the ``pre_llm_call``
hook; a callback acts only in its scenario (else it passes through) and writes what it
saw as JSON lines to the file named by ``HX_CONTRACT_NOTES``.
"""

from __future__ import annotations

import json
import os
from typing import Any

_scenario = ""


def note(what: str, **facts: Any) -> None:
    with open(os.environ["HX_CONTRACT_NOTES"], "a", encoding="utf-8") as f:
        f.write(json.dumps({"scenario": _scenario, "what": what, **facts}, default=repr) + "\n")


def set_scenario(**kw: Any) -> None:  # pre_llm_call: once per turn
    global _scenario
    message = str(kw.get("user_message") or "")
    _scenario = message[1:message.index("]")] if message.startswith("[") else ""


def exc_name(exc: BaseException) -> str:
    return f"{type(exc).__module__}.{type(exc).__qualname__}"


# ---------------------------------------------------------------- llm_request
def edit_in_place(**kw: Any) -> None:  # [chain]: edits the payload, returns no rewrite
    if _scenario == "chain":
        kw["request"]["max_tokens"] = 33


def set_temperature(**kw: Any) -> Any:  # [chain]: a rewrite built from what it was handed
    if _scenario == "chain":
        return {"request": {**kw["request"], "temperature": 0.5}}
    return None


def see_chain(**kw: Any) -> None:  # [chain]: what the next callback is handed
    if _scenario == "chain":
        request = kw["request"]
        note("request_seen", temperature=request.get("temperature"),
             max_tokens=request.get("max_tokens"),
             original_temperature=kw["original_request"].get("temperature"))


def always_fails(**kw: Any) -> None:  # [warn]: raises on every request
    if _scenario == "warn":
        raise ValueError("contract plugin: always fails")


def hermes_shape(**kw: Any) -> Any:  # [shapes]: a rewrite with a key otelmw's rules refuse
    if _scenario == "shapes":
        return {"request": {**kw["request"], "temperature": 0.125}, "name": "shape-probe",
                "note": "not a trace key"}
    return None


def bare_rewrite(**kw: Any) -> Any:  # [shapes]: a rewrite without trace fields
    if _scenario == "shapes":
        return {"request": dict(kw["request"])}
    return None


def ignored_return(**kw: Any) -> Any:  # [shapes]: a return Hermes ignores
    if _scenario == "shapes":
        return {"request": "not a dict", "source": "ignored"}
    return None


# ---------------------------------------------------------------- tool_request
def bound_reads(**kw: Any) -> Any:  # [shapes]: rewrites read_file args
    if _scenario == "shapes":
        return {"args": {**kw["args"], "limit": 40}, "source": "contract", "reason": "bounded"}
    return None


# -------------------------------------------------------------- llm_execution
def catch_downstream(**kw: Any) -> Any:  # outermost: what a failing provider call raises here
    try:
        return kw["next_call"](kw["request"])
    except Exception as exc:
        note("downstream_error", type=exc_name(exc), has_original=hasattr(exc, "original"))
        raise


def see_execution_trace(**kw: Any) -> Any:  # [shapes]: Hermes' trace in its execution context
    if _scenario == "shapes":
        note("execution_trace", middleware_trace=kw.get("middleware_trace"))
    return kw["next_call"](kw["request"])


def raise_before(**kw: Any) -> Any:  # [skip]: fails before next_call
    if _scenario == "skip":
        raise RuntimeError("contract plugin: before next_call")
    return kw["next_call"](kw["request"])


def raise_after(**kw: Any) -> Any:  # [skip]: fails after next_call returned
    response = kw["next_call"](kw["request"])
    if _scenario == "skip":
        raise KeyError("contract plugin: after next_call")
    return response


def call_twice(**kw: Any) -> Any:  # [twice]: a second next_call
    response = kw["next_call"](kw["request"])
    if _scenario == "twice":
        try:
            kw["next_call"](kw["request"])
        except Exception as exc:
            note("second_next_call", type=exc_name(exc),
                 runtime_error=isinstance(exc, RuntimeError))
    return response


def count_llm_base(**kw: Any) -> Any:  # innermost: once per run of the chain below
    note("llm_base")
    return kw["next_call"](kw["request"])


# ------------------------------------------------------------- tool_execution
def tool_raise_before(**kw: Any) -> Any:  # [skip]
    if _scenario == "skip":
        raise RuntimeError("contract plugin: tool before next_call")
    return kw["next_call"](kw["args"])


def tool_raise_after(**kw: Any) -> Any:  # [skip]
    result = kw["next_call"](kw["args"])
    if _scenario == "skip":
        raise KeyError("contract plugin: tool after next_call")
    return result


def count_tool_base(**kw: Any) -> Any:  # innermost
    note("tool_base")
    return kw["next_call"](kw["args"])


# ----------------------------------------------------------------------- hooks
def see_hook_trace(hook: str) -> Any:
    def hook_callback(**kw: Any) -> None:
        if _scenario == "shapes":
            note(hook, middleware_trace=kw.get("middleware_trace"))

    hook_callback.__name__ = f"see_{hook}"
    return hook_callback


def register(ctx: Any) -> None:
    ctx.register_hook("pre_llm_call", set_scenario)
    for callback in (edit_in_place, set_temperature, see_chain, always_fails, hermes_shape,
                     bare_rewrite, ignored_return):
        ctx.register_middleware("llm_request", callback)
    ctx.register_middleware("tool_request", bound_reads)
    for callback in (catch_downstream, see_execution_trace, raise_before, raise_after,
                     call_twice, count_llm_base):
        ctx.register_middleware("llm_execution", callback)
    for callback in (tool_raise_before, tool_raise_after, count_tool_base):
        ctx.register_middleware("tool_execution", callback)
    for hook in ("pre_api_request", "pre_tool_call", "post_tool_call"):
        ctx.register_hook(hook, see_hook_trace(hook))

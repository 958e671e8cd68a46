"""Observer hooks: order, fail-open, block / transform, middleware_trace, sync vs async."""

from __future__ import annotations

import asyncio
import gc
import inspect
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from _support.calls import (
    ALL_HOOKS,
    EXEC_KIND,
    LLM_HOOKS,
    MODES,
    OP_HOOKS,
    OPS,
    PAYLOAD_KEY,
    PLUGIN,
    REQUEST_KIND,
    TOOL_HOOKS,
    BaseCall,
    callback,
    named,
    pass_through,
    run_call,
)

from otelmw import Pipeline


def rec_req(log: list[str], stage: str, key: str, mode: str) -> Any:
    def body(**kw: Any) -> Any:
        log.append(stage)
        return {key: dict(kw[key]), "source": "s", "reason": "r"}

    return callback(mode, stage, body)


def rec_exec(log: list[str], stage: str, key: str, mode: str) -> Any:
    if mode == "sync":

        def cb(**kw: Any) -> Any:
            log.append(f"{stage}>")
            try:
                return kw["next_call"](kw[key])
            finally:
                log.append(f"<{stage}")

    else:

        async def cb(**kw: Any) -> Any:
            log.append(f"{stage}>")
            try:
                return await kw["next_call"](kw[key])
            finally:
                log.append(f"<{stage}")

    return named(cb, stage)


# ------------------------------------------------------------------------- order


# Everything a call logs when its request and execution
# stages each hold a recorder and every hook appends its name.
ORDER_ON_SUCCESS = {
    "llm": ["llm_request", "pre_api_request", "llm_execution>", "base", "<llm_execution",
            "post_api_request"],
    "tool": ["tool_request", "pre_tool_call", "tool_execution>", "base", "<tool_execution",
             "post_tool_call", "transform_tool_result"],
}
OP_PAYLOAD = {"llm": {"model": "m"}, "tool": {"a": 1}}


def add_stage_recorders(p: Pipeline, log: list[str], op: str, mode: str) -> None:
    p.registry.add_middleware(REQUEST_KIND[op], rec_req(log, REQUEST_KIND[op],
                                                        PAYLOAD_KEY[op], mode), plugin=PLUGIN)
    p.registry.add_middleware(EXEC_KIND[op], rec_exec(log, EXEC_KIND[op], PAYLOAD_KEY[op], mode),
                              plugin=PLUGIN)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("mode", MODES)
def test_hooks_fire_in_documented_order_on_success(mode: str, op: str) -> None:
    p = Pipeline()
    log: list[str] = []
    add_stage_recorders(p, log, op, mode)
    for h in OP_HOOKS[op]:
        p.registry.add_hook(h, callback(mode, h, lambda h=h, **kw: log.append(h)), plugin=PLUGIN)
    assert run_call(p, mode, op, OP_PAYLOAD[op], BaseCall(log=log)) == "base-result"
    assert log == ORDER_ON_SUCCESS[op]


@pytest.mark.parametrize("mode", MODES)
def test_llm_hooks_fire_in_documented_order_on_error(mode: str) -> None:
    p = Pipeline()
    log: list[str] = []
    error = RuntimeError("provider failed")
    add_stage_recorders(p, log, "llm", mode)
    errors: list[BaseException] = []

    def on_error(**kw: Any) -> None:
        log.append("api_request_error")
        errors.append(kw["error"])

    p.registry.add_hook("pre_api_request", callback(mode, "pre", lambda **kw: log.append(
        "pre_api_request")), plugin=PLUGIN)
    p.registry.add_hook("post_api_request", callback(mode, "post", lambda **kw: log.append(
        "post_api_request")), plugin=PLUGIN)
    p.registry.add_hook("api_request_error", callback(mode, "err", on_error), plugin=PLUGIN)
    with pytest.raises(RuntimeError) as info:
        run_call(p, mode, "llm", {"model": "m"}, BaseCall(log=log, error=error))
    assert info.value is error
    assert errors == [error] and errors[0] is error
    assert log == ["llm_request", "pre_api_request", "llm_execution>", "base",
                   "<llm_execution", "api_request_error"]


# ------------------------------------------------------------------------ fail-open


@pytest.mark.parametrize("mode", MODES)
def test_raising_hooks_never_break_the_call(mode: str) -> None:
    p = Pipeline()
    after: list[str] = []

    def boom(**kw: Any) -> Any:
        raise RuntimeError("hook exploded")

    for h in ALL_HOOKS:
        p.registry.add_hook(h, callback(mode, f"boom_{h}", boom), plugin=PLUGIN)
        p.registry.add_hook(h, callback(mode, f"after_{h}", lambda h=h, **kw: after.append(h)),
                            plugin=PLUGIN)
    assert run_call(p, mode, "llm", {"model": "m"}, lambda r: "llm-ok") == "llm-ok"
    error = ValueError("llm failed")
    with pytest.raises(ValueError) as info:
        run_call(p, mode, "llm", {"model": "m"}, BaseCall(log=[], error=error))
    assert info.value is error
    assert run_call(p, mode, "tool", {"a": 1}, lambda a: "tool-ok") == "tool-ok"

    assert after == ["pre_api_request", "post_api_request", "pre_api_request",
                     "api_request_error", "pre_tool_call", "post_tool_call",
                     "transform_tool_result"]
    for h in ALL_HOOKS:
        expected = 2 if h == "pre_api_request" else 1
        assert p.failures.counts[("hook", h, f"{PLUGIN}.boom_{h}")] == expected
    assert p.failures.total() == 7


# ------------------------------------------------------------- block and transform


@pytest.mark.parametrize("mode", MODES)
def test_pre_tool_call_block_directive_stops_the_tool(mode: str) -> None:
    p = Pipeline()
    calls: list[Any] = []
    wrapped: list[str] = []
    post: list[Any] = []
    p.registry.add_hook("pre_tool_call", callback(mode, "allow", lambda **kw: None), plugin=PLUGIN)
    p.registry.add_hook(
        "pre_tool_call",
        callback(mode, "blocker", lambda **kw: {"action": "block", "message": "not allowed: rm"}),
        plugin=PLUGIN)
    p.registry.add_middleware("tool_execution", rec_exec(wrapped, "exec", "args", mode),
                              plugin=PLUGIN)
    p.registry.add_hook("post_tool_call", callback(mode, "post", lambda **kw: post.append(
        kw["status"])), plugin=PLUGIN)
    result = run_call(p, mode, "tool", {"cmd": "rm -rf /"}, lambda a: calls.append(a))
    assert result == "not allowed: rm"
    assert calls == []
    assert wrapped == []
    assert post == ["blocked"]


@pytest.mark.parametrize("action", ["Block", "blokc", " BLOCK "])
@pytest.mark.parametrize("mode", MODES)
def test_malformed_block_directive_runs_the_tool_warns_once_and_counts(
        mode: str, action: str, caplog: pytest.LogCaptureFixture) -> None:
    p = Pipeline()
    calls: list[Any] = []
    p.registry.add_hook("pre_tool_call", callback(mode, "typo_guard", lambda **kw: {
        "action": action, "message": "not allowed"}), plugin=PLUGIN)
    with caplog.at_level("DEBUG", logger="otelmw"):
        for _ in range(2):
            assert run_call(p, mode, "tool", {"a": 1}, lambda a: calls.append(a) or "ran") == "ran"
    assert calls == [{"a": 1}, {"a": 1}]  # fail-open: the tool ran both times
    assert p.failures.counts[("hook", "pre_tool_call", f"{PLUGIN}.typo_guard")] == 2
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1, warned
    assert f"{action!r}" in warned[0] and "did you mean 'block'?" in warned[0]
    assert "the tool ran" in warned[0]


@pytest.mark.parametrize("mode", MODES)
def test_other_directives_are_not_block_near_misses(mode: str) -> None:
    p = Pipeline()
    for i, ret in enumerate(({"action": "allow"}, {"action": "log"}, {"other": 1})):
        p.registry.add_hook("pre_tool_call", callback(mode, f"h{i}", lambda r=ret, **kw: r),
                            plugin=PLUGIN)
    assert run_call(p, mode, "tool", {"a": 1}, lambda a: "ran") == "ran"
    assert p.failures.total() == 0


@pytest.mark.parametrize("mode", MODES)
def test_transform_tool_result_non_string_keeps_result_warns_once_and_counts(
        mode: str, caplog: pytest.LogCaptureFixture) -> None:
    p = Pipeline()
    p.registry.add_hook("transform_tool_result", callback(mode, "as_dict", lambda **kw: {
        "text": kw["result"]}), plugin=PLUGIN)
    with caplog.at_level("DEBUG", logger="otelmw"):
        for _ in range(2):
            assert run_call(p, mode, "tool", {"a": 1}, lambda a: "original") == "original"
    assert p.failures.counts[("hook", "transform_tool_result", f"{PLUGIN}.as_dict")] == 2
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1, warned
    assert "transform_tool_result must return a str or None, got dict" in warned[0]


@pytest.mark.parametrize("mode", MODES)
def test_transform_tool_result_string_replaces_result(mode: str) -> None:
    p = Pipeline()
    seen: list[Any] = []

    def not_a_string(**kw: Any) -> Any:
        seen.append(kw["result"])
        return {"ignored": True}

    p.registry.add_hook("transform_tool_result", callback(mode, "dict", not_a_string),
                        plugin=PLUGIN)
    p.registry.add_hook("transform_tool_result",
                        callback(mode, "redact", lambda **kw: f"[redacted {len(kw['result'])}]"),
                        plugin=PLUGIN)
    p.registry.add_hook("transform_tool_result", callback(mode, "late", lambda **kw: "too late"),
                        plugin=PLUGIN)
    assert run_call(p, mode, "tool", {"a": 1}, lambda a: "secret") == "[redacted 6]"
    assert seen == ["secret"]


@pytest.mark.parametrize("mode", MODES)
def test_transform_tool_result_returning_none_keeps_result(mode: str) -> None:
    p = Pipeline()
    p.registry.add_hook("transform_tool_result", callback(mode, "none", lambda **kw: None),
                        plugin=PLUGIN)
    assert run_call(p, mode, "tool", {"a": 1}, lambda a: "original") == "original"


# ----------------------------------------------------------------- middleware_trace

TRACE_ENTRY = {"kind": "", "middleware": "", "plugin": PLUGIN, "source": "src",
               "reason": "because"}


def trace_grabber(got: dict[str, list[Any]]) -> Callable[[str], Callable[..., None]]:
    """``grab(label)``: a callback appending the middleware trace it gets to ``got[label]``."""
    def grab(label: str) -> Callable[..., None]:
        return lambda **kw: got.setdefault(label, []).append(
            [dict(e) for e in kw["middleware_trace"]])

    return grab


def traced_pipeline(mode: str, op: str) -> tuple[Pipeline, dict[str, list[Any]]]:
    """A pipeline whose ``op`` request stage holds one rewrite with a source and a
    reason, and whose ``op`` hooks each record the trace they get into ``got``."""
    p = Pipeline()
    got: dict[str, list[Any]] = {}
    grab = trace_grabber(got)
    key = PAYLOAD_KEY[op]
    p.registry.add_middleware(REQUEST_KIND[op], callback(
        mode, "rewriter", lambda **kw: {key: dict(kw[key]), "source": "src", "reason": "because"}),
        plugin=PLUGIN)
    for h in OP_HOOKS[op]:
        p.registry.add_hook(h, callback(mode, f"grab_{h}", grab(h)), plugin=PLUGIN)
    return p, got


@pytest.mark.parametrize("mode", MODES)
def test_middleware_trace_reaches_llm_hooks_and_llm_execution(mode: str) -> None:
    p, got = traced_pipeline(mode, "llm")
    p.registry.add_middleware(
        "llm_execution", pass_through(mode, "exec_cb", "llm", trace_grabber(got)("llm_execution")),
        plugin=PLUGIN)
    run_call(p, mode, "llm", {"model": "m"}, lambda r: "ok")
    with pytest.raises(KeyError):
        run_call(p, mode, "llm", {"model": "m"}, BaseCall(log=[], error=KeyError("x")))

    expected = [{**TRACE_ENTRY, "kind": "llm_request", "middleware": f"{PLUGIN}.rewriter"}]
    assert got == {
        "llm_execution": [expected, expected],
        "pre_api_request": [expected, expected],
        "post_api_request": [expected],
        "api_request_error": [expected],
    }


@pytest.mark.parametrize("mode", MODES)
def test_middleware_trace_reaches_tool_hooks(mode: str) -> None:
    p, got = traced_pipeline(mode, "tool")
    run_call(p, mode, "tool", {"a": 1}, lambda a: "ok")
    expected = [{**TRACE_ENTRY, "kind": "tool_request", "middleware": f"{PLUGIN}.rewriter"}]
    assert got == {h: [expected] for h in TOOL_HOOKS}


# ----------------------------------------------------- sync vs async hook callbacks


def _trigger(p: Pipeline, mode: str, hook_name: str) -> None:
    """Make one call that fires ``hook_name``."""
    if hook_name == "api_request_error":
        with pytest.raises(LookupError):
            run_call(p, mode, "llm", {"model": "m"}, BaseCall(log=[], error=LookupError("x")))
    elif hook_name in LLM_HOOKS:
        assert run_call(p, mode, "llm", {"model": "m"}, lambda r: "ok") == "ok"
    else:
        assert run_call(p, mode, "tool", {"a": 1}, lambda a: "ok") == "ok"


@pytest.mark.parametrize("hook_name", ALL_HOOKS)
def test_sync_hook_returning_coroutine_in_sync_call_is_counted_and_closed(
    hook_name: str,
) -> None:
    p = Pipeline()
    made: list[Any] = []

    async def would_block(**kw: Any) -> Any:
        return {"action": "block", "message": "never"} if hook_name == "pre_tool_call" else "x"

    def sync_hook(**kw: Any) -> Any:
        coro = would_block(**kw)
        made.append(coro)
        return coro

    p.registry.add_hook(hook_name, named(sync_hook, "coro_hook"), plugin=PLUGIN)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _trigger(p, "sync", hook_name)
        gc.collect()
    assert len(made) == 1
    assert inspect.getcoroutinestate(made[0]) == inspect.CORO_CLOSED
    assert p.failures.counts[("hook", hook_name, f"{PLUGIN}.coro_hook")] == 1
    assert not [w for w in caught if "never awaited" in str(w.message)]


@pytest.mark.parametrize("hook_name", ALL_HOOKS)
def test_async_def_hook_in_sync_call_is_counted_and_closed(hook_name: str) -> None:
    p = Pipeline()

    async def async_hook(**kw: Any) -> None:
        return None

    p.registry.add_hook(hook_name, async_hook, plugin=PLUGIN)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _trigger(p, "sync", hook_name)
        gc.collect()
    assert p.failures.counts[("hook", hook_name, f"{PLUGIN}.async_hook")] == 1
    assert not [w for w in caught if "never awaited" in str(w.message)]


@pytest.mark.parametrize("hook_name", ALL_HOOKS)
def test_async_hooks_are_awaited_in_async_calls(hook_name: str) -> None:
    p = Pipeline()
    done: list[str] = []

    async def async_hook(**kw: Any) -> None:
        await asyncio.sleep(0)
        done.append(hook_name)

    p.registry.add_hook(hook_name, async_hook, plugin=PLUGIN)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _trigger(p, "async", hook_name)
        gc.collect()
    assert done == [hook_name]
    assert p.failures.total() == 0
    assert not [w for w in caught if "never awaited" in str(w.message)]


def test_async_block_and_transform_hooks_take_effect_in_async_calls() -> None:
    p = Pipeline()

    async def transform(**kw: Any) -> str:
        await asyncio.sleep(0)
        return f"T({kw['result']})"

    p.registry.add_hook("transform_tool_result", transform, plugin=PLUGIN)
    assert run_call(p, "async", "tool", {"a": 1}, lambda a: "raw") == "T(raw)"

    async def block(**kw: Any) -> Any:
        await asyncio.sleep(0)
        return {"action": "block", "message": "async says no"}

    p.registry.add_hook("pre_tool_call", block, plugin=PLUGIN)
    calls: list[Any] = []
    assert run_call(p, "async", "tool", {"a": 1}, lambda a: calls.append(a)) == "T(async says no)"
    assert calls == []


def test_async_post_tool_call_hook_is_awaited_for_malformed_arguments_async() -> None:
    """Malformed JSON arguments still fire post_tool_call; in an async call an
    ``async def`` hook must be awaited, not closed and counted as a failure."""
    p = Pipeline()
    done: list[Any] = []

    async def post(**kw: Any) -> None:
        await asyncio.sleep(0)
        done.append(kw["status"])

    p.registry.add_hook("post_tool_call", post, plugin=PLUGIN)
    calls: list[Any] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_call(p, "async", "tool", "{not json", lambda a: calls.append(a))
        gc.collect()
    assert calls == []
    assert isinstance(result, str) and result.startswith("Tool Error: ")
    assert not [w for w in caught if "never awaited" in str(w.message)]
    assert p.failures.total() == 0
    assert done == ["error"]


def test_sync_post_tool_call_hook_fires_for_malformed_arguments_sync() -> None:
    p = Pipeline()
    done: list[Any] = []
    p.registry.add_hook("post_tool_call", lambda **kw: done.append(kw["status"]), plugin=PLUGIN)
    result = run_call(p, "sync", "tool", "{not json", lambda a: pytest.fail("tool must not run"))
    assert isinstance(result, str) and result.startswith("Tool Error: ")
    assert done == ["error"]

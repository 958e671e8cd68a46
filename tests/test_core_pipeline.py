"""End-to-end pipeline rules: callback context fields, tool-argument parsing, concurrency."""

from __future__ import annotations

import asyncio
import contextvars
import copy
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _support.calls import LLM_HOOKS, MODES, PLUGIN, TOOL_HOOKS, named, pass_through, run_call

from otelmw import Pipeline, PluginManager, runtime_context
from otelmw.core.contract import CallInfo, RuntimeContext

COMMON = {
    "telemetry_schema_version": "otelmw.observer.v1",
    "middleware_schema_version": "otelmw.middleware.v1",
    "session_id": "sess-1",
    "task_id": "task-1",
    "turn_id": "turn-1",
}


def in_fresh_context(fn: Callable[[], Any]) -> Any:
    """Run in an empty context: no 'latest api_request_id' leaked from other tests."""
    return contextvars.Context().run(fn)


def capture_everything(p: Pipeline, mode: str, got: dict[str, list[dict[str, Any]]],
                       kinds: list[str], hooks: list[str]) -> None:
    def grab(label: str) -> Callable[..., Any]:
        def cb(**kw: Any) -> None:
            got.setdefault(label, []).append({k: v for k, v in kw.items()
                                              if k != "next_call"})

        return cb

    for kind in kinds:
        g = grab(kind)
        if kind.endswith("_request"):
            p.registry.add_middleware(kind, g, plugin=PLUGIN)
        else:
            op = "llm" if kind.startswith("llm") else "tool"
            p.registry.add_middleware(kind, pass_through(mode, "wrap", op, g), plugin=PLUGIN)
    for h in hooks:
        p.registry.add_hook(h, grab(h), plugin=PLUGIN)


def request() -> dict[str, Any]:
    return {"model": "gpt-req", "messages": []}


# -------------------------------------------------------------- context fields


@pytest.mark.parametrize("mode", MODES)
def test_llm_callbacks_receive_schema_versions_runtime_ids_and_llm_fields(mode: str) -> None:
    p = Pipeline()
    got: dict[str, list[dict[str, Any]]] = {}
    capture_everything(p, mode, got, ["llm_request", "llm_execution"], LLM_HOOKS)

    def boom(req: Any) -> Any:
        raise OSError("down")

    def scenario() -> None:
        with runtime_context(session_id="sess-1", task_id="task-1", turn_id="turn-1"):
            run_call(p, mode, "llm", request(), lambda r: "ok", provider="openai", model="gpt-x",
                api_mode="chat_completions", api_request_id="req-given")
            with pytest.raises(OSError):
                run_call(p, mode, "llm", request(), boom, provider="openai", model="gpt-x",
                    api_mode="chat_completions", api_request_id="req-given")

    in_fresh_context(scenario)
    assert sorted(got) == sorted(["llm_request", "llm_execution", *LLM_HOOKS])
    for label, calls in got.items():
        for kw in calls:
            for field, value in {**COMMON, "api_request_id": "req-given", "provider": "openai",
                                 "model": "gpt-x", "api_mode": "chat_completions"}.items():
                assert kw.get(field) == value, (label, field)


@pytest.mark.parametrize("mode", MODES)
def test_llm_api_request_id_is_generated_when_not_given(mode: str) -> None:
    p = Pipeline()
    got: dict[str, list[dict[str, Any]]] = {}
    capture_everything(p, mode, got, ["llm_request", "llm_execution"],
                       ["pre_api_request", "post_api_request"])

    def scenario() -> None:
        with runtime_context(session_id="sess-1", task_id="task-1", turn_id="turn-1"):
            run_call(p, mode, "llm", request(), lambda r: "ok", provider="anthropic",
                     model=None)
            run_call(p, mode, "llm", request(), lambda r: "ok", provider="anthropic",
                     model=None)

    in_fresh_context(scenario)
    ids_per_call = [{got[label][i]["api_request_id"] for label in got} for i in range(2)]
    for ids in ids_per_call:
        assert len(ids) == 1  # the same id for every callback of one call
        (rid,) = ids
        assert isinstance(rid, str) and rid
    assert ids_per_call[0] != ids_per_call[1]
    for calls in got.values():
        for kw in calls:
            assert kw["model"] == "gpt-req"  # taken from the request when not given
            assert kw["provider"] == "anthropic"
            assert {k: kw[k] for k in COMMON} == COMMON


def run_llm_then_tool(p: Pipeline, mode: str, llm_id: str | None) -> None:
    """Inside one runtime context: optionally an LLM call, then one tool call."""

    def scenario() -> None:
        with runtime_context(session_id="sess-1", task_id="task-1", turn_id="turn-1"):
            if mode == "sync":
                if llm_id is not None:
                    p.run_llm({"model": "m"}, lambda r: "ok", api_request_id=llm_id)
                p.run_tool("web_search", {"q": "x"}, lambda a: "found", tool_call_id="call-42")
            else:
                async def both() -> None:
                    if llm_id is not None:
                        await p.arun_llm({"model": "m"}, lambda r: "ok", api_request_id=llm_id)
                    await p.arun_tool("web_search", {"q": "x"}, lambda a: "found",
                                      tool_call_id="call-42")

                asyncio.run(both())

    in_fresh_context(scenario)


@pytest.mark.parametrize("mode", MODES)
def test_tool_callbacks_receive_schema_versions_runtime_ids_and_tool_fields(mode: str) -> None:
    p = Pipeline()
    got: dict[str, list[dict[str, Any]]] = {}
    capture_everything(p, mode, got, ["tool_request", "tool_execution"], TOOL_HOOKS)
    run_llm_then_tool(p, mode, llm_id=None)
    assert sorted(got) == sorted(["tool_request", "tool_execution", *TOOL_HOOKS])
    for label, calls in got.items():
        assert len(calls) == 1, label
        kw = calls[0]
        for field, value in {**COMMON, "tool_name": "web_search",
                             "tool_call_id": "call-42"}.items():
            assert kw.get(field) == value, (label, field)


@pytest.mark.parametrize("mode", MODES)
def test_tool_callbacks_get_a_generated_api_request_id_when_none_given(mode: str) -> None:
    """No LLM call preceded the tool call and none can be given: one is generated,
    the same for every callback of the call."""
    p = Pipeline()
    got: dict[str, list[dict[str, Any]]] = {}
    capture_everything(p, mode, got, ["tool_request", "tool_execution"], TOOL_HOOKS)
    run_llm_then_tool(p, mode, llm_id=None)
    ids = {calls[0]["api_request_id"] for calls in got.values()}
    assert len(ids) == 1
    (rid,) = ids
    assert isinstance(rid, str) and rid


@pytest.mark.parametrize("llm_side_registered", [True, False])
@pytest.mark.parametrize("mode", MODES)
def test_tool_callbacks_get_the_api_request_id_of_the_preceding_llm_call(
    mode: str, llm_side_registered: bool
) -> None:
    """The tool call's api_request_id is the one the host gave its LLM call, whether
    or not any LLM-side middleware/hook is registered."""
    p = Pipeline()
    got: dict[str, list[dict[str, Any]]] = {}
    capture_everything(p, mode, got, ["tool_request", "tool_execution"], TOOL_HOOKS)
    if llm_side_registered:
        p.registry.add_hook("pre_api_request", lambda **kw: None, plugin=PLUGIN)
    run_llm_then_tool(p, mode, llm_id="req-llm")
    for label, calls in got.items():
        assert calls[0]["api_request_id"] == "req-llm", label


@pytest.mark.parametrize("mode", MODES)
def test_runtime_context_propagates_per_call(mode: str) -> None:
    p = Pipeline()
    seen: list[tuple[Any, Any, Any]] = []
    p.registry.add_hook("pre_api_request",
                        lambda **kw: seen.append((kw["session_id"], kw["task_id"],
                                                  kw["turn_id"])), plugin=PLUGIN)

    def scenario() -> None:
        run_call(p, mode, "llm", request(), lambda r: "ok")
        with runtime_context(session_id="s"):
            with runtime_context(turn_id="t1"):
                run_call(p, mode, "llm", request(), lambda r: "ok")
            with runtime_context(turn_id="t2", task_id="k"):
                run_call(p, mode, "llm", request(), lambda r: "ok")
            run_call(p, mode, "llm", request(), lambda r: "ok")

    in_fresh_context(scenario)
    assert seen == [(None, None, None), ("s", None, "t1"), ("s", "k", "t2"), ("s", None, None)]


# ----------------------------------------------------------------- tool arguments


@pytest.mark.parametrize("with_middleware", [False, True])
@pytest.mark.parametrize("mode", MODES)
def test_json_string_tool_arguments_are_parsed(mode: str, with_middleware: bool) -> None:
    p = Pipeline()
    seen: list[tuple[Any, Any]] = []
    if with_middleware:
        p.registry.add_middleware(
            "tool_request",
            lambda **kw: seen.append((dict(kw["args"]), dict(kw["original_args"]))),
            plugin=PLUGIN)
    calls: list[Any] = []

    def execute(a: Any) -> str:
        calls.append(a)
        return "done"

    assert run_call(p, mode, "tool", '{"path": "/tmp/x", "n": 2}', execute) == "done"
    assert calls == [{"path": "/tmp/x", "n": 2}]
    assert type(calls[0]) is dict
    if with_middleware:
        assert seen == [({"path": "/tmp/x", "n": 2}, {"path": "/tmp/x", "n": 2})]


@pytest.mark.parametrize("bad", ["{not json", '{"a": 1', "[1, 2]", '"just a string"', "42"])
@pytest.mark.parametrize("with_middleware", [False, True])
@pytest.mark.parametrize("mode", MODES)
def test_malformed_json_tool_arguments_do_not_run_the_tool(
    mode: str, with_middleware: bool, bad: str
) -> None:
    p = Pipeline()
    touched: list[str] = []
    if with_middleware:
        p.registry.add_middleware("tool_request", lambda **kw: touched.append("req"),
                                  plugin=PLUGIN)
        p.registry.add_middleware("tool_execution", lambda **kw: touched.append("exec"),
                                  plugin=PLUGIN)
    calls: list[Any] = []
    result = run_call(p, mode, "tool", bad, lambda a: calls.append(a))
    assert isinstance(result, str) and result.startswith("Tool Error: ")
    assert calls == []
    assert touched == []


# -------------------------------------------------------------------- concurrency

ALLOWED_REQUEST_PATHS = {("s",), ("s", "d1", "d2")}
ALLOWED_EXEC_PATHS = {("S",), ("S", "D1", "D2", "D3")}


def _append(key: str, tag: str) -> Any:
    def rewrite(**kw: Any) -> Any:
        p = kw[key]
        return {key: {**p, "path": [*p["path"], tag]}}

    named(rewrite, f"rw_{tag}")
    return rewrite


def _wrap(key: str, tag: str) -> Any:
    def wrap(**kw: Any) -> Any:  # sync callback: on the async path it returns the coroutine
        p = kw[key]
        return kw["next_call"]({**p, "path": [*p["path"], tag]})

    named(wrap, f"wrap_{tag}")
    return wrap


def _register_stable(ctx: Any) -> None:
    ctx.register_middleware("llm_request", _append("request", "s"))
    ctx.register_middleware("llm_execution", _wrap("request", "S"))


def _register_dynamic(ctx: Any) -> None:
    for tag in ("d1", "d2"):
        ctx.register_middleware("llm_request", _append("request", tag))
    for tag in ("D1", "D2", "D3"):
        ctx.register_middleware("llm_execution", _wrap("request", tag))


@pytest.mark.parametrize("mode", MODES)
def test_concurrent_registration_and_reload_with_eight_calling_threads(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One thread re-registers / removes / reloads plugins while 8 threads make
    calls. Every worker keeps calling until the churner has made at least
    ``min_churn`` registry changes, so calls really overlap registry swaps."""
    monkeypatch.setattr(PluginManager, "entry_points", staticmethod(lambda: {}))
    p = Pipeline()
    pm = PluginManager(p, home=tmp_path)
    pm.add_plugin("stable", _register_stable)
    min_calls, min_churn, n_threads = 100, 300, 8
    deadline = time.monotonic() + 60
    errors: list[BaseException] = []
    paths: list[tuple[str, ...]] = []
    made = [0] * n_threads
    churned = [0]
    paths_lock = threading.Lock()
    stop = threading.Event()
    start = threading.Barrier(n_threads + 1)

    def base(req: Any) -> str:
        with paths_lock:
            paths.append(tuple(req["path"]))
        time.sleep(0)  # let the churner in between calls
        return "ok"

    def keep_going(i: int) -> bool:
        return (made[i] < min_calls or churned[0] < min_churn) and time.monotonic() < deadline

    def worker(i: int) -> None:
        try:
            start.wait()
            if mode == "sync":
                while keep_going(i):
                    assert p.run_llm({"path": []}, base) == "ok"
                    made[i] += 1
            else:
                async def many() -> None:
                    while keep_going(i):
                        assert await p.arun_llm({"path": []}, base) == "ok"
                        made[i] += 1

                asyncio.run(many())
        except BaseException as exc:
            errors.append(exc)

    def churn() -> None:
        try:
            start.wait()
            while not stop.is_set():
                step = churned[0] % 4
                if step == 0:
                    pm.add_plugin("dyn", _register_dynamic)
                elif step == 2:
                    pm.remove_plugin("dyn")
                else:
                    pm.reload()
                churned[0] += 1
                time.sleep(0)
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
    churner = threading.Thread(target=churn)
    for t in [*workers, churner]:
        t.start()
    for t in workers:
        t.join(timeout=120)
    stop.set()
    churner.join(timeout=60)

    assert errors == []
    assert churned[0] >= min_churn
    assert all(n >= min_calls for n in made)
    assert len(paths) == sum(made)
    for path in paths:
        req = tuple(x for x in path if x.islower())
        exe = tuple(x for x in path if x.isupper())
        assert req in ALLOWED_REQUEST_PATHS, path
        assert exe in ALLOWED_EXEC_PATHS, path
        assert path == req + exe, path
    assert p.failures.total() == 0


# ------------------------------------------------------------ call records


def test_named_call_constructors_set_every_field_as_the_keyword_built_record() -> None:
    """The pipelines build their calls field by field (``CallInfo.for_*``), for speed:
    each must equal the record built by keyword, every field set (a field the
    constructor forgot fails the comparison)."""
    rc = RuntimeContext(session_id="s", task_id="t", turn_id="u", agent_name="a",
                        runtime_id="r")
    ids = {"session_id": "s", "task_id": "t", "turn_id": "u", "agent_name": "a"}
    chat = CallInfo.for_chat(rc, api_request_id="id", provider="p", model="m",
                             api_mode="chat_completions", server=("h", 443))
    assert chat == CallInfo("chat", **ids, api_request_id="id", provider="p", model="m",
                            api_mode="chat_completions", runtime_id="r",
                            server_address="h", server_port=443)
    tool = CallInfo.for_tool(rc, api_request_id="id", tool_name="web_search",
                             tool_call_id="call-1", runtime_id="hermes")
    assert tool == CallInfo("execute_tool", **ids, api_request_id="id",
                            tool_name="web_search", tool_call_id="call-1",
                            runtime_id="hermes")
    emb = CallInfo.for_embeddings(rc, provider="p", model="m", server=(None, None))
    assert emb == CallInfo("embeddings", **ids, provider="p", model="m", runtime_id="r")
    assert chat.middleware_trace is not tool.middleware_trace  # one trace per call


# ------------------------------------------------ each stage's own kwargs dict
# The request stage and then the execution chain extend one kwargs dict in turn with
# their own keys: the call's, or a copy of them when hook payloads are built from those
# (hook points with callbacks, or an observer that hears every hook point). Every
# callback gets its own copy (``**kw``), so a callback that mutates its kwargs changes
# nothing another sees; each stage and hook point sees exactly its own keys; the host's
# request is never touched.

LLM_BASE = {*COMMON, "api_request_id", "provider", "model", "api_mode"}
TOOL_BASE = {*COMMON, "api_request_id", "tool_name", "tool_call_id"}
TOOL_RESULT_KEYS = {"args", "middleware_trace", "result", "normalized", "duration_ms",
                    "status", "error_type", "error_message"}
STAGE_KEYS = {
    "llm_request": LLM_BASE | {"request", "original_request"},
    "llm_execution": LLM_BASE | {"request", "original_request", "middleware_trace",
                                 "next_call"},
    "pre_api_request": LLM_BASE | {"request", "middleware_trace", "started_at"},
    "post_api_request": LLM_BASE | {"request", "middleware_trace", "started_at",
                                    "response", "ended_at", "api_duration"},
    "tool_request": TOOL_BASE | {"args", "original_args"},
    "tool_execution": TOOL_BASE | {"args", "original_args", "next_call"},
    "pre_tool_call": TOOL_BASE | {"args", "middleware_trace"},
    "post_tool_call": TOOL_BASE | TOOL_RESULT_KEYS,
    "transform_tool_result": TOOL_BASE | TOOL_RESULT_KEYS,
}


def register_vandals(p: Pipeline, kinds: list[str], hooks: list[str],
                     seen: dict[str, list[tuple[str, set[str], Any]]]) -> None:
    """Per kind and hook point, a callback that empties its kwargs and leaves a key
    of its own, then one that records what it got."""
    for label in [*kinds, *hooks]:
        key = "request" if label.startswith(("llm", "pre_api", "post_api")) else "args"

        def vandal(label: str = label, key: str = key, **kw: Any) -> Any:
            seen.setdefault(label, []).append(("vandal", set(kw), kw.get(key)))
            nxt, payload = kw.get("next_call"), kw.get(key)
            kw.clear()
            kw["vandal"] = True
            return None if nxt is None else nxt(payload)

        def witness(label: str = label, key: str = key, **kw: Any) -> Any:
            seen.setdefault(label, []).append(("witness", set(kw), kw.get(key)))
            return kw["next_call"](kw[key]) if "next_call" in kw else None

        for cb in (vandal, witness):
            if label in kinds:
                p.registry.add_middleware(label, cb, plugin=PLUGIN)
            else:
                p.registry.add_hook(label, cb, plugin=PLUGIN)


@pytest.mark.parametrize("with_hooks", [True, False])
@pytest.mark.parametrize("mode", MODES)
def test_a_callback_mutating_its_kwargs_changes_nothing_another_stage_sees(
        mode: str, with_hooks: bool) -> None:
    p = Pipeline()
    seen: dict[str, list[tuple[str, set[str], Any]]] = {}
    llm_kinds, tool_kinds = ["llm_request", "llm_execution"], ["tool_request", "tool_execution"]
    # Every hook point that fires on a call that succeeds.
    hooks = ["pre_api_request", "post_api_request", *TOOL_HOOKS] if with_hooks else []
    register_vandals(p, [*llm_kinds, *tool_kinds], hooks, seen)
    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    args = {"q": "x", "filters": ["a"]}
    request_before, args_before = copy.deepcopy(request), copy.deepcopy(args)
    base_got: list[Any] = []

    def base(payload: Any) -> str:
        base_got.append(payload)
        return "ok"

    def scenario() -> None:
        with runtime_context(session_id="sess-1", task_id="task-1", turn_id="turn-1"):
            if mode == "sync":
                p.run_llm(request, base)
                p.run_tool("web_search", args, base, tool_call_id="call-1")
            else:
                async def both() -> None:
                    await p.arun_llm(request, base)
                    await p.arun_tool("web_search", args, base, tool_call_id="call-1")

                asyncio.run(both())

    in_fresh_context(scenario)
    assert sorted(seen) == sorted([*llm_kinds, *tool_kinds, *hooks])
    for label, records in seen.items():
        assert [who for who, _, _ in records] == ["vandal", "witness"], label
        for who, keys, payload in records:
            assert keys == STAGE_KEYS[label], (label, who)
            assert payload == (request_before if "request" in STAGE_KEYS[label]
                               else args_before), (label, who)
    # Nothing was rewritten: the base call got the host's own objects, untouched.
    assert base_got[0] is request and base_got[1] is args
    assert request == request_before and args == args_before
    assert p.failures.total() == 0


class HookPayloads:
    """An observer that hears every hook point (``hook_events`` ``all``) and keeps the
    keys of each payload it is handed; otherwise silent."""

    hook_events = "all"

    def __init__(self) -> None:
        self.keys: dict[str, set[str]] = {}

    def call_started(self, call: CallInfo, payload: Any) -> None:
        return None

    def call_finished(self, call: CallInfo, result: Any, error: BaseException | None) -> Any:
        return result

    def request_rewritten(self, call: CallInfo, request: Any) -> None:
        pass

    def rewrite_started(self, *args: Any) -> None:
        return None

    def rewrite_finished(self, *args: Any) -> None:
        pass

    def wrapper_started(self, *args: Any) -> None:
        return None

    def wrapper_finished(self, *args: Any) -> None:
        pass

    def tool_result(self, *args: Any) -> None:
        pass

    def hook_fired(self, call: CallInfo, hook_name: str, payload: dict[str, Any],
                   failed: int) -> None:
        self.keys[hook_name] = set(payload)


@pytest.mark.parametrize("mode", MODES)
def test_hook_payloads_without_callbacks_carry_no_stage_keys(mode: str) -> None:
    """Hook points without callbacks, heard by an observer (``hook_events`` ``all``):
    their payloads are built from the call's kwargs, which the stages then must not
    extend (they extend a copy), whatever the layers rewrite."""
    p = Pipeline()
    observer = HookPayloads()
    p.observer = observer  # type: ignore[assignment]
    seen: dict[str, list[tuple[str, set[str], Any]]] = {}
    kinds = ["llm_request", "llm_execution", "tool_request", "tool_execution"]
    register_vandals(p, kinds, [], seen)
    p.registry.add_middleware(  # a rewrite too: the stages' dict holds its payload
        "llm_request", lambda **kw: {"request": {**kw["request"], "model": "m2"}},
        plugin=PLUGIN)

    def scenario() -> None:
        with runtime_context(session_id="sess-1", task_id="task-1", turn_id="turn-1"):
            if mode == "sync":
                p.run_llm({"model": "m"}, lambda r: "ok")
                p.run_tool("web_search", {"q": "x"}, lambda a: "found", tool_call_id="call-1")
            else:
                async def both() -> None:
                    await p.arun_llm({"model": "m"}, lambda r: "ok")
                    await p.arun_tool("web_search", {"q": "x"}, lambda a: "found",
                                      tool_call_id="call-1")

                asyncio.run(both())

    in_fresh_context(scenario)
    assert sorted(observer.keys) == sorted(
        ["pre_api_request", "post_api_request", *TOOL_HOOKS])
    for hook_name, keys in observer.keys.items():
        assert keys == STAGE_KEYS[hook_name], hook_name
    for label, records in seen.items():
        for who, keys, _ in records:
            assert keys == STAGE_KEYS[label], (label, who)
    assert p.failures.total() == 0

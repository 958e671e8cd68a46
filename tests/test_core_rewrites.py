"""Request-rewrite stage (``llm_request`` / ``tool_request``), sync and async twins.

Each rule runs on both paths (``mode``) and for both request kinds (``kind``).
"""

from __future__ import annotations

import asyncio
import copy
import gc
import inspect
import logging
import warnings
from typing import Any

import pytest
from _support.calls import (
    OPS,
    ORIGINAL_KEY,
    PAYLOAD_KEY,
    PLUGIN,
    PRE_HOOK,
    REQUEST_KIND,
    BaseCall,
    add_rewrite,
    callback,
    each_mode_and_op,
    host_payload,
    named,
    run_call,
)

from otelmw import Pipeline

EACH_MODE_AND_KIND = each_mode_and_op("kind")


def run_with_host_payload(p: Pipeline, mode: str, kind: str) -> BaseCall:
    """One call with ``host_payload()``; returns the base call that received it."""
    base = BaseCall()
    run_call(p, mode, kind, host_payload(), base, raise_errors=True)
    return base


def warnings_from_otelmw(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "otelmw" and r.levelno == logging.WARNING]


def add_tag(key: str, tag: str) -> Any:
    def body(**kw: Any) -> Any:
        p = kw[key]
        return {key: {**p, "path": [*p["path"], tag]}}

    return body


# --------------------------------------------------------------------------- order


@EACH_MODE_AND_KIND
def test_request_middleware_runs_in_registration_order_seeing_effective_and_original(
    mode: str, kind: str
) -> None:
    p = Pipeline()
    key, orig = PAYLOAD_KEY[kind], ORIGINAL_KEY[kind]
    seen: list[tuple[str, Any, Any]] = []

    def make(tag: str) -> Any:
        def body(**kw: Any) -> Any:
            seen.append((tag, copy.deepcopy(kw[key]), copy.deepcopy(kw[orig])))
            return add_tag(key, tag)(**kw)

        return body

    for tag in ("a", "b", "c"):
        add_rewrite(p, kind, mode, f"mw_{tag}", make(tag))
    host = host_payload()
    base = BaseCall()
    assert run_call(p, mode, kind, host, base, raise_errors=True) == "base-result"

    assert [s[0] for s in seen] == ["a", "b", "c"]
    assert [s[1]["path"] for s in seen] == [[], ["a"], ["a", "b"]]
    assert all(s[2] == host_payload() for s in seen)  # the untouched original every time
    assert base.calls == [{**host_payload(), "path": ["a", "b", "c"]}]
    assert host == host_payload()
    assert p.failures.total() == 0


# ------------------------------------------------------------------ mutation attempts

MUTATIONS = {
    "payload_setitem": lambda kw, key, orig: kw[key].__setitem__("model", "evil"),
    "payload_nested_append": lambda kw, key, orig: kw[key]["path"].append("evil"),
    "payload_deep_setitem": lambda kw, key, orig: kw[key]["messages"][0].__setitem__(
        "content", "evil"),
    "payload_pop": lambda kw, key, orig: kw[key].pop("messages"),
    "payload_iadd": lambda kw, key, orig: kw[key]["path"].__iadd__(["evil"]),
    "original_setitem": lambda kw, key, orig: kw[orig].__setitem__("model", "evil"),
    "original_nested_append": lambda kw, key, orig: kw[orig]["path"].append("evil"),
    "original_deep_setitem": lambda kw, key, orig: kw[orig]["messages"][0].__setitem__(
        "content", "evil"),
    "original_clear": lambda kw, key, orig: kw[orig].clear(),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
@EACH_MODE_AND_KIND
def test_request_middleware_mutating_its_input_cannot_corrupt_original(
    mode: str, kind: str, mutation: str, caplog: pytest.LogCaptureFixture
) -> None:
    p = Pipeline()
    key, orig = PAYLOAD_KEY[kind], ORIGINAL_KEY[kind]
    later_seen: list[tuple[Any, Any]] = []

    def mutate(**kw: Any) -> Any:
        MUTATIONS[mutation](kw, key, orig)
        return None

    def later(**kw: Any) -> Any:
        later_seen.append((copy.deepcopy(kw[key]), copy.deepcopy(kw[orig])))
        return None

    add_rewrite(p, kind, mode, "mutator", mutate)
    add_rewrite(p, kind, mode, "later", later)
    host = host_payload()
    base = BaseCall()
    with caplog.at_level(logging.WARNING, logger="otelmw"):
        run_call(p, mode, kind, host, base, raise_errors=True)

    assert later_seen == [(host_payload(), host_payload())]
    assert base.calls == [host_payload()]
    assert host == host_payload()
    # the mutation attempt is a middleware failure: counted and logged, nothing changed
    assert p.failures.counts[("middleware", REQUEST_KIND[kind], f"{PLUGIN}.mutator")] == 1
    assert len(warnings_from_otelmw(caplog)) == 1


@EACH_MODE_AND_KIND
def test_rewrite_result_cannot_be_corrupted_through_a_retained_reference(
    mode: str, kind: str
) -> None:
    """A middleware that keeps the dict it returned and mutates it later (from a
    later callback) must not change the effective payload."""
    p = Pipeline()
    key = PAYLOAD_KEY[kind]
    kept: dict[str, Any] = {}

    def rewrite(**kw: Any) -> Any:
        new = {**kw[key], "path": ["rewritten"]}
        kept["obj"] = new
        return {key: new}

    def vandal(**kw: Any) -> Any:
        kept["obj"]["path"].append("evil")
        kept["obj"]["model"] = "evil"
        return None

    add_rewrite(p, kind, mode, "rewrite", rewrite)
    add_rewrite(p, kind, mode, "vandal", vandal)
    base = run_with_host_payload(p, mode, kind)
    assert base.calls == [{**host_payload(), "path": ["rewritten"]}]


@EACH_MODE_AND_KIND
def test_base_call_mutating_its_payload_does_not_touch_the_original(mode: str, kind: str) -> None:
    """The base gets a plain mutable payload; mutating it leaves the views intact."""
    p = Pipeline()
    key = PAYLOAD_KEY[kind]
    originals: list[Any] = []

    add_rewrite(p, kind, mode, "tag", add_tag(key, "t"))

    def hook(**kw: Any) -> None:
        originals.append(kw)

    post_hook = "post_api_request" if kind == "llm" else "post_tool_call"
    p.registry.add_hook(post_hook, hook, plugin=PLUGIN)

    def base(payload: Any) -> str:
        payload["path"].append("base-mutated")
        payload["model"] = "base-mutated"
        return "ok"

    host = host_payload()
    run_call(p, mode, kind, host, base, raise_errors=True)
    assert host == host_payload()
    # the effective payload observed after the call is still the rewritten one
    assert copy.deepcopy(originals[0][key]) == {**host_payload(), "path": ["t"]}


# ------------------------------------------------------------------ replacement shapes


@EACH_MODE_AND_KIND
def test_request_rewrite_replaces_payload_completely(mode: str, kind: str) -> None:
    p = Pipeline()
    key = PAYLOAD_KEY[kind]
    p.registry.add_middleware(
        REQUEST_KIND[kind], callback(mode, "replace", lambda **kw: {key: {"only": "this"}}),
        plugin=PLUGIN)
    base = run_with_host_payload(p, mode, kind)
    assert base.calls == [{"only": "this"}]
    assert p.failures.total() == 0


@EACH_MODE_AND_KIND
def test_source_and_reason_become_a_middleware_trace_entry(mode: str, kind: str) -> None:
    p = Pipeline()
    key = PAYLOAD_KEY[kind]
    traces: list[Any] = []

    def rewrite(**kw: Any) -> Any:
        return {key: {**kw[key], "path": ["x"]}, "source": "my-src", "reason": "why not"}

    add_rewrite(p, kind, mode, "rw", rewrite)
    p.registry.add_middleware(REQUEST_KIND[kind], callback(mode, "quiet", add_tag(key, "y")),
                              plugin="other")
    p.registry.add_hook(PRE_HOOK[kind], lambda **kw: traces.append(kw["middleware_trace"]),
                        plugin=PLUGIN)
    run_call(p, mode, kind, host_payload(), BaseCall(), raise_errors=True)
    assert [dict(e) for e in traces[0]] == [
        {"kind": REQUEST_KIND[kind], "middleware": f"{PLUGIN}.rw", "plugin": PLUGIN,
         "source": "my-src", "reason": "why not"},
        {"kind": REQUEST_KIND[kind], "middleware": "other.quiet", "plugin": "other",
         "source": "other", "reason": None},
    ]


@EACH_MODE_AND_KIND
def test_request_middleware_returning_none_changes_nothing(
    mode: str, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    p = Pipeline()
    traces: list[Any] = []
    add_rewrite(p, kind, mode, "noop", lambda **kw: None)
    p.registry.add_hook(PRE_HOOK[kind], lambda **kw: traces.append(kw["middleware_trace"]),
                        plugin=PLUGIN)
    host = host_payload()
    base = BaseCall()
    with caplog.at_level(logging.DEBUG, logger="otelmw"):
        run_call(p, mode, kind, host, base, raise_errors=True)
    assert base.calls == [host_payload()]
    assert host == host_payload()
    assert list(traces[0]) == []
    assert p.failures.total() == 0
    assert warnings_from_otelmw(caplog) == []


def bad_returns(key: str) -> dict[str, Any]:
    good = {**host_payload(), "path": ["SHOULD-NOT-APPLY"]}
    return {
        "string": "not a dict",
        "list": [good],
        "int": 42,
        "true": True,
        "partial_patch": {"model": "x"},
        "missing_key": {"source": "s", "reason": "r"},
        "payload_not_dict": {key: "not a dict"},
        "payload_is_list": {key: [1, 2]},
        "payload_none": {key: None},
        "extra_key": {key: good, "model": "x"},
    }


@pytest.mark.parametrize("bad", sorted(bad_returns("request")))
@EACH_MODE_AND_KIND
def test_bad_return_shape_is_counted_logged_and_leaves_payload_unchanged(
    mode: str, kind: str, bad: str, caplog: pytest.LogCaptureFixture
) -> None:
    p = Pipeline()
    key = PAYLOAD_KEY[kind]
    value = bad_returns(key)[bad]
    after: list[Any] = []
    traces: list[Any] = []

    def next_one(**kw: Any) -> Any:
        after.append(copy.deepcopy(kw[key]))
        return None

    add_rewrite(p, kind, mode, "bad", lambda **kw: value)
    add_rewrite(p, kind, mode, "after", next_one)
    p.registry.add_hook(PRE_HOOK[kind], lambda **kw: traces.append(kw["middleware_trace"]),
                        plugin=PLUGIN)
    base = BaseCall()
    with caplog.at_level(logging.WARNING, logger="otelmw"):
        assert run_call(p, mode, kind, host_payload(), base, raise_errors=True) == "base-result"

    assert p.failures.counts[("middleware", REQUEST_KIND[kind], f"{PLUGIN}.bad")] == 1
    assert p.failures.total() == 1
    recs = warnings_from_otelmw(caplog)
    assert len(recs) == 1 and f"{PLUGIN}.bad" in recs[0].getMessage()
    assert after == [host_payload()]
    assert base.calls == [host_payload()]
    assert list(traces[0]) == []


@EACH_MODE_AND_KIND
def test_raising_request_middleware_fails_open(
    mode: str, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    p = Pipeline()
    key = PAYLOAD_KEY[kind]

    def boom(**kw: Any) -> Any:
        raise RuntimeError("request middleware exploded")

    add_rewrite(p, kind, mode, "first", add_tag(key, "a"))
    add_rewrite(p, kind, mode, "boom", boom)
    add_rewrite(p, kind, mode, "third", add_tag(key, "c"))
    base = BaseCall()
    with caplog.at_level(logging.WARNING, logger="otelmw"):
        assert run_call(p, mode, kind, host_payload(), base, raise_errors=True) == "base-result"
    assert base.calls == [{**host_payload(), "path": ["a", "c"]}]
    assert p.failures.counts[("middleware", REQUEST_KIND[kind], f"{PLUGIN}.boom")] == 1
    recs = warnings_from_otelmw(caplog)
    assert len(recs) == 1
    assert "request middleware exploded" in recs[0].getMessage()


@pytest.mark.parametrize("kind", OPS)
def test_async_request_middleware_in_sync_call_is_a_failure_and_closed(kind: str) -> None:
    """Sync twin of the async path's 'awaited' rule: the coroutine is closed and
    counted, never left un-awaited."""
    p = Pipeline()
    key = PAYLOAD_KEY[kind]
    made: list[Any] = []

    async def rewrite_async(**kw: Any) -> Any:
        return {key: {"should": "not apply"}}

    def cb(**kw: Any) -> Any:
        coro = rewrite_async(**kw)
        made.append(coro)
        return coro

    p.registry.add_middleware(REQUEST_KIND[kind], named(cb, "coro_returner"), plugin=PLUGIN)
    base = BaseCall()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_call(p, "sync", kind, host_payload(), base, raise_errors=True)
        gc.collect()
    assert base.calls == [host_payload()]
    assert inspect.getcoroutinestate(made[0]) == inspect.CORO_CLOSED
    assert p.failures.counts[("middleware", REQUEST_KIND[kind], f"{PLUGIN}.coro_returner")] == 1
    assert not [w for w in caught if "never awaited" in str(w.message)]


@pytest.mark.parametrize("kind", OPS)
def test_async_request_middleware_is_awaited_in_async_call(kind: str) -> None:
    p = Pipeline()
    key = PAYLOAD_KEY[kind]

    async def rewrite_async(**kw: Any) -> Any:
        await asyncio.sleep(0)
        return {key: {**kw[key], "path": ["awaited"]}}

    p.registry.add_middleware(REQUEST_KIND[kind], rewrite_async, plugin=PLUGIN)
    base = BaseCall()
    run_call(p, "async", kind, host_payload(), base, raise_errors=True)
    assert base.calls == [{**host_payload(), "path": ["awaited"]}]
    assert p.failures.total() == 0

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
from _core_helpers import (
    KEY,
    KINDS,
    MODES,
    ORIG,
    PLUGIN,
    PRE_HOOK,
    REQ_KIND,
    host_payload,
    invoke,
    named,
)

from otelmw import Pipeline


def req_mw(mode: str, name: str, body: Any) -> Any:
    """A request middleware running ``body(**kw)``; ``async def`` on the async path."""
    if mode == "sync":

        def cb(**kw: Any) -> Any:
            return body(**kw)

    else:

        async def cb(**kw: Any) -> Any:
            await asyncio.sleep(0)
            return body(**kw)

    return named(cb, name)


class Base:
    """The base call: records a deep copy of what it received."""

    def __init__(self, result: Any = "base-result") -> None:
        self.calls: list[Any] = []
        self.result = result

    def __call__(self, payload: Any) -> Any:
        self.calls.append(copy.deepcopy(payload))
        return self.result


def warnings_from_otelmw(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "otelmw" and r.levelno == logging.WARNING]


def add_tag(key: str, tag: str) -> Any:
    def body(**kw: Any) -> Any:
        p = kw[key]
        return {key: {**p, "path": [*p["path"], tag]}}

    return body


# --------------------------------------------------------------------------- order


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", MODES)
def test_request_middleware_runs_in_registration_order_seeing_effective_and_original(
    mode: str, kind: str
) -> None:
    p = Pipeline()
    key, orig = KEY[kind], ORIG[kind]
    seen: list[tuple[str, Any, Any]] = []

    def make(tag: str) -> Any:
        def body(**kw: Any) -> Any:
            seen.append((tag, copy.deepcopy(kw[key]), copy.deepcopy(kw[orig])))
            return add_tag(key, tag)(**kw)

        return body

    for tag in ("a", "b", "c"):
        p.registry.add_middleware(REQ_KIND[kind], req_mw(mode, f"mw_{tag}", make(tag)),
                                  plugin=PLUGIN)
    host = host_payload()
    base = Base()
    assert invoke(p, mode, kind, host, base) == "base-result"

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
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", MODES)
def test_request_middleware_mutating_its_input_cannot_corrupt_original(
    mode: str, kind: str, mutation: str, caplog: pytest.LogCaptureFixture
) -> None:
    p = Pipeline()
    key, orig = KEY[kind], ORIG[kind]
    later_seen: list[tuple[Any, Any]] = []

    def mutate(**kw: Any) -> Any:
        MUTATIONS[mutation](kw, key, orig)
        return None

    def later(**kw: Any) -> Any:
        later_seen.append((copy.deepcopy(kw[key]), copy.deepcopy(kw[orig])))
        return None

    p.registry.add_middleware(REQ_KIND[kind], req_mw(mode, "mutator", mutate), plugin=PLUGIN)
    p.registry.add_middleware(REQ_KIND[kind], req_mw(mode, "later", later), plugin=PLUGIN)
    host = host_payload()
    base = Base()
    with caplog.at_level(logging.WARNING, logger="otelmw"):
        invoke(p, mode, kind, host, base)

    assert later_seen == [(host_payload(), host_payload())]
    assert base.calls == [host_payload()]
    assert host == host_payload()
    # the mutation attempt is a middleware failure: counted and logged, nothing changed
    assert p.failures.counts[("middleware", REQ_KIND[kind], f"{PLUGIN}.mutator")] == 1
    assert len(warnings_from_otelmw(caplog)) == 1


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", MODES)
def test_rewrite_result_cannot_be_corrupted_through_a_retained_reference(
    mode: str, kind: str
) -> None:
    """A middleware that keeps the dict it returned and mutates it later (from a
    later callback) must not change the effective payload."""
    p = Pipeline()
    key = KEY[kind]
    kept: dict[str, Any] = {}

    def rewrite(**kw: Any) -> Any:
        new = {**kw[key], "path": ["rewritten"]}
        kept["obj"] = new
        return {key: new}

    def vandal(**kw: Any) -> Any:
        kept["obj"]["path"].append("evil")
        kept["obj"]["model"] = "evil"
        return None

    p.registry.add_middleware(REQ_KIND[kind], req_mw(mode, "rewrite", rewrite), plugin=PLUGIN)
    p.registry.add_middleware(REQ_KIND[kind], req_mw(mode, "vandal", vandal), plugin=PLUGIN)
    base = Base()
    invoke(p, mode, kind, host_payload(), base)
    assert base.calls == [{**host_payload(), "path": ["rewritten"]}]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", MODES)
def test_base_call_mutating_its_payload_does_not_touch_the_original(mode: str, kind: str) -> None:
    """The base gets a plain mutable payload; mutating it leaves the views intact."""
    p = Pipeline()
    key = KEY[kind]
    originals: list[Any] = []

    p.registry.add_middleware(REQ_KIND[kind], req_mw(mode, "tag", add_tag(key, "t")),
                              plugin=PLUGIN)

    def hook(**kw: Any) -> None:
        originals.append(kw)

    post_hook = "post_api_request" if kind == "llm" else "post_tool_call"
    p.registry.add_hook(post_hook, hook, plugin=PLUGIN)

    def base(payload: Any) -> str:
        payload["path"].append("base-mutated")
        payload["model"] = "base-mutated"
        return "ok"

    host = host_payload()
    invoke(p, mode, kind, host, base)
    assert host == host_payload()
    # the effective payload observed after the call is still the rewritten one
    assert copy.deepcopy(originals[0][key]) == {**host_payload(), "path": ["t"]}


# ------------------------------------------------------------------ replacement shapes


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", MODES)
def test_request_rewrite_replaces_payload_completely(mode: str, kind: str) -> None:
    p = Pipeline()
    key = KEY[kind]
    p.registry.add_middleware(
        REQ_KIND[kind], req_mw(mode, "replace", lambda **kw: {key: {"only": "this"}}),
        plugin=PLUGIN)
    base = Base()
    invoke(p, mode, kind, host_payload(), base)
    assert base.calls == [{"only": "this"}]
    assert p.failures.total() == 0


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", MODES)
def test_source_and_reason_become_a_middleware_trace_entry(mode: str, kind: str) -> None:
    p = Pipeline()
    key = KEY[kind]
    traces: list[Any] = []

    def rewrite(**kw: Any) -> Any:
        return {key: {**kw[key], "path": ["x"]}, "source": "my-src", "reason": "why not"}

    p.registry.add_middleware(REQ_KIND[kind], req_mw(mode, "rw", rewrite), plugin=PLUGIN)
    p.registry.add_middleware(REQ_KIND[kind], req_mw(mode, "quiet", add_tag(key, "y")),
                              plugin="other")
    p.registry.add_hook(PRE_HOOK[kind], lambda **kw: traces.append(kw["middleware_trace"]),
                        plugin=PLUGIN)
    invoke(p, mode, kind, host_payload(), Base())
    assert [dict(e) for e in traces[0]] == [
        {"kind": REQ_KIND[kind], "middleware": f"{PLUGIN}.rw", "plugin": PLUGIN,
         "source": "my-src", "reason": "why not"},
        {"kind": REQ_KIND[kind], "middleware": "other.quiet", "plugin": "other",
         "source": "other", "reason": None},
    ]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", MODES)
def test_request_middleware_returning_none_changes_nothing(
    mode: str, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    p = Pipeline()
    traces: list[Any] = []
    p.registry.add_middleware(REQ_KIND[kind], req_mw(mode, "noop", lambda **kw: None),
                              plugin=PLUGIN)
    p.registry.add_hook(PRE_HOOK[kind], lambda **kw: traces.append(kw["middleware_trace"]),
                        plugin=PLUGIN)
    host = host_payload()
    base = Base()
    with caplog.at_level(logging.DEBUG, logger="otelmw"):
        invoke(p, mode, kind, host, base)
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
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", MODES)
def test_bad_return_shape_is_counted_logged_and_leaves_payload_unchanged(
    mode: str, kind: str, bad: str, caplog: pytest.LogCaptureFixture
) -> None:
    p = Pipeline()
    key = KEY[kind]
    value = bad_returns(key)[bad]
    after: list[Any] = []
    traces: list[Any] = []

    def next_one(**kw: Any) -> Any:
        after.append(copy.deepcopy(kw[key]))
        return None

    p.registry.add_middleware(REQ_KIND[kind], req_mw(mode, "bad", lambda **kw: value),
                              plugin=PLUGIN)
    p.registry.add_middleware(REQ_KIND[kind], req_mw(mode, "after", next_one), plugin=PLUGIN)
    p.registry.add_hook(PRE_HOOK[kind], lambda **kw: traces.append(kw["middleware_trace"]),
                        plugin=PLUGIN)
    base = Base()
    with caplog.at_level(logging.WARNING, logger="otelmw"):
        assert invoke(p, mode, kind, host_payload(), base) == "base-result"

    assert p.failures.counts[("middleware", REQ_KIND[kind], f"{PLUGIN}.bad")] == 1
    assert p.failures.total() == 1
    recs = warnings_from_otelmw(caplog)
    assert len(recs) == 1 and f"{PLUGIN}.bad" in recs[0].getMessage()
    assert after == [host_payload()]
    assert base.calls == [host_payload()]
    assert list(traces[0]) == []


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", MODES)
def test_raising_request_middleware_fails_open(
    mode: str, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    p = Pipeline()
    key = KEY[kind]

    def boom(**kw: Any) -> Any:
        raise RuntimeError("request middleware exploded")

    p.registry.add_middleware(REQ_KIND[kind], req_mw(mode, "first", add_tag(key, "a")),
                              plugin=PLUGIN)
    p.registry.add_middleware(REQ_KIND[kind], req_mw(mode, "boom", boom), plugin=PLUGIN)
    p.registry.add_middleware(REQ_KIND[kind], req_mw(mode, "third", add_tag(key, "c")),
                              plugin=PLUGIN)
    base = Base()
    with caplog.at_level(logging.WARNING, logger="otelmw"):
        assert invoke(p, mode, kind, host_payload(), base) == "base-result"
    assert base.calls == [{**host_payload(), "path": ["a", "c"]}]
    assert p.failures.counts[("middleware", REQ_KIND[kind], f"{PLUGIN}.boom")] == 1
    recs = warnings_from_otelmw(caplog)
    assert len(recs) == 1
    assert "request middleware exploded" in recs[0].getMessage()


@pytest.mark.parametrize("kind", KINDS)
def test_async_request_middleware_in_sync_call_is_a_failure_and_closed(kind: str) -> None:
    """Sync twin of the async path's 'awaited' rule: the coroutine is closed and
    counted, never left un-awaited."""
    p = Pipeline()
    key = KEY[kind]
    made: list[Any] = []

    async def rewrite_async(**kw: Any) -> Any:
        return {key: {"should": "not apply"}}

    def cb(**kw: Any) -> Any:
        coro = rewrite_async(**kw)
        made.append(coro)
        return coro

    p.registry.add_middleware(REQ_KIND[kind], named(cb, "coro_returner"), plugin=PLUGIN)
    base = Base()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        invoke(p, "sync", kind, host_payload(), base)
        gc.collect()
    assert base.calls == [host_payload()]
    assert inspect.getcoroutinestate(made[0]) == inspect.CORO_CLOSED
    assert p.failures.counts[("middleware", REQ_KIND[kind], f"{PLUGIN}.coro_returner")] == 1
    assert not [w for w in caught if "never awaited" in str(w.message)]


@pytest.mark.parametrize("kind", KINDS)
def test_async_request_middleware_is_awaited_in_async_call(kind: str) -> None:
    p = Pipeline()
    key = KEY[kind]

    async def rewrite_async(**kw: Any) -> Any:
        await asyncio.sleep(0)
        return {key: {**kw[key], "path": ["awaited"]}}

    p.registry.add_middleware(REQ_KIND[kind], rewrite_async, plugin=PLUGIN)
    base = Base()
    invoke(p, "async", kind, host_payload(), base)
    assert base.calls == [{**host_payload(), "path": ["awaited"]}]
    assert p.failures.total() == 0

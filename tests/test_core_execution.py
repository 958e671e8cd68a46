"""Execution chain (``llm_execution`` / ``tool_execution``), warn-once and streaming.

Every rule runs on the sync and the async path (``mode``) and for LLM and tool
calls (``kind``). Execution middleware bodies are written once as generators
(``result = yield payload`` means ``result = next_call(payload)``) and driven
by a plain function on the sync path and by an ``async def`` on the async path.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable, Generator
from typing import Any

import pytest
from _support.calls import (
    EXEC_KIND,
    MODES,
    OPS,
    ORIGINAL_KEY,
    PAYLOAD_KEY,
    PLUGIN,
    REQUEST_KIND,
    BaseCall,
    each_mode_and_op,
    host_payload,
    named,
    run_call,
)
from _support.garbage import cyclic_garbage

from otelmw import NextCallReusedError, Pipeline, PluginManager

EACH_MODE_AND_KIND = each_mode_and_op("kind")

Body = Callable[[dict[str, Any]], Generator[Any, Any, Any]]


BODY_DONE = object()  # what ``BodyRun.next_payload`` gives once the body has returned


class BodyRun:
    """One run of a generator body: each value it yields is a ``next_call`` payload, and
    what that call returned (or raised) goes back into the body."""

    def __init__(self, body: Body, kw: dict[str, Any]) -> None:
        self.gen, self.reply, self.error = body(kw), None, None
        self.result: Any = None

    def next_payload(self) -> Any:
        """The next payload, or ``BODY_DONE`` once the body returned (its ``result``)."""
        reply, error, self.reply, self.error = self.reply, self.error, None, None
        try:
            return self.gen.throw(error) if error is not None else self.gen.send(reply)
        except StopIteration as stop:
            self.result = stop.value
            return BODY_DONE


def exec_mw(mode: str, name: str, body: Body) -> Any:
    """Turn a generator body into a sync or ``async def`` execution middleware."""

    def cb(**kw: Any) -> Any:
        run = BodyRun(body, kw)
        while (payload := run.next_payload()) is not BODY_DONE:
            try:
                run.reply = kw["next_call"](payload)
            except Exception as exc:
                run.error = exc
        return run.result

    async def acb(**kw: Any) -> Any:
        run = BodyRun(body, kw)
        while (payload := run.next_payload()) is not BODY_DONE:
            try:
                run.reply = await kw["next_call"](payload)
            except Exception as exc:
                run.error = exc
        return run.result

    return named(cb if mode == "sync" else acb, name)


def otelmw_records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "otelmw" and r.levelno == level]


def add_exec(p: Pipeline, kind: str, mode: str, name: str, body: Body,
             plugin: str = PLUGIN) -> None:
    p.registry.add_middleware(EXEC_KIND[kind], exec_mw(mode, name, body), plugin=plugin)


def recorder(log: list[str], tag: str) -> Body:
    def body(kw: dict[str, Any]) -> Generator[Any, Any, Any]:
        log.append(f"{tag}>")
        result = yield kw[key_of(kw)]
        log.append(f"<{tag}")
        return result

    return body


def add_between_recorders(p: Pipeline, kind: str, mode: str, log: list[str], name: str,
                          body: Body) -> None:
    """``body`` as layer ``name`` between the recorders ``outer`` and ``inner``."""
    add_exec(p, kind, mode, "outer", recorder(log, "outer"))
    add_exec(p, kind, mode, name, body)
    add_exec(p, kind, mode, "inner", recorder(log, "inner"))


def key_of(kw: dict[str, Any]) -> str:
    return "request" if "request" in kw else "args"


# ------------------------------------------------------------------------ nesting


@EACH_MODE_AND_KIND
def test_execution_middleware_nests_first_registered_outermost(mode: str, kind: str) -> None:
    p = Pipeline()
    log: list[str] = []
    for tag in ("a", "b", "c"):
        add_exec(p, kind, mode, f"mw_{tag}", recorder(log, tag))
    base = BaseCall(log=log)
    assert run_call(p, mode, kind, host_payload(), base, raise_errors=True) == "base-result"
    assert log == ["a>", "b>", "c>", "base", "<c", "<b", "<a"]
    assert len(base.calls) == 1
    assert p.failures.total() == 0


@EACH_MODE_AND_KIND
def test_next_call_with_modified_payload_passes_it_down(mode: str, kind: str) -> None:
    p = Pipeline()
    key, orig = PAYLOAD_KEY[kind], ORIGINAL_KEY[kind]
    inner_seen: list[tuple[Any, Any]] = []

    def outer(kw: dict[str, Any]) -> Generator[Any, Any, Any]:
        p_ = kw[key]
        return (yield {**p_, "path": [*p_["path"], "outer"], "model": "swapped"})

    def inner(kw: dict[str, Any]) -> Generator[Any, Any, Any]:
        inner_seen.append((copy.deepcopy(kw[key]), copy.deepcopy(kw[orig])))
        return (yield kw[key])

    add_exec(p, kind, mode, "outer", outer)
    add_exec(p, kind, mode, "inner", inner)
    host = host_payload()
    base = BaseCall()
    run_call(p, mode, kind, host, base, raise_errors=True)
    expected = {**host_payload(), "path": ["outer"], "model": "swapped"}
    assert inner_seen == [(expected, host_payload())]
    assert base.calls == [expected]
    assert host == host_payload()


# ------------------------------------------------------------------ next_call reuse


@EACH_MODE_AND_KIND
def test_second_next_call_raises_next_call_reused_error_inside_middleware(
    mode: str, kind: str
) -> None:
    p = Pipeline()
    key = PAYLOAD_KEY[kind]
    caught: list[BaseException] = []

    def twice(kw: dict[str, Any]) -> Generator[Any, Any, Any]:
        first = yield kw[key]
        try:
            yield kw[key]
        except Exception as exc:
            caught.append(exc)
        return first

    add_exec(p, kind, mode, "twice", twice)
    base = BaseCall(result="only-once")
    assert run_call(p, mode, kind, host_payload(), base, raise_errors=True) == "only-once"
    assert len(caught) == 1 and type(caught[0]) is NextCallReusedError
    assert len(base.calls) == 1
    assert p.failures.total() == 0


@EACH_MODE_AND_KIND
def test_uncaught_second_next_call_keeps_downstream_result(mode: str, kind: str) -> None:
    p = Pipeline()
    key = PAYLOAD_KEY[kind]

    def twice(kw: dict[str, Any]) -> Generator[Any, Any, Any]:
        yield kw[key]
        return (yield kw[key])  # raises NextCallReusedError out of the middleware

    log: list[str] = []
    add_exec(p, kind, mode, "twice", twice)
    add_exec(p, kind, mode, "inner", recorder(log, "inner"))
    base = BaseCall(result="downstream", log=log)
    assert run_call(p, mode, kind, host_payload(), base, raise_errors=True) == "downstream"
    assert log == ["inner>", "base", "<inner"]
    assert p.failures.counts[("middleware", EXEC_KIND[kind], f"{PLUGIN}.twice")] == 1


# ------------------------------------------------------------------- short-circuit


@EACH_MODE_AND_KIND
def test_not_calling_next_call_short_circuits(mode: str, kind: str) -> None:
    p = Pipeline()
    log: list[str] = []
    cached = object()

    def cache(kw: dict[str, Any]) -> Generator[Any, Any, Any]:
        log.append("cache")
        return cached
        yield  # pragma: no cover - makes this a generator

    add_between_recorders(p, kind, mode, log, "cache", cache)
    base = BaseCall(log=log)
    assert run_call(p, mode, kind, host_payload(), base, raise_errors=True) is cached
    assert base.calls == []
    assert log == ["outer>", "cache", "<outer"]
    assert p.failures.total() == 0


@pytest.mark.parametrize("keeper_at", ["outer", "last"])
@EACH_MODE_AND_KIND
def test_next_call_kept_beyond_its_call_still_runs_the_rest_once(
        mode: str, kind: str, keeper_at: str) -> None:
    """A middleware may keep ``next_call`` and call it after its call returned
    (a lazy wrapper; Hermes' own chain allows it): the layers below it and the
    base call run then, once. Freeing each call's objects at once (no cyclic
    garbage, below) must not take that away."""
    p = Pipeline()
    log: list[str] = []
    kept: list[Any] = []

    def keeper(kw: dict[str, Any]) -> Generator[Any, Any, Any]:
        kept.append(kw["next_call"])
        return "short"
        yield  # pragma: no cover - makes this a generator

    if keeper_at == "last":
        add_exec(p, kind, mode, "outer", recorder(log, "outer"))
    add_exec(p, kind, mode, "keeper", keeper)
    if keeper_at == "outer":
        add_exec(p, kind, mode, "inner", recorder(log, "inner"))
    base = BaseCall(log=log)
    assert run_call(p, mode, kind, host_payload(), base, raise_errors=True) == "short"
    assert base.calls == []
    before = list(log)
    late = kept[0]() if mode == "sync" else asyncio.run(kept[0]())
    assert late == "base-result"
    assert len(base.calls) == 1
    assert log[len(before):] == (["inner>", "base", "<inner"] if keeper_at == "outer"
                                 else ["base"])
    with pytest.raises(NextCallReusedError):  # still single use
        kept[0]()
    assert len(base.calls) == 1


@EACH_MODE_AND_KIND
def test_calls_through_the_execution_chain_leave_no_cyclic_garbage(
        mode: str, kind: str) -> None:
    """The chain's closures refer to each other; left so, every call would end
    as about 30 objects (its kwargs and payloads among them) that only the
    cyclic GC frees. Counted with the collector off, so nothing hides them."""
    p = Pipeline()
    for name in ("outer", "inner"):
        add_exec(p, kind, mode, name, recorder([], name))
    base = BaseCall()
    loop = asyncio.new_event_loop()
    results: list[Any] = []

    def one_call() -> None:
        results.append(run_call(p, mode, kind, host_payload(), base, loop=loop))

    try:
        unreachable = cyclic_garbage(one_call, 100)
    finally:
        loop.close()
    assert len(base.calls) == 105 and results == ["base-result"] * 105
    # A little slack for another thread's garbage; one call's cycle alone was ~30.
    assert unreachable < 20, f"{unreachable} unreachable objects after 100 calls"


# ----------------------------------------------------------- raising before / after


@EACH_MODE_AND_KIND
def test_raise_before_next_call_skips_layer_rest_and_base_still_run(
    mode: str, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    p = Pipeline()
    key = PAYLOAD_KEY[kind]
    log: list[str] = []

    def broken(kw: dict[str, Any]) -> Generator[Any, Any, Any]:
        log.append("broken")
        raise ValueError("broken before next_call")
        yield {**kw[key], "path": ["broken-was-applied"]}  # pragma: no cover

    add_between_recorders(p, kind, mode, log, "broken", broken)
    base = BaseCall(log=log)
    with caplog.at_level(logging.WARNING, logger="otelmw"):
        assert run_call(p, mode, kind, host_payload(), base, raise_errors=True) == "base-result"
    assert log == ["outer>", "broken", "inner>", "base", "<inner", "<outer"]
    assert base.calls == [host_payload()]
    assert p.failures.counts[("middleware", EXEC_KIND[kind], f"{PLUGIN}.broken")] == 1
    recs = otelmw_records(caplog, logging.WARNING)
    assert len(recs) == 1 and "broken before next_call" in recs[0].getMessage()


@EACH_MODE_AND_KIND
def test_raise_after_next_call_keeps_downstream_result_and_runs_nothing_twice(
    mode: str, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    p = Pipeline()
    key = PAYLOAD_KEY[kind]
    log: list[str] = []

    def post_broken(kw: dict[str, Any]) -> Generator[Any, Any, Any]:
        log.append("post_broken>")
        yield kw[key]
        log.append("<post_broken raising")
        raise RuntimeError("broken after next_call")

    add_between_recorders(p, kind, mode, log, "post_broken", post_broken)
    base = BaseCall(result="downstream-result", log=log)
    with caplog.at_level(logging.WARNING, logger="otelmw"):
        result = run_call(p, mode, kind, host_payload(), base, raise_errors=True)
        assert result == "downstream-result"
    assert log == ["outer>", "post_broken>", "inner>", "base", "<inner",
                   "<post_broken raising", "<outer"]
    assert len(base.calls) == 1
    assert p.failures.counts[("middleware", EXEC_KIND[kind], f"{PLUGIN}.post_broken")] == 1
    assert len(otelmw_records(caplog, logging.WARNING)) == 1


# ----------------------------------------------------------- downstream failures


class DownstreamError(Exception):
    pass


@EACH_MODE_AND_KIND
def test_downstream_failure_reaches_host_and_outer_middleware_as_same_object(
    mode: str, kind: str
) -> None:
    p = Pipeline()
    key = PAYLOAD_KEY[kind]
    error = DownstreamError("provider down")
    seen_by_outer: list[BaseException] = []
    seen_by_hook: list[BaseException] = []

    def outer(kw: dict[str, Any]) -> Generator[Any, Any, Any]:
        try:
            return (yield kw[key])
        except BaseException as exc:
            seen_by_outer.append(exc)
            raise

    def skipped(kw: dict[str, Any]) -> Generator[Any, Any, Any]:
        raise ValueError("skipped layer")
        yield kw[key]  # pragma: no cover

    add_exec(p, kind, mode, "outer", outer)
    add_exec(p, kind, mode, "middle", recorder([], "middle"))
    add_exec(p, kind, mode, "skipped", skipped)
    if kind == "llm":
        p.registry.add_hook("api_request_error", lambda **kw: seen_by_hook.append(kw["error"]),
                            plugin=PLUGIN)
    base = BaseCall(error=error)
    with pytest.raises(DownstreamError) as info:
        run_call(p, mode, kind, host_payload(), base, raise_errors=True)
    assert info.value is error
    assert len(seen_by_outer) == 1 and seen_by_outer[0] is error
    assert len(base.calls) == 1
    if kind == "llm":
        assert len(seen_by_hook) == 1 and seen_by_hook[0] is error


@EACH_MODE_AND_KIND
def test_downstream_failure_with_retry_via_second_next_call_still_surfaces_original(
    mode: str, kind: str
) -> None:
    """A middleware that catches the downstream failure and calls next_call again
    gets NextCallReusedError; the host still sees the base's own exception."""
    p = Pipeline()
    key = PAYLOAD_KEY[kind]
    error = DownstreamError("flaky")
    inside: list[BaseException] = []

    def retry(kw: dict[str, Any]) -> Generator[Any, Any, Any]:
        try:
            return (yield kw[key])
        except DownstreamError:
            try:
                return (yield kw[key])
            except NextCallReusedError as exc:
                inside.append(exc)
                raise

    add_exec(p, kind, mode, "retry", retry)
    base = BaseCall(error=error)
    with pytest.raises(DownstreamError) as info:
        run_call(p, mode, kind, host_payload(), base, raise_errors=True)
    assert info.value is error
    assert len(inside) == 1
    assert len(base.calls) == 1


@pytest.mark.parametrize("mode", MODES)
def test_downstream_tool_failure_without_raise_errors_becomes_tool_error_text(mode: str) -> None:
    p = Pipeline()
    add_exec(p, "tool", mode, "wrap", recorder([], "wrap"))
    base = BaseCall(error=DownstreamError("disk full"))
    assert run_call(p, mode, "tool", {"a": 1}, base) == "Tool Error: disk full"
    assert len(base.calls) == 1


# ------------------------------------------------------------------------- warn once


def _bad_signature_request(request: Any) -> Any:  # no **kwargs: TypeError on every call
    return None


def _bad_signature_execution(request: Any, next_call: Any) -> Any:
    return next_call(request)


def _bad_signature_hook(request: Any) -> None:
    return None


def _always_raises(**kw: Any) -> Any:
    raise RuntimeError("identical failure")


WARN_CASES = {
    "request_signature": ("middleware", "llm_request", _bad_signature_request, True),
    "execution_signature": ("middleware", "llm_execution", _bad_signature_execution, True),
    "hook_signature": ("hook", "pre_api_request", _bad_signature_hook, True),
    "execution_raises": ("middleware", "llm_execution", _always_raises, False),
}


@pytest.mark.parametrize("case", sorted(WARN_CASES))
@pytest.mark.parametrize("mode", MODES)
def test_identical_failure_warns_once_counts_every_call_and_reload_resets(
    mode: str, case: str, caplog: pytest.LogCaptureFixture, tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    category, kind, callback, is_signature = WARN_CASES[case]
    monkeypatch.setattr(PluginManager, "entry_points", staticmethod(lambda: {}))
    p = Pipeline()
    pm = PluginManager(p, home=tmp_path)

    def register(ctx: Any) -> None:
        if category == "hook":
            ctx.register_hook(kind, callback)
        else:
            ctx.register_middleware(kind, callback)

    pm.add_plugin("noisy", register)
    name = f"noisy.{callback.__qualname__}"
    base = BaseCall()
    n = 6
    caplog.set_level(logging.DEBUG, logger="otelmw")
    for _ in range(n):
        assert run_call(p, mode, "llm", host_payload(), base) == "base-result"
    assert len(base.calls) == n

    warns = otelmw_records(caplog, logging.WARNING)
    debugs = [r for r in otelmw_records(caplog, logging.DEBUG) if name in r.getMessage()]
    assert len(warns) == 1
    assert name in warns[0].getMessage()
    assert len(debugs) == n - 1
    if is_signature:
        text = warns[0].getMessage()
        assert "telemetry_schema_version" in text
        assert "middleware_schema_version" in text
        assert "api_request_id" in text
    assert p.failures.counts[(category, kind, name)] == n

    caplog.clear()
    pm.reload()
    run_call(p, mode, "llm", host_payload(), base)
    run_call(p, mode, "llm", host_payload(), base)
    assert len(otelmw_records(caplog, logging.WARNING)) == 1
    assert p.failures.counts[(category, kind, name)] == n + 2


# ------------------------------------------------------------------------ streaming


@EACH_MODE_AND_KIND
def test_sync_generator_passes_through_execution_middleware_unconsumed(
        mode: str, kind: str) -> None:
    """On either path a sync generator the base call returns reaches the host unpulled
    (with a request rewrite on the sync path, none on the async one)."""
    p = Pipeline()
    pulled: list[int] = []

    def stream() -> Generator[int, None, None]:
        for i in range(3):
            pulled.append(i)
            yield i

    add_exec(p, kind, mode, "wrap", recorder([], "wrap"))
    if mode == "sync":
        p.registry.add_middleware(REQUEST_KIND[kind], named(lambda **kw: None, "noop"),
                                  plugin=PLUGIN)
    result = run_call(p, mode, kind, host_payload(), lambda payload: stream(), raise_errors=True)
    assert pulled == []
    assert list(result) == [0, 1, 2]
    assert pulled == [0, 1, 2]


@pytest.mark.parametrize("kind", OPS)
def test_async_generator_passes_through_execution_middleware_unconsumed_async(kind: str) -> None:
    p = Pipeline()
    pulled: list[int] = []

    async def stream() -> Any:
        for i in range(3):
            pulled.append(i)
            yield i

    add_exec(p, kind, "async", "wrap", recorder([], "wrap"))

    async def noop(**kw: Any) -> None:
        return None

    p.registry.add_middleware(REQUEST_KIND[kind], noop, plugin=PLUGIN)

    async def main() -> tuple[list[int], list[int]]:
        if kind == "llm":
            result = await p.arun_llm(host_payload(), lambda payload: stream())
        else:
            result = await p.arun_tool("tool_x", host_payload(), lambda payload: stream())
        before = list(pulled)
        items = [x async for x in result]
        return before, items

    before, items = asyncio.run(main())
    assert before == []
    assert items == [0, 1, 2]
    assert pulled == [0, 1, 2]

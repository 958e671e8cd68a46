"""Context propagation: thread pools, bare threads, asyncio tasks, ``carry``,
``safe_detach`` and many concurrent calls — zero orphan spans, no cross-parenting.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from _support.calls import MODEL, MODES, OPS, TOOL, minimal_payload, named, run_call
from _support.telemetry import TelemetryHarness, is_child, op_span_name, parent_id
from _support.threads import run_in_threads
from opentelemetry import context as otel_context
from opentelemetry import trace

from otelmw.telemetry import carry, instrument_threads, safe_detach, uninstrument_threads

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def instrumented() -> Iterator[None]:
    instrument_threads()
    yield
    uninstrument_threads()


def worker(h: TelemetryHarness, label: str) -> Callable[[], str]:
    def work() -> str:
        with h.tracer.start_as_current_span(label):
            return label
    return work


def assert_parented_to_call(h: TelemetryHarness, op: str, execute: Callable[[Any], str],
                            labels: list[str]) -> None:
    """Run ``op`` with ``execute`` as its base; every span in ``labels`` is the call's child."""
    run_call(h.pipeline, "sync", op, minimal_payload(op), execute)
    top = h.one(op_span_name(op))
    for label in labels:
        assert is_child(h.one(label), top)


# ---------------------------------------------------------------- thread pools
@pytest.mark.parametrize("op", OPS)
def test_thread_pool_work_parents_to_call_after_instrument_threads(
        h: TelemetryHarness, instrumented: None, op: str) -> None:
    # A warm pool: its worker threads were started before (outside) the call.
    with ThreadPoolExecutor(max_workers=3) as pool:
        pool.submit(lambda: None).result()

        def execute(p: Any) -> str:
            futures = [pool.submit(worker(h, f"pooled {i}")) for i in range(6)]
            assert [f.result() for f in futures] == [f"pooled {i}" for i in range(6)]
            return "done"

        assert_parented_to_call(h, op, execute, [f"pooled {i}" for i in range(6)])


def test_thread_pool_created_inside_call_does_not_leak_parent(
        h: TelemetryHarness, instrumented: None) -> None:
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        def execute(args: Any) -> str:
            # The pool's only worker thread is started here, inside the tool span.
            return pool.submit(worker(h, "inside")).result()

        h.pipeline.run_tool(TOOL, {}, execute)
        # Later work submitted outside any call must not inherit the old span.
        pool.submit(worker(h, "outside")).result()
    finally:
        pool.shutdown()
    assert is_child(h.one("inside"), h.one(f"execute_tool {TOOL}"))
    assert h.one("outside").parent is None


def test_run_in_executor_inside_async_call(h: TelemetryHarness, instrumented: None) -> None:
    async def execute(args: Any) -> str:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, worker(h, "executor work"))

    asyncio.run(h.pipeline.arun_tool(TOOL, {}, execute))
    assert is_child(h.one("executor work"), h.one(f"execute_tool {TOOL}"))


# ---------------------------------------------------------------- bare threads
@pytest.mark.parametrize("op", OPS)
def test_bare_thread_parents_to_call_after_instrument_threads(
        h: TelemetryHarness, instrumented: None, op: str) -> None:
    def execute(p: Any) -> str:
        assert run_in_threads(worker(h, f"thread {i}") for i in range(3)) == []
        return "done"

    assert_parented_to_call(h, op, execute, [f"thread {i}" for i in range(3)])


def test_thread_subclass_with_target_after_instrument_threads(
        h: TelemetryHarness, instrumented: None) -> None:
    class Named(threading.Thread):
        pass

    def execute(args: Any) -> str:
        t = Named(target=worker(h, "subclassed"))
        t.start()
        t.join()
        return "ok"

    h.pipeline.run_tool(TOOL, {}, execute)
    assert is_child(h.one("subclassed"), h.one(f"execute_tool {TOOL}"))


@pytest.mark.parametrize("op", OPS)
def test_carry_without_instrument_threads(h: TelemetryHarness, op: str) -> None:
    def execute(p: Any) -> str:
        t = threading.Thread(target=carry(worker(h, "carried")))
        t.start()
        t.join()
        control = threading.Thread(target=worker(h, "not carried"))
        control.start()
        control.join()
        return "done"

    run_call(h.pipeline, "sync", op, minimal_payload(op), execute)
    top = h.one(op_span_name(op))
    assert is_child(h.one("carried"), top)
    # Control: without carry or instrument_threads a bare thread loses the context.
    assert h.one("not carried").parent is None


def test_carried_callable_can_run_concurrently(h: TelemetryHarness) -> None:
    barrier = threading.Barrier(4)

    def work(i: int) -> None:
        barrier.wait()
        with h.tracer.start_as_current_span(f"concurrent {i}"):
            time.sleep(0.01)

    def execute(args: Any) -> str:
        fn = carry(work)  # one carried callable, entered by 4 threads at once
        assert run_in_threads(functools.partial(fn, i) for i in range(4)) == []
        return "ok"

    h.pipeline.run_tool(TOOL, {}, execute)
    top = h.one(f"execute_tool {TOOL}")
    for i in range(4):
        assert is_child(h.one(f"concurrent {i}"), top)


def test_thread_subclass_overriding_run_after_instrument_threads(
        h: TelemetryHarness, instrumented: None) -> None:
    class Worker(threading.Thread):
        def run(self) -> None:
            with h.tracer.start_as_current_span("overridden run"):
                pass

    def execute(args: Any) -> str:
        t = Worker()
        t.start()
        t.join()
        return "ok"

    h.pipeline.run_tool(TOOL, {}, execute)
    assert is_child(h.one("overridden run"), h.one(f"execute_tool {TOOL}"))


def _thread_attrs() -> tuple[Any, ...]:
    return (ThreadPoolExecutor.__dict__["submit"],
            *(threading.Thread.__dict__.get(k) for k in ("start", "run", "_bootstrap_inner")))


def test_uninstrument_threads_restores_originals() -> None:
    originals = _thread_attrs()
    instrument_threads()
    instrument_threads()  # idempotent
    assert ThreadPoolExecutor.__dict__["submit"] is not originals[0]
    uninstrument_threads()
    uninstrument_threads()
    assert all(a is b for a, b in zip(_thread_attrs(), originals, strict=True))


# ---------------------------------------------------------------- asyncio
def test_asyncio_tasks_inside_async_tool_call(h: TelemetryHarness) -> None:
    async def child(i: int) -> int:
        await asyncio.sleep(0.001 * (3 - i))
        with h.tracer.start_as_current_span(f"task {i}"):
            await asyncio.sleep(0)
        return i

    async def execute(args: Any) -> list[int]:
        tasks = [asyncio.create_task(child(i)) for i in range(3)]
        async with asyncio.TaskGroup() as tg:
            tg.create_task(child(3))
        return list(await asyncio.gather(*tasks))

    asyncio.run(h.pipeline.arun_tool(TOOL, {}, execute))
    top = h.one(f"execute_tool {TOOL}")
    for i in range(4):
        assert is_child(h.one(f"task {i}"), top)


def test_asyncio_tasks_inside_async_execution_wrapper_and_llm(h: TelemetryHarness) -> None:
    async def spawn(**kw: Any) -> Any:
        async def side() -> None:
            with h.tracer.start_as_current_span("wrapper task"):
                await asyncio.sleep(0)
        await asyncio.create_task(side())
        return await kw["next_call"]()

    h.pipeline.registry.add_middleware("llm_execution", named(spawn, "spawn"), plugin="x")

    async def execute(req: Any) -> dict[str, Any]:
        async def side() -> None:
            with h.tracer.start_as_current_span("base task"):
                await asyncio.sleep(0)
        await asyncio.gather(side())
        return {"id": "r"}

    async def main() -> None:
        async with h.pipeline.turn("agent"):
            await h.pipeline.arun_llm({"model": MODEL}, execute)

    asyncio.run(main())
    wrapper = h.one("llm_execution x.spawn")
    assert is_child(wrapper, h.one(f"chat {MODEL}"))
    assert is_child(h.one("wrapper task"), wrapper)
    assert is_child(h.one("base task"), wrapper)
    assert len({s.context.trace_id for s in h.spans()}) == 1


def test_concurrent_async_calls_in_tasks_do_not_cross_parent(h: TelemetryHarness) -> None:
    async def one(i: int) -> None:
        async def execute(args: Any) -> str:
            await asyncio.sleep(0.001 * (i % 5))
            with h.tracer.start_as_current_span(f"inner {i}"):
                await asyncio.sleep(0)
            return "ok"

        async with h.pipeline.turn(f"agent-{i}"):
            await h.pipeline.arun_tool(TOOL, {"i": i}, execute)

    async def main() -> None:
        await asyncio.gather(*(one(i) for i in range(20)))

    asyncio.run(main())
    for i in range(20):
        agent, inner = h.one(f"invoke_agent agent-{i}"), h.one(f"inner {i}")
        assert agent.parent is None
        tool = next(s for s in h.named(f"execute_tool {TOOL}") if is_child(inner, s))
        assert is_child(tool, agent)


# ---------------------------------------------------------------- safe_detach
def test_safe_detach_foreign_token_neither_raises_nor_logs(
        h: TelemetryHarness, caplog: pytest.LogCaptureFixture) -> None:
    tokens: list[object] = []
    span = h.tracer.start_span("elsewhere")

    def other_thread() -> None:
        tokens.append(otel_context.attach(trace.set_span_in_context(span)))

    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    before = otel_context.get_current()
    with caplog.at_level(logging.DEBUG):
        safe_detach(tokens[0])
        safe_detach(None)
        # A token made in another contextvars.Context (e.g. a generator finalised
        # in another task) as well.
        token2 = contextvars.copy_context().run(otel_context.attach,
                                                trace.set_span_in_context(span))
        safe_detach(token2)
    span.end()
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert otel_context.get_current() == before


def test_plain_detach_of_foreign_token_would_log_error(
        caplog: pytest.LogCaptureFixture) -> None:
    """Control for the test above: the stock ``detach`` logs an ERROR here."""
    tokens: list[object] = []
    t = threading.Thread(target=lambda: tokens.append(
        otel_context.attach(otel_context.get_current())))
    t.start()
    t.join()
    with caplog.at_level(logging.ERROR):
        otel_context.detach(tokens[0])  # type: ignore[arg-type]
    assert any(r.levelno >= logging.ERROR for r in caplog.records)


def test_safe_detach_own_token_restores_context(h: TelemetryHarness) -> None:
    span = h.tracer.start_span("mine")
    token = otel_context.attach(trace.set_span_in_context(span))
    assert trace.get_current_span() is span
    safe_detach(token)
    assert trace.get_current_span() is not span
    span.end()


# ---------------------------------------------------------------- 32 threads
@pytest.mark.parametrize("threads_instrumented", [False, True])
@pytest.mark.parametrize("mode", MODES)
def test_32_threads_each_call_has_its_own_trace(
        h: TelemetryHarness, mode: str, threads_instrumented: bool) -> None:
    if threads_instrumented:
        instrument_threads()
    n = 32
    barrier = threading.Barrier(n)

    def rewrite(**kw: Any) -> Any:
        return {"args": {**kw["args"], "seen": True}}

    def wrap(**kw: Any) -> Any:
        time.sleep(0.001)
        return kw["next_call"]()

    p = h.pipeline
    p.registry.add_middleware("tool_request", named(rewrite, "rewrite"), plugin="x")
    p.registry.add_middleware("tool_execution", named(wrap, "wrap"), plugin="x")
    p.registry.add_middleware("llm_execution", named(wrap, "wrap"), plugin="x")

    def base(label: str) -> Callable[[Any], Any]:
        def run(_: Any) -> Any:
            time.sleep(0.002)
            with h.tracer.start_as_current_span(label):
                time.sleep(0.001)
            return {"id": label}
        return run

    def thread_main(i: int) -> None:
        barrier.wait()
        for op in OPS:
            run_call(p, mode, op, minimal_payload(op), base(f"{op} base {i}"))

    assert run_in_threads(functools.partial(thread_main, i) for i in range(n)) == []

    spans = h.spans()
    assert len(spans) == n * (4 + 3)  # tool: op, rewrite, wrap, base; llm: op, wrap, base
    by_trace: dict[int, list[Any]] = defaultdict(list)
    for s in spans:
        by_trace[s.context.trace_id].append(s)
    assert len(by_trace) == 2 * n  # every call is its own trace
    for members in by_trace.values():
        ids = {s.context.span_id for s in members}
        roots = [s for s in members if s.parent is None]
        assert len(roots) == 1
        assert roots[0].name in (f"chat {MODEL}", f"execute_tool {TOOL}")
        assert all(parent_id(s) in ids for s in members if s.parent is not None)
        bases = [s for s in members if " base " in s.name]
        assert len(bases) == 1
        op = "llm" if roots[0].name.startswith("chat") else "tool"
        assert bases[0].name.startswith(f"{op} base ")
        assert len(members) == (3 if op == "llm" else 4)


def test_32_threads_each_turn_has_its_own_trace(h: TelemetryHarness) -> None:
    n = 32
    barrier = threading.Barrier(n)

    def thread_main(i: int) -> None:
        barrier.wait()
        with h.pipeline.turn(f"agent-{i}"):
            for op in OPS:
                def execute(_: Any, i: int = i, op: str = op) -> Any:
                    with h.tracer.start_as_current_span(f"{op} base {i}"):
                        time.sleep(0.001)
                    return {"id": str(i)}
                run_call(h.pipeline, "sync", op, minimal_payload(op), execute)

    assert run_in_threads(functools.partial(thread_main, i) for i in range(n)) == []
    for i in range(n):
        agent = h.one(f"invoke_agent agent-{i}")
        trace_spans = [s for s in h.spans() if s.context.trace_id == agent.context.trace_id]
        assert sorted(s.name for s in trace_spans) == sorted(
            [f"invoke_agent agent-{i}", f"chat {MODEL}", f"execute_tool {TOOL}",
             f"llm base {i}", f"tool base {i}"])
        for s in trace_spans:
            if s is not agent:
                assert parent_id(s) in {x.context.span_id for x in trace_spans}


# ------------------------------------------------------- context across turns
def _trace_of(h: TelemetryHarness, name: str) -> int:
    return h.one(name).context.trace_id


def test_long_lived_thread_started_in_a_turn_does_not_parent_later_turns(
        h: TelemetryHarness, instrumented: None) -> None:
    """A worker started lazily inside turn A serves turns B and C: a request that
    carries nothing runs outside every turn (never under A, which has ended); a
    ``carry``-ed callable and executor work run in their caller's turn."""
    p = h.pipeline
    requests: Any = __import__("queue").Queue()
    pool = ThreadPoolExecutor(max_workers=1)

    def serve() -> None:  # the host's loop: gets data, makes the pipeline call itself
        while True:
            item = requests.get()
            if item is None:
                return
            name, done = item
            if callable(name):
                name()
            else:
                p.run_tool(name, {}, lambda a: "ok")
            done.set()

    server: threading.Thread | None = None
    try:
        for turn in "ABC":
            with p.turn(f"agent-{turn}"):
                if server is None:
                    server = threading.Thread(target=serve)
                    server.start()
                pool.submit(p.run_tool, f"pooled-{turn}", {}, lambda a: "ok").result()
                for item in (f"plain-{turn}", carry(
                        lambda t=turn: p.run_tool(f"carried-{t}", {}, lambda a: "ok"))):
                    done = threading.Event()
                    requests.put((item, done))
                    assert done.wait(10)
    finally:
        requests.put(None)
        if server is not None:
            server.join(10)
        pool.shutdown()
    for turn in "ABC":
        agent = h.one(f"invoke_agent agent-{turn}")
        for kind in ("pooled", "carried"):
            assert is_child(h.one(f"execute_tool {kind}-{turn}"), agent), (kind, turn)
    # Plain requests: A's runs while A is open (the thread was started in it);
    # B's and C's are not parented into A's trace.
    assert is_child(h.one("execute_tool plain-A"), h.one("invoke_agent agent-A"))
    a_trace = _trace_of(h, "invoke_agent agent-A")
    for turn in "BC":
        plain = h.one(f"execute_tool plain-{turn}")
        assert plain.context.trace_id != a_trace
        assert plain.parent is None
        assert "otelmw.turn.id" not in (plain.attributes or {})


def test_turn_started_on_one_thread_finished_on_another(h: TelemetryHarness) -> None:
    """``Turn.start()`` on thread X, ``finish()`` on thread Y: X's later calls are
    not in the finished turn's trace, and X's context is back to what it was."""
    import otelmw.core.contract as c

    p = h.pipeline
    before_otel, before_rc = otel_context.get_current(), c.current_runtime_context()
    turn = p.turn("agent")
    turn.start()
    p.run_tool("inside", {}, lambda a: "ok")
    finisher = threading.Thread(target=turn.finish)
    finisher.start()
    finisher.join()
    p.run_tool("after", {}, lambda a: "ok")
    agent = h.one("invoke_agent agent")
    assert agent.end_time is not None
    assert is_child(h.one("execute_tool inside"), agent)
    after = h.one("execute_tool after")
    assert after.context.trace_id != agent.context.trace_id and after.parent is None
    assert "otelmw.turn.id" not in (after.attributes or {})
    assert c.current_runtime_context() == before_rc
    assert trace.get_current_span(otel_context.get_current()) is trace.get_current_span(
        before_otel)
    h.assert_clean()


_host_var: contextvars.ContextVar[str] = contextvars.ContextVar("host_var", default="default")


def test_instrument_threads_carries_only_telemetry_context(
        h: TelemetryHarness, instrumented: None) -> None:
    """A host's own ContextVar is not copied into executor work or threads (as
    without otelmw); OpenTelemetry's and otelmw's context are."""
    seen: dict[str, Any] = {}

    def look(label: str) -> None:
        seen[label] = (_host_var.get(), trace.get_current_span().get_span_context().span_id,
                       __import__("otelmw").contract.current_runtime_context().turn_id)

    token = _host_var.set("set by the caller")
    try:
        with h.pipeline.turn("agent", turn_id="turn-1"), ThreadPoolExecutor(1) as pool:
            pool.submit(look, "submit").result()
            t = threading.Thread(target=look, args=("thread",))
            t.start()
            t.join()
    finally:
        _host_var.reset(token)
    agent_id = h.one("invoke_agent agent").context.span_id
    assert seen == {"submit": ("default", agent_id, "turn-1"),
                    "thread": ("default", agent_id, "turn-1")}

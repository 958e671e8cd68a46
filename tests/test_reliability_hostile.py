"""Hostile middleware, hooks, results and inputs.

Part 1 (hypothesis, 4 properties x 2,500 examples = 10,000 in CI): chains of execution
middleware that raise before/after ``next_call``, call it twice, short-circuit, swallow
or replace results, mutate read-only payloads, sleep, or are ``async def`` in a sync
call; request middleware returning wrong shapes; hooks that raise, return coroutines
or junk. Checked against a reference model of the contract: the host gets exactly the
result (or its own exception object) the model predicts, the base call runs at most
once (and exactly when predicted), the base sees exactly the predicted request, and
with the telemetry observer attached every call ends its operation span exactly once
and every middleware span it started.

Part 2: hostile results and inputs (100 MB strings, cycles, non-JSON objects, bytes,
exceptions as results, malformed JSON arguments, lone surrogates) through digesting,
normalization and the stock OTLP exporter to a real receiver, in a fresh interpreter.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support.calls import MODES, OPS, PAYLOAD_KEY
from _support.distributions import PLUGINS, install_distribution
from _support.otlp_receiver import OtlpReceiver
from _support.telemetry import ObservedPipeline
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otelmw import HOOK_NAMES, NextCallReusedError, Pipeline
from otelmw.core.registry import Layer, make_layer
from otelmw.telemetry.content.policy import ContentPolicy

EXAMPLES = int(os.environ.get("OTELMW_HOSTILE_EXAMPLES", "2500"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))
EXAMPLES_RUN: dict[str, int] = {}


class HostError(Exception):
    """The host's (base call's) own error."""


class MwError(Exception):
    """A hostile middleware's / hook's own error: must never reach the host."""


# ------------------------------------------------------------------ harness
class Harness(ObservedPipeline):
    def __init__(self) -> None:
        super().__init__(ContentPolicy("SPAN_AND_EVENT"))

    def reset(self, mw: list[Layer], hooks: list[Layer]) -> None:
        self.span_exporter.clear()
        self.log_exporter.clear()
        self.lifecycle.open.clear()
        self.sdk_warnings.clear()
        self.pipeline.registry.replace_all(mw, hooks)


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    h = Harness()
    quiet = logging.getLogger("otelmw")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # first-occurrence WARNINGs of 10k hostile failures
    try:
        yield h
    finally:
        quiet.setLevel(level)
        h.close()


# ------------------------------------------------- hostile execution middleware
EXEC = ["pass", "raise_before", "raise_after", "twice", "twice_catch", "twice_noawait",
        "short", "discard", "swallow", "replace", "mutate", "mutate_after", "sleep",
        "coroutine", "no_arg", "return_pending"]


def short_value(i: int) -> Any:
    return ("short", i)


def short_circuit(b: str, nxt: Any, p: Any, i: int) -> Any:
    """"short" answers without next_call; "discard" calls it and drops what it gave (in an
    async call that awaitable is never awaited, so downstream never runs)."""
    if b == "discard":
        nxt(p)
    return short_value(i)


def reuse_refused(nxt: Any, p: Any) -> None:
    """A second next_call, which the pipeline refuses; the middleware catches the refusal."""
    with contextlib.suppress(NextCallReusedError):
        nxt(p)


def make_exec(kind: str, key: str, i: int, b: str, mode: str) -> Any:
    """The callback for behaviour ``b`` at position ``i`` (sync or async flavour)."""
    if b == "coroutine":  # an ``async def`` callback; in a sync call it is a failure
        async def co(**kw: Any) -> Any:
            await asyncio.sleep(0)
            return await kw["next_call"](kw[key])
        return co
    if b == "return_pending":  # a sync callback returning next_call's value as is
        def ret(**kw: Any) -> Any:
            return kw["next_call"](kw[key])
        return ret
    if mode == "sync":
        def cb(**kw: Any) -> Any:
            nxt, p = kw["next_call"], kw[key]
            if b in ("short", "discard"):
                return short_circuit(b, nxt, p, i)
            if b == "pass":
                return nxt(p)
            if b == "no_arg":
                return nxt()
            if b == "raise_before":
                raise MwError(f"before {i}")
            if b == "raise_after":
                nxt(p)
                raise MwError(f"after {i}")
            if b in ("twice", "twice_noawait"):
                r = nxt(p)
                nxt(p)  # NextCallReusedError, uncaught
                return r
            if b == "twice_catch":
                r = nxt(p)
                reuse_refused(nxt, p)
                return r
            if b == "swallow":
                try:
                    return nxt(p)
                except HostError:
                    return ("fallback", i)
            if b == "replace":
                return ("wrapped", i, nxt(p))
            if b == "mutate":
                p["injected"] = i  # read-only view: TypeError
                return nxt(p)
            if b == "mutate_after":
                r = nxt(p)
                kw["original_" + key]["injected"] = i
                return r
            if b == "sleep":
                time.sleep(0.00005)
                return nxt(p)
            raise AssertionError(b)
        return cb

    async def acb(**kw: Any) -> Any:
        nxt, p = kw["next_call"], kw[key]
        if b in ("short", "discard"):
            return short_circuit(b, nxt, p, i)
        if b == "pass":
            return await nxt(p)
        if b == "no_arg":
            return await nxt()
        if b == "raise_before":
            raise MwError(f"before {i}")
        if b == "raise_after":
            await nxt(p)
            raise MwError(f"after {i}")
        if b == "twice":
            r = await nxt(p)
            nxt(p)
            return r
        if b == "twice_noawait":
            nxt(p)
            nxt(p)  # raises; the first awaitable was never awaited
            raise AssertionError("unreachable")
        if b == "twice_catch":
            r = await nxt(p)
            reuse_refused(nxt, p)
            return r
        if b == "swallow":
            try:
                return await nxt(p)
            except HostError:
                return ("fallback", i)
        if b == "replace":
            return ("wrapped", i, await nxt(p))
        if b == "mutate":
            p["injected"] = i
            return await nxt(p)
        if b == "mutate_after":
            r = await nxt(p)
            kw["original_" + key]["injected"] = i
            return r
        if b == "sleep":
            await asyncio.sleep(0)
            time.sleep(0.00005)
            return await nxt(p)
        raise AssertionError(b)
    return acb


def model_exec(bs: list[str], base: tuple[str, Any], mode: str) -> tuple[tuple[str, Any], int,
                                                                         int]:
    """(outcome, base calls, layers entered) the contract predicts for the chain."""
    skip = {"raise_before", "mutate"} | ({"coroutine"} if mode == "sync" else
                                         {"twice_noawait"})
    entered = 0
    calls = 0

    def at(i: int) -> tuple[str, Any]:
        nonlocal entered, calls
        if i == len(bs):
            calls += 1
            return base
        entered += 1
        b = bs[i]
        if b in skip:
            return at(i + 1)
        if b == "short" or (b == "discard" and mode == "async"):
            return ("ok", short_value(i))
        down = at(i + 1)
        if down[0] == "err":
            return ("ok", ("fallback", i)) if b == "swallow" else down
        if b == "replace":
            return ("ok", ("wrapped", i, down[1]))
        if b == "discard":
            return ("ok", short_value(i))
        return down  # pass, twice*, raise_after (result kept), mutate_after, sleep, ...

    out = at(0)
    return out, calls, entered


# ------------------------------------------------------ hostile request middleware
REWRITE = ["none", "rewrite", "raise", "int", "partial", "extra_keys", "non_dict",
           "mutate", "mutate_original", "coroutine", "sleep"]


def make_rewrite(key: str, i: int, b: str) -> Any:
    if b == "coroutine":
        async def co(**kw: Any) -> Any:
            return {key: {**dict(kw[key]), f"co{i}": i}}
        return co

    def cb(**kw: Any) -> Any:
        cur = kw[key]
        if b == "none":
            return None
        if b == "rewrite":
            return {key: {**dict(cur), f"k{i}": i}, "reason": "hostile", "source": "t"}
        if b == "raise":
            raise MwError(f"rewrite {i}")
        if b == "int":
            return 42
        if b == "partial":
            return {"temperature": 0.0}
        if b == "extra_keys":
            return {key: {**dict(cur), "x": 1}, "junk": True}
        if b == "non_dict":
            return {key: [1, 2]}
        if b == "mutate":
            cur["x"] = i
            return None
        if b == "mutate_original":
            kw["original_" + key]["model"] = "stolen"
            return None
        if b == "sleep":
            time.sleep(0.00005)
            return None
        raise AssertionError(b)
    return cb


def model_rewrites(bs: list[str], start: dict[str, Any], mode: str) -> dict[str, Any]:
    cur = dict(start)
    for i, b in enumerate(bs):
        if b == "rewrite":
            cur = {**cur, f"k{i}": i}
        elif b == "coroutine" and mode == "async":
            cur = {**cur, f"co{i}": i}
    return cur


# ---------------------------------------------------------------- hostile hooks
HOOK = ["none", "raise", "coroutine", "coroutine_raises", "junk", "bad_block", "sleep",
        "mutate"]


def make_hook(i: int, b: str) -> Any:
    if b == "coroutine":
        async def co(**kw: Any) -> Any:
            return None
        return co
    if b == "coroutine_raises":
        async def cor(**kw: Any) -> Any:
            raise MwError(f"async hook {i}")
        return cor

    def cb(**kw: Any) -> Any:
        if b == "none":
            return None
        if b == "raise":
            raise MwError(f"hook {i}")
        if b == "junk":
            return [object(), 42]
        if b == "bad_block":
            return {"action": "not-block", "message": 7}
        if b == "sleep":
            time.sleep(0.00005)
            return None
        if b == "mutate":
            for k in ("request", "args", "middleware_trace"):
                if k in kw:
                    kw[k]["x"] = 1  # read-only view: TypeError
            return None
        raise AssertionError(b)
    return cb


LLM_HOOKS = ["pre_api_request", "post_api_request", "api_request_error"]
TOOL_HOOKS = ["pre_tool_call", "post_tool_call", "transform_tool_result"]

scenario = st.fixed_dictionaries({
    "rewrites": st.lists(st.sampled_from(REWRITE), max_size=3),
    "exec": st.lists(st.sampled_from(EXEC), max_size=4),
    "hooks": st.lists(st.tuples(st.integers(0, 2), st.sampled_from(HOOK)), max_size=4),
    "base_fails": st.booleans(),
    "raise_errors": st.booleans(),
})


def build(op: str, sc: dict[str, Any], mode: str) -> tuple[list[Layer], list[Layer]]:
    key = PAYLOAD_KEY[op]
    rk, ek = ("llm_request", "llm_execution") if op == "llm" else ("tool_request",
                                                                   "tool_execution")
    mw = [make_layer(rk, make_rewrite(key, i, b), "hostile") for i, b in enumerate(sc["rewrites"])]
    mw += [make_layer(ek, make_exec(ek, key, i, b, mode), "hostile")
           for i, b in enumerate(sc["exec"])]
    names = LLM_HOOKS if op == "llm" else TOOL_HOOKS
    hooks = [make_layer(names[n], make_hook(i, b), "hostile")
             for i, (n, b) in enumerate(sc["hooks"])]
    return mw, hooks


def run_case(h: Harness, op: str, mode: str, sc: dict[str, Any], name: str) -> None:
    EXAMPLES_RUN[name] = EXAMPLES_RUN.get(name, 0) + 1
    mw, hooks = build(op, sc, mode)
    h.reset(mw, hooks)
    pipe = h.pipeline
    start = {"model": "m", "messages": [{"role": "user", "content": "hi"}]} if op == "llm" \
        else {"q": "v", "n": [1, 2]}
    pristine = copy.deepcopy(start)
    seen: list[Any] = []
    error = HostError("host")
    result_obj = ("base-result",)

    def base(p: Any) -> Any:
        seen.append(p)
        if sc["base_fails"]:
            raise error
        return result_obj

    async def abase(p: Any) -> Any:
        await asyncio.sleep(0)
        return base(p)

    raise_errors = sc["raise_errors"] or op == "llm"
    try:
        if op == "llm":
            if mode == "sync":
                got: Any = pipe.run_llm(start, base, provider="p")
            else:
                got = asyncio.run(pipe.arun_llm(start, abase, provider="p"))
        elif mode == "sync":
            got = pipe.run_tool("t", start, base, tool_call_id="c", raise_errors=raise_errors)
        else:
            got = asyncio.run(pipe.arun_tool("t", start, abase, tool_call_id="c",
                                             raise_errors=raise_errors))
        outcome: tuple[str, Any] = ("ok", got)
    except HostError as exc:
        assert exc is error  # the host's own exception object, not a wrapper
        outcome = ("err", exc)
    # (any other exception escapes and fails the property: host sees only its own errors)

    expected, calls, entered = model_exec(sc["exec"], ("err", error) if sc["base_fails"]
                                          else ("ok", result_obj), mode)
    if op == "tool" and not raise_errors and expected[0] == "err":
        expected = ("ok", "Tool Error: host")
    assert outcome == expected, (sc, outcome, expected)
    assert len(seen) == calls <= 1, (sc, len(seen), calls)  # base runs at most once
    if seen:  # nothing lost: the base saw exactly the rewrites that were valid
        assert seen[0] == model_rewrites(sc["rewrites"], pristine, mode), (sc, seen[0])
    assert start == pristine  # the host's payload was never mutated

    spans = h.spans()
    op_prefix = "chat" if op == "llm" else "execute_tool"
    assert sum(s.name.startswith(op_prefix) for s in spans) == 1, [s.name for s in spans]
    kinds = [s.attributes.get("otelmw.middleware.kind") for s in spans]
    assert sum(k in ("llm_request", "tool_request") for k in kinds) == len(sc["rewrites"])
    assert sum(k in ("llm_execution", "tool_execution") for k in kinds) == entered, (sc, kinds)
    assert h.lifecycle.open == set(), sc  # every span started was ended
    assert not h.complaints, (sc, h.complaints)  # no double end / detach


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("mode", MODES)
@SETTINGS
@given(sc=scenario)
def test_hostile_chain(harness: Harness, mode: str, op: str, sc: dict[str, Any]) -> None:
    run_case(harness, op, mode, sc, f"{mode}_{op}")


def test_hypothesis_example_budget() -> None:
    """Runs last in this module: the four properties above ran >= 10,000 examples."""
    if len(EXAMPLES_RUN) < 4:
        pytest.skip("properties not run in this session (selected subset)")
    total = sum(EXAMPLES_RUN.values())
    report = os.environ.get("OTELMW_RELIABILITY_REPORT")
    if report:
        with open(report, "a") as fh:
            fh.write(json.dumps({"test": "hypothesis", "examples": EXAMPLES_RUN,
                                 "total": total}) + "\n")
    if EXAMPLES >= 2500:
        assert total >= 10_000, EXAMPLES_RUN


# ===================================================== part 2: hostile results / inputs
HOSTILE_PROGRAM = textwrap.dedent(r"""
    import asyncio, decimal, json, os, sys, time
    from otelmw import Pipeline, RuntimeMiddlewareRegistry
    from otelmw.core.results import NormalizedToolResult
    from otelmw.telemetry.export import guard
    from otelmw.telemetry.setup.configuration import configure

    pipe = Pipeline(normalizers=RuntimeMiddlewareRegistry())
    tel = configure("hostile", pipeline=pipe)
    SURR = "bad\ud800text\udcff"
    MB = 1024 * 1024

    class Vendor:  # a normalizer whose metadata is hostile too
        runtime_id = "vendor"
        def normalize(self, result, tool_name, ctx):
            meta = {f"k{i}": ("v" * 10_000 if i % 2 else SURR) for i in range(100)}
            meta[SURR + "K" * 1000] = 1
            meta["obj"] = object()
            return NormalizedToolResult(content=result, metadata=meta, raw_result=result)

    pipe.normalizers.register("vendor", Vendor())

    def rewrite(**kw):
        return {kw["args"].__class__ is dict and "args" or "args": dict(kw["args"]),
                "reason": SURR * 5000, "source": SURR + "s" * 5000}

    def llm_rewrite(**kw):
        return {"request": dict(kw["request"]), "reason": "r" * 100_000}

    def passthrough(**kw):
        return kw["next_call"]()

    def hook(**kw):
        return None

    for kind, cb in (("tool_request", rewrite), ("llm_request", llm_rewrite),
                     ("tool_execution", passthrough), ("llm_execution", passthrough)):
        pipe.registry.add_middleware(kind, cb, "hostile" + SURR)
    for name in ("pre_api_request", "post_api_request", "api_request_error", "pre_tool_call",
                 "post_tool_call", "transform_tool_result"):
        pipe.registry.add_hook(name, hook, "hostile")

    class Hostile:
        def __str__(self):
            raise RuntimeError("no str")
        __repr__ = __str__
        def __eq__(self, other):
            raise RuntimeError("no eq")
        __hash__ = object.__hash__

    class BadDump:
        def model_dump(self, **kw):
            raise RuntimeError("no dump")

    class HostileExc(Exception):
        def __str__(self):
            raise RuntimeError("no str")

    def deep(n):
        root = cur = []
        for _ in range(n):
            nxt = []
            cur.append(nxt)
            cur = nxt
        return root

    cyc = {}
    cyc["self"] = cyc
    lst = []
    lst.append(lst)

    def results():
        yield "big_str", "x" * (100 * MB)
        yield "big_bytes", b"y" * (100 * MB)
        yield "big_in_dict", {"blob": "z" * (10 * MB), "n": 1}
        yield "cycle_dict", cyc
        yield "cycle_list", lst
        yield "deep", deep(100_000)
        yield "object", object()
        yield "set", {1, 2, "a"}
        yield "decimal", decimal.Decimal("1.5")
        yield "hostile", Hostile()
        yield "bad_dump", BadDump()
        yield "bytes", b"\xff\xfe\x00"
        yield "bytearray", bytearray(b"\x80\x81")
        yield "memoryview", memoryview(b"abc")
        yield "exc_value", ValueError("returned, not raised")
        yield "exc_surrogate", ValueError(SURR)
        yield "hostile_exc", HostileExc()
        yield "surrogate_str", SURR
        yield "surrogate_dict", {"k": SURR, SURR: 1, 1: "int key", None: "none key"}
        yield "mixed_keys", {1: "a", "1": "b", (1, 2): "tuple"}

    def raises():
        yield "big_msg", ValueError("m" * (100 * MB))
        yield "fs_name", FileNotFoundError(2, "No such file", os.fsdecode(b"/tmp/\xff\xfe.txt"))
        yield "hostile_exc", HostileExc()
        yield "surrogate_msg", RuntimeError(SURR)

    ARGS = ['{"a": ', "[1, 2]", '"\\ud800"', '{"a": "\\ud800"}', b"\xff\xfe", b'{"a": 1}',
            12345, None, "", '{"a": "' + "w" * (10 * MB) + '"}', [("a", 1)], object(),
            {"a": SURR, SURR: [SURR]}, {"cyc": cyc}]
    out = {"calls": 0, "raised": []}

    def call(label, fn):
        out["calls"] += 1
        try:
            return fn()
        except BaseException as exc:
            out["raised"].append(f"{label}: {type(exc).__name__}: {str(exc)[:200]}")

    with pipe.turn("agent" + SURR, session_id=SURR):
        for name, value in results():
            for rt in (None, "vendor"):
                call(f"result {name} {rt}", lambda: pipe.run_tool(
                    "tool_" + name, {"q": 1}, lambda a: value, tool_call_id=SURR,
                    runtime_id=rt))
            if not name.startswith("big"):
                call(f"aresult {name}", lambda: asyncio.run(pipe.arun_tool(
                    "tool_" + name, {"q": 1}, lambda a: value, runtime_id="vendor")))
            del value
        for name, exc in raises():
            def boom(a, exc=exc):
                raise exc
            call(f"raise {name}", lambda: pipe.run_tool("raiser_" + name, {}, boom))
        for i, args in enumerate(ARGS):
            call(f"args {i}", lambda: pipe.run_tool("args_tool", args, lambda a: "ok"))
        call("tool name surrogate", lambda: pipe.run_tool("tool" + SURR, {}, lambda a: 1))
        call("tool name 1MB", lambda: pipe.run_tool("T" * MB, {}, lambda a: 1,
                                                    tool_call_id="C" * MB))
        REQS = [{"model": "m" + SURR, "messages": [{"role": "user", "content": SURR}]},
                {"model": "M" * MB, "messages": []},
                {"model": "m", "messages": [{"content": "c" * (10 * MB)}]},
                {"model": "m", "messages": cyc},
                {"model": "m", "messages": [Hostile(), BadDump(), b"\xff"]}]
        RESPS = [{"id": "i" * MB, "model": "r" + SURR,
                  "choices": [{"finish_reason": "f" * 10_000}] * 1000,
                  "usage": {"prompt_tokens": 10 ** 30, "completion_tokens": -5}},
                 {"id": SURR, "model": 5, "choices": "nope", "usage": "many"},
                 Hostile(), BadDump(), b"\xff", ValueError("as response"), cyc]
        for i, req in enumerate(REQS):
            for j, resp in enumerate(RESPS):
                call(f"llm {i}/{j}", lambda: pipe.run_llm(req, lambda r: resp, provider=SURR))
    out["failures"] = {"/".join(k): v for k, v in pipe.failures.counts.items()}
    t0 = time.monotonic()
    out["shutdown_ok"] = tel.shutdown(timeout_s=30)
    out["shutdown_s"] = time.monotonic() - t0
    out["drops"] = {f"{s}/{r}": n for (s, r), n in guard.drop_counts().items()}
    print(json.dumps(out), flush=True)
""")

SPAN_ATTR_LIMIT = 128
STR_LIMIT = 4096


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)


# 1 invoke_agent; tool calls: 3 spans each (execute_tool, tool_request, tool_execution) except
# the 6 whose arguments are rejected (execute_tool only); LLM calls: 3 spans each.
TOOL_CALLS, BAD_ARGS, LLM_CALLS = 20 * 2 + 17 + 4 + 14 + 2, 6, 5 * 7
EXPECTED_SPANS = 1 + 3 * (TOOL_CALLS - BAD_ARGS) + BAD_ARGS + 3 * LLM_CALLS


@pytest.mark.parametrize("capture", ["NO_CONTENT", "SPAN_AND_EVENT"])
def test_hostile_results_and_inputs_export_cleanly(tmp_path: Path, capture: str) -> None:
    """Nothing raises into the agent, every span reaches the receiver (no batch is
    lost to a lone surrogate or an oversized string), and every exported string is
    within the documented bound."""
    with OtlpReceiver() as rx:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OTELMW_"))}
        env.update(OTELMW_HOME=str(tmp_path), OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint,
                   OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=capture,
                   OTELMW_HOOK_EVENTS="all", OTEL_METRIC_EXPORT_INTERVAL="60000")
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-c", HOSTILE_PROGRAM], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=240)
        elapsed = time.monotonic() - t0
        assert proc.returncode == 0, proc.stderr[-4000:]
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        spans = rx.wait_for_spans(EXPECTED_SPANS, timeout=10)
        logs = rx.logs()
    assert out["raised"] == [], out["raised"]
    assert out["calls"] == TOOL_CALLS + LLM_CALLS
    assert out["shutdown_ok"] is True
    assert out["drops"] == {}, out["drops"]  # no batch failed
    assert len(spans) == EXPECTED_SPANS
    assert logs, "hook events exported"
    problems = []
    for sp in spans:
        if len(sp.attributes) > SPAN_ATTR_LIMIT:
            problems.append(("attr count", sp.name[:40], len(sp.attributes)))
        for text in _strings([sp.name, sp.status_message, sp.attributes]):
            if len(text) > STR_LIMIT:
                problems.append(("span string", sp.name[:40], len(text)))
    for log in logs:
        for text in _strings([log.event_name, log.body, log.attributes]):
            if len(text) > STR_LIMIT:
                problems.append(("log string", log.event_name, len(text)))
    assert not problems, problems[:20]
    captured = [sp for sp in spans if "gen_ai.tool.call.result" in sp.attributes]
    assert bool(captured) == (capture == "SPAN_AND_EVENT")
    report = os.environ.get("OTELMW_RELIABILITY_REPORT")
    if report:
        with open(report, "a") as fh:
            fh.write(json.dumps({"test": f"hostile-export:{capture}", "spans": len(spans),
                                 "logs": len(logs), "elapsed_s": elapsed,
                                 "encode_error_lines": proc.stderr.count("Failed to encode"),
                                 "max_name": max(len(x.name) for x in spans)}) + "\n")


# ------------------------------------------------------------ in-process catalogue
def _catalogue() -> Iterator[tuple[str, Any]]:
    surr = "bad\ud800text\udcff"
    cyc: dict[str, Any] = {}
    cyc["self"] = cyc

    class Hostile:
        def __str__(self) -> str:
            raise RuntimeError("no str")

        __repr__ = __str__

    class BadDump:
        def model_dump(self, **kw: Any) -> Any:
            raise RuntimeError("no dump")

    yield "big_str", "x" * (100 * 1024 * 1024)
    yield "big_bytes", b"y" * (100 * 1024 * 1024)
    yield "cycle", cyc
    yield "hostile", Hostile()
    yield "bad_dump", BadDump()
    yield "surrogates", {"k": surr, surr: [surr, b"\xff"]}
    yield "exception", ValueError(surr)
    yield "set", {1, "a"}


def test_digest_render_normalize_never_raise_and_stay_bounded() -> None:
    from otelmw.core.results import MiddlewareContext, PassThroughMiddleware
    from otelmw.telemetry.content.digests import digest
    from otelmw.telemetry.content.policy import ContentPolicy

    policy = ContentPolicy("SPAN_AND_EVENT", 4096)
    for name, value in _catalogue():
        t0 = time.perf_counter()
        d, size = digest(value)
        took = time.perf_counter() - t0
        assert d.startswith(("sha256-keyed:", "sha256-keyed-sampled:",
                             "sha256-keyed-prefix:")), name
        assert isinstance(size, int)
        assert took < 1.0, (name, took)  # capped at OTELMW_DIGEST_MAX_BYTES (4 MiB)
        text = policy.render(value)
        assert isinstance(text, str) and len(text) <= 4096, name
        n = PassThroughMiddleware().normalize(value, "t", MiddlewareContext("t", "x"))
        assert n.raw_result is value


# ------------------------------------------------------------ absurdly deep inputs
def test_deeply_nested_json_arguments_become_a_tool_error() -> None:
    pipe = Pipeline()
    got = pipe.run_tool("t", "[" * 100_000, lambda a: "ran")
    assert isinstance(got, str) and got.startswith("Tool Error: ")


def test_deeply_nested_dict_arguments_reach_the_tool() -> None:
    pipe = Pipeline()
    pipe.registry.add_middleware("tool_execution", lambda **kw: kw["next_call"](), "p")
    args: dict[str, Any] = {}
    cur = args
    for _ in range(5000):
        cur["a"] = {}
        cur = cur["a"]
    assert pipe.run_tool("t", args, lambda a: "ran") == "ran"


# ------------------------------------------------------------------------ plugins
PLUGIN_MODULES = {
    "relp_good": "def register(ctx):\n"
                 "    ctx.register_middleware('tool_execution', wrap)\n"
                 "def wrap(**kw):\n"
                 "    return ('good', kw['next_call']())\n",
    "relp_import_error": "raise ImportError('relp_import_error needs a missing dependency')\n",
    "relp_raising": "def register(ctx):\n    raise RuntimeError('register exploded')\n",
    "relp_bad_kind": "def register(ctx):\n"
                     "    ctx.register_middleware('tool_executoin', lambda **kw: None)\n",
    "relp_half": "def register(ctx):\n"
                 "    ctx.register_middleware('tool_execution', half)\n"
                 "    ctx.register_hook('post_tool_cal', lambda **kw: None)\n"
                 "    ctx.register_hook('post_tool_call', lambda **kw: SEEN.append(1))\n"
                 "SEEN = []\n"
                 "def half(**kw):\n"
                 "    return ('half', kw['next_call']())\n",
    "relp_not_callable": "register = 42\n",
}
ENTRY_POINTS = {
    "good": "relp_good:register",
    "import-error": "relp_import_error:register",
    "missing-module": "relp_no_such_module_xyz:register",
    "raising": "relp_raising:register",
    "bad-kind": "relp_bad_kind:register",
    "half": "relp_half:register",
    "not-callable": "relp_not_callable",
}


@pytest.fixture
def plugin_dist(tmp_path: Path) -> Iterator[Path]:
    """A real installed distribution (dist-info on sys.path) with otelmw.plugins entry
    points, discovered by ``importlib.metadata`` like any pip-installed plugin."""
    site = install_distribution(tmp_path / "site", "otelmw-reliability-plugins",
                                {PLUGINS: ENTRY_POINTS},
                                {f"{name}.py": code for name, code in PLUGIN_MODULES.items()})
    sys.path.insert(0, str(site))
    try:
        yield tmp_path / "home"
    finally:
        sys.path.remove(str(site))
        for name in PLUGIN_MODULES:
            sys.modules.pop(name, None)


def test_broken_plugins_are_disabled_with_a_clear_message_others_load(
        plugin_dist: Path, caplog: pytest.LogCaptureFixture) -> None:
    from otelmw import PluginManager

    pipe = Pipeline()
    pm = PluginManager(pipe, home=plugin_dist)
    for name in ENTRY_POINTS:
        pm.set_enabled(name, True)
    with caplog.at_level(logging.WARNING, logger="otelmw"):
        status = pm.reload()
    assert status["good"].loaded and status["good"].error is None
    assert status["good"].middleware == ["tool_execution:good.wrap"]
    # an unknown hook name rejects that one registration (warned), not the plugin
    assert status["half"].loaded and status["half"].error is None
    assert status["half"].middleware == ["tool_execution:half.half"]
    assert [h.split(":")[0] for h in status["half"].hooks] == ["post_tool_call"]
    assert len(status["half"].rejected) == 1
    half_warnings = [r.getMessage() for r in caplog.records if "'post_tool_cal'" in r.getMessage()]
    assert len(half_warnings) == 1, half_warnings
    assert "plugin 'half'" in half_warnings[0]
    assert "did you mean 'post_tool_call'?" in half_warnings[0]
    assert all(name in half_warnings[0] for name in HOOK_NAMES)
    assert status["half"].rejected == half_warnings
    expected = {"import-error": "ImportError: relp_import_error needs a missing dependency",
                "missing-module": "ModuleNotFoundError",
                "raising": "RuntimeError: register exploded",
                "bad-kind": "unknown middleware kind 'tool_executoin'",
                "not-callable": "no register(ctx) callable"}
    for name, text in expected.items():
        st_ = status[name]
        assert not st_.loaded and st_.enabled, name
        assert st_.error is not None and text in st_.error, (name, st_.error)
        assert any(f"plugin {name!r} disabled" in r.getMessage() and text in r.getMessage()
                   for r in caplog.records), (name, [r.getMessage() for r in caplog.records])
    # the good plugin's layer and half's valid registrations
    layers = pipe.registry.all_layers()
    assert sorted(x.name for x in layers if x.kind == "tool_execution") == ["good.wrap",
                                                                            "half.half"]
    assert pipe.run_tool("t", {}, lambda a: "base") == ("good", ("half", "base"))
    assert sys.modules["relp_half"].SEEN == [1]  # half's valid hook ran
    # reload is idempotent and keeps working with the broken ones still present
    assert pm.reload()["good"].loaded
    assert sorted(x.name for x in pipe.registry.all_layers()
                  if x.kind == "tool_execution") == ["good.wrap", "half.half"]


@pytest.mark.parametrize("kind", ["tool_executoin", "LLM_REQUEST", "", None, 3, "post_tool_call"])
def test_a_plugin_cannot_register_for_a_kind_that_does_not_exist(kind: Any) -> None:
    from otelmw import PluginManager

    pipe = Pipeline()

    def register(ctx: Any) -> None:
        ctx.register_middleware(kind, lambda **kw: None)

    with pytest.raises(ValueError, match=r"plugin 'typo'.*unknown middleware kind"):
        PluginManager(pipe, home=Path("/nonexistent-otelmw-home")).add_plugin("typo", register)
    with pytest.raises(ValueError, match="unknown middleware kind"):
        pipe.registry.add_middleware(kind, lambda **kw: None, "direct")
    with pytest.raises(ValueError, match="unknown hook name"):
        pipe.registry.add_hook(kind if kind != "post_tool_call" else "post_tool_cal",
                               lambda **kw: None, "direct")
    assert pipe.registry.all_layers() == []
    assert pipe.run_tool("t", {}, lambda a: "base") == "base"

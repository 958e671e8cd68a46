"""Hostile values from middleware, hooks and the host's own arguments: nothing a
callback returns and no argument the model or host passes makes otelmw raise into
the host's call. Each fault fails open, is logged once and counted."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from _support.calls import MODES, OPS, PAYLOAD_KEY, named, run_call

from otelmw import Pipeline, RuntimeMiddlewareRegistry

pytestmark = pytest.mark.timeout(60)

LLM_HOOKS = ["pre_api_request", "post_api_request", "api_request_error"]
TOOL_HOOKS = ["pre_tool_call", "post_tool_call", "transform_tool_result"]


class HostError(Exception):
    pass


class Boom(Exception):
    pass


class CloseRaises:
    """An awaitable (a coroutine-like object) whose ``close()`` raises."""

    def __await__(self) -> Iterator[None]:
        yield None

    def close(self) -> None:
        raise Boom("close")


class AttributesRaise:
    """An awaitable whose every attribute lookup raises."""

    def __await__(self) -> Iterator[None]:
        yield None

    def __getattribute__(self, name: str) -> Any:
        raise Boom(f"attribute {name}")


class ClassRaises:
    """``__class__`` raises: ``isinstance`` against an ABC (``Awaitable``) looks it up."""

    @property  # type: ignore[misc]
    def __class__(self) -> Any:
        raise Boom("__class__")


class EqRaises:
    def __eq__(self, other: object) -> bool:
        raise Boom("__eq__")

    __hash__ = object.__hash__


class GetRaises(dict):  # type: ignore[type-arg]
    def get(self, *a: Any, **k: Any) -> Any:
        raise Boom("get")


class HostileStr(str):
    def __str__(self) -> str:
        raise Boom("__str__")

    def __eq__(self, other: object) -> bool:
        raise Boom("__eq__")

    __hash__ = str.__hash__


def _sync_returns() -> dict[str, Any]:
    return {"close_raises": CloseRaises, "attributes_raise": AttributesRaise,
            "class_raises": ClassRaises}


DIRECTIVES = {
    "action_eq_raises": lambda: {"action": EqRaises(), "message": "m"},
    "get_raises": lambda: GetRaises(action="block", message="m"),
    "message_hostile_str": lambda: {"action": "block", "message": HostileStr("no")},
    "class_raises": ClassRaises,
}


@pytest.fixture
def pipe() -> Pipeline:
    return Pipeline(normalizers=RuntimeMiddlewareRegistry())


def _call(p: Pipeline, hook: str, mode: str) -> Any:
    """The hook point's call; returns what the host got (or its own error)."""
    if hook in LLM_HOOKS:
        def base(req: Any) -> Any:
            if hook == "api_request_error":
                raise HostError("provider")
            return {"id": "r"}
        try:
            return run_call(p, mode, "llm", {"model": "m", "messages": []}, base, model=None)
        except HostError as exc:
            return exc
    return run_call(p, mode, "tool", {"q": 1}, lambda a: "tool-ok", tool="t", tool_call_id=None)


def _expect(hook: str, got: Any) -> None:
    if hook == "api_request_error":
        assert isinstance(got, HostError)
    elif hook in LLM_HOOKS:
        assert got == {"id": "r"}
    else:
        assert type(got) is str and got == "tool-ok"


def _assert_counted_once(p: Pipeline, hook: str, caplog: pytest.LogCaptureFixture) -> None:
    counts = {k: v for k, v in p.failures.counts.items() if k[0] == "hook"}
    assert counts == {("hook", hook, "x.hostile"): 1}, counts
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING
                and r.name == "otelmw" and "x.hostile" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("returned", sorted(_sync_returns()))
@pytest.mark.parametrize("hook", LLM_HOOKS + TOOL_HOOKS)
def test_hostile_hook_return_fails_open(pipe: Pipeline, hook: str, returned: str, mode: str,
                                        caplog: pytest.LogCaptureFixture) -> None:
    """Sync: the awaitable cannot run (closed, counted); async: it is awaited, and
    what it yields or raises is the hook's, counted once either way."""
    make = _sync_returns()[returned]

    def hostile(**kw: Any) -> Any:
        return make()

    named(hostile, "hostile")
    pipe.registry.add_hook(hook, hostile, "x")
    caplog.set_level(logging.WARNING, "otelmw")
    _expect(hook, _call(pipe, hook, mode))
    if mode == "async" and returned == "close_raises":
        # A valid awaitable (yields once, returns None): awaited, nothing to count.
        assert pipe.failures.total() == 0
        return
    _assert_counted_once(pipe, hook, caplog)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("directive", sorted(DIRECTIVES))
def test_hostile_block_directive_fails_open(
        pipe: Pipeline, mode: str, directive: str, caplog: pytest.LogCaptureFixture) -> None:
    make = DIRECTIVES[directive]

    def hostile(**kw: Any) -> Any:
        return make()

    named(hostile, "hostile")
    pipe.registry.add_hook("pre_tool_call", hostile, "x")
    ran: list[Any] = []

    def tool(a: Any) -> str:
        ran.append(a)
        return "tool-ok"

    caplog.set_level(logging.WARNING, "otelmw")
    if directive in ("message_hostile_str", "get_raises"):
        # A valid block by its content (a str subclass message, a dict subclass whose
        # ``.get`` raises): honoured, the host gets a plain str.
        got = (pipe.run_tool("t", {"q": 1}, tool) if mode == "sync"
               else asyncio.run(pipe.arun_tool("t", {"q": 1}, tool)))
        assert type(got) is str and got == ("no" if directive == "message_hostile_str"
                                            else "m")
        assert ran == [] and pipe.failures.total() == 0
        return
    got = (pipe.run_tool("t", {"q": 1}, tool) if mode == "sync"
           else asyncio.run(pipe.arun_tool("t", {"q": 1}, tool)))
    assert type(got) is str and got == "tool-ok" and ran == [{"q": 1}]
    _assert_counted_once(pipe, "pre_tool_call", caplog)


@pytest.mark.parametrize("mode", MODES)
def test_hostile_transform_string_reaches_the_host_as_a_plain_str(
        pipe: Pipeline, mode: str) -> None:
    pipe.registry.add_hook("transform_tool_result", lambda **kw: HostileStr("new"), "x")
    got = (pipe.run_tool("t", {"q": 1}, lambda a: "tool-ok") if mode == "sync"
           else asyncio.run(pipe.arun_tool("t", {"q": 1}, lambda a: "tool-ok")))
    assert type(got) is str
    assert str.__eq__(got, "new")


class LookupsRaise(dict):  # type: ignore[type-arg]
    """A dict subclass whose Python-level lookups all raise."""

    def __contains__(self, key: object) -> bool:
        raise Boom("__contains__")

    def __iter__(self) -> Iterator[Any]:
        raise Boom("__iter__")

    def get(self, *a: Any, **k: Any) -> Any:
        raise Boom("get")

    def items(self) -> Any:
        raise Boom("items")

    def keys(self) -> Any:
        raise Boom("keys")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", OPS)
def test_hostile_rewrite_return_fails_open(
        pipe: Pipeline, mode: str, op: str, caplog: pytest.LogCaptureFixture) -> None:
    """A request middleware returning a dict subclass whose lookups raise, around a
    payload that is itself such a subclass: the base call gets the rewrite's
    content (a valid replacement by content) or the original, never an error."""
    key = PAYLOAD_KEY[op]
    new = {"model": "m", "messages": [], "x": 1} if op == "llm" else {"q": 2}

    def hostile(**kw: Any) -> Any:
        return LookupsRaise({key: LookupsRaise(new), "source": "s"})

    named(hostile, "hostile")
    pipe.registry.add_middleware(f"{op}_request", hostile, "x")
    seen: list[Any] = []

    def base(p: Any) -> str:
        seen.append(dict(p))
        return "ok"

    caplog.set_level(logging.WARNING, "otelmw")
    payload = {"model": "m", "messages": []} if op == "llm" else {"q": 1}
    if op == "llm":
        got = (pipe.run_llm(payload, base) if mode == "sync"
               else asyncio.run(pipe.arun_llm(payload, base)))
    else:
        got = (pipe.run_tool("t", payload, base) if mode == "sync"
               else asyncio.run(pipe.arun_tool("t", payload, base)))
    assert got == "ok"
    assert seen == [new]
    assert pipe.failures.total() == 0


# ------------------------------------------------------- element-wise values (item 10)
class Ambiguous:
    """What ``==`` of a pandas Series / numpy array returns: no truth value."""

    def __bool__(self) -> bool:
        raise ValueError("The truth value of a Series is ambiguous. "
                         "Use a.empty, a.bool(), a.item(), a.any() or a.all().")


class FrameLike:
    """A pandas-like mapping: ``keys()``/``[]`` like a Series, ``==`` element-wise."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def keys(self) -> Any:
        return self._data.keys()

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> Any:  # type: ignore[override]
        return Ambiguous()

    __ne__ = __eq__  # type: ignore[assignment]
    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        raise ValueError("The truth value of a DataFrame is ambiguous.")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("observed", [False, True])
def test_pandas_like_tool_arguments_reach_the_tool(mode: str, observed: bool) -> None:
    from _support.telemetry import TelemetryHarness

    h = TelemetryHarness("SPAN_AND_EVENT")
    try:
        p = h.pipeline
        if not observed:
            p.observer = None
        frame = FrameLike({"a": 1})

        def rewrite(args: Any, **kw: Any) -> Any:
            return {"args": {**args, "frame": FrameLike({"b": 2})}}

        p.registry.add_middleware("tool_request", rewrite, "x")
        p.registry.add_hook("post_tool_call", lambda **kw: None, "x")
        seen: list[Any] = []

        def tool(a: Any) -> str:
            seen.append(a)
            return "ok"

        args = FrameLike({"q": 1, "frame": frame})
        got = (p.run_tool("t", args, tool) if mode == "sync"
               else asyncio.run(p.arun_tool("t", args, tool)))
        assert got == "ok"
        assert p.failures.total() == 0, p.failures.counts
        assert [sorted(a) for a in seen] == [["frame", "q"]]
        assert isinstance(seen[0]["frame"], FrameLike) and seen[0]["frame"]["b"] == 2
        if observed:
            (span,) = h.named("execute_tool t")
            (rw,) = h.named("tool_request x.rewrite")
            assert rw.attributes["otelmw.rewrite.changed_keys"] == ("frame",)
            assert span.status.status_code.name == "UNSET"
    finally:
        h.close()


@pytest.mark.parametrize("args", [FrameLike({}), HostileStr(""), b"", bytearray()])
def test_empty_or_hostile_arguments_are_an_empty_object(pipe: Pipeline, args: Any) -> None:
    seen: list[Any] = []
    pipe.registry.add_hook("post_tool_call", lambda **kw: None, "x")
    assert pipe.run_tool("t", args, lambda a: seen.append(a) or "ok") == "ok"
    assert seen == [{}]


# ------------------------------------------------- out-of-range numbers (item 11)
HUGE_PROGRAM = r"""
import json, sys
from otelmw import Pipeline, RuntimeMiddlewareRegistry
from otelmw.core.results import NormalizedToolResult
from otelmw.telemetry.export import guard
from otelmw.telemetry.setup.configuration import configure

pipe = Pipeline(normalizers=RuntimeMiddlewareRegistry())
tel = configure("huge", pipeline=pipe)

class Vendor:
    runtime_id = "vendor"
    def normalize(self, result, tool_name, ctx):
        return NormalizedToolResult(content=result, raw_result=result, metadata={
            "big": 2 ** 70, "neg": -(2 ** 64), "ok": 5, "edge": 2 ** 63 - 1,
            "digits": 10 ** 5000, "f": 1.5})

pipe.normalizers.register("vendor", Vendor())
with pipe.turn("agent"):
    for i in range(3):
        pipe.run_llm({"model": "m", "messages": [], "max_tokens": 2 ** 70,
                      "temperature": 0.5}, lambda r: {"id": "x"}, provider="openai",
                     server_address="127.0.0.1", server_port=2 ** 70)
        pipe.run_tool("t", {"q": 1}, lambda a: "ok", runtime_id="vendor")
ok = tel.shutdown(timeout_s=30)
print(json.dumps({"shutdown_ok": ok,
                  "drops": {f"{s}/{r}": n for (s, r), n in guard.drop_counts().items()}}))
"""


def test_out_of_range_numbers_are_bounded_at_the_source(tmp_path: Any) -> None:
    """``max_tokens=2**70``, a huge server port and huge ints in normalizer metadata:
    every span reaches the real receiver through the stock OTLP exporter with no
    ``Value out of range`` encode error; in-range values are kept."""
    import json
    import os
    import subprocess
    import sys

    from _support.otlp_receiver import OtlpReceiver

    with OtlpReceiver() as rx:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OTELMW_"))}
        env.update(OTELMW_HOME=str(tmp_path), OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint,
                   OTEL_METRIC_EXPORT_INTERVAL="60000", PYTHONPATH=os.environ.get(
                       "PYTHONPATH", ""))
        proc = subprocess.run([sys.executable, "-c", HUGE_PROGRAM], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-4000:]
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        spans = rx.wait_for_spans(1 + 3 * 2, timeout=10)
    assert "out of range" not in proc.stderr and "Failed to encode" not in proc.stderr, (
        proc.stderr[-3000:])
    assert out["shutdown_ok"] is True and out["drops"] == {}
    chats = [s for s in spans if s.name == "chat m"]
    tools = [s for s in spans if s.name == "execute_tool t"]
    assert len(chats) == 3 and len(tools) == 3
    for s in chats:
        assert s.attributes["gen_ai.request.temperature"] == 0.5
        assert "gen_ai.request.max_tokens" not in s.attributes
        assert "server.port" not in s.attributes
        assert s.attributes["server.address"] == "127.0.0.1"
    prefix = "otelmw.result.metadata."
    for s in tools:
        meta = {k[len(prefix):]: v for k, v in s.attributes.items() if k.startswith(prefix)}
        assert meta["ok"] == 5 and meta["edge"] == 2 ** 63 - 1 and meta["f"] == 1.5
        assert meta["big"] == str(2 ** 70) and meta["neg"] == str(-(2 ** 64))
        assert isinstance(meta["digits"], str) and len(meta["digits"]) <= 256

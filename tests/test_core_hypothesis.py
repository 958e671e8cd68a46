"""Property tests: random middleware stacks against a reference model of the contract.

A stack is 0-5 request middleware and 0-5 execution middleware with random
behaviours, over an LLM or a tool call whose base either returns or raises a
unique exception. A small model computes what the contract promises (host
outcome, payload at the base, number of base calls, failure count, trace
length); the pipeline must match it exactly on the sync and the async path.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from dataclasses import dataclass
from typing import Any

import pytest
from _support.calls import (
    ASYNC,
    EXEC_KIND,
    MODES,
    OPS,
    ORIGINAL_KEY,
    PAYLOAD_KEY,
    PRE_HOOK,
    REQUEST_KIND,
    callback,
    host_payload,
    named,
    run_call,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otelmw import Pipeline

REQ_BEHAVIOURS = ["rewrite", "none", "raise", "bad_shape", "mutate"]
EXEC_BEHAVIOURS = ["pass", "raise_before", "raise_after", "bad_return", "double_next_call",
                   "short_circuit", "mutate_payload"]
# On the async path these may also be plain (sync) callbacks returning next_call's awaitable.
SYNC_OK_IN_ASYNC = {"pass", "raise_before", "bad_return", "short_circuit", "mutate_payload"}


class MiddlewareBug(Exception):
    """Raised deliberately by a misbehaving middleware."""


class BaseFailure(Exception):
    """Raised by the base call; each example creates a unique instance."""


@dataclass(frozen=True)
class Layer:
    behaviour: str
    variant: int  # picks the bad shape / mutation; for exec: sync-callback flag on async path


request_layers = st.lists(
    st.builds(Layer, st.sampled_from(REQ_BEHAVIOURS), st.integers(0, 3)), max_size=5)
execution_layers = st.lists(
    st.builds(Layer, st.sampled_from(EXEC_BEHAVIOURS), st.integers(0, 3)), max_size=5)


# ------------------------------------------------------------------ middleware


def make_request_mw(layer: Layer, i: int, kind: str, use_async: bool) -> Any:
    key, orig = PAYLOAD_KEY[kind], ORIGINAL_KEY[kind]

    def body(**kw: Any) -> Any:
        b = layer.behaviour
        if b == "rewrite":
            p = kw[key]
            return {key: {**p, "path": [*p["path"], f"r{i}"]}, "source": f"src{i}",
                    "reason": "test"}
        if b == "none":
            return None
        if b == "raise":
            raise MiddlewareBug(f"request {i}")
        if b == "bad_shape":
            good = {**kw[key], "path": ["BAD-SHAPE-APPLIED"]}
            return ["a string", {"model": "x"}, {key: "not a dict"}, {key: good, "x": 1}][
                layer.variant]
        # mutate: try to change what we were given in place
        target = kw[key] if layer.variant % 2 == 0 else kw[orig]
        if layer.variant < 2:
            target["path"].append("evil")
        else:
            target["model"] = "evil"
        return None

    name = f"req{i}_{layer.behaviour}"
    if use_async and layer.variant % 2 == 0:
        return callback(ASYNC, name, body)
    return named(body, name)


def make_exec_mw(layer: Layer, i: int, kind: str, use_async: bool, values: dict[str, Any]
                 ) -> Any:
    key, orig = PAYLOAD_KEY[kind], ORIGINAL_KEY[kind]
    b = layer.behaviour

    def tagged(p: Any) -> dict[str, Any]:
        return {**p, "path": [*p["path"], f"E{i}"]}

    def sync_cb(**kw: Any) -> Any:
        nc, p = kw["next_call"], kw[key]
        if b == "pass":
            return nc(tagged(p))
        if b == "raise_before":
            raise MiddlewareBug(f"before {i}")
        if b == "raise_after":
            nc(p)
            raise MiddlewareBug(f"after {i}")
        if b == "bad_return":
            return values[f"junk{i}"]
        if b == "double_next_call":
            with contextlib.suppress(Exception):
                nc(p)
            return nc(p)
        if b == "short_circuit":
            return values[f"sc{i}"]
        kw[orig]["path"].append("evil")  # mutate_payload: the original is read-only
        return nc(p)

    async def async_cb(**kw: Any) -> Any:
        nc, p = kw["next_call"], kw[key]
        await asyncio.sleep(0)
        if b == "pass":
            return await nc(tagged(p))
        if b == "raise_before":
            raise MiddlewareBug(f"before {i}")
        if b == "raise_after":
            await nc(p)
            raise MiddlewareBug(f"after {i}")
        if b == "bad_return":
            return values[f"junk{i}"]
        if b == "double_next_call":
            with contextlib.suppress(Exception):
                await nc(p)
            return await nc(p)
        if b == "short_circuit":
            return values[f"sc{i}"]
        kw[orig]["path"].append("evil")
        return await nc(p)

    cb: Any = async_cb if use_async and not (b in SYNC_OK_IN_ASYNC and layer.variant % 2) \
        else sync_cb
    named(cb, f"exec{i}_{b}")
    return cb


# ------------------------------------------------------------------ reference model


@dataclass
class Expected:
    ok: bool
    value: Any  # the result object (ok) or the exception object (not ok)
    base_path: list[str] | None  # path the base received, None when not called
    failures: int


def model_requests(layers: list[Layer]) -> tuple[list[str], int, int]:
    path = [f"r{i}" for i, layer in enumerate(layers) if layer.behaviour == "rewrite"]
    failures = sum(layer.behaviour in ("raise", "bad_shape", "mutate") for layer in layers)
    return path, failures, len(path)


def model_execution(layers: list[Layer], i: int, path: list[str], values: dict[str, Any]
                    ) -> Expected:
    if i == len(layers):
        if "base_error" in values:
            return Expected(False, values["base_error"], path, 0)
        return Expected(True, values["base_result"], path, 0)
    b = layers[i].behaviour
    if b == "pass":
        return model_execution(layers, i + 1, [*path, f"E{i}"], values)
    if b in ("raise_before", "mutate_payload"):
        inner = model_execution(layers, i + 1, path, values)
        inner.failures += 1
        return inner
    if b in ("raise_after", "double_next_call"):
        inner = model_execution(layers, i + 1, path, values)
        if inner.ok:
            inner.failures += 1  # post-processing failure: downstream result kept
        return inner
    if b == "bad_return":
        return Expected(True, values[f"junk{i}"], None, 0)
    return Expected(True, values[f"sc{i}"], None, 0)  # short_circuit


# ------------------------------------------------------------------------ runner


def run_example(mode: str, kind: str, req: list[Layer], exe: list[Layer],
                base_raises: bool) -> None:
    values: dict[str, Any] = {"base_result": object()}
    if base_raises:
        values["base_error"] = BaseFailure("unique base failure")
    for i in range(len(exe)):
        values[f"junk{i}"] = ("junk", i, object())
        values[f"sc{i}"] = object()

    p = Pipeline()
    use_async = mode == "async"
    for i, layer in enumerate(req):
        p.registry.add_middleware(REQUEST_KIND[kind], make_request_mw(layer, i, kind, use_async),
                                  plugin="hyp")
    for i, layer in enumerate(exe):
        p.registry.add_middleware(EXEC_KIND[kind],
                                  make_exec_mw(layer, i, kind, use_async, values), plugin="hyp")
    traces: list[int] = []
    p.registry.add_hook(PRE_HOOK[kind], lambda **kw: traces.append(len(kw["middleware_trace"])),
                        plugin="hyp")

    base_calls: list[Any] = []

    def base(payload: Any) -> Any:
        base_calls.append(copy.deepcopy(payload))
        if base_raises:
            raise values["base_error"]
        return values["base_result"]

    host = host_payload()

    req_path, req_failures, n_rewrites = model_requests(req)
    expected = model_execution(exe, 0, req_path, values)

    try:
        result = run_call(p, mode, kind, host, base, raise_errors=True)
    except BaseFailure as exc:
        assert not expected.ok, "host got the base's exception but the model expected a result"
        assert exc is expected.value
    except BaseException as exc:  # anything else is a contract violation
        raise AssertionError(f"host saw a foreign exception {exc!r}") from exc
    else:
        assert expected.ok, f"host got {result!r}, expected the base exception"
        assert result is expected.value

    assert len(base_calls) <= 1
    if expected.base_path is None:
        assert base_calls == []
    else:
        assert base_calls == [{**host_payload(), "path": expected.base_path}]
    assert host == host_payload()
    assert traces == [n_rewrites]
    assert p.failures.total() == req_failures + expected.failures


COMMON = settings(max_examples=300, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.function_scoped_fixture,
                                         HealthCheck.too_slow])


@pytest.mark.parametrize("mode", MODES)
@COMMON
@given(kind=st.sampled_from(OPS), req=request_layers, exe=execution_layers,
       base_raises=st.booleans())
def test_random_middleware_stack_matches_contract(
    mode: str, kind: str, req: list[Layer], exe: list[Layer], base_raises: bool
) -> None:
    run_example(mode, kind, req, exe, base_raises)

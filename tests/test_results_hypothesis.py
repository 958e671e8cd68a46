"""Property: whatever a tool returns or raises, the normalizing pipeline never raises.

Results are arbitrary: nested dicts/lists/tuples, bytes, None, floats including
nan/inf, cyclic structures, objects without ``__dict__``, multi-megabyte strings,
objects whose ``__str__``/``__repr__`` raise, and exceptions with hostile
``__str__``. They go through ``Pipeline.run_tool`` and ``Pipeline.arun_tool`` with
a registered normalizer, a registered ``PassThroughMiddleware``, an unregistered
runtime and the native bypass, while a ``post_tool_call`` hook and a memory
adapter watch every call.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from typing import Any

import pytest
from _support.hostile import (
    HostileBoth,
    HostileRepr,
    HostileStr,
    HostileStrError,
    NonStrStrError,
    ReprRaisesHostileError,
)
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from otelmw import ListMemoryAdapter, Pipeline
from otelmw.core.results import (
    MiddlewareContext,
    NormalizedToolResult,
    PassThroughMiddleware,
    RuntimeMiddlewareRegistry,
)

SETTINGS = settings(max_examples=200, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))

NORMALIZED_RT = "vendor_harness"
PASSTHROUGH_RT = "passthrough_harness"
RUNTIMES = [NORMALIZED_RT, PASSTHROUGH_RT, "unregistered_harness", None, "praisonai"]


# ---------------------------------------------------- objects of unusual shape

class Slotted:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 1


def _cyclic_dict() -> Any:
    d: dict[str, Any] = {"name": "loop"}
    d["self"] = d
    return d


def _cyclic_list() -> Any:
    xs: list[Any] = [1, 2]
    xs.append(xs)
    return xs


def _mutual_cycle() -> Any:
    d: dict[str, Any] = {}
    xs: list[Any] = [d]
    d["items"] = xs
    d["status"] = "ok"
    d["data"] = xs
    return d


BUILDERS: dict[str, Any] = {
    "cyclic_dict": _cyclic_dict,
    "cyclic_list": _cyclic_list,
    "mutual_cycle": _mutual_cycle,
    "object": object,
    "slotted": Slotted,
    "hostile_str": HostileStr,
    "hostile_repr": HostileRepr,
    "hostile_both": HostileBoth,
    "repr_raises_hostile_error": ReprRaisesHostileError,
    "exception_value": lambda: ValueError("returned, not raised"),
    "hostile_exception_value": HostileStrError,
    "nan": lambda: float("nan"),
}


@dataclass(frozen=True)
class Make:
    """A placeholder built into a fresh object inside the test (printable by hypothesis)."""

    kind: str
    mb: int = 0

    def build(self) -> Any:
        if self.kind == "huge_string":
            return "x" * (self.mb * 1_000_000)
        return BUILDERS[self.kind]()


def materialize(spec: Any) -> Any:
    if isinstance(spec, Make):
        return spec.build()
    if isinstance(spec, list):
        return [materialize(x) for x in spec]
    if isinstance(spec, tuple):
        return tuple(materialize(x) for x in spec)
    if isinstance(spec, dict):
        return {k: materialize(v) for k, v in spec.items()}
    return spec


plain_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.binary(max_size=20),
)
leaves = st.one_of(plain_leaves, st.sampled_from(sorted(BUILDERS)).map(Make))
trees = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(st.text(max_size=8), children, max_size=4),
    ),
    max_leaves=20,
)
vendor_shaped = st.fixed_dictionaries(
    {"status": st.sampled_from(["ok", "error"])},
    optional={"data": trees, "message": trees, "region": trees},
)
# A few examples (about 3 in 40) carry a 1-10 MB string, alone or in a vendor payload.
huge = st.sampled_from([1, 3, 10]).map(lambda mb: Make("huge_string", mb))


def _pick(choice: int, tree: Any, vendor: Any, big: Make) -> Any:
    if choice == 0:
        return big
    if choice == 1:
        return {"status": "ok", "data": big}
    if choice == 2:
        return {"status": "error", "message": big}
    return vendor if choice % 2 else tree


results = st.builds(_pick, st.integers(0, 39), trees, vendor_shaped, huge)

TOOL_OUTCOMES = ["return", "return", "return", "return", "raise_normal", "raise_hostile_str",
                 "raise_non_str_str", "raise_empty_message", "raise_huge_message"]
NORMALIZER_MODES = ["realistic", "realistic", "realistic", "realistic", "raises", "returns_garbage",
                    "returns_failure"]


# ------------------------------------------------------------------ the pipeline

class VendorNormalizer:
    """A realistic harness normalizer that touches the result (and so may fail)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    @property
    def runtime_id(self) -> str:
        return NORMALIZED_RT

    def normalize(self, result: Any, tool_name: str,
                  ctx: MiddlewareContext) -> NormalizedToolResult:
        if self.mode == "raises":
            raise KeyError(tool_name)
        if self.mode == "returns_garbage":
            return {"content": result}  # type: ignore[return-value]
        if self.mode == "returns_failure":
            return NormalizedToolResult(content=None, success=False,
                                        error_message="vendor said no", raw_result=result)
        preview = repr(result)[:80]  # hostile objects make this raise
        meta = {"vendor": "acme", "preview": preview, "size": sys.getsizeof(result),
                "elapsed": ctx.execution_time_ms}
        if isinstance(result, dict) and result.get("status") == "error":
            return NormalizedToolResult(content=None, success=False,
                                        error_message=str(result.get("message")),
                                        metadata=meta, raw_result=result)
        content = result.get("data", result) if isinstance(result, dict) else result
        return NormalizedToolResult(content=content, metadata=meta, raw_result=result)


class Observed:
    def __init__(self, normalizer_mode: str) -> None:
        reg = RuntimeMiddlewareRegistry()
        reg.register(NORMALIZED_RT, VendorNormalizer(normalizer_mode))
        reg.register(PASSTHROUGH_RT, PassThroughMiddleware(PASSTHROUGH_RT))
        self.p = Pipeline(normalizers=reg)
        self.memory = ListMemoryAdapter()
        self.p.add_memory_adapter(self.memory)
        self.post: list[dict[str, Any]] = []
        self.p.registry.add_hook("post_tool_call", self._hook, plugin="t")

    def _hook(self, **payload: Any) -> None:
        self.post.append(payload)


def _exception(outcome: str) -> BaseException:
    return {
        "raise_normal": lambda: RuntimeError("vendor tool failed"),
        "raise_hostile_str": HostileStrError,
        "raise_non_str_str": NonStrStrError,
        "raise_empty_message": ValueError,
        "raise_huge_message": lambda: ValueError("e" * 2_000_000),
    }[outcome]()


def _check(obs: Observed, out: Any, raw: Any, exc: BaseException | None) -> None:
    assert len(obs.post) == 1
    assert len(obs.memory.records) == 1
    payload = obs.post[0]
    normalized = payload["normalized"]
    assert isinstance(normalized, NormalizedToolResult)
    assert obs.memory.records[0][0] is normalized
    assert out is payload["result"]
    if exc is not None:
        assert normalized.success is False
        assert normalized.raw_result is exc
        assert isinstance(out, str) and out.startswith("Tool Error: ")
        assert isinstance(normalized.error_message, str)
    elif normalized.success:
        assert normalized.raw_result is raw
    else:
        assert isinstance(out, str) and out.startswith("Tool Error: ")


def _run_one(mode: str, spec: Any, outcome: str, runtime: str | None,
             normalizer_mode: str) -> None:
    obs = Observed(normalizer_mode)
    raw = materialize(spec)
    exc = None if outcome == "return" else _exception(outcome)

    def sync_tool(args: dict[str, Any]) -> Any:
        if exc is not None:
            raise exc
        return raw

    async def async_tool(args: dict[str, Any]) -> Any:
        await asyncio.sleep(0)
        return sync_tool(args)

    if mode == "run_tool":
        out = obs.p.run_tool("search_docs", {"q": "x"}, sync_tool, runtime_id=runtime)
    else:
        fn = async_tool if mode == "arun_tool_async" else sync_tool
        out = asyncio.run(obs.p.arun_tool("search_docs", {"q": "x"}, fn, runtime_id=runtime))
    _check(obs, out, raw, exc)


def _run(mode: str, spec: Any, outcome: str, normalizer_mode: str) -> None:
    """Every example goes through each runtime: normalizer, passthrough, none, bypass."""
    for runtime in RUNTIMES:
        _run_one(mode, spec, outcome, runtime, normalizer_mode)


def with_explicit_examples(test: Any) -> Any:
    """Always cover every hostile kind, every tool outcome and the largest string."""
    for kind in sorted(BUILDERS):
        test = example(spec=Make(kind), outcome="return", normalizer_mode="realistic")(test)
        test = example(spec={"status": "error", "message": Make(kind)}, outcome="return",
                       normalizer_mode="realistic")(test)
    for outcome in sorted(set(TOOL_OUTCOMES) - {"return"}):
        test = example(spec=None, outcome=outcome, normalizer_mode="realistic")(test)
    for mode in sorted(set(NORMALIZER_MODES)):
        test = example(spec={"status": "ok", "data": Make("huge_string", 10)},
                       outcome="return", normalizer_mode=mode)(test)
    return test


# The entry point: ``run_tool``, or ``arun_tool`` with an async or a sync tool.
ENTRY_POINTS = ["run_tool", "arun_tool_async", "arun_tool_sync"]


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@SETTINGS
@given(spec=results, outcome=st.sampled_from(TOOL_OUTCOMES),
       normalizer_mode=st.sampled_from(NORMALIZER_MODES))
@with_explicit_examples
def test_tool_entry_point_never_raises_on_arbitrary_results(
        entry: str, spec: Any, outcome: str, normalizer_mode: str) -> None:
    _run(entry, spec, outcome, normalizer_mode)

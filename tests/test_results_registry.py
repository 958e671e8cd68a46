"""The runtime tool-result contract: data shapes and the middleware registry.

Each test states one row or rule of
``shared/reference/runtime-tool-result-middleware.md`` (PraisonAI's runtime tool
result middleware), as implemented by ``otelmw.core.results``.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import random
import threading
import time
import types
import typing
from typing import Any, Optional

import pytest

from otelmw.core.results import (
    MiddlewareContext,
    NormalizedToolResult,
    PassThroughMiddleware,
    RuntimeMiddlewareRegistry,
    RuntimeToolResultMiddleware,
    get_default_middleware_registry,
    get_middleware,
    register_middleware,
)

_NO_DEFAULT = object()


def _canonical(tp: Any) -> Any:
    """Compare ``Optional[str]`` with ``str | None`` and ``Dict`` with ``dict``."""
    origin = typing.get_origin(tp)
    if origin is None:
        return tp
    if origin in (typing.Union, types.UnionType):
        return ("union", frozenset(_canonical(a) for a in typing.get_args(tp)))
    return (origin, tuple(_canonical(a) for a in typing.get_args(tp)))


def _field_table(cls: type) -> dict[str, tuple[Any, Any]]:
    """name -> (resolved type, default value or _NO_DEFAULT / 'factory')."""
    hints = typing.get_type_hints(cls)
    out: dict[str, tuple[Any, Any]] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            default: Any = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = "factory"
        else:
            default = _NO_DEFAULT
        out[f.name] = (hints[f.name], default)
    return out


# ----------------------------------------------------------------- MiddlewareContext

# The document's table: field, type, default ("factory" = computed per instance).
MIDDLEWARE_CONTEXT_TABLE: list[tuple[str, Any, Any]] = [
    ("tool_name", str, _NO_DEFAULT),
    ("runtime_id", str, _NO_DEFAULT),
    ("agent_id", Optional[str], None),  # noqa: UP045
    ("session_id", Optional[str], None),  # noqa: UP045
    ("execution_time_ms", float, 0.0),
    ("timestamp", float, "factory"),
    ("metadata", dict[str, Any], "factory"),
]

NORMALIZED_RESULT_TABLE: list[tuple[str, Any, Any]] = [
    ("content", Any, _NO_DEFAULT),
    ("success", bool, True),
    ("error_message", Optional[str], None),  # noqa: UP045
    ("metadata", dict[str, Any], "factory"),
    ("execution_time_ms", float, 0.0),
    ("timestamp", float, "factory"),
    ("raw_result", Optional[Any], None),  # noqa: UP045
]


FIELD_TABLES = [(MiddlewareContext, MIDDLEWARE_CONTEXT_TABLE),
                (NormalizedToolResult, NORMALIZED_RESULT_TABLE)]


@pytest.mark.parametrize(("cls", "table"), FIELD_TABLES,
                         ids=[cls.__name__ for cls, _ in FIELD_TABLES])
def test_dataclass_has_exactly_the_documented_fields_in_order(
        cls: type, table: list[tuple[str, Any, Any]]) -> None:
    # The order is part of the contract: otelmw itself builds results positionally.
    assert [f.name for f in dataclasses.fields(cls)] == [row[0] for row in table]


@pytest.mark.parametrize(("cls", "name", "tp", "default"),
                         [(cls, *row) for cls, table in FIELD_TABLES for row in table],
                         ids=[f"{cls.__name__}.{row[0]}" for cls, table in FIELD_TABLES
                              for row in table])
def test_field_type_and_default(cls: type, name: str, tp: Any, default: Any) -> None:
    actual_tp, actual_default = _field_table(cls)[name]
    assert _canonical(actual_tp) == _canonical(tp)
    if default is _NO_DEFAULT or default == "factory":
        assert actual_default is default or actual_default == default
    else:
        assert actual_default == default
        assert type(actual_default) is type(default)


def test_middleware_context_tool_name_and_runtime_id_are_required() -> None:
    with pytest.raises(TypeError):
        MiddlewareContext()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        MiddlewareContext(tool_name="t")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        MiddlewareContext(runtime_id="r")  # type: ignore[call-arg]


def test_middleware_context_defaults_on_a_fresh_instance() -> None:
    ctx = MiddlewareContext(tool_name="lookup", runtime_id="my_plugin_harness")
    assert ctx.tool_name == "lookup"
    assert ctx.runtime_id == "my_plugin_harness"
    assert ctx.agent_id is None
    assert ctx.session_id is None
    assert ctx.execution_time_ms == 0.0 and type(ctx.execution_time_ms) is float
    assert ctx.metadata == {} and type(ctx.metadata) is dict


def test_middleware_context_timestamp_defaults_to_time_at_construction() -> None:
    before = time.time()
    ctx = MiddlewareContext(tool_name="t", runtime_id="r")
    after = time.time()
    assert type(ctx.timestamp) is float
    assert before <= ctx.timestamp <= after
    time.sleep(0.01)
    later = MiddlewareContext(tool_name="t", runtime_id="r")
    assert later.timestamp > ctx.timestamp


def test_middleware_context_metadata_default_is_a_fresh_dict_per_instance() -> None:
    a = MiddlewareContext(tool_name="t", runtime_id="r")
    b = MiddlewareContext(tool_name="t", runtime_id="r")
    assert a.metadata is not b.metadata
    a.metadata["k"] = 1
    assert b.metadata == {}
    assert MiddlewareContext(tool_name="t", runtime_id="r").metadata == {}


def test_middleware_context_accepts_every_field_by_keyword() -> None:
    md = {"retry": 2}
    ctx = MiddlewareContext(tool_name="t", runtime_id="r", agent_id="assistant",
                            session_id="s-1", execution_time_ms=12.5, timestamp=123.0,
                            metadata=md)
    assert (ctx.agent_id, ctx.session_id, ctx.execution_time_ms, ctx.timestamp) == (
        "assistant", "s-1", 12.5, 123.0)
    assert ctx.metadata is md


# -------------------------------------------------------------- NormalizedToolResult

def test_normalized_result_content_is_required() -> None:
    with pytest.raises(TypeError):
        NormalizedToolResult()  # type: ignore[call-arg]


def test_normalized_result_defaults_on_a_fresh_instance() -> None:
    r = NormalizedToolResult(content="hello")
    assert r.content == "hello"
    assert r.success is True
    assert r.error_message is None
    assert r.metadata == {} and type(r.metadata) is dict
    assert r.execution_time_ms == 0.0 and type(r.execution_time_ms) is float
    assert r.raw_result is None


def test_normalized_result_content_may_be_none() -> None:
    r = NormalizedToolResult(content=None, success=False, error_message="boom")
    assert r.content is None and r.success is False and r.error_message == "boom"


def test_normalized_result_timestamp_defaults_to_time_at_construction() -> None:
    before = time.time()
    r = NormalizedToolResult(content=1)
    after = time.time()
    assert type(r.timestamp) is float
    assert before <= r.timestamp <= after
    time.sleep(0.01)
    assert NormalizedToolResult(content=1).timestamp > r.timestamp


def test_normalized_result_metadata_default_is_a_fresh_dict_per_instance() -> None:
    a = NormalizedToolResult(content=1)
    b = NormalizedToolResult(content=2)
    assert a.metadata is not b.metadata
    a.metadata["vendor"] = "x"
    assert b.metadata == {}
    assert NormalizedToolResult(content=3).metadata == {}


def test_normalized_result_keeps_raw_result_identity() -> None:
    raw = {"status": "ok", "data": [1, 2]}
    r = NormalizedToolResult(content=raw["data"], raw_result=raw)
    assert r.raw_result is raw


# ------------------------------------------------------------------------ registry

class HarnessMiddleware:
    """The document's Quick Start middleware, parameterised by runtime id."""

    def __init__(self, runtime_id: str = "my_plugin_harness") -> None:
        self._rid = runtime_id

    @property
    def runtime_id(self) -> str:
        return self._rid

    def normalize(self, result: Any, tool_name: str,
                  ctx: MiddlewareContext) -> NormalizedToolResult:
        if isinstance(result, dict) and result.get("status") == "error":
            return NormalizedToolResult(content=None, success=False,
                                        error_message=result.get("message"),
                                        metadata={"vendor": "my_harness"}, raw_result=result)
        data = result.get("data", result) if isinstance(result, dict) else result
        return NormalizedToolResult(content=data, raw_result=result)


class OtherHarnessMiddleware(HarnessMiddleware):
    pass


def test_documented_middleware_satisfies_the_protocol() -> None:
    assert isinstance(HarnessMiddleware(), RuntimeToolResultMiddleware)
    assert isinstance(PassThroughMiddleware(), RuntimeToolResultMiddleware)


def test_register_returns_none_and_get_middleware_returns_it() -> None:
    reg = RuntimeMiddlewareRegistry()
    mw = HarnessMiddleware()
    assert reg.register("my_plugin_harness", mw) is None
    assert reg.get_middleware("my_plugin_harness") is mw


def test_unregister_returns_true_when_removed_and_false_when_absent() -> None:
    reg = RuntimeMiddlewareRegistry()
    reg.register("my_plugin_harness", HarnessMiddleware())
    assert reg.unregister("my_plugin_harness") is True
    assert reg.unregister("my_plugin_harness") is False
    assert reg.unregister("never_registered") is False
    assert not reg.has_middleware("my_plugin_harness")


def test_get_middleware_returns_passthrough_when_absent() -> None:
    reg = RuntimeMiddlewareRegistry()
    mw = reg.get_middleware("unknown_runtime")
    assert isinstance(mw, PassThroughMiddleware)
    assert isinstance(mw, RuntimeToolResultMiddleware)
    reg.register("my_plugin_harness", HarnessMiddleware())
    reg.unregister("my_plugin_harness")
    assert isinstance(reg.get_middleware("my_plugin_harness"), PassThroughMiddleware)


def test_passthrough_passes_content_through_with_raw_result_set() -> None:
    mw = RuntimeMiddlewareRegistry().get_middleware("unknown_runtime")
    raw = {"vendor": "shape", "nested": [1, {"a": None}]}
    ctx = MiddlewareContext(tool_name="lookup", runtime_id="unknown_runtime",
                            execution_time_ms=7.0)
    out = mw.normalize(raw, "lookup", ctx)
    assert isinstance(out, NormalizedToolResult)
    assert out.content is raw
    assert out.raw_result is raw
    assert out.success is True
    assert out.error_message is None
    assert out.metadata == {}


def test_passthrough_keeps_none_and_falsy_results() -> None:
    mw = PassThroughMiddleware()
    ctx = MiddlewareContext(tool_name="t", runtime_id="r")
    for raw in (None, 0, "", [], False):
        out = mw.normalize(raw, "t", ctx)
        assert out.content is raw and out.raw_result is raw and out.success is True


def test_has_middleware_reflects_registration() -> None:
    reg = RuntimeMiddlewareRegistry()
    assert reg.has_middleware("my_plugin_harness") is False
    reg.register("my_plugin_harness", HarnessMiddleware())
    assert reg.has_middleware("my_plugin_harness") is True
    assert reg.has_middleware("other") is False


def test_list_runtimes_lists_registered_ids() -> None:
    reg = RuntimeMiddlewareRegistry()
    assert reg.list_runtimes() == []
    reg.register("a_harness", HarnessMiddleware("a_harness"))
    reg.register("b_harness", HarnessMiddleware("b_harness"))
    listed = reg.list_runtimes()
    assert isinstance(listed, list)
    assert sorted(listed) == ["a_harness", "b_harness"]
    listed.append("mutating-the-copy")
    assert sorted(reg.list_runtimes()) == ["a_harness", "b_harness"]


def test_clear_drops_all_registrations() -> None:
    reg = RuntimeMiddlewareRegistry()
    reg.register("a_harness", HarnessMiddleware("a_harness"))
    reg.register("b_harness", HarnessMiddleware("b_harness"))
    assert reg.clear() is None
    assert reg.list_runtimes() == []
    assert not reg.has_middleware("a_harness")
    assert isinstance(reg.get_middleware("a_harness"), PassThroughMiddleware)


@pytest.fixture
def default_registry() -> typing.Iterator[RuntimeMiddlewareRegistry]:
    """The process-wide registry, restored to its prior content afterwards."""
    reg = get_default_middleware_registry()
    before = {rid: reg.get_middleware(rid) for rid in reg.list_runtimes()}
    yield reg
    reg.clear()
    for rid, mw in before.items():
        reg.register(rid, mw)


def test_module_helpers_work_on_the_default_registry(
        default_registry: RuntimeMiddlewareRegistry) -> None:
    assert isinstance(default_registry, RuntimeMiddlewareRegistry)
    assert get_default_middleware_registry() is default_registry
    mw = HarnessMiddleware("helper_harness")
    assert register_middleware("helper_harness", mw) is None
    assert default_registry.has_middleware("helper_harness")
    assert "helper_harness" in default_registry.list_runtimes()
    assert get_middleware("helper_harness") is mw
    assert isinstance(get_middleware("helper_harness_absent"), PassThroughMiddleware)
    assert default_registry.unregister("helper_harness") is True
    assert isinstance(get_middleware("helper_harness"), PassThroughMiddleware)


def test_module_helpers_validate_like_the_registry(
        default_registry: RuntimeMiddlewareRegistry) -> None:
    with pytest.raises(ValueError):
        register_middleware("praisonai", HarnessMiddleware("praisonai"))
    with pytest.raises(ValueError):
        register_middleware("helper_harness", HarnessMiddleware("another_harness"))
    assert not default_registry.has_middleware("helper_harness")


def test_register_with_mismatched_runtime_id_raises_value_error() -> None:
    reg = RuntimeMiddlewareRegistry()
    with pytest.raises(ValueError, match="my_plugin_harness"):
        reg.register("other_harness", HarnessMiddleware("my_plugin_harness"))
    assert reg.list_runtimes() == []


def test_register_object_without_runtime_id_raises_value_error() -> None:
    class NoRuntimeId:
        def normalize(self, result: Any, tool_name: str,
                      ctx: MiddlewareContext) -> NormalizedToolResult:
            return NormalizedToolResult(content=result)

    reg = RuntimeMiddlewareRegistry()
    with pytest.raises(ValueError):
        reg.register("my_plugin_harness", NoRuntimeId())  # type: ignore[arg-type]
    assert reg.list_runtimes() == []


def test_register_object_without_normalize_raises_type_error() -> None:
    class NoNormalize:
        runtime_id = "my_plugin_harness"

    class NormalizeNotCallable:
        runtime_id = "my_plugin_harness"
        normalize = "not a function"

    reg = RuntimeMiddlewareRegistry()
    for bad in (NoNormalize(), NormalizeNotCallable(), object(), None, 42):
        with pytest.raises(TypeError):
            reg.register("my_plugin_harness", bad)  # type: ignore[arg-type]
    assert reg.list_runtimes() == []


def test_register_for_praisonai_raises_value_error() -> None:
    reg = RuntimeMiddlewareRegistry()
    with pytest.raises(ValueError, match="praisonai"):
        reg.register("praisonai", HarnessMiddleware("praisonai"))
    with pytest.raises(ValueError):
        reg.register("praisonai", PassThroughMiddleware("praisonai"))
    assert not reg.has_middleware("praisonai")
    assert reg.list_runtimes() == []


def test_replacing_a_registration_logs_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    reg = RuntimeMiddlewareRegistry()
    first = HarnessMiddleware("my_plugin_harness")
    second = OtherHarnessMiddleware("my_plugin_harness")
    with caplog.at_level(logging.WARNING, logger="otelmw"):
        reg.register("my_plugin_harness", first)
        assert [r for r in caplog.records if r.name == "otelmw"] == []
        reg.register("my_plugin_harness", second)
    warnings = [r for r in caplog.records
                if r.name == "otelmw" and r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "my_plugin_harness" in warnings[0].getMessage()
    assert reg.get_middleware("my_plugin_harness") is second
    assert reg.list_runtimes() == ["my_plugin_harness"]


def test_first_registration_logs_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    reg = RuntimeMiddlewareRegistry()
    with caplog.at_level(logging.DEBUG, logger="otelmw"):
        reg.register("a_harness", HarnessMiddleware("a_harness"))
        reg.register("b_harness", HarnessMiddleware("b_harness"))
    assert [r for r in caplog.records
            if r.name == "otelmw" and r.levelno >= logging.WARNING] == []


def test_concurrent_register_get_unregister_is_safe_and_consistent(
        caplog: pytest.LogCaptureFixture) -> None:
    threads_n, ops = 16, 500
    reg = RuntimeMiddlewareRegistry()
    shared_ids = [f"shared_{i}" for i in range(4)]
    shared = {rid: HarnessMiddleware(rid) for rid in shared_ids}
    barrier = threading.Barrier(threads_n)
    errors: list[BaseException] = []
    final_private: dict[str, HarnessMiddleware | None] = {}
    lock = threading.Lock()

    def worker(n: int) -> None:
        rng = random.Random(n)
        mine = [f"t{n}_{i}" for i in range(5)]
        mws = {rid: HarnessMiddleware(rid) for rid in mine}
        state: dict[str, HarnessMiddleware | None] = dict.fromkeys(mine)
        try:
            barrier.wait()
            for _ in range(ops):
                op = rng.randrange(6)
                rid = rng.choice(mine)
                if op == 0:
                    reg.register(rid, mws[rid])
                    state[rid] = mws[rid]
                elif op == 1:
                    removed = reg.unregister(rid)
                    assert removed is (state[rid] is not None)
                    state[rid] = None
                elif op == 2:
                    got = reg.get_middleware(rid)
                    expected = state[rid]
                    assert got is expected if expected is not None else isinstance(
                        got, PassThroughMiddleware)
                    assert reg.has_middleware(rid) is (expected is not None)
                elif op == 3:
                    sid = rng.choice(shared_ids)
                    reg.register(sid, shared[sid])
                    got = reg.get_middleware(sid)
                    assert got is shared[sid] or isinstance(got, PassThroughMiddleware)
                elif op == 4:
                    reg.unregister(rng.choice(shared_ids))
                else:
                    listed = reg.list_runtimes()
                    assert len(listed) == len(set(listed))
                    for r in mine:
                        assert (r in listed) is (state[r] is not None)
            with lock:
                final_private.update(state)
        except BaseException as exc:
            with lock:
                errors.append(exc)

    with caplog.at_level(logging.WARNING, logger="otelmw"):
        workers = [threading.Thread(target=worker, args=(n,)) for n in range(threads_n)]
        for t in workers:
            t.start()
        for t in workers:
            t.join(timeout=60)
    assert not any(t.is_alive() for t in workers)
    assert errors == []
    listed = reg.list_runtimes()
    assert len(listed) == len(set(listed))
    for rid, mw in final_private.items():
        if mw is None:
            assert rid not in listed
            assert not reg.has_middleware(rid)
            assert isinstance(reg.get_middleware(rid), PassThroughMiddleware)
        else:
            assert rid in listed
            assert reg.get_middleware(rid) is mw
    for sid in shared_ids:
        assert reg.has_middleware(sid) is (sid in listed)
        if sid in listed:
            assert reg.get_middleware(sid) is shared[sid]
    assert set(listed) <= set(final_private) | set(shared_ids)
    # Re-registering the same object is not a replacement: no warning for it.
    assert [r for r in caplog.records
            if r.name == "otelmw" and r.levelno >= logging.WARNING] == []


# ------------------------------------------- the installed PraisonAI module, name by name

_PRAISONAI_MODULES = ("praisonaiagents.runtime.middleware",
                      "praisonaiagents.runtime.middleware_registry")


def _praisonai_public_names() -> dict[str, Any]:
    """Every public name PraisonAI's two runtime middleware modules define (not imports)."""
    from _support.components import require_module

    names: dict[str, Any] = {}
    for module_name in _PRAISONAI_MODULES:
        module = require_module(module_name)
        for name, obj in vars(module).items():
            if not name.startswith("_") and getattr(obj, "__module__", None) == module_name:
                names[name] = obj
    return names


def _params(fn: Any) -> list[tuple[str, Any, Any]]:
    sig = inspect.signature(fn)
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


@pytest.mark.host("praisonai")
def test_results_defines_every_name_of_praisonai_runtime_middleware() -> None:
    import otelmw.core.results

    theirs = _praisonai_public_names()
    assert {"MiddlewareRegistry", "PassThroughMiddleware", "NormalizedToolResult",
            "MiddlewareContext", "RuntimeToolResultMiddleware", "get_middleware",
            "register_middleware", "get_default_middleware_registry"} <= set(theirs)
    missing = sorted(n for n in theirs if not hasattr(otelmw.core.results, n))
    assert missing == []
    import otelmw
    assert otelmw.MiddlewareRegistry is otelmw.core.results.MiddlewareRegistry


@pytest.mark.host("praisonai")
@pytest.mark.parametrize("name", ["MiddlewareRegistry", "PassThroughMiddleware",
                                  "NormalizedToolResult", "MiddlewareContext",
                                  "RuntimeToolResultMiddleware", "get_middleware",
                                  "register_middleware", "get_default_middleware_registry"])
def test_results_name_has_praisonai_shape(name: str) -> None:
    import otelmw.core.results

    theirs = _praisonai_public_names()[name]
    ours = getattr(otelmw.core.results, name)
    if inspect.isfunction(theirs):
        assert _params(ours) == _params(theirs)
        return
    if dataclasses.is_dataclass(theirs):
        def fields(cls: Any) -> list[tuple[str, Any]]:
            return [(f.name, f.default if f.default is not dataclasses.MISSING
                     else type(f.default_factory())  # type: ignore[misc]
                     if f.default_factory is not dataclasses.MISSING else _NO_DEFAULT)
                    for f in dataclasses.fields(cls)]
        assert fields(ours) == fields(theirs)
    public = [m for m, v in vars(theirs).items()
              if (not m.startswith("_") or m == "__init__")
              and (inspect.isfunction(v) or isinstance(v, property))]
    assert public or dataclasses.is_dataclass(theirs), name
    for member in public:
        their_member = inspect.getattr_static(theirs, member)
        our_member = inspect.getattr_static(ours, member, None)
        assert our_member is not None, f"{name}.{member} is missing"
        if isinstance(their_member, property):
            assert isinstance(our_member, property), f"{name}.{member} is not a property"
        elif inspect.isfunction(their_member) and not dataclasses.is_dataclass(theirs):
            assert _params(our_member) == _params(their_member), f"{name}.{member}"


@pytest.mark.host("praisonai")
def test_passthrough_defaults_are_praisonai_defaults() -> None:
    theirs = _praisonai_public_names()
    import otelmw.core.results as ours

    assert ours.PassThroughMiddleware().runtime_id == theirs["PassThroughMiddleware"]().runtime_id
    for module in (ours, None):
        registry = (ours.MiddlewareRegistry() if module is not None
                    else theirs["MiddlewareRegistry"]())
        assert registry.get_middleware("never_registered").runtime_id == "praisonai"
    assert ours.get_middleware("never_registered").runtime_id == \
        theirs["get_middleware"]("never_registered").runtime_id
    ctx_ours = ours.MiddlewareContext("t", "r")
    raw = {"k": [1]}
    a = ours.PassThroughMiddleware().normalize(raw, "t", ctx_ours)
    b = theirs["PassThroughMiddleware"]().normalize(raw, "t", theirs["MiddlewareContext"]("t", "r"))
    for f in ("content", "success", "error_message", "metadata", "raw_result",
              "execution_time_ms"):
        assert getattr(a, f) == getattr(b, f), f

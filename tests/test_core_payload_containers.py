"""The README's promise, over every container a payload can hold: middleware and
hooks that try every in-place change on the arguments / request and on
``original_*`` corrupt neither the originals nor the host's own objects; the base
call gets the host's own object when nothing was rewritten, and a mutable copy of
the same types when something was.

Covered: dict, list, tuple (holding mutables), set, bytearray, writable
memoryview, deque, defaultdict, OrderedDict, Counter, nested in dicts and lists.
Instances of the host's own classes are shared as they are (otelmw cannot freeze
arbitrary objects): documented in docs/reliability.md and asserted below.
"""

from __future__ import annotations

import copy
from collections import Counter, OrderedDict, defaultdict, deque
from collections.abc import Callable
from typing import Any

import pytest
from _support import calls

from otelmw import Pipeline, RuntimeMiddlewareRegistry


def _containers() -> dict[str, Callable[[], Any]]:
    return {
        "dict": lambda: {"k": [1, 2]},
        "list": lambda: [1, {"k": 2}],
        "tuple": lambda: ({"k": [1]}, [2]),
        "set": lambda: {1, 2, "a"},
        "bytearray": lambda: bytearray(b"abc"),
        "memoryview": lambda: memoryview(bytearray(b"abc")),
        "deque": lambda: deque([{"k": 1}, [2]], maxlen=5),
        "defaultdict": lambda: defaultdict(list, {"k": [1]}),
        "OrderedDict": lambda: OrderedDict([("b", [1]), ("a", {"k": 2})]),
        "Counter": lambda: Counter({"x": 2}),
    }


CONTAINERS = _containers()


def _mutations(v: Any) -> list[Callable[[], Any]]:
    """Every in-place change a middleware could try on ``v`` (and inside it)."""
    ops: list[Callable[[], Any]] = []
    if isinstance(v, dict):
        ops += [lambda: v.__setitem__("new", 1), lambda: v.pop(next(iter(v))),
                lambda: v.update(z=1), lambda: v.clear(), lambda: v.setdefault("s", 1),
                lambda: v.popitem()]
        if isinstance(v, OrderedDict):
            ops.append(lambda: v.move_to_end(next(iter(v)), last=False))
        for inner in list(dict.values(v)):
            ops += _mutations(inner)
    elif isinstance(v, list):
        ops += [lambda: v.append(9), lambda: v.__setitem__(0, 9), lambda: v.sort(key=str),
                lambda: v.reverse(), lambda: v.clear(), lambda: v.__iadd__([9])]
        for inner in list(v):
            ops += _mutations(inner)
    elif isinstance(v, tuple):
        for inner in v:
            ops += _mutations(inner)
    elif isinstance(v, set | frozenset):
        ops += [lambda: v.add(9), lambda: v.discard(1), lambda: v.clear(),
                lambda: v.update({8}), lambda: v.__ior__({7})]
    elif isinstance(v, bytearray | bytes):
        ops += [lambda: v.__setitem__(0, 0), lambda: v.append(1), lambda: v.extend(b"z"),
                lambda: v.clear(), lambda: v.__iadd__(b"q")]
    elif isinstance(v, memoryview):
        ops += [lambda: v.__setitem__(0, 0)]
    elif isinstance(v, deque):
        ops += [lambda: v.append(9), lambda: v.appendleft(9), lambda: v.rotate(1),
                lambda: v.__setitem__(0, 9), lambda: v.clear(), lambda: v.__iadd__([9])]
        for inner in list(v):
            ops += _mutations(inner)
    return ops


def _try_all(v: Any) -> int:
    """Attempt every mutation; how many were allowed (0 on a frozen view)."""
    allowed = 0
    for op in _mutations(v):
        try:
            op()
            allowed += 1
        except (TypeError, AttributeError, KeyError, IndexError, ValueError, StopIteration):
            pass
    return allowed


def _read_missing(v: Any) -> None:
    """A frozen defaultdict reads a missing key as its default without inserting it."""
    if isinstance(v, dict):
        if isinstance(v, defaultdict):
            assert v["missing"] == v.default_factory()  # type: ignore[misc]
            assert "missing" not in v
        for inner in dict.values(v):
            _read_missing(inner)
    elif isinstance(v, list):
        for inner in v:
            _read_missing(inner)


def _snapshot(v: Any) -> Any:
    if isinstance(v, memoryview):
        return ("memoryview", v.tobytes())
    if isinstance(v, dict):
        return (type(v).__name__, [(k, _snapshot(x)) for k, x in dict.items(v)])
    if isinstance(v, list | tuple | deque):
        return (type(v).__name__, [_snapshot(x) for x in v])
    return copy.deepcopy(v)


def _content(v: Any) -> Any:
    """Like ``_snapshot`` without the container class (views and copies compare)."""
    if isinstance(v, memoryview):
        return v.tobytes()
    if isinstance(v, dict):
        return [(k, _content(x)) for k, x in dict.items(v)]
    if isinstance(v, list | tuple | deque):
        return [_content(x) for x in v]
    if isinstance(v, set | frozenset):
        return sorted(map(str, v))
    if isinstance(v, bytes | bytearray):
        return bytes(v)
    return v


@pytest.mark.parametrize("rewrite", [False, True])
@pytest.mark.parametrize("mode", calls.MODES)
@pytest.mark.parametrize("op", calls.OPS)
@pytest.mark.parametrize("kind", sorted(CONTAINERS))
def test_no_callback_can_corrupt_the_originals(kind: str, op: str, mode: str,
                                               rewrite: bool) -> None:
    p = Pipeline(normalizers=RuntimeMiddlewareRegistry())
    value = CONTAINERS[kind]()
    host = ({"model": "m", "messages": [{"role": "user", "content": "hi"}],
             "extra": {"held": value, "nested": [value]}} if op == "llm"
            else {"held": value, "nested": [{"deep": value}]})
    before = _snapshot(host)
    key, orig = calls.PAYLOAD_KEY[op], calls.ORIGINAL_KEY[op]
    allowed: list[int] = []

    def request_mw(**kw: Any) -> Any:
        _read_missing(kw[key])
        allowed.append(_try_all(kw[key]) + _try_all(kw[orig]))
        # keeps every value, adds one, and puts the held container under a new key
        held_view = kw[key]["extra"]["held"] if op == "llm" else kw[key]["held"]
        return {key: {**kw[key], "added": 1, "moved": held_view}} if rewrite else None

    def execution_mw(next_call: Any, **kw: Any) -> Any:
        allowed.append(_try_all(kw[key]) + _try_all(kw[orig]))
        return next_call()

    def hook(**kw: Any) -> None:
        allowed.append(_try_all(kw[key]))

    p.registry.add_middleware(calls.REQUEST_KIND[op], request_mw, calls.PLUGIN)
    p.registry.add_middleware(calls.EXEC_KIND[op], execution_mw, calls.PLUGIN)
    p.registry.add_hook(calls.PRE_HOOK[op], hook, calls.PLUGIN)
    got: list[Any] = []

    def base(payload: Any) -> str:
        got.append(payload)
        return "ok"

    assert calls.run_call(p, mode, op, host, base) == "ok"
    assert allowed == [0, 0, 0], "a mutation went through"
    assert _snapshot(host) == before, "the host's object was changed"
    (seen,) = got
    if not rewrite:
        assert seen is host  # nothing rewritten: the host's own object
        return
    # Rewritten: a new top-level dict. A value the rewrite kept is the host's own object,
    # as when nothing is rewritten; one it placed anew is a mutable copy of the same
    # types and content, not the host's object.
    assert seen is not host and seen["added"] == 1
    assert all(seen[k] is host[k] for k in host)
    held = seen["moved"]
    assert type(held) is type(value) or (kind == "Counter" and type(held) is dict)
    assert _content(held) == _content(value)
    if kind != "memoryview":  # a read-only view of the host's buffer, by design
        assert held is not value
        assert _try_all(held) > 0  # the base call can change its copy
        assert _snapshot(host) == before


def test_host_class_instances_are_shared_as_they_are() -> None:
    """Not a container otelmw knows: passed by reference (documented)."""

    class Box:
        def __init__(self) -> None:
            self.items = [1]

    box = Box()
    p = Pipeline(normalizers=RuntimeMiddlewareRegistry())
    seen: list[Any] = []
    p.registry.add_middleware("tool_request", lambda **kw: seen.append(kw["args"]["box"]),
                              "x")
    p.run_tool("t", {"box": box}, lambda a: "ok")
    assert seen == [box] and seen[0] is box


@pytest.mark.parametrize("kind", sorted(set(CONTAINERS) - {"memoryview"}))  # not copyable
def test_frozen_views_copy_and_pickle_as_plain_containers(kind: str) -> None:
    import pickle

    from otelmw.core.payloads import freeze, thaw

    value = CONTAINERS[kind]()
    view = freeze({"v": value})["v"]
    # A shallow copy of a tuple is the tuple itself (as for any tuple).
    shallow = [] if kind == "tuple" else [copy.copy(view)]
    for copied in (*shallow, copy.deepcopy(view), thaw(view)):
        assert _content(copied) == _content(value)
        assert _try_all(copied) > 0  # a mutable copy
    assert _content(pickle.loads(pickle.dumps(view))) == _content(value)

"""The orjson fast path of canonical-JSON digests writes exactly the documented bytes.

``digests`` encodes *plain* trees with orjson (about eight times faster than the
``json`` encoder) and everything else with ``json``. The digest must not depend on
which encoder ran, nor on whether orjson is installed: every expected value here
is recomputed from the documented ``json.dumps`` form, never from otelmw's code.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import enum
import inspect
import json
import os
import pathlib
import subprocess
import sys
import uuid
from typing import Any

import orjson
import pytest
from _support.digest_key import keyed_hex
from hypothesis import given, settings
from hypothesis import strategies as st

from otelmw.telemetry.content import digests
from otelmw.telemetry.content.digests import digest


def documented_default(value: Any) -> Any:
    """The documented form of what JSON has no type for (bytes; other objects: their
    type tag), written from docs/telemetry.md, not from otelmw's code."""
    if isinstance(value, bytes):
        return "base64:" + base64.b64encode(value).decode()
    return f"<{type(value).__module__}.{type(value).__qualname__}>"


def documented(value: Any, cap: int = 1 << 40) -> tuple[str, int]:
    """The documented digest of a JSON tree (under a cap), from json.dumps alone."""
    full = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=documented_default).encode("utf-8", "surrogatepass")
    if len(full) <= cap:
        return "sha256-keyed:" + keyed_hex(full), len(full)
    return "sha256-keyed-prefix:" + keyed_hex(full[:cap]), -1


class Spy:
    """Stands in for the orjson module and counts the encodes it is asked for."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.calls = 0

    def dumps(self, value: Any, default: Any = None, option: int = 0) -> bytes:
        self.calls += 1
        return bytes(self.real.dumps(value, default, option))


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Spy:
    assert digests._orjson is not None and digests._ORJSON_SAME_BYTES, "orjson fast path is off"
    s = Spy(digests._orjson)
    monkeypatch.setattr(digests, "_orjson", s)
    return s


def rows(n: int) -> dict[str, Any]:
    return {"rows": [{"id": i, "name": f"row-{i}", "score": i * 0.25, "ok": i % 2 == 0,
                      "note": None, "tags": ["a", "é"]} for i in range(n)], "status": "ok"}


@pytest.mark.parametrize("value", [
    {"status": "ok", "text": "hello"},
    rows(3),
    rows(40),
    [1, "two", 3.5, None, True, [], {}],
    {"é": "\x00\x1f\x7f\u2028\U0001f600\"\\/", "a": -0.0, "b": 1e-4, "c": 9999999999999998.0},
    ("tuple", "as", "array"),
])
def test_plain_trees_take_orjson_and_match_the_documented_bytes(spy: Spy, value: Any) -> None:
    assert digest(value) == documented(value)
    assert spy.calls == 1


@pytest.mark.parametrize("value", [
    {"x": 1e16}, {"x": 1e-5}, {"x": 5e-324}, {"x": -1.5e300},
    {"x": float("nan")}, {"x": float("inf")}, {"rows": [{"x": 0.5}, {"x": 1e22}]},
    {"k": b"bytes"}, {1: "int key"}, {"r": [{2: "nested int key"}]},
])
def test_trees_orjson_would_write_differently_use_json(spy: Spy, value: Any) -> None:
    # exponent floats (orjson: 1e16, json: 1e+16), NaN/inf (orjson: null), bytes, int keys
    assert digest(value) == documented(value)
    assert spy.calls == 0


class Color(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


@dataclasses.dataclass
class Point:
    x: int


class Tag(str):
    pass


@pytest.mark.parametrize("leaf", [
    Color.RED, Level.HIGH, Point(1), datetime.datetime(2026, 1, 2, 3, 4, 5),
    uuid.UUID(int=7), Tag("sub"),
])
def test_objects_orjson_knows_get_the_documented_form(spy: Spy, leaf: Any) -> None:
    # orjson would write enums, dataclasses, datetimes and UUIDs natively; the
    # documented form tags them (or writes them as json does) — never orjson's.
    value = {"leaf": leaf, "n": 1}
    assert digest(value) == documented(value)
    assert digest([leaf]) == documented([leaf])
    assert spy.calls == 0  # the walks kept them away from orjson


def test_orjson_refusals_fall_back_to_json(spy: Spy) -> None:
    # plain by the walk, refused by orjson: a lone surrogate, an int beyond 64 bits,
    # depth beyond orjson's 254
    lone = {"s": "a\udc80b"}
    assert digest(lone) == documented(lone)
    assert spy.calls == 1  # tried once, refused, and not asked again
    big = {"n": 2**70, "m": [-(2**65)]}
    assert digest(big) == documented(big)
    deep: Any = "leaf"
    for _ in range(300):
        deep = [deep]
    assert digest(deep) == documented(deep)
    assert spy.calls >= 2  # orjson was tried on the nested trees too


json_leaves = (st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80)
               | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12))
def containers(kids: Any) -> Any:
    return st.lists(kids, max_size=5) | st.dictionaries(st.text(max_size=6), kids, max_size=5)


# roots are containers: a root str is hashed as UTF-8, not as JSON (documented)
json_trees = containers(st.recursive(json_leaves, containers, max_leaves=25))


@settings(max_examples=400, deadline=None)
@given(json_trees)
def test_any_json_tree_digests_to_the_documented_bytes(value: Any) -> None:
    assert digest(value) == documented(value)


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_float_in_a_tree_digests_to_the_documented_bytes(x: float) -> None:
    assert digest({"x": x, "row": [x, -x]}) == documented({"x": x, "row": [x, -x]})


SAMPLES = ("rows(5)", "{'x': 1e16, 'y': float('nan')}", "[1, 'two', 3.5, None, True]",
           "{'é': '\\u2028', 'k': [0.1, 0.2]}")


def test_digests_do_not_depend_on_orjson_being_installed() -> None:
    here = [digest(eval(src, {"rows": rows}))[0] for src in SAMPLES]
    code = (
        "import sys; sys.modules['orjson'] = None\n"
        "from typing import Any\n"
        "from otelmw.telemetry.content import digests\n"
        "assert digests._orjson is None and not digests._ORJSON_SAME_BYTES\n"
        + inspect.getsource(rows)
        + f"for src in {SAMPLES!r}: print(digests.digest(eval(src))[0])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=pathlib.Path(__file__).parent.parent,
                         env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == here


def test_probe_turns_the_fast_path_off_for_an_orjson_that_writes_floats_otherwise(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = digests._orjson

    class Drifted:
        OPT_SORT_KEYS = real.OPT_SORT_KEYS

        @staticmethod
        def dumps(value: Any, default: Any = None, option: int = 0) -> bytes:
            return bytes(real.dumps(value, default, option)).replace(b"0.1", b"1e-1")

    assert digests._probe_fast_path()
    monkeypatch.setattr(digests, "_orjson", Drifted)
    assert not digests._probe_fast_path()


# What orjson writes its own way without raising (UUIDs, plain enum members, fragments,
# NaN/infinity, floats below 1e-4) or refuses (bytes, subclasses, datetimes, dataclasses),
# mixed into any tree: whichever encoder runs, the digest is the documented one.
edge_leaves = st.sampled_from([
    uuid.UUID(int=7), Color.RED, Level.HIGH, Tag("sub"), Point(1),
    datetime.datetime(2026, 1, 2, 3, 4, 5), orjson.Fragment(b'{"raw":1}'),
    float("nan"), float("-inf"), 1e-5, -3.5e-7, 1e16, 2.5e300])


def edge_containers(kids: Any) -> Any:
    return containers(kids) | st.lists(kids, max_size=4).map(tuple)


edge_trees = containers(st.recursive(json_leaves | edge_leaves | st.binary(max_size=8),
                                     edge_containers, max_leaves=30))


@settings(max_examples=400, deadline=None)
@given(edge_trees)
def test_trees_with_values_orjson_writes_its_own_way_digest_to_the_documented_bytes(
        value: Any) -> None:
    assert digest(value) == documented(value)


def keyed_containers(kids: Any) -> Any:
    return containers(kids) | st.dictionaries(st.integers(-99, 99), kids, max_size=4)


keyed_trees = containers(st.recursive(json_leaves | st.binary(max_size=8), keyed_containers,
                                      max_leaves=40))


@settings(max_examples=400, deadline=None)
@given(keyed_trees, st.integers(min_value=1, max_value=400))
def test_any_tree_under_any_cap_digests_to_the_documented_prefix(value: Any, cap: int) -> None:
    # small caps send most trees through the piece-by-piece encoder
    assert digest(value, max_bytes=cap) == documented(value, cap)


def long_trees() -> list[Any]:
    return [
        {"rows": [{"id": i, "name": f"row-{i}", "score": i * 0.5, "ok": True, "t": None}
                  for i in range(3000)], "status": "ok"},
        list(range(5000)),
        [i * 1.5e20 for i in range(700)] + [float("nan"), float("-inf")] + [0.25] * 300,
        {"a": [(i, str(i), [i] * 3) for i in range(900)], "b": {"x": b"\x00\xff" * 40}},
        {str(i): {"k": [{"deep": [i, "é\u2028"]}]} for i in range(1500)},
        [{"n": i, "ints": {3: "c", 1: "a", 20: "t"},
          "mix": {True: "t", 5: 0, 2.5: "x", False: None}} for i in range(400)],
    ]


@pytest.mark.parametrize("tree", range(len(long_trees())))
def test_long_trees_cut_anywhere_digest_to_the_documented_prefix(tree: int) -> None:
    value = long_trees()[tree]
    full_size = documented(value)[1]
    for cap in (1, 63, 64, 65, 1000, 4097, full_size // 2 + 7, full_size - 1, full_size,
                full_size + 1):
        assert digest(value, max_bytes=cap) == documented(value, cap), cap


def test_a_tree_of_too_many_nodes_for_the_walk_still_gets_its_exact_digest() -> None:
    # 120 000 leaves: past the walk's node bound, yet far under the 4 MiB cap
    value = {"rows": [{"a": i, "b": "x", "c": 0.5, "d": None, "e": True, "f": [i]}
                      for i in range(20_000)]}
    exact = documented(value, digests.MAX_BYTES)
    assert exact[0].startswith("sha256-keyed:") and 0 < exact[1] < digests.MAX_BYTES
    assert digest(value) == exact


def json_keys(value: Any) -> Any:
    """Every dict key converted as documented for keys json cannot sort: str as is,
    True/False/None as true/false/null, numbers as json writes them."""
    if isinstance(value, dict):
        return {k if isinstance(k, str) else json.dumps(k): json_keys(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [json_keys(v) for v in value]
    return value


def test_mixed_keys_in_a_big_tree_follow_the_whole_tree_conversion_rule() -> None:
    # one dict with unsortable keys: every key of the tree is converted, then sorted
    # as strings (so the int keys 10, 9 of another dict come out "10" before "9")
    value = {"rows": [{"i": i} for i in range(300)], "odd": {1: "one", "b": "bee", None: 0},
             "ints": {10: "ten", 9: "nine"}}
    for cap in (50, 2000, 1 << 20):
        assert digest(value, max_bytes=cap) == documented(json_keys(value), cap)

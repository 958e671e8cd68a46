"""Read-only payload views (``otelmw.core.payloads``): both freezing paths.

``freeze`` copies plain JSON trees without a cycle memo and falls back to the
memoized walk for cycles, very deep trees, tuples and dict/list subclasses;
each case here goes through one of those paths and checks the guarantee the
middleware contract relies on: every container reachable from the view refuses
in-place changes, content is equal, and the caller's object is untouched.
"""

from __future__ import annotations

import collections
import copy
import pickle
from typing import Any

import pytest

from otelmw.core.payloads import EMPTY_LIST_VIEW, FrozenDict, FrozenList, freeze, thaw


def _containers(value: Any, seen: set[int] | None = None) -> list[Any]:
    """Every dict/list reachable from ``value`` (cycle-safe)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return []
    out: list[Any] = []
    if isinstance(value, dict):
        seen.add(id(value))
        out.append(value)
        for v in value.values():
            out += _containers(v, seen)
    elif isinstance(value, list | tuple):
        seen.add(id(value))
        if isinstance(value, list):
            out.append(value)
        for v in value:
            out += _containers(v, seen)
    return out


def _assert_read_only(view: Any) -> None:
    found = _containers(view)
    assert found, "nothing to check"
    for node in found:
        assert type(node).__name__.startswith("Frozen"), type(node)
        with pytest.raises(TypeError, match="read-only"):
            if isinstance(node, dict):
                node["x"] = 1
            else:
                node.append(1)


def _chat_request() -> dict[str, Any]:
    return {"model": "m", "temperature": 0.2, "stop": None, "stream": False,
            "messages": [{"role": "system", "content": "be brief"},
                         {"role": "user", "content": [{"type": "text", "text": "hi"}]}],
            "tools": [{"type": "function",
                       "function": {"name": "f", "parameters": {"type": "object",
                                                                "properties": {}}}}]}


def test_json_tree_is_read_only_everywhere_equal_and_the_original_untouched() -> None:
    request = _chat_request()
    marker = bytearray(b"attachment")  # a mutable leaf: frozen as a read-only copy
    request["messages"][0]["blob"] = marker
    before = copy.deepcopy(request)
    view = freeze(request)
    assert view == before and view is not request
    _assert_read_only(view)
    assert request == before
    for node in _containers(request):
        assert type(node) in (dict, list)  # the caller's containers were not converted
    blob = view["messages"][0]["blob"]
    assert isinstance(blob, bytes) and blob == marker and blob is not marker


def test_flat_scalar_dict_and_empty_list() -> None:
    args = {"path": "/tmp/x", "offset": 0, "limit": 1.5, "raw": b"\x00", "flag": True}
    view = freeze(args)
    assert type(view) is FrozenDict and view == args
    assert freeze([]) is EMPTY_LIST_VIEW
    assert freeze({"a": []})["a"] is EMPTY_LIST_VIEW


def test_frozen_subtrees_and_non_containers_are_shared_not_copied() -> None:
    inner = freeze({"k": [1, 2]})
    marker = object()
    view = freeze({"inner": inner, "obj": marker, "t": (1, "a")})
    assert view["inner"] is inner
    assert view["obj"] is marker
    assert freeze(view) is view


@pytest.mark.parametrize("kind", ["dict", "list"])
def test_cycles_are_preserved_as_cycles_of_views(kind: str) -> None:
    if kind == "dict":
        d: dict[str, Any] = {"name": "a", "children": []}
        d["children"].append(d)
        view = freeze(d)
        assert view["children"][0] is view
    else:
        lst: list[Any] = [1]
        lst.append({"back": lst})
        view = freeze(lst)
        assert view[1]["back"] is view
    _assert_read_only(view)


def test_trees_deeper_than_the_fast_path_are_still_frozen_to_the_bottom() -> None:
    root: dict[str, Any] = {}
    node = root
    for i in range(200):
        node["next"] = {"i": i, "items": [i]}
        node = node["next"]
    view = freeze(root)
    tip = view
    for _ in range(200):
        tip = tip["next"]
    assert tip["i"] == 199 and isinstance(tip, FrozenDict)
    with pytest.raises(TypeError):
        tip["items"].append(0)


def test_subclasses_and_tuples_become_read_only_views_with_equal_content() -> None:
    od = collections.OrderedDict([("b", 1), ("a", [1, {"x": 2}])])
    dd = collections.defaultdict(list, {"k": [3]})

    class Rows(list):  # type: ignore[type-arg]
        pass

    value = {"od": od, "dd": dd, "rows": Rows([{"r": 1}]), "tup": ({"in": [1]}, 2)}
    view = freeze(value)
    assert view == value
    # OrderedDict and defaultdict keep their kind (order, default_factory); other
    # dict/list subclasses become plain views.
    assert isinstance(view["od"], collections.OrderedDict) and list(view["od"]) == ["b", "a"]
    assert isinstance(view["dd"], collections.defaultdict) and view["dd"].default_factory is list
    assert type(view["rows"]) is FrozenList
    assert type(view["tup"]) is tuple and type(view["tup"][0]) is FrozenDict
    _assert_read_only(view)


def test_shared_subtree_is_frozen_at_both_places() -> None:
    shared = {"v": [1, 2]}
    view = freeze({"a": shared, "b": [shared]})
    assert view["a"] == view["b"][0] == shared
    _assert_read_only(view)


def test_absurdly_deep_input_is_handed_on_without_raising() -> None:
    root: list[Any] = []
    node = root
    for _ in range(100_000):
        nxt: list[Any] = []
        node.append(nxt)
        node = nxt
    assert freeze(root) is root  # unprotected rather than failing the call


def test_thaw_gives_plain_mutable_equal_structures() -> None:
    request = _chat_request()
    back = thaw(freeze(request))
    assert back == request
    for node in _containers(back):
        assert type(node) in (dict, list)
    back["messages"].append({"role": "user", "content": "more"})
    assert len(request["messages"]) == 2


def test_views_copy_and_pickle_as_plain_containers() -> None:
    view = freeze(_chat_request())
    assert type(copy.copy(view)) is dict
    deep = copy.deepcopy(view)
    assert deep == view and all(type(n) in (dict, list) for n in _containers(deep))
    again = pickle.loads(pickle.dumps(view))
    assert again == view and type(again) is dict

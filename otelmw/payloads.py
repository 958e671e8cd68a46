"""Read-only payload views handed to middleware and hooks.

Why: the contract promises that ``original_request``/``original_args`` cannot be
corrupted and that a failed rewrite leaves the payload unchanged. Instead of a
deep copy per callback (Hermes' approach), otelmw freezes the payload once per
call into dict/list subclasses whose mutators raise ``TypeError``. Already
frozen sub-trees are shared, so freezing a replacement built with
``dict(kwargs["request"])`` only copies what the middleware actually changed.
The base call gets a plain, mutable structure back (``thaw``), or the host's own
object untouched when nothing was rewritten.
"""

from __future__ import annotations

from typing import Any, NoReturn


def _read_only(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(
        "otelmw middleware payloads are read-only views; build a replacement "
        "(e.g. request = dict(kwargs['request'])) and return it"
    )


class FrozenDict(dict):  # type: ignore[type-arg]
    """A ``dict`` that refuses in-place changes. ``dict(view)`` gives a mutable copy."""

    __slots__ = ()
    __setitem__ = __delitem__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only
    __ior__ = _read_only

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return thaw(self)

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))


class FrozenList(list):  # type: ignore[type-arg]
    """A ``list`` that refuses in-place changes. ``list(view)`` gives a mutable copy."""

    __slots__ = ()
    __setitem__ = __delitem__ = _read_only
    append = extend = insert = pop = remove = reverse = sort = clear = _read_only
    __iadd__ = __imul__ = _read_only

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return thaw(self)

    def __reduce__(self) -> Any:
        return (list, (list(self),))


_FROZEN = (FrozenDict, FrozenList)


def freeze(value: Any) -> Any:
    """Return a read-only view of ``value`` (dicts and lists, recursively).

    Frozen sub-trees are reused; other objects (SDK clients, pydantic models,
    tuples of scalars) are shared as they are. Cycles are preserved.
    """
    try:
        if type(value) is dict:  # inlined top level of _freeze_tree: the usual payload
            out = FrozenDict(value)
            try:
                for k, v in value.items():
                    if type(v) not in _SCALARS:
                        _dict_set(out, k, _freeze_tree(v, 1))
                return out
            except _NotATree:
                return _freeze(value, {})
        if type(value) in _FROZEN or not isinstance(value, dict | list | tuple):
            return value
        try:
            return _freeze_tree(value, 0)
        except _NotATree:
            return _freeze(value, {})
    except RecursionError:  # absurdly deep: hand it on unprotected rather than fail the call
        return value


_SCALARS = frozenset({str, int, float, bool, type(None), bytes})
EMPTY_LIST_VIEW = FrozenList()
_MAX_TREE_DEPTH = 48
_dict_set = dict.__setitem__


class _NotATree(Exception):
    """Too deep (a cycle?) or not plain dicts/lists: take the memoized path."""


def _freeze_tree(value: Any, depth: int) -> Any:
    # The common case, JSON-shaped plain dicts and lists, without the memo the
    # general path needs for cycles and shared sub-trees: copy each container in
    # C, then replace only the non-scalar values. A shared sub-tree is frozen
    # twice here (equal, not identical), which no reader can tell apart.
    t = type(value)
    if t is dict:
        if depth > _MAX_TREE_DEPTH:
            raise _NotATree
        out = FrozenDict(value)
        for k, v in value.items():
            if type(v) not in _SCALARS:
                _dict_set(out, k, _freeze_tree(v, depth + 1))
        return out
    if t is list:
        if depth > _MAX_TREE_DEPTH:
            raise _NotATree
        if not value:
            return EMPTY_LIST_VIEW
        return FrozenList([v if type(v) in _SCALARS else _freeze_tree(v, depth + 1)
                           for v in value])
    if t is FrozenDict or t is FrozenList or not isinstance(value, dict | list | tuple):
        return value
    raise _NotATree  # tuples and dict/list subclasses


def _freeze(value: Any, memo: dict[int, Any]) -> Any:
    # Scalar leaves (most nodes of a request) are taken as they are, without a
    # recursive call: that halves the cost of freezing a chat request.
    t = type(value)
    if t is FrozenDict or t is FrozenList:
        return value
    if isinstance(value, dict):
        key = id(value)
        if key in memo:
            return memo[key]
        out = FrozenDict()
        memo[key] = out
        dict.update(out, {k: v if type(v) in _SCALARS else _freeze(v, memo)
                          for k, v in dict.items(value)})
        return out
    if isinstance(value, list):
        key = id(value)
        if key in memo:
            return memo[key]
        out_l = FrozenList()
        memo[key] = out_l
        list.extend(out_l, [v if type(v) in _SCALARS else _freeze(v, memo) for v in value])
        return out_l
    if t is tuple:
        return tuple(v if type(v) in _SCALARS else _freeze(v, memo) for v in value)
    return value


def thaw(value: Any) -> Any:
    """Mutable copy of a frozen view; plain containers inside are copied too."""
    try:
        return _thaw(value, {})
    except RecursionError:
        return value


def _thaw(value: Any, memo: dict[int, Any]) -> Any:
    if isinstance(value, dict):
        key = id(value)
        if key in memo:
            return memo[key]
        out: dict[Any, Any] = {}
        memo[key] = out
        for k, v in dict.items(value):
            out[k] = _thaw(v, memo)
        return out
    if isinstance(value, list):
        key = id(value)
        if key in memo:
            return memo[key]
        out_l: list[Any] = []
        memo[key] = out_l
        out_l.extend(_thaw(v, memo) for v in value)
        return out_l
    if type(value) is tuple:
        return tuple(_thaw(v, memo) for v in value)
    return value


def changed_keys(before: Any, after: Any) -> list[str]:
    """Top-level keys whose value differs between two mappings (sorted)."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return []
    try:
        return _changed_keys(before, after)
    except Exception:  # keys whose __hash__/__eq__/__str__ raise: nothing to report
        return []


def _changed_keys(before: dict[Any, Any], after: dict[Any, Any]) -> list[str]:
    out = []
    for k in dict.keys(before) | dict.keys(after):
        if not dict.__contains__(before, k) or not dict.__contains__(after, k):
            out.append(str(k))
            continue
        a, b = dict.__getitem__(before, k), dict.__getitem__(after, k)
        if a is b:
            continue
        try:
            same = (a == b) is True  # element-wise results (arrays, frames) count as changed
        except Exception:
            same = False
        if not same:
            out.append(str(k))
    return sorted(out)

"""Read-only payload views handed to middleware and hooks.

Why: the contract promises that ``original_request``/``original_args`` cannot be
corrupted and that a failed rewrite leaves the payload unchanged. Instead of a
deep copy per callback (Hermes' approach), otelmw freezes the payload once per
call into subclasses of the built-in containers whose mutators raise
``TypeError`` (a ``set`` becomes a ``frozenset`` subclass, a ``bytearray`` a
``bytes`` subclass, a writable ``memoryview`` a read-only one). Already
frozen sub-trees are shared, so freezing a replacement built with
``dict(kwargs["request"])`` only copies what the middleware actually changed.
The base call gets a plain, mutable structure back (``thaw``), or the host's own
object untouched when nothing was rewritten.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict, deque
from operator import is_
from typing import Any, NoReturn


def _read_only(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(
        "otelmw middleware payloads are read-only views; build a replacement "
        "(e.g. request = dict(kwargs['request'])) and return it"
    )


class _ReadOnlyView:
    """What every view class shares. The in-place methods a subclass names in
    ``refuses`` raise ``TypeError``; ``copy.copy`` gives back the mutable container
    a subclass's ``__reduce__`` rebuilds when unpickled, ``copy.deepcopy`` a
    thawed tree (``thaw``)."""

    __slots__ = ()

    def __init_subclass__(cls, refuses: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in refuses.split():
            setattr(cls, name, _read_only)

    def __reduce__(self) -> Any:
        raise NotImplementedError  # each view: its mutable type and what rebuilds it

    def __copy__(self) -> Any:
        rebuild, args = self.__reduce__()
        return rebuild(*args)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return thaw(self)


class FrozenDict(_ReadOnlyView, dict,  # type: ignore[type-arg]
                 refuses="__setitem__ __delitem__ __ior__ clear pop popitem setdefault "
                         "update"):
    """A ``dict`` that refuses in-place changes. ``dict(view)`` gives a mutable copy."""

    __slots__ = ()

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))


class FrozenList(_ReadOnlyView, list,  # type: ignore[type-arg]
                 refuses="__setitem__ __delitem__ __iadd__ __imul__ append extend insert "
                         "pop remove reverse sort clear"):
    """A ``list`` that refuses in-place changes. ``list(view)`` gives a mutable copy."""

    __slots__ = ()

    def __reduce__(self) -> Any:
        return (list, (list(self),))


class FrozenSet(_ReadOnlyView, frozenset,  # type: ignore[type-arg]
                refuses="add discard remove pop clear update intersection_update "
                        "difference_update symmetric_difference_update"):
    """A ``set`` in a payload, as a ``frozenset``; ``set(view)`` gives a mutable copy."""

    __slots__ = ()

    def __reduce__(self) -> Any:
        return (set, (list(self),))


class FrozenBytes(_ReadOnlyView, bytes,
                  refuses="append extend insert pop remove reverse clear"):
    """A ``bytearray`` in a payload, as ``bytes``; ``bytearray(view)`` gives a copy."""

    __slots__ = ()

    def __reduce__(self) -> Any:
        return (bytearray, (bytes(self),))


class FrozenDeque(_ReadOnlyView, deque,  # type: ignore[type-arg]
                  refuses="__setitem__ __delitem__ __iadd__ __imul__ append appendleft "
                          "extend extendleft insert pop popleft remove reverse rotate clear"):
    """A ``deque`` that refuses in-place changes (``maxlen`` kept)."""

    __slots__ = ()

    def __reduce__(self) -> Any:
        return (deque, (list(self), self.maxlen))


class FrozenOrderedDict(_ReadOnlyView, OrderedDict,  # type: ignore[type-arg]
                        refuses="__setitem__ __delitem__ __ior__ clear pop popitem "
                                "setdefault update move_to_end"):
    """An ``OrderedDict`` that refuses in-place changes."""

    __slots__ = ()

    def __reduce__(self) -> Any:
        return (OrderedDict, (list(dict.items(self)),))


class FrozenDefaultDict(_ReadOnlyView, defaultdict,  # type: ignore[type-arg]
                        refuses="__setitem__ __delitem__ __ior__ clear pop popitem "
                                "setdefault update"):
    """A ``defaultdict`` that refuses in-place changes; a missing key reads as
    ``default_factory()`` without being inserted."""

    __slots__ = ()

    def __missing__(self, key: Any) -> Any:
        if self.default_factory is None:
            raise KeyError(key)
        return self.default_factory()

    def __reduce__(self) -> Any:
        return (defaultdict, (self.default_factory, dict(self)))


_FROZEN = (FrozenDict, FrozenList, FrozenSet, FrozenBytes, FrozenDeque, FrozenOrderedDict,
           FrozenDefaultDict)
_FROZEN_TYPES = frozenset(_FROZEN)
# Containers freeze() looks into or converts; anything else is shared as it is.
_CONTAINERS = (dict, list, tuple, set, bytearray, deque, memoryview)


def freeze(value: Any) -> Any:
    """Return a read-only view of ``value``: dicts, lists, tuples, sets, bytearrays,
    deques and writable memoryviews, recursively (dict and list subclasses other
    than ``OrderedDict``/``defaultdict`` become plain views; ``Counter`` a dict view).

    Frozen sub-trees are reused; other objects (SDK clients, pydantic models,
    instances of the host's own classes) are shared as they are. Cycles are
    preserved.
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
        if type(value) in _FROZEN_TYPES or not isinstance(value, _CONTAINERS):
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


def _freeze_leaf(value: Any) -> Any:
    """Containers that hold no further mutable containers of their own kind:
    sets (their items are hashable), bytearrays, memoryviews."""
    t = type(value)
    if t is set:
        return FrozenSet(value)
    if t is bytearray:
        return FrozenBytes(value)
    if t is memoryview:
        return value if value.readonly else value.toreadonly()
    return _NOT_A_LEAF


_NOT_A_LEAF = object()


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
    if t in _FROZEN_TYPES or not isinstance(value, _CONTAINERS):
        return value
    leaf = _freeze_leaf(value)
    if leaf is not _NOT_A_LEAF:
        return leaf
    raise _NotATree  # tuples, deques, subclasses


def _freeze(value: Any, memo: dict[int, Any]) -> Any:
    # Scalar leaves (most nodes of a request) are taken as they are, without a
    # recursive call: that halves the cost of freezing a chat request.
    t = type(value)
    if t in _FROZEN_TYPES:
        return value
    if isinstance(value, dict):
        key = id(value)
        if key in memo:
            return memo[key]
        items = {k: v for k, v in dict.items(value)}
        if isinstance(value, OrderedDict):
            out: Any = FrozenOrderedDict()
            memo[key] = out
            for k, v in items.items():
                OrderedDict.__setitem__(out, k, v if type(v) in _SCALARS else _freeze(v, memo))
            return out
        out = (FrozenDefaultDict(value.default_factory) if isinstance(value, defaultdict)
               else FrozenDict())
        memo[key] = out
        dict.update(out, {k: v if type(v) in _SCALARS else _freeze(v, memo)
                          for k, v in items.items()})
        return out
    if isinstance(value, list):
        key = id(value)
        if key in memo:
            return memo[key]
        out_l = FrozenList()
        memo[key] = out_l
        list.extend(out_l, [v if type(v) in _SCALARS else _freeze(v, memo)
                            for v in list.__iter__(value)])
        return out_l
    if t is tuple:  # the tuple itself when its items already are read-only
        kept = tuple(v if type(v) in _SCALARS else _freeze(v, memo) for v in value)
        return value if all(map(is_, kept, value)) else kept
    if isinstance(value, deque):
        key = id(value)
        if key in memo:
            return memo[key]
        out_d = FrozenDeque((), value.maxlen)
        memo[key] = out_d
        deque.extend(out_d, [v if type(v) in _SCALARS else _freeze(v, memo)
                             for v in deque.__iter__(value)])
        return out_d
    leaf = _freeze_leaf(value)
    return value if leaf is _NOT_A_LEAF else leaf


def thaw(value: Any) -> Any:
    """Mutable copy of a frozen view; plain containers inside are copied too
    (each frozen kind back to its own: set, bytearray, deque, OrderedDict,
    defaultdict)."""
    try:
        return _thaw(value, {})
    except RecursionError:
        return value


def thaw_rewrite(value: Any, frozen_original: Any, original: Any) -> Any:
    """``thaw(value)`` for the base call, where ``value`` is a rewrite of
    ``frozen_original`` (``freeze(original)``): each top-level value the rewrite kept
    (the very frozen sub-tree it was handed) is the host's own object, as the base call
    gets it when nothing is rewritten; only what the rewrite changed is copied. A
    rewrite of one setting of a chat request then copies no message."""
    if type(value) is not FrozenDict or type(frozen_original) is not FrozenDict or (
            type(original) is not dict):
        return thaw(value)
    try:
        memo: dict[int, Any] = {}
        out = {}
        for k, v in dict.items(value):
            kept = dict.get(frozen_original, k, _NOT_A_LEAF)
            out[k] = (dict.__getitem__(original, k) if kept is v and k in original
                      else _thaw(v, memo))
        return out
    except RecursionError:
        return value


def _thaw(value: Any, memo: dict[int, Any]) -> Any:
    if isinstance(value, dict):
        key = id(value)
        if key in memo:
            return memo[key]
        out: dict[Any, Any] = (
            OrderedDict() if isinstance(value, OrderedDict)
            else defaultdict(value.default_factory) if isinstance(value, defaultdict) else {})
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
        out_l.extend(_thaw(v, memo) for v in list.__iter__(value))
        return out_l
    t = type(value)
    if t is tuple:
        return tuple(_thaw(v, memo) for v in value)
    if t is FrozenSet:
        return set(value)
    if t is FrozenBytes:
        return bytearray(value)
    if isinstance(value, deque):
        key = id(value)
        if key in memo:
            return memo[key]
        out_d: deque[Any] = deque(maxlen=value.maxlen)
        memo[key] = out_d
        out_d.extend(_thaw(v, memo) for v in deque.__iter__(value))
        return out_d
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

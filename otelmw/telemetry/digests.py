"""Raw-result digests: a canonical serialization, hashed, bounded in cost.

Canonical serialization (what is hashed), so a user can recompute a digest:

* ``bytes``/``bytearray``/``memoryview``: the bytes as they are.
* ``str``: UTF-8 (lone surrogates encoded with ``surrogatepass``).
* ``None``/``bool``/``int``/``float``/``dict``/``list``/``tuple`` trees: canonical
  JSON — ``json.dumps(v, sort_keys=True, separators=(",", ":"),
  ensure_ascii=False)``; inside the tree, bytes become ``"base64:<b64>"``,
  objects with ``model_dump()`` (pydantic / SDK types) their ``model_dump(mode="json")``,
  exceptions ``"module.QualName: message"``, other objects their type tag in
  literal angle brackets (``"<decimal.Decimal>"``). Non-string dict keys are
  converted as ``json.dumps`` converts them (and sorted by the original key). A dict
  whose keys ``json.dumps`` cannot sort or convert (mixed types such as ``1`` and
  ``"a"``, tuples) has its keys converted first — ``str`` as is,
  ``True``/``False``/``None`` → ``"true"``/``"false"``/``"null"``, numbers as
  ``json.dumps`` writes them, anything else by ``str()`` — and sorted as strings.
* an exception: UTF-8 of ``"module.QualName: message"`` (``builtins.`` included).
* a pydantic / SDK object: canonical JSON of ``model_dump(mode="json")``.
* anything else, or a tree that cannot be serialized (cycles, hostile objects):
  UTF-8 of the type tag — ``QualName`` for builtins (``dict``), else
  ``module.QualName`` — so the digest never raises.

The digest value names its algorithm:

* ``sha256:<hex>`` — SHA-256 of the whole canonical serialization.
* ``sha256-sampled:<hex>`` — ``str``/``bytes`` whose serialization is larger than
  ``max_bytes`` (default 4 MiB, ``OTELMW_DIGEST_MAX_BYTES``): SHA-256 of
  ``b"<length>:" + head + tail``, head/tail being the first and last
  ``max_bytes // 2`` bytes (for ``str``: characters, UTF-8 encoded; length in
  characters). Cost is bounded by ``max_bytes`` whatever the size.
* ``sha256-prefix:<hex>`` — a JSON tree whose canonical JSON exceeds
  ``max_bytes``: SHA-256 of its first ``max_bytes`` bytes (encoding stops there).

``size`` is the byte length of the canonical serialization (for sampled ``str``:
its length in characters; for a prefix-hashed tree: ``-1``, unknown).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from typing import Any, Final

_DEFAULT_MAX: Final = 4 * 1024 * 1024
_sha256 = hashlib.sha256
_JSON_SCALARS = (str, int, float, bool, type(None))
_JSON_TYPES = (dict, list, tuple, *_JSON_SCALARS)


def _max_bytes() -> int:
    try:
        return max(1024, int(os.environ.get("OTELMW_DIGEST_MAX_BYTES", _DEFAULT_MAX)))
    except ValueError:
        return _DEFAULT_MAX


MAX_BYTES = _max_bytes()


def type_name(value: Any) -> str:
    t = type(value)
    mod = t.__module__
    return t.__qualname__ if mod == "builtins" else f"{mod}.{t.__qualname__}"


def _exc_text(exc: BaseException) -> str:
    try:
        msg = str(exc)
    except Exception:
        msg = ""
    return f"{type(exc).__module__}.{type(exc).__qualname__}: {msg}"


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return "base64:" + base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, BaseException):
        return _exc_text(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return dump(mode="json")
        except Exception:
            pass
    if isinstance(value, set | frozenset):
        try:
            return sorted(value)
        except TypeError:
            pass
    return f"<{type_name(value)}>"


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                            default=_json_default)


def _hex(h: Any) -> str:
    return str(h.hexdigest())


def digest(value: Any, max_bytes: int | None = None) -> tuple[str, int]:
    """``(digest, size)`` of ``value``'s canonical serialization. Never raises."""
    limit = MAX_BYTES if max_bytes is None else max_bytes
    t = type(value)
    if (t is str or t is bytes) and len(value) <= 4096 and limit >= 16384:  # common case
        data = value.encode("utf-8", "surrogatepass") if t is str else value
        return "sha256:" + _sha256(data).hexdigest(), len(data)
    try:
        return _digest(value, limit)
    except Exception:
        data = type_name(value).encode()
        return "sha256:" + hashlib.sha256(data).hexdigest(), len(data)


def _digest(value: Any, limit: int) -> tuple[str, int]:
    t = type(value)
    if t is str:
        if len(value) <= limit // 4:  # ≤ 4 bytes per char: cannot exceed the limit
            data = value.encode("utf-8", "surrogatepass")
            return "sha256:" + hashlib.sha256(data).hexdigest(), len(data)
        if len(value) <= limit:
            data = value.encode("utf-8", "surrogatepass")
            if len(data) <= limit:
                return "sha256:" + hashlib.sha256(data).hexdigest(), len(data)
        # Over the cap: sampled by characters, as documented (not by UTF-8 bytes).
        half = limit // 2
        h = hashlib.sha256(f"{len(value)}:".encode())
        n = len(value)
        # 64 Ki-character slices: no multi-MiB temporary per sample.
        for lo, hi in ((0, half), (n - half, n)):
            for start in range(lo, hi, 65536):
                h.update(value[start:min(start + 65536, hi)].encode("utf-8", "surrogatepass"))
        return "sha256-sampled:" + _hex(h), len(value)
    if t is bytes or t is bytearray or t is memoryview:
        return _bytes_digest(value, limit)
    if isinstance(value, BaseException):
        data = _exc_text(value).encode("utf-8", "surrogatepass")
        return _bytes_digest(data, limit)
    if not isinstance(value, _JSON_TYPES):
        dump = getattr(value, "model_dump", None)
        if callable(dump):
            value = dump(mode="json")
        else:
            data = type_name(value).encode()
            return "sha256:" + hashlib.sha256(data).hexdigest(), len(data)
    return _json_digest(value, limit)


def _bytes_digest(data: Any, limit: int) -> tuple[str, int]:
    n = len(data)
    if n <= limit:
        return "sha256:" + hashlib.sha256(data).hexdigest(), n
    half = limit // 2
    mv = memoryview(data)
    h = hashlib.sha256(f"{n}:".encode())
    h.update(mv[:half])
    h.update(mv[n - half:])
    return "sha256-sampled:" + _hex(h), n


def _fits(value: Any, limit: int) -> bool:
    """Cheap bounded walk: True when the canonical JSON is surely under ``limit``.

    Leaves are charged where their container is scanned (no stack round trip per
    leaf); only containers go on the stack. At most 50 000 nodes are looked at.
    """
    budget = limit // 2  # rough: ~2 bytes per char/number of overhead at most
    nodes = 0
    stack = [value]
    push = stack.append
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            budget -= 2 * len(v)
            try:
                budget -= 2 * sum(map(len, v))  # str keys, summed in C
            except TypeError:  # non-str keys (json converts them): count the str ones
                budget -= 2 * sum(len(k) for k in v if type(k) is str)
            items: Any = v.values()
        elif isinstance(v, list | tuple):
            budget -= len(v)
            items = v
        else:  # a non-container root (the caller only passes JSON types)
            items = (v,)
        nodes += len(items)
        if nodes > 50_000:
            return False
        for x in items:
            tx = type(x)
            if tx is str:
                budget -= 2 * len(x) + 2
            elif tx in _FLAT_SCALARS:
                budget -= 32
            elif tx is dict or tx is list or tx is tuple:
                push(x)
            elif tx is bytes or tx is bytearray:
                budget -= 2 * len(x) + 16
            elif isinstance(x, dict | list | tuple):  # subclasses: walked too
                push(x)
            else:
                budget -= 32
        if budget < 0:
            return False
    return True


def _json_key(key: Any) -> str:
    """A dict key converted as ``json.dumps`` converts it (``str()`` for the rest)."""
    if isinstance(key, str):
        return key
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, int | float):
        return json.dumps(key)
    return str(key)


def _str_keys(value: Any, active: set[int]) -> Any:
    """Copy of a tree with every dict key converted by ``_json_key`` (cycles raise)."""
    if isinstance(value, dict | list | tuple):
        if id(value) in active:
            raise ValueError("circular reference")
        active.add(id(value))
        try:
            if isinstance(value, dict):
                return {_json_key(k): _str_keys(v, active) for k, v in value.items()}
            return [_str_keys(v, active) for v in value]
        finally:
            active.discard(id(value))
    return value


def _encode(value: Any) -> str:
    try:
        return _ENCODER.encode(value)
    except TypeError:  # keys json cannot sort or convert: convert them first
        return _ENCODER.encode(_str_keys(value, set()))


def _prefix_digest(value: Any, limit: int) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    for chunk in _ENCODER.iterencode(value):
        data = chunk.encode("utf-8", "surrogatepass")
        if size + len(data) > limit:
            h.update(data[: limit - size])
            return "sha256-prefix:" + _hex(h), -1
        h.update(data)
        size += len(data)
    return "sha256:" + _hex(h), size


_FLAT_SCALARS = frozenset({int, float, bool, type(None)})


def _small_flat(value: Any) -> bool:
    """A short container of scalars/short strings: surely under any cap, so the
    bounded walk of ``_fits`` can be skipped."""
    t = type(value)
    if t is dict:
        if len(value) > 64 or not all(type(k) is str and len(k) <= 256 for k in value):
            return False
        items: Any = value.values()
    elif t is list or t is tuple:
        items = value
    else:
        return False
    if len(value) > 64:
        return False
    for v in items:
        tv = type(v)
        if tv is str:
            if len(v) > 1024:
                return False
        elif tv not in _FLAT_SCALARS:
            return False
    return True


def _json_digest(value: Any, limit: int) -> tuple[str, int]:
    if _small_flat(value) or _fits(value, limit):
        try:
            data = _encode(value).encode("utf-8", "surrogatepass")
        except (ValueError, TypeError, RecursionError):
            data = type_name(value).encode()
        return "sha256:" + hashlib.sha256(data).hexdigest(), len(data)
    try:
        try:
            return _prefix_digest(value, limit)
        except TypeError:  # keys json cannot sort or convert: convert them first
            return _prefix_digest(_str_keys(value, set()), limit)
    except (ValueError, TypeError, RecursionError):  # cycles, hostile objects
        data = type_name(value).encode()
        return "sha256:" + hashlib.sha256(data).hexdigest(), len(data)


def canonical_bytes(value: Any) -> bytes:
    """The full canonical serialization (for documentation and tests)."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, BaseException):
        return _exc_text(value).encode("utf-8", "surrogatepass")
    if not isinstance(value, _JSON_TYPES):
        dump = getattr(value, "model_dump", None)
        if not callable(dump):
            return type_name(value).encode()
        value = dump(mode="json")
    return _encode(value).encode("utf-8", "surrogatepass")

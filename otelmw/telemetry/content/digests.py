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

The digest value names its algorithm. Digests are keyed: SHA-256 of a secret 64-byte
block followed by the data, the block being the SHA-512 of the deployment's digest key
(``OTELMW_DIGEST_KEY``, else the key generated once in ``$OTELMW_HOME/digest.key``, mode
0600; see ``load_key`` and ``key_block``), so a short result (a PIN) cannot be recovered
by hashing candidates without the key, while every process of one deployment (same key)
gives the same digest for the same value. Why this construction and not HMAC or keyed
BLAKE2b: docs/telemetry.md, Digests.

* ``sha256-keyed:<hex>`` — of the whole canonical serialization.
* ``sha256-keyed-sampled:<hex>`` — ``str``/``bytes`` whose serialization is larger than
  ``max_bytes`` (default 4 MiB, ``OTELMW_DIGEST_MAX_BYTES``): of
  ``b"<length>:" + head + tail``, head/tail being the first and last
  ``max_bytes // 2`` bytes (for ``str``: characters, UTF-8 encoded; length in
  characters). Cost is bounded by ``max_bytes`` whatever the size.
* ``sha256-keyed-prefix:<hex>`` — a JSON tree whose canonical JSON exceeds
  ``max_bytes``: of its first ``max_bytes`` bytes (encoding stops there).

``size`` is the byte length of the canonical serialization (for sampled ``str``:
its length in characters; for a prefix-hashed tree: ``-1``, unknown).

Speed: a *plain* tree — only ``dict`` (``str`` keys), ``list``, ``tuple``, ``str``,
``int``, ``bool``, ``None`` and floats that ``json`` and ``orjson`` write alike
(zero, or ``1e-4 <= |x| < 1e16``) — is encoded by ``orjson`` with sorted keys,
which writes exactly the bytes of the canonical JSON above about eight times
faster. Anything else (exponent floats, NaN, non-``str`` keys, big ints, lone
surrogates, objects) takes the ``json`` encoder; the digest is the same either
way (an import-time probe turns the fast path off if the installed ``orjson``
ever writes the probe tree differently).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import secrets
import threading
from pathlib import Path
from typing import Any, Final

from ...config import settings as cfg
from ...core.failures import exported_type_name

try:  # optional at import (a dependency of the package): only an accelerator
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised by test_digest_without_orjson
    _orjson = None  # type: ignore[assignment]

_DEFAULT_MAX: Final = cfg.DIGEST_MAX_BYTES.default
WHOLE: Final = "sha256-keyed:"
SAMPLED: Final = "sha256-keyed-sampled:"
PREFIX: Final = "sha256-keyed-prefix:"
KEY_FILE: Final = "digest.key"
logger = logging.getLogger("otelmw")
_JSON_SCALARS = (str, int, float, bool, type(None))
_JSON_TYPES = (dict, list, tuple, *_JSON_SCALARS)


#: The bound ``digest`` applies when none is given: ``OTELMW_DIGEST_MAX_BYTES``'s default
#: (the observer digests with the configured bound its settings hand it).
MAX_BYTES: Final = cfg.DIGEST_MAX_BYTES.default


def type_name(value: Any) -> str:
    t = type(value)
    return t.__qualname__ if t.__module__ == "builtins" else exported_type_name(t)


def _exc_text(exc: BaseException) -> str:
    try:
        msg = str(exc)
    except Exception:
        msg = ""
    return f"{exported_type_name(type(exc))}: {msg}"


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


# ------------------------------------------------------------------- the key
# The key block is absorbed once into ``_mac`` (one SHA-256 block, compressed); a digest
# is one ``copy()`` of it, the data and the final block: no key processing and, unlike
# HMAC, no second hash per digest (which doubles a small digest's cost); SHA-256 runs
# in hardware on current x86 and ARM CPUs, about twice BLAKE2b's speed here.
# ``None`` until the first digest (or ``use_key``). Process-wide runtime state, not a
# setting handed down: the key is the deployment's (every process of it agrees), and
# the public ``digest()`` must give what the observer exported without ``configure()``.
_mac: Any = None
_key_lock = threading.Lock()


def key_block(key: bytes) -> bytes:
    """The secret block every digest's SHA-256 starts with: the SHA-512 of the key
    material ``key`` (64 bytes, exactly one SHA-256 block)."""
    return hashlib.sha512(key).digest()


def use_key(key: bytes) -> None:
    """Key every later digest with ``key`` (bytes; see ``load_key``)."""
    global _mac
    _mac = hashlib.sha256(key_block(key))


def load_key(home: Path | None, given: str) -> bytes:
    """The deployment's digest key: ``given`` (``OTELMW_DIGEST_KEY``) when set, else the
    text of ``home``'s (``OTELMW_HOME``'s, default ``~/.otelmw``) ``digest.key`` (created
    on first use: 32 random bytes as 64 hex characters, mode 0600; concurrent first
    processes agree on one file), UTF-8 encoded without surrounding whitespace. Raises
    ``OSError`` when the file can be neither read nor created, ``ValueError`` when it
    holds fewer than 16 characters."""
    if given:
        return given.encode("utf-8")
    path = (home if home is not None else Path.home() / ".otelmw") / KEY_FILE
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        text = _create_key_file(path)
    if len(text) < 16:
        raise ValueError(f"digest key file {path} holds fewer than 16 characters")
    return text.encode("utf-8")


def _create_key_file(path: Path) -> str:
    """Write a new key beside ``path`` (0600) and link it into place; a process that
    lost the race to create it reads the winner's key."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    text = secrets.token_hex(32)
    tmp = path.with_name(f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
        try:
            os.link(tmp, path)  # atomic, and never replaces an existing key
        except FileExistsError:
            return path.read_text(encoding="utf-8").strip()
    finally:
        tmp.unlink(missing_ok=True)
    return text


def _usable_key(home: Path | None, given: str) -> bytes:
    """``load_key``, or without a usable key a per-process random one, with one
    warning. Never raises."""
    try:
        return load_key(home, given)
    except (OSError, ValueError) as exc:
        logger.warning(
            "otelmw: no digest key (%s); this process's digests use a random key "
            "and cannot be compared with other processes' - set OTELMW_DIGEST_KEY "
            "or make $OTELMW_HOME writable", exc)
        return secrets.token_bytes(32)


def use_settings(settings: cfg.Settings) -> None:
    """Key every later digest with the key ``settings`` name (``configure()``: its
    ``OTELMW_DIGEST_KEY``, else the key file of its ``OTELMW_HOME``, created now when
    missing). Never raises (see ``_usable_key``)."""
    global _mac
    key = _usable_key(settings[cfg.HOME], settings[cfg.DIGEST_KEY])
    with _key_lock:
        _mac = hashlib.sha256(key_block(key))


def _keyed() -> Any:
    """The keyed SHA-256 state, loading the key the environment's settings name on first
    use (a program that digests without ``configure()``; a bad setting warns and keeps
    its default). Never raises."""
    with _key_lock:
        if _mac is None:
            settings = cfg.load(strict=False)
            use_key(_usable_key(settings[cfg.HOME], settings[cfg.DIGEST_KEY]))
    return _mac


def _new_hash() -> Any:
    """A fresh keyed hash to feed data into (finish it with ``hexdigest()``)."""
    return (_mac if _mac is not None else _keyed()).copy()


def _keyed_hex(data: Any) -> str:
    h = (_mac if _mac is not None else _keyed()).copy()
    h.update(data)
    return str(h.hexdigest())


def _whole(data: Any) -> tuple[str, int]:
    """The ``sha256-keyed:`` digest of a whole serialization, and its size."""
    return WHOLE + _keyed_hex(data), len(data)


def _type_digest(value: Any) -> tuple[str, int]:
    """What cannot be serialized (cycles, hostile objects): its type tag's digest."""
    return _whole(type_name(value).encode())


def digest(value: Any, max_bytes: int | None = None) -> tuple[str, int]:
    """``(digest, size)`` of ``value``'s canonical serialization. Never raises."""
    limit = MAX_BYTES if max_bytes is None else max_bytes
    t = type(value)
    if (t is str or t is bytes) and len(value) <= 4096 and limit >= 16384:  # common case
        data = value.encode("utf-8", "surrogatepass") if t is str else value
        h = (_mac if _mac is not None else _keyed()).copy()  # _keyed_hex, inlined
        h.update(data)
        return WHOLE + h.hexdigest(), len(data)
    try:
        if t is dict or t is list:  # the common tool results: straight to the JSON path
            # Inlined copy of _json_digest's first case (one flat orjson encode, no
            # walk): two calls fewer is 0.07 of the 100 B dict's 0.9 µs.
            shape = _small_flat(value)
            if shape == _PLAIN:
                try:
                    data = _orjson.dumps(value, None, _ORJSON_OPTS)
                except Exception:  # big ints, lone surrogates: json's turn, not orjson's again
                    shape = _JSON
                else:
                    if len(data) <= limit:  # _keyed_hex, inlined
                        h = (_mac if _mac is not None else _keyed()).copy()
                        h.update(data)
                        return WHOLE + h.hexdigest(), len(data)
            return _json_digest(value, limit, shape)
        return _digest(value, limit)
    except Exception:
        return _type_digest(value)


def _digest(value: Any, limit: int) -> tuple[str, int]:
    t = type(value)
    if t is str:
        if len(value) <= limit // 4:  # ≤ 4 bytes per char: cannot exceed the limit
            return _whole(value.encode("utf-8", "surrogatepass"))
        if len(value) <= limit:
            data = value.encode("utf-8", "surrogatepass")
            if len(data) <= limit:
                return _whole(data)
        # Over the cap: sampled by characters, as documented (not by UTF-8 bytes).
        half = limit // 2
        h = _new_hash()
        h.update(f"{len(value)}:".encode())
        n = len(value)
        # 64 Ki-character slices: no multi-MiB temporary per sample.
        for lo, hi in ((0, half), (n - half, n)):
            for start in range(lo, hi, 65536):
                h.update(value[start:min(start + 65536, hi)].encode("utf-8", "surrogatepass"))
        return SAMPLED + h.hexdigest(), len(value)
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
            return _type_digest(value)
    return _json_digest(value, limit)


def _bytes_digest(data: Any, limit: int) -> tuple[str, int]:
    n = len(data)
    if n <= limit:
        return _whole(data)
    half = limit // 2
    mv = memoryview(data)
    h = _new_hash()
    h.update(f"{n}:".encode())
    h.update(mv[:half])
    h.update(mv[n - half:])
    return SAMPLED + h.hexdigest(), n


# What the bounded walks report about a JSON tree.
_TOO_BIG: Final = 0  # over the cap (or too many nodes): prefix-hashed
_JSON: Final = 1  # under the cap; needs the ``json`` encoder
_PLAIN: Final = 2  # under the cap and plain: ``orjson`` writes the same bytes


def _fits(value: Any, limit: int) -> int:
    """Cheap bounded walk: ``_JSON``/``_PLAIN`` when the canonical JSON is surely
    under ``limit``, else ``_TOO_BIG``.

    Leaves are charged where their container is scanned (no stack round trip per
    leaf); only containers go on the stack. At most 50 000 nodes are looked at.
    The same scan tells whether the tree is plain (see the module docstring).
    """
    budget = limit // 2  # rough: ~2 bytes per char/number of overhead at most
    nodes = 0
    plain = True
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
                plain = False
            items: Any = v.values()
        elif isinstance(v, list | tuple):
            budget -= len(v)
            items = v
        else:  # a non-container root (the caller only passes JSON types)
            items = (v,)
        nodes += len(items)
        if nodes > 50_000:
            return _TOO_BIG
        for x in items:
            tx = type(x)
            if tx is str:
                budget -= 2 * len(x) + 2
            elif tx is float:
                budget -= 32
                if x != 0.0 and not 1e-4 <= abs(x) < 1e16:  # exponent form, NaN, inf
                    plain = False
            elif tx in _FLAT_SCALARS:
                budget -= 32
            elif tx is dict or tx is list or tx is tuple:
                push(x)
            elif tx is bytes or tx is bytearray:
                budget -= 2 * len(x) + 16
                plain = False
            elif isinstance(x, dict | list | tuple):  # subclasses: walked too
                push(x)
            else:
                budget -= 32
                plain = False
        if budget < 0:
            return _TOO_BIG
    return _PLAIN if plain and _ORJSON_SAME_BYTES else _JSON


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


class _Full(Exception):
    """The canonical JSON reached the cap: encoding stops there."""


_JSON_KEY_TYPES = (str, int, float, bool, type(None))


def _stream_digest(value: Any, limit: int) -> tuple[str, int]:
    """Digest of a big tree's canonical JSON, encoded piece by piece into the hash
    and stopped at ``limit`` bytes (``sha256-keyed-prefix``). Short flat containers — rows,
    64-item slices of long lists — are encoded whole by the C encoders, so a huge
    tree costs about one small encode per row, never a Python step per character.
    Raises ``TypeError`` for keys json cannot sort or convert (the caller converts
    the whole tree's keys and starts again, as ``_encode`` does), ``ValueError``
    for cycles."""
    h = _new_hash()
    size = 0
    active: set[int] = set()

    def write(data: bytes) -> None:
        nonlocal size
        if size + len(data) > limit:
            h.update(data[: limit - size])
            raise _Full
        h.update(data)
        size += len(data)

    def emit(v: Any) -> None:
        shape = _small_flat(v)
        if shape:
            write(_flat_bytes(v, shape))
        elif isinstance(v, dict | list | tuple):
            if id(v) in active:
                raise ValueError("circular reference")
            active.add(id(v))
            if isinstance(v, dict):
                emit_dict(v)
            else:
                write(b"[")
                for i in range(0, len(v), 64):
                    part = v[i:i + 64]
                    shape = _small_flat(part)
                    if shape:  # the slice's array without its brackets
                        write((b"," if i else b"") + _flat_bytes(part, shape)[1:-1])
                        continue
                    for j, x in enumerate(part):
                        if i or j:
                            write(b",")
                        emit(x)
                write(b"]")
            active.discard(id(v))
        elif isinstance(v, _JSON_SCALARS):
            write(_ENCODER.encode(v).encode("utf-8", "surrogatepass"))
        else:
            emit(_json_default(v))  # as json does with the value ``default`` returns

    def emit_dict(v: dict[Any, Any]) -> None:
        if all(type(k) is str for k in v):
            keys: list[Any] = sorted(v)
            names = keys
        else:  # json's order: sorted by the original key, then converted
            keys = sorted(v)  # TypeError when unsortable: the caller converts keys
            if not all(isinstance(k, _JSON_KEY_TYPES) for k in keys):
                raise TypeError("keys must be str, int, float, bool or None")
            names = [_json_key(k) for k in keys]
        write(b"{")
        for n, (k, name) in enumerate(zip(keys, names, strict=True)):
            sep = b"," if n else b""
            write(sep + _ENCODER.encode(name).encode("utf-8", "surrogatepass") + b":")
            emit(v[k])
        write(b"}")

    try:
        emit(value)
    except _Full:
        return PREFIX + h.hexdigest(), -1
    return WHOLE + h.hexdigest(), size


def _flat_bytes(value: Any, shape: int) -> bytes:
    """Canonical JSON of a tree the walks found under the cap (``_JSON``/``_PLAIN``)."""
    if shape == _PLAIN:
        try:
            return _orjson.dumps(value, None, _ORJSON_OPTS)
        except Exception:  # big ints, lone surrogates, depth > 254: json's turn
            pass
    return _encode(value).encode("utf-8", "surrogatepass")


_FLAT_SCALARS = frozenset({int, bool, type(None)})  # floats: checked apart


def _small_flat(value: Any) -> int:
    """A short container of scalars/short strings encodes to at most ~0.5 MB, so
    the bounded walk of ``_fits`` can be skipped (the caller still compares the
    encoding with the cap): ``_JSON``/``_PLAIN`` for one, ``_TOO_BIG`` (meaning:
    walk it) for anything else."""
    t = type(value)
    if t is dict:
        if len(value) > 64:
            return _TOO_BIG
        for k in value:  # a plain loop: cheaper than all(...) or map() at this size
            if type(k) is not str or len(k) > 256:
                return _TOO_BIG
        items: Any = value.values()
    elif t is list or t is tuple:
        items = value
    else:
        return _TOO_BIG
    if len(value) > 64:
        return _TOO_BIG
    plain = _ORJSON_SAME_BYTES
    for v in items:
        tv = type(v)
        if tv is str:
            if len(v) > 1024:
                return _TOO_BIG
        elif tv is float:
            if v != 0.0 and not 1e-4 <= abs(v) < 1e16:
                plain = False
        elif tv not in _FLAT_SCALARS:
            return _TOO_BIG
    return _PLAIN if plain else _JSON


# orjson options: sorted keys; types json would not encode natively go to the
# (absent) default, i.e. raise, so the json encoder handles them.
_ORJSON_OPTS: Final = (0 if _orjson is None else _orjson.OPT_SORT_KEYS
                       | _orjson.OPT_PASSTHROUGH_DATACLASS | _orjson.OPT_PASSTHROUGH_DATETIME
                       | _orjson.OPT_PASSTHROUGH_SUBCLASS)
_PROBE: Final = {"b": [0.0, -0.0, 0.5, 1e-4, 0.1, 1 / 3, 9999999999999998.0, 123.456, -2.5e-3],
                 "a": {"\u00e9\n\t\x7f\u2028\U0001f600\"\\/\x00": [1, True, None, -7, 2**63 - 1]},
                 "\u00e9": "", "Z": [[], {}]}


def _probe_fast_path() -> bool:
    """True when the installed orjson writes the probe tree exactly as json does."""
    if _orjson is None:
        return False
    try:
        return bool(_orjson.dumps(_PROBE, option=_ORJSON_OPTS) == _ENCODER.encode(_PROBE).encode())
    except Exception:  # pragma: no cover - a broken orjson install
        return False


_ORJSON_SAME_BYTES = _probe_fast_path()  # False: every tree takes the json encoder


def _json_digest(value: Any, limit: int, flat: int | None = None) -> tuple[str, int]:
    """``flat``: ``_small_flat(value)`` when the caller already has it."""
    try:
        shape = (_small_flat(value) if flat is None else flat) or _fits(value, limit)
        if shape:
            data = _flat_bytes(value, shape)
            if len(data) <= limit:
                return _whole(data)
            # the walks' estimate is rough (and a tiny explicit cap is possible)
            return PREFIX + _keyed_hex(data[:limit]), -1
        try:
            return _stream_digest(value, limit)
        except TypeError:  # keys json cannot sort or convert: convert them first
            return _stream_digest(_str_keys(value, set()), limit)
    except (ValueError, TypeError, RecursionError):  # cycles, hostile objects
        return _type_digest(value)


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

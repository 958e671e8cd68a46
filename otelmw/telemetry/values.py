"""Attribute values made safe for OTLP, shared by the parts of the observer.

Host-provided names and ids are bounded and made valid UTF-8 (a lone surrogate
would make protobuf reject the whole export batch); error descriptions are
redacted (by the installed redactor, ``content.redact``) and shortened.
"""

from __future__ import annotations

from typing import Any

from . import attributes as a
from .content import redact

MAX_STR = 1024
_MAX_META_KEYS = 32


def error_type(exc: BaseException) -> str:
    # Host wrappers are unwrapped by their adapter (Hermes' downstream wrapper in
    # instrumentation/hermes.py), not guessed here from an ``original`` attribute.
    t = type(exc)
    return f"{t.__module__}.{t.__qualname__}"


def clean_str(value: Any, limit: int = 256) -> Any:
    """A host-provided name/id made safe for OTLP: bounded, valid UTF-8 (a lone
    surrogate would make protobuf reject the whole export batch)."""
    if not isinstance(value, str):
        return value
    if len(value) > limit:
        value = value[:limit]
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            value = value.encode("utf-8", "replace").decode("utf-8")
    return value


def short_text(text: Any, limit: int = MAX_STR) -> str:
    try:
        s = text if isinstance(text, str) else str(text)
    except Exception:
        s = "<unprintable>"
    s = redact(s[: limit * 2])
    return str(clean_str(s if len(s) <= limit else s[: limit - 1] + "…", limit))


_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1


def otlp_number(value: Any) -> bool | int | float | None:
    """``value`` if OTLP can carry it as a number (a bool, a double, an int that
    fits int64), else None. A larger int makes the exporter drop the attribute
    with a traceback on every export, so it is bounded here, at the source."""
    if isinstance(value, bool | float):
        return value
    if isinstance(value, int):
        n = int.__int__(value)  # a plain int: an int subclass's comparisons are not run
        return n if _INT64_MIN <= n <= _INT64_MAX else None
    return None


def port_number(value: Any) -> int | None:
    """A TCP/UDP port (1–65535), else None."""
    n = otlp_number(value)
    return n if type(n) is int and 0 < n < 65536 else None


def _int_text(value: int) -> str:
    try:
        return str(value)
    except ValueError:  # more digits than int-to-str conversion allows
        return f"<int of {int.bit_length(value)} bits>"


def flatten_metadata(meta: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not isinstance(meta, dict):
        return out
    for key, value in meta.items():
        if len(out) >= _MAX_META_KEYS:
            break
        k = a.OTELMW_RESULT_METADATA_PREFIX + clean_str(str(key), 64)
        if isinstance(value, bool | int | float):
            n = otlp_number(value)
            # An int beyond int64 is kept as its decimal text (bounded).
            out[k] = n if n is not None else clean_str(_int_text(int.__int__(value)))  # type: ignore[arg-type]  # only ints are out of range
        elif isinstance(value, str):
            out[k] = clean_str(value)
    return out


def put_present(out: dict[str, Any], items: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    """Add each ``(key, value)`` whose value is set, cleaned (optional ids)."""
    for key, value in items:
        if value:
            out[key] = clean_str(value)
    return out

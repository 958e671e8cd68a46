"""Attribute values made safe for OTLP, shared by the parts of the observer.

Host-provided names and ids are bounded and made valid UTF-8 (a lone surrogate
would make protobuf reject the whole export batch); error descriptions are
redacted and shortened.
"""

from __future__ import annotations

from typing import Any

from . import attributes as a
from .content import default_redactor

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
    s = default_redactor(s[: limit * 2])
    return str(clean_str(s if len(s) <= limit else s[: limit - 1] + "…", limit))


def flatten_metadata(meta: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not isinstance(meta, dict):
        return out
    for key, value in meta.items():
        if len(out) >= _MAX_META_KEYS:
            break
        k = a.OTELMW_RESULT_METADATA_PREFIX + clean_str(str(key), 64)
        if isinstance(value, bool | int | float):
            out[k] = value
        elif isinstance(value, str):
            out[k] = clean_str(value)
    return out


def put_present(out: dict[str, Any], items: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    """Add each ``(key, value)`` whose value is set, cleaned (optional ids)."""
    for key, value in items:
        if value:
            out[key] = clean_str(value)
    return out

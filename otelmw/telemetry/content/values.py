"""Attribute values made safe for OTLP, shared by the parts of the observer.

Host-provided names and ids are bounded and made valid UTF-8 (a lone surrogate
would make protobuf reject the whole export batch); error descriptions are
redacted (by the installed redactor, ``policy.redact``) and shortened.
"""

from __future__ import annotations

from typing import Any

from .. import attributes
from .policy import redact

MAX_STR = 1024
_MAX_META_KEYS = 32


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
# Built once: ``isinstance(v, bool | float)`` would build the union on every call.
_BOOL_OR_FLOAT = bool | float
_NUMBER = bool | int | float


def otlp_number(value: Any) -> bool | int | float | None:
    """``value`` if OTLP can carry it as a number (a bool, a double, an int that
    fits int64), else None. A larger int makes the exporter drop the attribute
    with a traceback on every export, so it is bounded here, at the source."""
    if isinstance(value, _BOOL_OR_FLOAT):
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


def provider_error_summary(exc: BaseException) -> str | None:
    """For an error made from a provider's HTTP error response (the openai and anthropic
    SDKs' ``APIStatusError`` and alike: an int ``status_code`` and a ``body``), its type,
    HTTP status, error type and code — never the body's message, which providers fill
    with the request's content (``Invalid content: <the prompt>``). ``None`` for any
    other exception. Never raises."""
    try:
        status = getattr(exc, "status_code", None)
        if type(status) is not int or not hasattr(exc, "body"):
            return None
        body = getattr(exc, "body", None)
        detail = body.get("error", body) if isinstance(body, dict) else None
        if not isinstance(detail, dict):
            detail = {}
        parts = [f"HTTP {status}"]
        kind = detail.get("type") or getattr(exc, "type", None)
        code = detail.get("code") or getattr(exc, "code", None)
        if isinstance(kind, str) and kind:
            parts.append(kind)
        if isinstance(code, str | int) and not isinstance(code, bool) and code:
            parts.append(f"code {code}")
        return short_text(f"{type(exc).__name__}: {', '.join(parts)}", 256)
    except Exception:
        return None


def error_description(exc: BaseException, with_content: bool) -> str:
    """A span's status description for ``exc``: redacted and bounded; a provider error
    response is summarized by ``provider_error_summary`` unless content goes on spans."""
    if not with_content:
        summary = provider_error_summary(exc)
        if summary is not None:
            return summary
    return short_text(exc, 256)


def flatten_metadata(meta: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not isinstance(meta, dict):
        return out
    for key, value in meta.items():
        if len(out) >= _MAX_META_KEYS:
            break
        k = attributes.OTELMW_RESULT_METADATA_PREFIX + clean_str(str(key), 64)
        if isinstance(value, _NUMBER):
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

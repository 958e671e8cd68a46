"""Content capture policy: off by default, truncated and redacted when on.

``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``:
``NO_CONTENT`` (default; also ``false``), ``SPAN_ONLY`` (also ``true``),
``EVENT_ONLY``, ``SPAN_AND_EVENT``. ``OTELMW_CONTENT_MAX_LENGTH`` (default 4096
characters) truncates each captured value. Before anything is exported the
redactor (``set_redactor``; default masks API keys, bearer tokens and
``key=value`` secrets) runs over the serialized text.
"""

from __future__ import annotations

import json
import re
import reprlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from .. import settings as cfg
from .digests import _json_default

_RENDER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=_json_default)

NO_CONTENT: Final = "NO_CONTENT"
SPAN_ONLY: Final = "SPAN_ONLY"
EVENT_ONLY: Final = "EVENT_ONLY"
SPAN_AND_EVENT: Final = "SPAN_AND_EVENT"
MODES: Final = cfg.CAPTURE_MODES
ENV_MODE: Final = cfg.CAPTURE_CONTENT.name
ENV_MAX: Final = cfg.CONTENT_MAX_LENGTH.name

_SECRET_PATTERNS: Final = [
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{12,}"),
    re.compile(r"\bsk-ant-[A-Za-z0-9_-]{12,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),
    re.compile(r"\bxox[abpr]-[A-Za-z0-9-]{10,}"),
    re.compile(
        r"(?i)(\"?(?:api[_-]?key|x-api-key|authorization|access[_-]?token|secret|password)"
        r"\"?\s*[:=]\s*\"?)([^\s\",}]{4,})"
    ),
]
REDACTED: Final = "[REDACTED]"


def default_redactor(text: str) -> str:
    """Mask API keys, bearer tokens and ``key: value`` secrets."""
    for i, pat in enumerate(_SECRET_PATTERNS):
        if i == len(_SECRET_PATTERNS) - 1:
            text = pat.sub(lambda m: m.group(1) + REDACTED, text)
        else:
            text = pat.sub(REDACTED, text)
    return text


Redactor = Callable[[str], str]
_redactor: Redactor = default_redactor


def set_redactor(redactor: Redactor | None) -> None:
    """Install a redaction hook (``None`` restores the default). Validated here."""
    global _redactor
    if redactor is not None and not callable(redactor):
        raise TypeError("redactor must be a callable str -> str")
    _redactor = redactor if redactor is not None else default_redactor


def parse_mode(value: str | None) -> str:
    """Parse the capture-mode env value; raise ``ValueError`` on a typo."""
    if not (value or "").strip():
        return NO_CONTENT
    try:
        return cfg.CAPTURE_CONTENT.parse(value or "")
    except ValueError:
        raise ValueError(cfg.CAPTURE_CONTENT.problem(value or "")) from None


@dataclass(frozen=True, slots=True)
class ContentPolicy:
    mode: str = NO_CONTENT
    max_length: int = 4096

    @property
    def on_spans(self) -> bool:
        return self.mode in (SPAN_ONLY, SPAN_AND_EVENT)

    @property
    def on_events(self) -> bool:
        return self.mode in (EVENT_ONLY, SPAN_AND_EVENT)

    @classmethod
    def from_env(cls) -> ContentPolicy:
        """From the environment; ``ValueError`` on an invalid value."""
        return cls.from_settings(cfg.load())

    @classmethod
    def from_settings(cls, settings: cfg.Settings) -> ContentPolicy:
        return cls(settings[cfg.CAPTURE_CONTENT], settings[cfg.CONTENT_MAX_LENGTH])

    def render(self, value: Any) -> str:
        """Serialize (bounded), redact, truncate and clean one captured value.
        Never raises; the cost is bounded by ``max_length`` whatever the value."""
        cap = self.max_length * 4
        try:
            if isinstance(value, str):
                text = value[:cap]
            elif isinstance(value, bytes | bytearray | memoryview):
                text = bytes(value[:cap]).decode("utf-8", "replace")
            else:
                parts: list[str] = []
                size = 0
                for chunk in _RENDER.iterencode(value):  # stops early on huge values
                    parts.append(chunk)
                    size += len(chunk)
                    if size >= cap:
                        break
                text = "".join(parts)[:cap]
        except Exception:
            try:
                text = reprlib.repr(value)
            except Exception:
                text = f"<{type(value).__name__}>"
        try:
            text = _redactor(text)
        except Exception:
            text = default_redactor(text)
        if len(text) > self.max_length:
            text = text[: self.max_length - 15] + "…[truncated]"
        if not text.isascii():  # lone surrogates would make the OTLP batch fail
            text = text.encode("utf-8", "replace").decode("utf-8")
        return text

"""Content capture policy: off by default, truncated and redacted when on.

``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``:
``NO_CONTENT`` (default; also ``false``), ``SPAN_ONLY`` (also ``true``),
``EVENT_ONLY``, ``SPAN_AND_EVENT``. ``OTELMW_CONTENT_MAX_LENGTH`` (default 4096
characters) truncates each captured value. Before anything is exported the
redactor (``set_redactor``; ``default_redactor`` masks credential forms) runs over the
serialized text — and, through ``redact``, over the error messages, status
descriptions and middleware reasons recorded under every mode.

The GenAI message attributes (``render_messages``, shapes from ``messages``) stay valid
JSON of the conventions' schemas when they are cut: the redactor runs over each part's
content, and a value too long is cut *inside* part contents (text, arguments, responses),
never at the end of the JSON text.
"""

from __future__ import annotations

import itertools
import json
import re
import reprlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any, Final, NamedTuple

from ...config import settings as cfg
from ..attributes import MIME_JSON, MIME_TEXT
from ..shapes.messages import BINARY, CONTENT_FIELDS, OPTIONAL
from .digests import _json_default

_RENDER = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=_json_default)
# Message attributes: compact, in the schema's key order, strict JSON (no NaN).
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                            default=str)
# ``_COMPACT.encode`` without what it does on every call (build a C encoder, with a
# cycle check): the values encoded here are the message shapes' own acyclic copies, many
# times per message attribute.
_COMPACT_C: Final = None if c_make_encoder is None else c_make_encoder(
    None, str, encode_basestring, None, ":", ",", False, False, False)


def _dumps(value: Any) -> str:
    if isinstance(value, str):
        return encode_basestring(value)
    if _COMPACT_C is None:
        return _COMPACT.encode(value)
    return "".join(_COMPACT_C(value, 0))


MIN_SHARE: Final = 32  # characters of content each message taken is promised
CUT: Final = "…"  # ends a part content that was cut (inside the content, never after the JSON)
TRUNCATED: Final = "…[truncated]"  # ends a captured text cut at the content limit

NO_CONTENT: Final = "NO_CONTENT"
SPAN_ONLY: Final = "SPAN_ONLY"
EVENT_ONLY: Final = "EVENT_ONLY"
SPAN_AND_EVENT: Final = "SPAN_AND_EVENT"
MODES: Final = cfg.CAPTURE_MODES

REDACTED: Final = "[REDACTED]"

# Key names whose value is a secret: the name ends with one of these words
# (``api_key``, ``X-Api-Key``, ``client_secret``, ``GITHUB_TOKEN``, ``Authorization``),
# not merely contains it (``max_tokens``, ``token_count``, ``author`` are left alone).
_SECRET_KEY: Final = (
    r"[\w.-]*(?:api[_-]?key|apikey|auth|authorization|access[_-]?key|secret|password|passwd"
    r"|passphrase|pwd|token|session[_-]?(?:id|key)|cookie|credentials?|private[_-]?key)"
    r"(?![\w-])")
_SCHEME: Final = r"(?:bearer|basic|token|digest|apikey)"
# ``key = value`` / ``key: value`` with the key bare, quoted (JSON, Python reprs) or
# quoted inside a JSON string (``\"key\"``); the value quoted (up to its closing quote,
# escapes honoured, spaces included) or bare (up to a delimiter); an HTTP auth scheme
# in front of the value is kept, the credential masked.
_KEY_VALUE: Final = re.compile(
    r"(?i)(?<![\w-])(?P<head>(?P<kq>\\?[\"']?)" + _SECRET_KEY + r"(?P=kq)\s*[:=]\s*)"
    r"(?:(?P<q>\\?[\"'])(?P<qv>(?:(?!(?P=q))(?:\\.|[^\\\n]))+)(?P=q)"
    r"|(?P<uv>(?:" + _SCHEME + r"\s+)?[^\s\"',;&}\])]+))")
_SCHEME_VALUE: Final = re.compile(r"(?i)^(" + _SCHEME + r"\s+)\S")
# A credential after an HTTP auth scheme anywhere in free text. ``Bearer`` in any case;
# ``Basic``/``Token``/``Digest`` capitalized and followed by something credential-like
# (a digit, a base64 character or a capital after the first letter), so prose ("Basic
# usage", "Token Support") is left alone.
_AUTH_SCHEME: Final = re.compile(
    r"\b(?P<scheme>(?i:bearer)\s+|(?:Basic|Token|Digest)\s+"
    r"(?=[\w.~+/=-]*[0-9+/=]|[\w.~+/=-][\w.~+/=-]*[A-Z]))[A-Za-z0-9._~+/=-]{8,}")
# Well-known key formats, wherever they appear.
_KNOWN_KEYS: Final = re.compile(
    r"\bsk-ant-[A-Za-z0-9_-]{12,}"  # Anthropic
    r"|\b(?:sk|pk|rk)-[A-Za-z0-9_-]{12,}"  # OpenAI and alike (sk-proj-…)
    r"|\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{10,}"  # Stripe
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"  # AWS access key ids
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"  # GitHub
    r"|\bxox[abposr]-[A-Za-z0-9-]{10,}|\bxapp-[A-Za-z0-9-]{10,}"  # Slack
    r"|\bglpat-[A-Za-z0-9_-]{20,}"  # GitLab
    r"|\bAIza[0-9A-Za-z_-]{35}"  # Google API keys
    r"|\bhf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|\bnpm_[A-Za-z0-9]{36}"  # npm
    r"|\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")  # JWTs
# Cheap tests that a text may hold what the expressions above look for (each a
# necessary condition of one expression's match: a text that fails it is left as it is
# without running the expression, which tries every position of the text).
# ``_KEY_VALUE`` needs a secret key name, an optional quote, spaces and ``:``/``=``: the
# text before each ``:``/``=``, reversed, must start with them reversed.
_ASSIGN: Final = re.compile(r"[:=]")
_KEY_BEFORE: Final = re.compile(
    r"(?i)\s*[\"']?\\?(?:yek[_-]?ipa|yekipa|htua|noitazirohtua|yek[_-]?ssecca|terces"
    r"|drowssap|dwssap|esarhpssap|dwp|nekot|(?:di|yek)[_-]?noisses|eikooc|s?laitnederc"
    r"|yek[_-]?etavirp)")
_KEY_WINDOW: Final = 64  # characters looked at before a ``:``/``=``
# Every ``_KNOWN_KEYS`` form holds one of these.
_KNOWN_KEY_HINTS: Final = ("k-", "xox", "xapp-", "glpat-", "AKIA", "ASIA", "AIza", "eyJ")
_KNOWN_KEY_UNDERSCORED: Final = ("k_", "gh", "github_pat_", "hf_", "npm_")


def _may_assign_secret(text: str) -> bool:
    """Whether ``_KEY_VALUE`` may match: a secret key name before some ``:``/``=``."""
    for found in _ASSIGN.finditer(text):
        end = found.start()
        before = text[max(0, end - _KEY_WINDOW):end][::-1]
        if _KEY_BEFORE.match(before):
            return True
        # Spaces longer than the window could hide a key name: look the slow way.
        if end > _KEY_WINDOW and len(before) - len(before.lstrip()) > _KEY_WINDOW // 2:
            return True
    return False


def _may_hold_known_key(text: str) -> bool:
    """Whether ``_KNOWN_KEYS`` may match."""
    for hint in _KNOWN_KEY_HINTS:
        if hint in text:
            return True
    if "_" in text:
        for hint in _KNOWN_KEY_UNDERSCORED:
            if hint in text:
                return True
    return False


def _may_name_auth_scheme(text: str) -> bool:
    """Whether ``_AUTH_SCHEME`` may match. (Case-insensitive matching maps no other
    character to the letters of "bearer", so ``lower()`` finds what the expression
    would.)"""
    return ("Basic" in text or "Token" in text or "Digest" in text
            or "bearer" in text.lower())


_PRIVATE_KEY: Final = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S)
_URL_PASSWORD: Final = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@]+:)[^\s@/]+(@)")


def _mask_key_value(m: re.Match[str]) -> str:
    value = m.group("qv")
    quote = m.group("q")
    if value is None:
        value, quote = m.group("uv"), ""
    scheme = _SCHEME_VALUE.match(value)
    kept = scheme.group(1) if scheme else ""
    return f"{m.group('head')}{quote}{kept}{REDACTED}{quote}"


def default_redactor(text: str) -> str:
    """Mask credentials: private key blocks, passwords in URLs, ``key=value`` /
    ``key: value`` secrets (bare, quoted, JSON, Python reprs; an auth scheme in front of
    the value is kept), ``Bearer``/``Basic``/``Token`` credentials and well-known key
    formats (``sk-…``, ``sk-ant-…``, ``sk_live_…``, ``AKIA…``, ``ghp_…``, ``github_pat_…``,
    ``xox…-``, ``glpat-…``, ``AIza…``, ``hf_…``, ``npm_…``, JWTs)."""
    if "PRIVATE KEY" in text:
        text = _PRIVATE_KEY.sub(REDACTED, text)
    if "://" in text:
        text = _URL_PASSWORD.sub(r"\1" + REDACTED + r"\2", text)
    if _may_assign_secret(text):
        text = _KEY_VALUE.sub(_mask_key_value, text)
    if _may_name_auth_scheme(text):
        text = _AUTH_SCHEME.sub(lambda m: m.group("scheme") + REDACTED, text)
    if _may_hold_known_key(text):
        text = _KNOWN_KEYS.sub(REDACTED, text)
    return text


Redactor = Callable[[str], str]
# Process-wide, not a setting: the redactor the program installed with the public
# ``set_redactor`` (at any time, before or after ``configure()``); every capture,
# error description and middleware reason of the process passes through it.
_redactor: Redactor = default_redactor


# What the default redactor made of the texts it saw lately, by text: an agent sends its
# earlier messages again on every model call, and their redaction (regular expressions
# over every character) was most of what content capture cost per message. The default
# redactor is a function of its text alone, so a text seen before gets the same answer;
# a redactor of the program's own is called every time (it may not be). Bounded by the
# characters held (keys and values; the keys are mostly the host's own strings).
REDACTED_CACHE_CHARS: Final = 1 << 21


class _RedactionMemory:
    """Process-wide runtime state: the default redactor's answers by text, and the
    characters they hold (never rebound, so ``configure()`` leaves module globals as
    they were; ``tests/test_setup_configure.py``)."""

    __slots__ = ("answers", "chars")

    def __init__(self) -> None:
        self.answers: dict[str, str] = {}
        self.chars = 0

    def redacted(self, text: str) -> str:
        if type(text) is not str:  # a subclass may hash and compare as it likes
            return default_redactor(text)
        out = self.answers.get(text)
        if out is None:
            out = default_redactor(text)
            size = len(text) + len(out)
            if self.chars + size > REDACTED_CACHE_CHARS:
                self.answers.clear()
                self.chars = 0
            if size <= REDACTED_CACHE_CHARS // 16:
                self.answers[text] = out
                self.chars += size
        return out


_REDACTED = _RedactionMemory()
_default_redacted = _REDACTED.redacted  # bound once: no extra frame per text


def redact(text: str) -> str:
    """The installed redactor over ``text`` (the default when it raises or returns
    something else than a ``str``): captured content, error descriptions, free-text
    middleware ``reason``s all pass through here."""
    redactor = _redactor
    if redactor is default_redactor:
        return _default_redacted(text)
    try:
        out = redactor(text)
    except Exception:
        return _default_redacted(text)
    return out if isinstance(out, str) else _default_redacted(text)


def set_redactor(redactor: Redactor | None) -> None:
    """Install a redaction hook (``None`` restores the default). Validated here."""
    global _redactor
    if redactor is not None and not callable(redactor):
        raise TypeError("redactor must be a callable str -> str")
    _redactor = redactor if redactor is not None else default_redactor


class MessageValue(NamedTuple):
    """One GenAI message attribute, cut to the content limit and redacted."""

    value: list[dict[str, Any]]  # structured: the events' form
    text: str  # the same as JSON text: the spans' form


@dataclass(frozen=True, slots=True)
class ContentPolicy:
    mode: str = NO_CONTENT
    max_length: int = 4096
    # Whether content goes on spans / on log records: read on every call's path, so
    # derived from ``mode`` once (the policy is frozen) rather than per read.
    on_spans: bool = field(init=False, repr=False, compare=False)
    on_events: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "on_spans", self.mode in (SPAN_ONLY, SPAN_AND_EVENT))
        object.__setattr__(self, "on_events", self.mode in (EVENT_ONLY, SPAN_AND_EVENT))

    @classmethod
    def from_settings(cls, settings: cfg.Settings) -> ContentPolicy:
        return cls(settings[cfg.CAPTURE_CONTENT], settings[cfg.CONTENT_MAX_LENGTH])

    def render(self, value: Any) -> str:
        """Serialize (bounded), redact, truncate and clean one captured value.
        Never raises; the cost is bounded by ``max_length`` whatever the value."""
        cap = self.max_length * 4
        whole_json = False
        try:
            if isinstance(value, str):
                text = value[:cap]
            elif isinstance(value, bytes | bytearray | memoryview):
                text = bytes(value[:cap]).decode("utf-8", "replace")
            else:
                text, whole_json = _bounded_json(_RENDER, value, cap)
                if not whole_json:  # too big to render whole: its first items
                    pruned = _pruned(value, cap, self.max_length)
                    text, whole_json = _bounded_json(_RENDER, pruned, cap * 2)
        except Exception:
            try:
                text = reprlib.repr(value)
            except Exception:
                text = f"<{type(value).__name__}>"
        text = redact(text)
        if len(text) > self.max_length:
            fitted = _fit_json(text, self.max_length) if whole_json else None
            text = fitted if fitted is not None else (
                text[: self.max_length - len(TRUNCATED)] + TRUNCATED)
        if not text.isascii():  # lone surrogates would make the OTLP batch fail
            text = text.encode("utf-8", "replace").decode("utf-8")
        return text

    def render_messages(self, items: list[dict[str, Any]], *,
                        keep_last: bool = False) -> str | None:
        """One GenAI message attribute (``messages`` shapes: messages, system parts or
        tool definitions) as JSON of at most ``max_length`` characters, valid against
        its schema: each part content redacted and, when the whole is too long, cut
        (every content gets an equal share of what the structure leaves; shorter ones
        are kept whole). Items whose structure alone does not fit are left out: the
        oldest (``keep_last``, input messages) or the last. ``None`` when none fits.
        Never raises; the cost is bounded by ``max_length`` whatever the value."""
        fitted = self.message_value(items, keep_last=keep_last)
        return None if fitted is None else fitted.text

    def message_value(self, items: list[dict[str, Any]], *,
                      keep_last: bool = False) -> MessageValue | None:
        """``render_messages``'s attribute both structured (what an event carries) and
        as its JSON text (what a span carries). Never raises."""
        try:
            return self._value(reversed(items) if keep_last else items, keep_last)
        except Exception:
            return None

    def newest_messages_value(self, newest_first: Iterable[dict[str, Any]]
                              ) -> MessageValue | None:
        """``message_value(items, keep_last=True)`` of the items ``newest_first`` yields,
        newest first: taken (and, from a generator, shaped) only while they fit.
        Raises what the items' source raises."""
        return self._value(newest_first, True)

    def _value(self, taking: Iterable[dict[str, Any]], newest_first: bool
               ) -> MessageValue | None:
        texts: list[str] = []
        fitted = self._fit(taking, newest_first, texts)
        if fitted is None:
            return None
        text = f"[{','.join(texts)}]" if texts else _dumps(fitted)  # (= _dumps(fitted))
        if not text.isascii():  # lone surrogates would make the OTLP batch fail
            clean = text.encode("utf-8", "replace").decode("utf-8")
            if clean != text:  # the structure too: the cleaned text, parsed
                text, fitted = clean, json.loads(clean)
        return MessageValue(fitted, text)

    def fit_messages(self, items: list[dict[str, Any]], *,
                     keep_last: bool = False) -> list[dict[str, Any]] | None:
        """``render_messages`` before serialization (the structured form an event
        carries); modifies the part dicts of ``items`` in place."""
        return self._fit(reversed(items) if keep_last else items, keep_last)

    def _fit(self, taking: Iterable[dict[str, Any]], newest_first: bool,
             texts: list[str] | None = None) -> list[dict[str, Any]] | None:
        """``fit_messages`` of the items in the order they are taken (``newest_first``:
        the last ones kept, handed back in their own order). ``texts``: filled with each
        item's JSON, in the same order, when the items are taken whole (left empty when
        they were cut)."""
        items = iter(taking)
        taken: list[dict[str, Any]] = []
        read: list[str] = [] if texts is None else texts
        if self._fits_whole(items, taken, read):
            if newest_first:
                taken.reverse()
                read.reverse()
            return taken
        read.clear()
        return self._fit_cut(itertools.chain(taken, items), newest_first)

    def _fits_whole(self, items: Iterator[dict[str, Any]], taken: list[dict[str, Any]],
                    texts: list[str]) -> bool:
        """Whether every item fits the limit as it is and the redactor changes none of
        their contents (the usual case: a short conversation, no credential): then
        ``_fit_cut`` would take them all and change nothing, so its skeletons and shares
        are skipped. ``taken``: the items read (all of them when True), ``texts``: their
        JSON; reading stops once they are over the limit."""
        size = 1  # the JSON list: "[", then each item followed by "," or "]"
        for item in items:
            taken.append(item)
            text = _dumps(item)
            texts.append(text)
            size += len(text) + 1
            if size > self.max_length:
                return False
        cap = self.max_length * 4
        for item in taken:
            for part, key, kind in _contents(item):
                if not _redacts_nothing(part[key], kind, cap):
                    return False
        return bool(taken)

    def _fit_cut(self, taking: Iterable[dict[str, Any]], newest_first: bool
                 ) -> list[dict[str, Any]] | None:
        """``_fit`` in general: items taken while their structures and a readable share
        of their contents fit, contents redacted, then cut to equal shares."""
        limit, cap = self.max_length, self.max_length * 4
        kept: list[tuple[dict[str, Any], list[_Slot]]] = []
        size = 2  # the list's brackets
        reserved = 0  # room kept for the contents of the items taken
        for item in taking:
            slots = _slots(item)
            for slot in slots:
                slot.empty()
            skeleton = len(_dumps(item)) + (1 if kept else 0)
            for slot in slots:
                slot.restore()
            # One more item only while the contents taken keep a readable share each
            # (a conversation cut to its structure says nothing).
            need = sum(slot.minimum() for slot in slots)
            if size + skeleton + reserved + need > limit:
                break
            size += skeleton
            reserved += need
            kept.append((item, slots))
        if not kept:
            return None
        if newest_first:
            kept.reverse()
        slots = [slot for _, item_slots in kept for slot in item_slots]
        for slot in slots:
            slot.redact(cap)
        share = _share([slot.extra for slot in slots], limit - size)
        if share is not None:
            for slot in slots:
                if slot.extra > share:
                    slot.cut(share)
        return [item for item, _ in kept]


class _Slot:
    """One part content of a message attribute: where it is, what it may become."""

    __slots__ = ("container", "extra", "key", "kind", "value")

    def __init__(self, container: dict[str, Any], key: str, kind: str) -> None:
        self.container, self.key, self.kind = container, key, kind
        self.value = container.get(key)
        self.extra = 0  # serialized length beyond the emptied slot's

    def empty(self) -> None:
        if self.kind == OPTIONAL:
            del self.container[self.key]
        else:
            self.container[self.key] = ""

    def restore(self) -> None:
        self.container[self.key] = self.value

    def minimum(self) -> int:
        """The room this content is promised when its item is taken (an estimate
        before redaction): all of it when short, ``MIN_SHARE`` otherwise."""
        if self.kind == OPTIONAL:
            return 0
        value = self.value
        return min(len(value) if isinstance(value, str) else MIN_SHARE, MIN_SHARE)

    def redact(self, cap: int) -> None:
        """Bounded to ``cap`` characters, then through the redactor (binary data is
        not text: left to the cut alone)."""
        value = self.value
        if self.kind == BINARY:
            value = value[: cap - cap % 4] if isinstance(value, str) else ""
        elif isinstance(value, str):
            value = redact(value[:cap])
        else:
            text, whole = _bounded_json(_COMPACT, value, cap)
            masked = redact(text)
            if masked != text or not whole:
                try:  # still JSON after the redactor (a cut text is not)
                    value = json.loads(masked) if whole else masked
                except ValueError:
                    value = masked
            if self.kind == OPTIONAL and not isinstance(value, dict | bool):
                value = None  # a parameter schema that is no schema any more
        self.value = self.container[self.key] = value
        if self.kind == OPTIONAL:  # ,"key":value
            self.extra = 0 if value is None else len(self.key) + 4 + len(_dumps(value))
            if value is None:
                del self.container[self.key]
        else:
            self.extra = max(0, len(_dumps(value)) - 2)

    def cut(self, share: int) -> None:
        """At most ``share`` characters more than the emptied slot."""
        value: Any = self.value
        if self.kind == OPTIONAL:
            self.container.pop(self.key, None)
            return
        if self.kind == BINARY:
            value = value[: share - share % 4]
        else:
            if not isinstance(value, str):
                value = _dumps(value)
            value = _cut_text(value, share)
        self.value = self.container[self.key] = value


def _contents(item: dict[str, Any]) -> list[tuple[dict[str, Any], str, str]]:
    """Where the contents of one message, part or tool definition are: (the part or
    definition, its content's key, the content's kind), for each content it has."""
    found = []
    parts = item.get("parts")
    for part in parts if isinstance(parts, list) else (item,):
        for key, kind in CONTENT_FIELDS.get(str(part.get("type")), ()):
            if key in part:
                found.append((part, key, kind))
    return found


def _slots(item: dict[str, Any]) -> list[_Slot]:
    """The content slots of one message, part or tool definition."""
    return [_Slot(part, key, kind) for part, key, kind in _contents(item)]


def _redacts_nothing(value: Any, kind: str, cap: int) -> bool:
    """Whether ``_Slot.redact(cap)`` would leave a content of ``kind`` as it is (its
    container untouched), for a content shorter than ``cap``. (A function of the value,
    not a ``_Slot`` method: ``_fits_whole`` asks it of every content of every call.)"""
    if kind == BINARY:
        return isinstance(value, str)
    if isinstance(value, str):
        return redact(value) == value
    if kind == OPTIONAL and not isinstance(value, dict | bool):
        return False
    text, whole = _bounded_json(_COMPACT, value, cap)
    return whole and redact(text) == text


def _share(extras: list[int], budget: int) -> int | None:
    """The largest per-content length so that the contents fit ``budget``
    (those shorter kept whole); ``None`` when all fit as they are."""
    if sum(extras) <= budget:
        return None
    left, budget = len(extras), max(0, budget)
    for extra in sorted(extras):
        if extra * left > budget:
            return budget // left
        budget -= extra
        left -= 1
    return 0


def _cut_text(text: str, share: int) -> str:
    """``text`` cut so that its JSON string body is at most ``share`` characters,
    ending with ``CUT``."""
    if share <= 0:
        return ""
    target = share - len(CUT)
    prefix = text[:target]
    over = len(_dumps(prefix)) - 2 - target  # escapes (quotes, newlines) take more room
    if over > 0:
        prefix = prefix[: max(0, len(prefix) - over)]
    return prefix + CUT


def mime_type(rendered: str) -> str:
    """OpenInference's mime type of a ``ContentPolicy.render`` text: a rendered object or
    list is JSON (also when cut: it is cut inside its strings), a string is itself, and
    so is a structure that had to be cut as text."""
    if rendered.startswith(("{", "[")) and not rendered.endswith(TRUNCATED):
        return MIME_JSON
    return MIME_TEXT


MAX_DEPTH: Final = 32  # nesting kept by ``_pruned``; deeper values become ``CUT``


def _pruned(value: Any, budget: int, longest: int) -> Any:
    """A JSON-ready copy of ``value`` of about ``budget`` characters at most: strings and
    bytes cut to ``longest`` (a later cut shares the limit between them), containers
    stopped when the budget runs out, with ``CUT`` as their last item (a dict:
    ``CUT: CUT``), models through their ``model_dump``. Its cost is bounded by
    ``budget``, whatever the value."""
    return _prune(value, max(0, budget), max(0, longest), 0)[0]


def _prune(value: Any, budget: int, longest: int, depth: int) -> tuple[Any, int]:
    if isinstance(value, str):
        kept = min(len(value), budget, longest)
        return value[:kept], kept + 2
    if value is None or isinstance(value, bool | int | float):
        return value, 6
    if depth >= MAX_DEPTH:
        return CUT, 3
    if isinstance(value, bytes | bytearray | memoryview):
        value = bytes(value[: min(budget, longest) * 3 // 4])
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        used = 2
        for key, item in value.items():
            name = key if isinstance(key, str) else str(key)
            if used + len(name) + 4 >= budget:
                out[CUT] = CUT
                break
            out[name], cost = _prune(item, budget - used - len(name) - 4, longest, depth + 1)
            used += cost + len(name) + 4
        return out, used
    if isinstance(value, list | tuple):
        items: list[Any] = []
        used = 2
        for item in value:
            if used + 2 >= budget:
                items.append(CUT)
                break
            kept, cost = _prune(item, budget - used - 2, longest, depth + 1)
            items.append(kept)
            used += cost + 2
        return items, used
    converted = _json_default(value)  # a model's dump, a set's items, or its type's name
    if converted is value:
        return CUT, 3
    return _prune(converted, budget, longest, depth + 1)


def _fit_json(text: str, limit: int) -> str | None:
    """``text`` (a captured structure rendered as JSON and redacted) cut to ``limit``
    characters *inside* its strings, so that it stays JSON of the same shape: each
    string gets an equal share of what the keys, numbers and brackets leave (shorter
    ones kept whole). ``None`` when the structure alone does not fit, or when the
    redactor left no JSON to parse."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    fitted = _fit_value(value, limit)
    if fitted is None:  # its keys alone are too long: its first items, cut again
        half = limit // 2
        fitted = _fit_value(_pruned(json.loads(text), half, half), limit)
    return fitted


def _fit_value(value: Any, limit: int) -> str | None:
    """``_fit_json`` of the parsed ``value`` (its strings are cut in place); ``None``
    when its structure alone does not fit."""
    leaves: list[tuple[Any, Any, str]] = []  # (container, key or index, string)
    stack = [value]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else (
            enumerate(node) if isinstance(node, list) else ())
        for key, item in items:
            if isinstance(item, str):
                leaves.append((node, key, item))
            elif isinstance(item, dict | list):
                stack.append(item)
    for container, key, _ in leaves:
        container[key] = ""
    skeleton = len(_RENDER.encode(value))
    share = _share([len(_RENDER.encode(s)) - 2 for _, _, s in leaves], limit - skeleton)
    if share is not None and share <= len(CUT):
        return None
    for container, key, string in leaves:
        container[key] = string if share is None or len(_RENDER.encode(string)) - 2 <= share \
            else _cut_text(string, share)
    out = _RENDER.encode(value)
    return out if len(out) <= limit else None


def _bounded_json(encoder: json.JSONEncoder, value: Any, cap: int) -> tuple[str, bool]:
    """``value`` as JSON text of at most ``cap`` characters (the encoding stops early on
    a huge value); whether the text is whole."""
    parts: list[str] = []
    size = 0
    for chunk in encoder.iterencode(value):
        parts.append(chunk)
        size += len(chunk)
        if size > cap:
            return "".join(parts)[:cap], False
    return "".join(parts), True

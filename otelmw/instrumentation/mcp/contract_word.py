"""The client's word on the contract it ran for a ``tools/call``, and the server's check
of it, so a client and a server both under otelmw do not run the same plugins twice on
one call (docs/telemetry.md, ``otelmw_mcp``, "One contract run per tool call").

The client puts under ``params._meta["otelmw/contract"]`` the plugins it ran on the
call (each by name and fingerprint, ``ToolPlugin``), the tool's name, a digest of the
arguments it sends and when, signed with HMAC-SHA256 under ``OTELMW_MCP_CONTRACT_KEY``.
A server honours the word only when its own key verifies the signature, the word is
about this very call (same tool, same arguments) and at most ``MAX_AGE_S`` old; it then
skips those of its plugins the client ran (same name, same fingerprint) and runs every
other. Without a key a client sends no word and a server honours none: anyone can
write ``_meta``, and a forged word must never switch off a server's own plugins.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from ...core import ToolPlugin

META_KEY: Final = "otelmw/contract"
VERSION: Final = 1
MAX_AGE_S: Final = 300.0  # a word older (or newer) than this is not honoured

Verdict = Literal["honoured", "unverified", "bad_signature", "other_call", "stale",
                  "malformed"]

_key: bytes | None = None


def use_key(key: str | None) -> None:
    """The key this process signs and verifies words with (``None``: none)."""
    global _key
    _key = key.encode() if key else None


def _digest(arguments: Any) -> str:
    text = json.dumps(arguments if arguments is not None else {}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _signature(key: bytes, fields: Mapping[str, Any]) -> str:
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def word_for(tool: str, arguments: Any, plugins: Sequence[ToolPlugin]) -> dict[str, Any] | None:
    """The signed word for a call the client ran ``plugins`` on and sends with
    ``arguments``; ``None`` without a key or without a plugin."""
    key = _key
    if key is None or not plugins:
        return None
    fields: dict[str, Any] = {
        "v": VERSION, "tool": tool, "arguments": _digest(arguments), "issued": int(time.time()),
        "plugins": [{"name": p.name, "fingerprint": p.fingerprint} for p in plugins]}
    return {**fields, "signature": _signature(key, fields)}


def with_word(meta: Any, word: dict[str, Any]) -> Any:
    """``meta`` (the caller's ``_meta``, a dict or None) with the word under ``META_KEY``;
    a caller's own ``META_KEY`` is replaced (the word is otelmw's to say)."""
    if meta is None:
        return {META_KEY: word}
    if isinstance(meta, dict):
        return {**meta, META_KEY: word}
    return meta  # a shape otelmw does not know: sent as the caller made it


@dataclass(frozen=True, slots=True)
class Check:
    """What the server made of a word: its verdict and, when honoured, the plugins the
    client ran (name, fingerprint)."""

    verdict: Verdict
    ran: frozenset[tuple[str, str]] = frozenset()

    def skipped(self, own: Collection[ToolPlugin]) -> list[str]:
        """The server's own plugins the client already ran on the call."""
        if self.verdict != "honoured":
            return []
        return [p.name for p in own if (p.name, p.fingerprint) in self.ran]


def _carrier(meta: Any) -> Mapping[str, Any] | None:
    if meta is None or isinstance(meta, Mapping):
        return meta
    dump = getattr(meta, "model_dump", None)  # 1.x: a RequestParams.Meta model
    return dump(by_alias=True) if dump is not None else None


def check(meta: Any, tool: str, arguments: Any) -> Check | None:
    """The server's check of the word in ``meta`` for the call of ``tool`` with
    ``arguments`` as received; ``None`` when there is none."""
    carrier = _carrier(meta)
    word = carrier.get(META_KEY) if carrier else None
    if word is None:
        return None
    try:
        fields = {k: word[k] for k in ("v", "tool", "arguments", "issued", "plugins")}
        signature = word["signature"]
        ran = frozenset((p["name"], p["fingerprint"]) for p in fields["plugins"])
        if (fields["v"] != VERSION or not isinstance(signature, str)
                or not isinstance(fields["issued"], int)
                or not all(isinstance(x, str) for pair in ran for x in pair)):
            return Check("malformed")
    except (KeyError, TypeError):
        return Check("malformed")
    key = _key
    if key is None:
        return Check("unverified")
    if not hmac.compare_digest(signature, _signature(key, fields)):
        return Check("bad_signature")
    if fields["tool"] != tool or fields["arguments"] != _digest(arguments):
        return Check("other_call")
    if abs(time.time() - fields["issued"]) > MAX_AGE_S:
        return Check("stale")
    return Check("honoured", ran)

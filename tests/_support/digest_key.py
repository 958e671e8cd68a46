"""Digests recomputed as docs/telemetry.md says a user does: SHA-256 of the SHA-512 of
the deployment's key (``OTELMW_DIGEST_KEY``, else ``$OTELMW_HOME/digest.key``) followed
by the data."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from otelmw.telemetry.content import digests


def deployment_key() -> bytes:
    given = os.environ.get("OTELMW_DIGEST_KEY", "").strip()
    if given:
        return given.encode()
    home = Path(os.environ.get("OTELMW_HOME") or Path.home() / ".otelmw").expanduser()
    digests.digest("make sure the key file exists")  # the first digest creates it
    return (home / "digest.key").read_text(encoding="utf-8").strip().encode()


def keyed_hex(data: bytes, key: bytes | None = None) -> str:
    """The documented keyed SHA-256 of ``data`` (default key: the deployment's)."""
    key = deployment_key() if key is None else key
    return hashlib.sha256(hashlib.sha512(key).digest() + data).hexdigest()

"""Digests recomputed as docs/telemetry.md says a user does: HMAC-SHA256 with the
deployment's key (``OTELMW_DIGEST_KEY``, else ``$OTELMW_HOME/digest.key``)."""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

from otelmw.telemetry import digests


def deployment_key() -> bytes:
    given = os.environ.get("OTELMW_DIGEST_KEY", "").strip()
    if given:
        return given.encode()
    home = Path(os.environ.get("OTELMW_HOME") or Path.home() / ".otelmw").expanduser()
    digests.digest("make sure the key file exists")  # the first digest creates it
    return (home / "digest.key").read_text(encoding="utf-8").strip().encode()


def keyed_hex(data: bytes) -> str:
    return hmac.new(deployment_key(), data, hashlib.sha256).hexdigest()

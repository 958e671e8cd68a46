"""Digests are keyed (HMAC-SHA256 with the deployment's key), so a short result cannot
be recovered by hashing candidates, yet the processes of one deployment agree."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from _support.components import clean_env
from _support.digest_key import keyed_hex
from _telemetry_fixtures import TOOL, TelemetryHarness, run_call

from otelmw.telemetry import digests

PIN = "4821"
CHILD = ("import json, sys; from otelmw.telemetry.digests import digest; "
         "print(json.dumps([digest(v)[0] for v in json.loads(sys.argv[1])]))")


def test_a_four_digit_pin_is_not_recovered_from_its_exported_digest() -> None:
    h = TelemetryHarness()
    try:
        run_call(h.pipeline, "sync", "tool", {"account": "a-1"}, lambda a: PIN)
        exported = h.one(f"execute_tool {TOOL}").attributes["otelmw.result.raw.digest"]
    finally:
        h.close()
    algorithm, _, value = str(exported).partition(":")
    assert algorithm == "hmac-sha256"
    # the attack: hash every candidate, unkeyed as before and in the usual encodings
    candidates = {f"{n:04d}" for n in range(10_000)}
    for encode in (str.encode, lambda c: json.dumps(c).encode()):
        assert not [c for c in candidates if hashlib.sha256(encode(c)).hexdigest() == value]
    # with the deployment's key, as documented, the digest is recomputed exactly
    assert value == keyed_hex(PIN.encode())


def _digests(env: dict[str, str], values: list[object], cwd: Path) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(values)], env=env,
                          cwd=cwd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return list(json.loads(proc.stdout))


def test_processes_of_one_deployment_agree_and_other_deployments_differ(
        tmp_path: Path) -> None:
    values: list[object] = [PIN, {"rows": [1, 2]}, "x" * 5000]
    env = clean_env(tmp_path)
    home = Path(env["OTELMW_HOME"])
    # several first processes at once: one key file, the same digests everywhere
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(values)], env=env,
                              cwd=tmp_path, stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    outs = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert all(o == outs[0] for o in outs)
    key_file = home / "digest.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert [x for x in os.listdir(home) if x != "digest.key"] == []  # no temp files left
    key = key_file.read_text().strip().encode()
    assert outs[0][0] == "hmac-sha256:" + hmac.new(key, PIN.encode(), hashlib.sha256).hexdigest()
    assert _digests(env, values, tmp_path) == outs[0]  # a later process: same key, same
    other = clean_env(tmp_path / "other")
    assert _digests(other, values, tmp_path)[0] != outs[0][0]
    given = clean_env(tmp_path, OTELMW_DIGEST_KEY="a-deployment-secret-0123")
    assert _digests(given, [PIN], tmp_path) == [
        "hmac-sha256:" + hmac.new(b"a-deployment-secret-0123", PIN.encode(),
                                  hashlib.sha256).hexdigest()]


def test_a_short_digest_key_is_refused_at_configure_without_echoing_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from otelmw.telemetry.setup import configure

    monkeypatch.setenv("OTELMW_DIGEST_KEY", "hunter2")
    with pytest.raises(ValueError, match="OTELMW_DIGEST_KEY") as info:
        configure("digest-key-check")
    assert "hunter2" not in str(info.value)
    assert "16 characters" in str(info.value)


def test_without_a_usable_home_digests_still_work_with_one_warning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("OTELMW_HOME", str(blocker / "home"))
    monkeypatch.setattr(digests, "_inner", None)
    monkeypatch.setattr(digests, "_outer", None)
    with caplog.at_level(logging.WARNING, logger="otelmw"):
        first = digests.digest(PIN)
        second = digests.digest(PIN)
    assert first == second and first[0].startswith("hmac-sha256:")
    warnings = [r.getMessage() for r in caplog.records if "digest key" in r.getMessage()]
    assert len(warnings) == 1 and "OTELMW_DIGEST_KEY" in warnings[0]

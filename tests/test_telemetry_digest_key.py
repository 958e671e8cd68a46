"""Digests are keyed (SHA-256 after a secret block derived from the deployment's key),
so a short result cannot be recovered by hashing candidates, yet the processes of one
deployment agree."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _support.calls import TOOL, run_call
from _support.components import clean_env, unavailable
from _support.digest_key import keyed_hex
from _support.telemetry import TelemetryHarness

from otelmw.telemetry.content import digests

PIN = "4821"
DOCS = Path(__file__).resolve().parent.parent / "docs" / "telemetry.md"
CHILD = ("import json, sys; from otelmw.telemetry.content.digests import digest; "
         "print(json.dumps([digest(v)[0] for v in json.loads(sys.argv[1])]))")


def test_a_four_digit_pin_is_not_recovered_from_its_exported_digest() -> None:
    h = TelemetryHarness()
    try:
        run_call(h.pipeline, "sync", "tool", {"account": "a-1"}, lambda a: PIN)
        exported = h.one(f"execute_tool {TOOL}").attributes["otelmw.result.raw.digest"]
    finally:
        h.close()
    algorithm, _, value = str(exported).partition(":")
    assert algorithm == "sha256-keyed"
    # the attack: hash every candidate unkeyed (plain SHA-256, unkeyed BLAKE2b of the
    # same size), in the usual encodings
    candidates = {f"{n:04d}" for n in range(10_000)}
    unkeyed = (hashlib.sha256, lambda b: hashlib.blake2b(b, digest_size=32))
    for encode in (str.encode, lambda c: json.dumps(c).encode()):
        for hash_of in unkeyed:
            assert not [c for c in candidates if hash_of(encode(c)).hexdigest() == value]
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
    assert outs[0][0] == "sha256-keyed:" + hashlib.sha256(
        hashlib.sha512(key).digest() + PIN.encode()).hexdigest()
    assert _digests(env, values, tmp_path) == outs[0]  # a later process: same key, same
    other = clean_env(tmp_path / "other")
    assert _digests(other, values, tmp_path)[0] != outs[0][0]
    given = clean_env(tmp_path, OTELMW_DIGEST_KEY="a-deployment-secret-0123")
    assert _digests(given, [PIN], tmp_path) == [
        "sha256-keyed:" + hashlib.sha256(hashlib.sha512(b"a-deployment-secret-0123").digest()
                                         + PIN.encode()).hexdigest()]


def test_a_short_digest_key_is_refused_at_configure_without_echoing_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from otelmw.telemetry.setup.configuration import configure

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
    monkeypatch.setattr(digests, "_mac", None)
    with caplog.at_level(logging.WARNING, logger="otelmw"):
        first = digests.digest(PIN)
        second = digests.digest(PIN)
    assert first == second and first[0].startswith("sha256-keyed:")
    warnings = [r.getMessage() for r in caplog.records if "digest key" in r.getMessage()]
    assert len(warnings) == 1 and "OTELMW_DIGEST_KEY" in warnings[0]


SETTINGS_KEY = "the-settings-own-key-0123"
SETTINGS_CHILD = textwrap.dedent("""
    import json
    from opentelemetry import trace
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from otelmw import get_pipeline
    from otelmw.config import settings as cfg
    from otelmw.telemetry.setup.configuration import configure

    settings = cfg.load().with_value(cfg.DIGEST_KEY, %r).with_value(cfg.DIGEST_MAX_BYTES, 64)
    telemetry = configure("digest-settings", settings=settings)
    memory = InMemorySpanExporter()
    trace.get_tracer_provider().add_span_processor(SimpleSpanProcessor(memory))
    for result in ("4821", "x" * 1000):
        get_pipeline().run_tool("lookup", {"q": 1}, lambda args, r=result: r)
    print(json.dumps([s.attributes["otelmw.result.raw.digest"] for s in memory.get_finished_spans()
                      if s.name == "execute_tool lookup"]))
    telemetry.shutdown()
""") % SETTINGS_KEY


def test_the_settings_handed_to_configure_key_and_bound_the_digests(tmp_path: Path) -> None:
    """``configure(settings=...)``: its ``OTELMW_DIGEST_KEY`` and ``OTELMW_DIGEST_MAX_BYTES``
    are the ones the tool spans' digests use, not the environment's."""
    env = clean_env(tmp_path, OTELMW_DIGEST_KEY="the-environment-key-0123",
                    OTEL_TRACES_EXPORTER="none", OTEL_METRICS_EXPORTER="none",
                    OTEL_LOGS_EXPORTER="none")
    proc = subprocess.run([sys.executable, "-c", SETTINGS_CHILD], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    pin, long = json.loads(proc.stdout.strip().splitlines()[-1])
    key = SETTINGS_KEY.encode()
    assert pin == "sha256-keyed:" + keyed_hex(PIN.encode(), key)
    # 1,000 characters over a 64-byte cap: sampled, its first and last 32
    assert long == "sha256-keyed-sampled:" + keyed_hex(b"1000:" + b"x" * 64, key)


def _documented(pattern: str) -> str:
    section = DOCS.read_text(encoding="utf-8").split("Recomputing a digest", 1)[1]
    found = re.search(pattern, section, re.S)
    assert found, f"docs/telemetry.md: no {pattern!r} after 'Recomputing a digest'"
    return found.group(1)


@pytest.mark.parametrize("key", [None, "a-deployment-secret-0123",
                                 "a long passphrase, " * 6], ids=["file", "env", "env-over-64"])
def test_the_documented_recompute_gives_the_exported_digest(tmp_path: Path,
                                                            key: str | None) -> None:
    snippet = _documented(r"```python\n(.*?)```")
    env = clean_env(tmp_path, **({} if key is None else {"OTELMW_DIGEST_KEY": key}))
    exported = _digests(env, [{"pin": PIN}], tmp_path)  # creates the key file if needed
    proc = subprocess.run([sys.executable, "-c", snippet], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == exported
    assert exported[0] != _digests(clean_env(tmp_path / "other"), [{"pin": PIN}], tmp_path)[0]


def test_the_documented_openssl_command_gives_the_exported_digest(tmp_path: Path) -> None:
    if shutil.which("openssl") is None:
        unavailable("openssl")
    command = _documented(r"`(\{ printf[^`]*sha256sum)`").replace("\n", " ")
    env = clean_env(tmp_path, KEY="a-deployment-secret-0123")
    env["OTELMW_DIGEST_KEY"] = env["KEY"]
    exported = _digests(env, [{"pin": PIN}], tmp_path)[0]
    proc = subprocess.run(command, shell=True, env=env, input=b'{"pin":"4821"}',
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "sha256-keyed:" + proc.stdout.decode().split()[0].lower() == exported

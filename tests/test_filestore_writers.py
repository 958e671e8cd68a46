"""The embedded store's writing side under real limits, in real processes: a file-size
limit (``RLIMIT_FSIZE``, what a full disk looks like to a writer) that is lifted again,
and writers sharing one store directory while rotation prunes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from _support.components import clean_env

from otelmw.telemetry.store import files

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX limits and locks")

# One process writing turns (one span each, exported as one line by the stock file
# exporter) through a real TracerProvider.
WRITER_HEAD = textwrap.dedent(r"""
    import json, os, resource, sys, time
    from pathlib import Path
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from otelmw.telemetry.store.exporters import FileSpanExporter

    STORE = Path(sys.argv[1])
    exporter = FileSpanExporter(STORE)
    results = []
    real_export = exporter.export

    def export(spans):
        result = real_export(spans)
        results.append(result.name)
        return result

    exporter.export = export
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("store-test")

    def turn(name):
        with tracer.start_as_current_span(name) as span:
            span.set_attribute("padding", "p" * 300)
""")

DISK_FULL = WRITER_HEAD + textwrap.dedent(r"""
    for i in range(5):
        turn(f"before-{i}")
    (path,) = STORE.glob("traces-*.jsonl")
    size = path.stat().st_size
    # "the disk is full": the file may grow by 100 bytes, less than a line
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 100, hard))
    for i in range(5):
        turn(f"full-{i}")
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # space freed
    for i in range(10):
        turn(f"after-{i}")
    provider.shutdown()
    print(json.dumps(results))
""")


def _stored_span_names(store: Path) -> tuple[list[str], list[str]]:
    """(span names of every stored line, lines that are not JSON)."""
    names: list[str] = []
    bad: list[str] = []
    for path in sorted(store.glob("traces-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                request = json.loads(line)
            except ValueError:
                bad.append(line[:80])
                continue
            for rs in request["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    names.extend(s["name"] for s in ss["spans"])
    return names, bad


def test_a_full_disk_then_freed_space_loses_only_the_turns_written_meanwhile(
        tmp_path: Path) -> None:
    store = tmp_path / "store"
    proc = subprocess.run([sys.executable, "-c", DISK_FULL, str(store)],
                          env=clean_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    # the exporter says which batches failed: exactly those written while full
    assert results == ["SUCCESS"] * 5 + ["FAILURE"] * 5 + ["SUCCESS"] * 10
    names, bad = _stored_span_names(store)
    assert bad == []  # no torn line kept, none merged into the next write
    assert names == [f"before-{i}" for i in range(5)] + [f"after-{i}" for i in range(10)]
    assert proc.stderr.count("cannot write the embedded store") == 1  # warned once
    assert "File too large" in proc.stderr


QUIET = WRITER_HEAD + textwrap.dedent(r"""
    turn("quiet-1")
    (STORE / "quiet-ready").write_text("")
    while not (STORE / "busy-done").exists():
        time.sleep(0.02)
    turn("quiet-2")
    provider.shutdown()
    print(json.dumps(results))
""")

BUSY = WRITER_HEAD + textwrap.dedent(r"""
    while not (STORE / "quiet-ready").exists():
        time.sleep(0.02)
    time.sleep(0.05)  # the quiet writer's file is now the oldest by mtime
    for i in range(200):
        turn(f"busy-{i}")
    provider.shutdown()
    (STORE / "busy-done").write_text("")
    print(json.dumps(results))
""")


def test_rotation_never_deletes_the_file_another_live_process_is_writing(
        tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    env = clean_env(tmp_path, OTELMW_DATA_MAX_BYTES="4000", OTELMW_DATA_MAX_FILES="3")
    quiet = subprocess.Popen([sys.executable, "-c", QUIET, str(store)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    busy = subprocess.Popen([sys.executable, "-c", BUSY, str(store)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    outs = {}
    for name, proc in (("busy", busy), ("quiet", quiet)):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        outs[name] = json.loads(out.strip().splitlines()[-1])
    assert outs["quiet"] == ["SUCCESS", "SUCCESS"] and outs["busy"] == ["SUCCESS"] * 200
    names, bad = _stored_span_names(store)
    assert bad == []
    assert "quiet-1" in names and "quiet-2" in names  # the quiet writer lost nothing
    busy_files = [p for p in store.glob("traces-*.jsonl") if str(busy.pid) in p.name]
    assert len(busy_files) <= 2  # rotation still bounds the store: 3 files, 1 is quiet's
    assert f"busy-{199}" in names



def test_a_writer_rolls_over_after_fork_instead_of_sharing_its_parents_file(
        tmp_path: Path) -> None:
    store = tmp_path / "store"
    out = files.RotatingLines("traces", store)
    out.write('{"resourceSpans":[]}')
    pid = os.fork()
    if pid == 0:  # the child: its own file, never the parent's
        try:
            out.write('{"resourceSpans":[],"child":true}')
            out.close()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    out.write('{"resourceSpans":[],"parent":2}')
    out.close()
    by_pid: dict[str, list[dict[str, Any]]] = {}
    for path in store.glob("traces-*.jsonl"):
        writer = path.name.split("-")[2]
        by_pid.setdefault(writer, []).extend(
            json.loads(x) for x in path.read_text().splitlines())
    assert by_pid[str(os.getpid())] == [{"resourceSpans": []},
                                        {"resourceSpans": [], "parent": 2}]
    assert by_pid[str(pid)] == [{"resourceSpans": [], "child": True}]

"""The embedded store as a user meets it: readers keep every good line of a
corrupt or truncated file and say which lines they skipped; write errors and a
store directory that cannot be one are named, with the path and the OS error."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _support.cli import otelmw_cmd
from _support.components import clean_env
from _support.otlp_receiver import OtlpReceiver

from otelmw.cli.views import spans_from_requests
from otelmw.telemetry.store import files, readers

TIMEOUT = 90
SPANS_PER_TURN = 22

# Two demo turns, flushed between them: two stored lines of 22 spans each.
TWO_BATCHES = textwrap.dedent("""
    from otelmw.demo import (DEMO_RUNTIME, ScriptedProvider, build_demo_pipeline,
                             register_demo_plugins, run_agent)
    from otelmw.core.plugins import PluginManager
    from otelmw.telemetry.setup.configuration import configure
    import tempfile
    from pathlib import Path

    pipeline, _ = build_demo_pipeline()
    telemetry = configure("store-test", pipeline=pipeline)
    with tempfile.TemporaryDirectory() as home:
        PluginManager(pipeline, home=Path(home)).add_plugin("demo", register_demo_plugins)
    for _ in range(2):
        with pipeline.turn("demo-agent", runtime_id=DEMO_RUNTIME):
            run_agent(pipeline, ScriptedProvider(), "weather?")
        telemetry.force_flush()
    telemetry.shutdown(timeout_s=10)
""")


def run(cmd: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=TIMEOUT)


@pytest.fixture(scope="module")
def batches(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The two stored lines of a real two-turn run."""
    root = tmp_path_factory.mktemp("batches")
    store = root / "store"
    proc = run([sys.executable, "-c", TWO_BATCHES], clean_env(root, OTELMW_DATA_DIR=str(store)),
               root)
    assert proc.returncode == 0, proc.stderr
    [path] = sorted(store.glob("traces-*.jsonl"))
    lines = path.read_text(encoding="utf-8").splitlines()
    counts = [len(list(spans_from_requests([json.loads(x)]))) for x in lines]
    assert counts == [SPANS_PER_TURN, SPANS_PER_TURN], counts
    return lines


def trace_of(line: str) -> str:
    return json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]


WRONG_SHAPES = [
    ('{"resourceSpans": {"not": "a list"}}', "resourceSpans is not a list"),
    ('{"resourceSpans": [1, 2]}', "an entry of resourceSpans is not an object"),
    ('{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "x", '
     '"startTimeUnixNano": "abc"}]}]}]}', "a span's startTimeUnixNano is not an integer"),
    ('{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "x", "attributes": '
     '[{"key": "k", "value": {"arrayValue": 7}}]}]}]}]}', "arrayValue is not a list of values"),
    ('[1, 2, 3]', "a JSON list, not an export request"),
]


@pytest.mark.parametrize(("bad", "reason"), [
    ("this is not json {", "not JSON (torn or corrupt)"),
    *WRONG_SHAPES,
])
def test_a_bad_line_between_two_batches_is_skipped_and_named(
        tmp_path: Path, batches: list[str], bad: str, reason: str) -> None:
    path = tmp_path / "traces-20260101T000000-1-000001.jsonl"
    path.write_text("\n".join([batches[0], bad, batches[1]]) + "\n", encoding="utf-8")
    skipped: list[readers.SkippedLine] = []
    spans = list(spans_from_requests(readers.read_requests("traces", tmp_path, skipped)))
    assert len(spans) == 2 * SPANS_PER_TURN  # every good line kept
    assert skipped == [readers.SkippedLine(path, 2, reason)]
    told = readers.describe_skipped(skipped)
    assert told.startswith("otelmw: skipped 1 unreadable line(s)")
    assert f"{path}: line 2 ({reason})" in told


def test_a_torn_write_followed_by_a_complete_batch_keeps_the_batch(
        tmp_path: Path, batches: list[str]) -> None:
    """A write cut short (disk full, crash) and the next batch appended to it on the
    same line: the complete batch is still read."""
    path = tmp_path / "traces-20260101T000000-1-000001.jsonl"
    torn = batches[0][: len(batches[0]) // 2]
    path.write_text(torn + batches[1] + "\n", encoding="utf-8")
    skipped: list[readers.SkippedLine] = []
    spans = list(spans_from_requests(readers.read_requests("traces", tmp_path, skipped)))
    assert len(spans) == SPANS_PER_TURN
    assert {s.trace_id for s in spans} == {trace_of(batches[1])}
    assert skipped == [readers.SkippedLine(path, 1, "a torn request; the complete one after it "
                                               "was kept")]


def test_a_truncated_file_keeps_the_lines_before_the_cut(tmp_path: Path,
                                                        batches: list[str]) -> None:
    path = tmp_path / "traces-20260101T000000-1-000001.jsonl"
    data = ("\n".join(batches) + "\n").encode("utf-8")
    path.write_bytes(data[: len(batches[0]) + 1 + len(batches[1]) // 3])
    skipped: list[readers.SkippedLine] = []
    spans = list(spans_from_requests(readers.read_requests("traces", tmp_path, skipped)))
    assert {s.trace_id for s in spans} == {trace_of(batches[0])}
    assert len(spans) == SPANS_PER_TURN
    assert skipped == [readers.SkippedLine(path, 2, "not JSON (torn or corrupt)")]


def _corrupt_store(store: Path, batches: list[str]) -> Path:
    store.mkdir()
    path = store / "traces-20260101T000000-1-000001.jsonl"
    path.write_text("\n".join([batches[0], "garbage{", WRONG_SHAPES[2][0], batches[1]]) + "\n",
                    encoding="utf-8")
    return path


def test_traces_list_and_show_on_a_corrupt_store(tmp_path: Path, batches: list[str]) -> None:
    path = _corrupt_store(tmp_path / "store", batches)
    env = clean_env(tmp_path, OTELMW_DATA_DIR=str(tmp_path / "store"))
    listed = run([*otelmw_cmd(), "traces", "list"], env, tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "Traceback" not in listed.stderr
    for line in batches:
        assert trace_of(line) in listed.stdout
    [told] = [x for x in listed.stderr.splitlines() if x.startswith("otelmw: skipped")]
    assert told.startswith("otelmw: skipped 2 unreadable line(s)")
    assert (f"{path}: line 2 (not JSON (torn or corrupt)), line 3 (a span's "
            "startTimeUnixNano is not an integer)") in told
    shown = run([*otelmw_cmd(), "traces", "show", trace_of(batches[1])], env, tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.count("execute_tool get_weather") == 1
    assert "otelmw: skipped 2 unreadable line(s)" in shown.stderr


def test_replay_of_a_corrupt_store_sends_every_good_line(tmp_path: Path,
                                                        batches: list[str]) -> None:
    path = _corrupt_store(tmp_path / "store", batches)
    env = clean_env(tmp_path, OTELMW_DATA_DIR=str(tmp_path / "store"))
    with OtlpReceiver() as rx:
        proc = run([*otelmw_cmd(), "replay", "--endpoint", rx.http_endpoint], env, tmp_path)
        assert proc.returncode == 0, proc.stderr
        spans = rx.wait_for_spans(2 * SPANS_PER_TURN, timeout=15)
    assert len(spans) == 2 * SPANS_PER_TURN
    assert "traces: 2 request(s)" in proc.stdout
    assert f"{path}: line 2 (not JSON (torn or corrupt)), line 3" in proc.stderr
    assert "Traceback" not in proc.stderr


# ------------------------------------------------------------------ store errors (item 11)
def test_data_dir_that_is_a_file_is_an_error_at_start(tmp_path: Path) -> None:
    a_file = tmp_path / "not-a-dir"
    a_file.write_text("x")
    env = clean_env(tmp_path, OTELMW_DATA_DIR=str(a_file))
    for args in (["demo"], ["run", "--", sys.executable, "-c", "print('RAN')"],
                 ["traces", "list"]):
        proc = run([*otelmw_cmd(), *args], env, tmp_path)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.startswith(f"otelmw: error: OTELMW_DATA_DIR='{a_file}': "
                                      f"{a_file} exists and is not a directory"), proc.stderr
        assert "RAN" not in proc.stdout and "answer:" not in proc.stdout
        assert "Traceback" not in proc.stderr


def test_a_store_that_cannot_be_written_is_named_and_the_demo_does_not_claim_it(
        tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    store = blocker / "store"  # cannot be created: its parent is a file
    proc = run([*otelmw_cmd(), "demo", "--quiet"], clean_env(tmp_path, OTELMW_DATA_DIR=str(
        store)), tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "stored in" not in proc.stdout
    assert f"not stored: {store}: Not a directory" in proc.stdout
    named = [x for x in proc.stderr.splitlines() if "cannot write the embedded store" in x]
    assert len(named) == 1, proc.stderr  # once, not once per batch or per signal
    assert f"{store}: Not a directory" in named[0]
    assert "Traceback" not in proc.stderr


def test_store_write_error_during_a_run_is_named_once(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    out = files.RotatingLines("traces", tmp_path / "store")
    out.write(json.dumps({"resourceSpans": []}))
    out.close()
    shutil.rmtree(tmp_path / "store")
    (tmp_path / "store").write_text("now a file")  # the directory was replaced
    monkeypatch.setattr(files, "_write_errors", {})
    with caplog.at_level("WARNING", logger="otelmw"):
        for _ in range(3):
            with pytest.raises(OSError):
                out.write("{}")
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1, warned
    assert f"{tmp_path / 'store'}: File exists" in warned[0]
    assert files.store_write_errors() == [f"{tmp_path / 'store'}: File exists"]

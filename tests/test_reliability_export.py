"""Limits of real collectors and backends that stay away: nothing is lost without a
count and a place to recover it.

* A collector at gRPC's default 4 MiB receive limit gets every one of 3,000 heavy
  tool spans (normalizer metadata at its documented bounds): batches are cut into
  requests under ``OTELMW_EXPORT_MAX_BYTES``; an oversized span is shrunk, not lost.
* A backend that is unreachable, or rejects every batch: spans and log records go
  to the spool, the exit says how many, and ``otelmw replay`` delivers them to the
  real receiver later (once).

Each program runs in a fresh interpreter with ``configure()`` and the stock OTLP
exporter.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import grpc
import pytest
from _support.cli import otelmw
from _support.components import clean_env
from _support.otlp_receiver import OtlpReceiver, free_port

TIMEOUT = 120
COLLECTOR_LIMIT = 4 * 1024 * 1024  # gRPC's (and the Collector's) default receive limit

# The stack tests' program (tests/stack_scripts), here at the suite's receiver.
HEAVY = Path(__file__).resolve().parent / "stack_scripts" / "heavy_tool_spans.py"


def run_heavy(tmp_path: Path, rx: OtlpReceiver, n: int, extra: str = "-",
              **env: str) -> dict[str, int]:
    proc = subprocess.run(
        [sys.executable, str(HEAVY), str(n), extra], cwd=tmp_path, capture_output=True,
        text=True, timeout=TIMEOUT,
        env=clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint,
                      OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none",
                      OTEL_BSP_MAX_QUEUE_SIZE="4096",  # the loop is unpaced: keep all queued
                      OTELMW_SHUTDOWN_TIMEOUT="30", **env))
    assert proc.returncode == 0, proc.stderr
    assert "larger than max" not in proc.stderr
    drops: dict[str, int] = json.loads(proc.stdout.split("DROPS ", 1)[1])
    return drops


def test_heavy_batches_fit_a_collector_at_the_default_4mib_limit(tmp_path: Path) -> None:
    with OtlpReceiver(max_receive_bytes=COLLECTOR_LIMIT) as rx:
        drops = run_heavy(tmp_path, rx, 3000)
        rx.wait_for(lambda: len(rx.spans("execute_tool heavy")) >= 3000, timeout=30)
        spans = rx.spans("execute_tool heavy")
        requests = rx.raw_requests("traces")
    assert drops == {}
    assert len(spans) == 3000
    assert len({s.attributes["gen_ai.tool.call.id"] for s in spans}) == 3000
    sizes = [r.message.ByteSize() for r in requests]
    assert max(sizes) <= 3 * 1024 * 1024  # the documented default bound
    assert len(requests) > 3000 // 512  # batches were cut
    meta = [k for k in spans[0].attributes if k.startswith("otelmw.result.metadata.")]
    assert len(meta) == 32
    assert all(len(spans[0].attributes[k]) == 256 for k in meta)  # nothing shrunk
    assert not any("otelmw.export.truncated" in s.attributes for s in spans)


def test_a_smaller_export_bound_is_kept(tmp_path: Path) -> None:
    with OtlpReceiver(max_receive_bytes=COLLECTOR_LIMIT) as rx:
        drops = run_heavy(tmp_path, rx, 600, OTELMW_EXPORT_MAX_BYTES=str(512 * 1024))
        rx.wait_for(lambda: len(rx.spans("execute_tool heavy")) >= 600, timeout=30)
        sizes = [r.message.ByteSize() for r in rx.raw_requests("traces")]
    assert drops == {}
    assert max(sizes) <= 512 * 1024
    assert len(sizes) >= 600 * 14_000 // (512 * 1024)


def test_an_oversized_span_is_shrunk_and_delivered(tmp_path: Path) -> None:
    with OtlpReceiver(max_receive_bytes=COLLECTOR_LIMIT) as rx:
        drops = run_heavy(tmp_path, rx, 10, "oversized")
        rx.wait_for(lambda: bool(rx.spans("oversized")), timeout=30)
        [big] = rx.spans("oversized")
        assert len(rx.spans("execute_tool heavy")) == 10
        sizes = [r.message.ByteSize() for r in rx.raw_requests("traces")]
    assert drops == {}
    assert big.attributes["otelmw.export.truncated"] is True
    assert 0 < len(big.events) < 128  # events kept while they fit, in order
    assert [e.name for e in big.events] == [f"e{i}" for i in range(len(big.events))]
    assert all(len(v) <= 256 for e in big.events for v in e.attributes.values())
    assert max(sizes) <= 3 * 1024 * 1024


# ------------------------------------------------------------------ 15. the spool

AGENT = textwrap.dedent("""
    import sys
    from otelmw import Pipeline
    from otelmw.telemetry.setup.configuration import configure

    pipe = Pipeline()
    configure("spool-agent", pipeline=pipe)
    for t in range(int(sys.argv[1])):
        with pipe.turn("spooler", session_id="s"):
            pipe.run_tool("lookup", {"q": t}, lambda a: {"hit": a["q"]},
                          tool_call_id=f"t{t}", raise_errors=True)
    print("END", flush=True)
""")
SPOOL_LINE = re.compile(r"otelmw: (\d+) span\(s\) and (\d+) log record\(s\) could not be "
                        r"delivered and are spooled in (\S+);")
TURNS = 20


@pytest.mark.parametrize("backend", ["unreachable", "rejecting"])
def test_undeliverable_telemetry_is_spooled_and_replayed(tmp_path: Path, backend: str) -> None:
    store = tmp_path / "store"
    rejecting = OtlpReceiver(mode="error", grpc_error_code=grpc.StatusCode.PERMISSION_DENIED)
    with rejecting:
        endpoint = (f"http://127.0.0.1:{free_port()}" if backend == "unreachable"
                    else rejecting.grpc_endpoint)
        env = clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
                        OTEL_METRICS_EXPORTER="none", OTELMW_HOOK_EVENTS="all",
                        OTELMW_DATA_DIR=str(store), OTELMW_SHUTDOWN_TIMEOUT="3")
        script = tmp_path / "agent.py"
        script.write_text(AGENT)
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, str(script), str(TURNS)], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=TIMEOUT)
        took = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr
    assert took < 3 + 6, took  # the shutdown budget holds (plus interpreter start)
    m = SPOOL_LINE.search(proc.stderr)
    assert m, proc.stderr
    spans, logs = int(m.group(1)), int(m.group(2))
    assert spans == TURNS * 2  # invoke_agent + execute_tool per turn
    assert logs == TURNS * 3  # pre_tool_call, post_tool_call, transform_tool_result events
    assert Path(m.group(3)) == store / "spool"
    assert "not delivered in total" not in proc.stderr  # spooled is not dropped
    assert not list(store.glob("traces-*.jsonl"))  # the spool, not the store

    with OtlpReceiver() as rx:
        env_replay = clean_env(tmp_path)
        out = otelmw("replay", "--endpoint", rx.grpc_endpoint, "--protocol", "grpc",
                         "--data-dir", str(store), env=env_replay, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        rx.wait_for(lambda: len(rx.spans()) >= spans and len(rx.logs()) >= logs, timeout=15)
        got_spans, got_logs = rx.spans(), rx.logs()
        again = otelmw("replay", "--endpoint", rx.grpc_endpoint, "--protocol", "grpc",
                           "--data-dir", str(store), env=env_replay, cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        time.sleep(0.5)
        assert len(rx.spans()) == spans  # delivered once: the spool empties as it is sent
    assert sorted(s.name for s in got_spans) == sorted(
        ["invoke_agent spooler", "execute_tool lookup"] * TURNS)
    assert len({s.trace_id for s in got_spans}) == TURNS
    assert len(got_logs) == logs
    assert {x.trace_id for x in got_logs} == {s.trace_id for s in got_spans}
    assert not list((store / "spool").glob("*.jsonl"))


def test_the_spool_is_bounded_and_what_does_not_fit_is_counted(tmp_path: Path) -> None:
    store = tmp_path / "store"
    env = clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{free_port()}",
                    OTEL_METRICS_EXPORTER="none", OTEL_LOGS_EXPORTER="none",
                    OTELMW_DATA_DIR=str(store), OTELMW_SHUTDOWN_TIMEOUT="6",
                    OTELMW_SPOOL_MAX_BYTES="65536", OTEL_BSP_MAX_EXPORT_BATCH_SIZE="50")
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    proc = subprocess.run([sys.executable, str(script), "400"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    m = SPOOL_LINE.search(proc.stderr)
    assert m, proc.stderr
    spooled = int(m.group(1))
    dropped = re.search(r"span spool_full: (\d+)", proc.stderr)
    assert dropped, proc.stderr
    assert spooled + int(dropped.group(1)) == 800  # every span either spooled or counted
    assert 0 < spooled < 800
    size = sum(p.stat().st_size for p in (store / "spool").glob("*.jsonl"))
    assert size <= 65536

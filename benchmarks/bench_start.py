"""Benchmark 8 — process start: ``python -c pass`` bare, under ``otelmw run`` and under
``opentelemetry-instrument`` with the peers of the same hosts installed.

One virtualenv (made on first use, ``bench_hosts.VENVS["start"]``) holds the hosts of
the ``current`` matrix environment, otelmw (editable, this checkout), every peer of
benchmark 7 (OpenInference, OpenLLMetry and the official genai instrumentations of
LangChain, LiteLLM, the OpenAI Agents SDK, pydantic-ai, MCP), benchmark 1's three
openai anchors, OpenLLMetry anthropic and ``opentelemetry-distro`` (the SDK
configurator ``opentelemetry-instrument`` runs). The contenders, each the whole
command a user types (launcher process included), all exporting over OTLP/gRPC to a
port nothing listens on (nothing is sent: the program makes no call):

* ``bare``: ``python -c pass``;
* ``otelmw run``: ``otelmw run -- python -c pass`` (``otelmw-store``: the same with
  otelmw's default exporter, the embedded store);
* ``opentelemetry-instrument``: ``opentelemetry-instrument python -c pass`` with the
  distro's configurator and every installed instrumentor except otelmw's.

Start-up cost = contender − bare, in instructions of the program's process (valgrind
``callgrind``, following the launcher's ``exec``: deterministic, what the target
judges; callgrind loses what a process counted before it ``exec``s, so the launchers'
own work is not in it) and in wall time of the whole command (median of interleaved
runs; the machine is shared, so time is a cross-check). Target (issue 39): otelmw's
start-up cost ≤ 0.5 × opentelemetry-instrument's. Also listed: the host modules (and
heavy OpenTelemetry pieces) already in ``sys.modules`` when the program starts: no
host under otelmw (a host is imported by the program, never by its instrumentation),
and with the store nothing of gRPC, protobuf or the SDK's configurator either
(tests/test_run_start.py asserts it without timing; over OTLP/gRPC the exporters are
built, so imported, at start).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _harness as h  # noqa: E402
import bench_hosts  # noqa: E402

CONTENDERS = ("bare", "otelmw run", "otelmw-store", "opentelemetry-instrument")
RUNS = {"full": 15, "quick": 5}
_COLLECTED = re.compile(r"Collected : (\d+)")
# What must not be imported before the program imports it (prefixes of module names).
HOST_MODULES = ("openai", "anthropic", "langchain", "langchain_core", "langgraph", "litellm",
                "mcp", "pydantic_ai", "agents", "praisonaiagents", "run_agent", "hermes_cli",
                "model_tools")
HEAVY_MODULES = ("grpc", "google.protobuf", "opentelemetry.exporter.otlp.proto.grpc",
                 "opentelemetry.sdk._configuration")
PROBE = ("import json, sys\n"
         "hosts = {m.split('.')[0] for m in sys.modules} & set(sys.argv[1].split(','))\n"
         "heavy = [m for m in sys.argv[2].split(',') if m in sys.modules]\n"
         "print(json.dumps(sorted(hosts) + heavy))\n")


def _otelmw_instrumentors(python: str) -> str:
    code = ("from importlib import metadata; print(','.join(sorted(ep.name for ep in "
            "metadata.entry_points(group='opentelemetry_instrumentor') "
            "if ep.name.startswith('otelmw_'))))")
    return subprocess.run([python, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def environment(python: str, data_dir: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "OTELMW_", "PYTHON"))}
    env.update(PYTHONHASHSEED="0", OTELMW_HOME="/nonexistent", OTELMW_DATA_DIR=data_dir,
               OTELMW_QUIET="1", LANGSMITH_TRACING="false", LITELLM_LOCAL_MODEL_COST_MAP="True",
               OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",  # nothing listens
               OTEL_EXPORTER_OTLP_PROTOCOL="grpc", OTEL_TRACES_EXPORTER="otlp",
               OTEL_METRICS_EXPORTER="otlp", OTEL_LOGS_EXPORTER="otlp")
    return env


def commands(python: str, data_dir: str) -> dict[str, tuple[list[str], dict[str, str]]]:
    """contender -> (argv, environment): the program is ``python -c pass``, or the
    probe when ``-c`` gets other code."""
    bindir = Path(python).parent
    base = environment(python, data_dir)
    store = {k: v for k, v in base.items() if not k.startswith("OTEL_")}
    peers = {**base, "OTEL_PYTHON_CONFIGURATOR": "configurator",  # opentelemetry-distro's
             "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": _otelmw_instrumentors(python)}
    return {
        "bare": ([python], base),
        "otelmw run": ([str(bindir / "otelmw"), "run", "--", python], base),
        "otelmw-store": ([str(bindir / "otelmw"), "run", "--", python], store),
        "opentelemetry-instrument": ([str(bindir / "opentelemetry-instrument"), python], peers),
    }


def count(argv: list[str], env: dict[str, str]) -> int:
    """Instructions of the program the command ends in: callgrind follows ``exec``
    and reports only the process image that exits (the launcher's count is lost)."""
    cmd = ["valgrind", "--tool=callgrind", "--trace-children=yes",
           "--callgrind-out-file=/dev/null", *argv, "-c", "pass"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False,
                          timeout=1800)
    found = [int(x) for x in _COLLECTED.findall(proc.stderr)]
    if proc.returncode != 0 or not found:
        raise RuntimeError(f"valgrind {' '.join(argv)} failed (exit {proc.returncode}): "
                           f"{proc.stderr[-3000:]}")
    return found[-1]


def wall(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    # stderr too: opentelemetry-instrument prints each peer that fails to instrument
    # (OpenLLMetry mcp cannot instrument mcp 2.x) at every start
    subprocess.run([*argv, "-c", "pass"], env=env, check=True, timeout=300,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def imported_at_start(argv: list[str], env: dict[str, str]) -> list[str]:
    proc = subprocess.run([*argv, "-c", PROBE, ",".join(HOST_MODULES), ",".join(HEAVY_MODULES)],
                          env=env, capture_output=True, text=True, check=True, timeout=300)
    found: list[str] = json.loads(proc.stdout.strip().splitlines()[-1])
    return found


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer timed runs")
    p.add_argument("--no-count", action="store_true", help="skip the valgrind counts")
    p.add_argument("--here", action="store_true",
                   help="run with this python (it has the hosts and their peers)")
    p.add_argument("--json", help="write the results here")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    if not args.no_count and shutil.which("valgrind") is None:
        sys.exit("the instruction counts need valgrind on PATH (Debian: apt-get install "
                 "valgrind); --no-count for wall time only")
    python = sys.executable if args.here else str(bench_hosts.ensure_venv("start"))
    with tempfile.TemporaryDirectory(prefix="otelmw-bench-start-") as data_dir:
        cmds = commands(python, data_dir)
        modules = {c: imported_at_start(*cmds[c]) for c in CONTENDERS}
        times: dict[str, list[float]] = {c: [] for c in CONTENDERS}
        for c in CONTENDERS:  # warm the page cache and the bytecode caches
            wall(*cmds[c])
        for _ in range(RUNS["quick" if args.quick else "full"]):  # interleaved rounds
            for c in CONTENDERS:
                times[c].append(wall(*cmds[c]))
        instr: dict[str, int] = {}
        for c in [] if args.no_count else CONTENDERS:
            instr[c] = count(*cmds[c])
            if args.verbose:
                print(f"[{c}] {instr[c]:,} instructions", file=sys.stderr, flush=True)
    median = {c: statistics.median(v) for c, v in times.items()}
    over_t = {c: median[c] - median["bare"] for c in CONTENDERS}
    over_i = {c: instr[c] - instr["bare"] for c in instr}
    peer = "opentelemetry-instrument"
    rows = []
    for c in CONTENDERS:
        rows.append([c, f"{instr[c] / 1e6:,.0f}M" if c in instr else "—",
                     f"{over_i[c] / 1e6:,.0f}M" if c in over_i else "—",
                     h.fmt(over_i[c] / over_i[peer]) if c in over_i and c != "bare" else "—",
                     f"{median[c] * 1000:.0f}", f"{over_t[c] * 1000:.0f}",
                     h.fmt(over_t[c] / over_t[peer]) if c != "bare" else "—",
                     ", ".join(modules[c]) or "none"])
    print(h.table(["contender", "instructions", "start-up cost", "÷ peer's", "wall ms (median)",
                   "start-up ms", "÷ peer's", "imported at program start"], rows))
    ratio = over_i["otelmw run"] / over_i[peer] if over_i else over_t["otelmw run"] / over_t[peer]
    # No host in either otelmw row; over OTLP the gRPC exporters are built (and
    # imported) at start, as the SDK's metric reader needs its exporter's preferences.
    no_host = not any(m.split(".")[0] in HOST_MODULES
                      for c in ("otelmw run", "otelmw-store") for m in modules[c])
    clean = no_host and not modules["otelmw-store"]
    print(f"\notelmw run start-up ÷ opentelemetry-instrument's "
          f"({'instructions' if over_i else 'wall time'}) = {ratio:.2f}: target ≤ 0.50 "
          f"{'met' if ratio <= 0.5 else 'missed'}; no host imported at start, nor (with the "
          f"store) a deferred module: {'met' if clean else 'missed'}")
    out = {"instructions": instr, "wall_s": times, "imported_at_start": modules,
           "ratio": ratio,
           "targets": {"start-up: otelmw ≤ 0.5 × opentelemetry-instrument": ratio <= 0.5,
                       "nothing imported before the program": clean}}
    h.write_json(args.json, out)
    return out


if __name__ == "__main__":
    main()

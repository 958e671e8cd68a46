"""Run every otelmw benchmark and print their tables.

    python benchmarks/run.py            # full run (about 2 h on a 2-core machine)
    python benchmarks/run.py --quick    # fewer rounds and calls
    python benchmarks/run.py --only chain,digests
    python benchmarks/run.py --markdown results.md   # also write the tables + machine

Benchmark 1 (OpenAI, against the three anchor instrumentations) runs once per
openai release of the test suite's host matrix (newest 3.x first, then the 2.x
Hermes pins), and benchmarks 1b and 6 (the same call counted in instructions by
valgrind, 6 over conversation length) once, for the newest; each with the python
of a separate virtualenv that this runner creates on first use (see ``_venv.py``;
``--venv PATH`` to place them, ``--no-venv`` to run it once with the current
interpreter, which must then have the anchors installed). The other benchmarks run
with the current interpreter (otelmw's development environment, with
``hermes-agent`` for benchmark 2 and ``grpcio`` for benchmark 5); benchmark 7 makes
its own virtualenvs of the hosts and their peers (``bench_hosts.py``), benchmark 8
one with all of them and the provider SDKs' peers (``bench_start.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _harness as h  # noqa: E402

BENCHES = {
    "openai": ("bench_openai.py", "1. OpenAI chat call overhead vs anchors and floor"),
    "instructions": ("bench_instructions.py", "1b. OpenAI chat call in instructions (valgrind)"),
    "conversation": ("bench_conversation.py",
                     "6. OpenAI chat call over conversation length, in instructions (valgrind)"),
    "chain": ("bench_chain.py", "2. Middleware chain vs Hermes Agent"),
    "chain-instructions": ("bench_chain_instructions.py",
                           "2b. Middleware chain in instructions (valgrind)"),
    "fastpath": ("bench_fastpath.py", "3. No-middleware path and native bypass"),
    "digests": ("bench_digests.py", "4. Digests by result size"),
    "outage": ("bench_outage.py", "5. Exporter outage"),
    "hosts": ("bench_hosts.py",
              "7. One turn per agent host (LangChain, LiteLLM, OpenAI Agents SDK, pydantic-ai, "
              "MCP 2.x and 1.x) vs its peers, in instructions (valgrind) and CPU time"),
    "start": ("bench_start.py",
              "8. Process start under otelmw run vs opentelemetry-instrument with the peers"),
}
# The benchmarks run in the anchors' virtualenvs: how many of the openai releases
# each covers, newest first (None: all; benchmark 1b, slow under valgrind, the newest).
ANCHOR_BENCHES: dict[str, int | None] = {"openai": None, "instructions": 1, "conversation": 1}
VERSIONS = ["otelmw", "opentelemetry-api", "opentelemetry-sdk",
            "opentelemetry-exporter-otlp-proto-grpc", "wrapt", "openai", "httpx", "pydantic",
            "hermes-agent", "grpcio", "protobuf"]


class Job:
    """One benchmark process: ``name`` keys its results (``openai``: the newest openai
    release; ``openai-2``: the 2.x one)."""

    def __init__(self, name: str, script: str, title: str, python: str) -> None:
        self.name, self.script, self.title, self.python = name, script, title, python


def _jobs(name: str, args: argparse.Namespace) -> list[Job]:
    script, title = BENCHES[name]
    if name not in ANCHOR_BENCHES or args.no_venv:
        return [Job(name, script, title, sys.executable)]
    from _venv import DEFAULT_VENV, OPENAI_RELEASES, ensure_venv, venv_for

    base = Path(args.venv) if args.venv else DEFAULT_VENV
    jobs = []
    for i, release in enumerate(OPENAI_RELEASES[:ANCHOR_BENCHES[name]]):
        py = ensure_venv(venv_for(release, base), log=lambda s: print(s, flush=True),
                         openai=release)
        key = name if i == 0 else f"{name}-{release.split('.')[0]}"
        jobs.append(Job(key, script, f"{title}, openai {release}", str(py)))
    return jobs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer rounds and calls")
    p.add_argument("--only", default="", help=f"comma list of {', '.join(BENCHES)}")
    p.add_argument("--venv", default=None, help="where the anchors venv lives")
    p.add_argument("--no-venv", action="store_true",
                   help="run benchmark 1 with this interpreter (anchors must be installed)")
    p.add_argument("--json", default=None, help="directory for raw JSON results")
    p.add_argument("--markdown", default=None, help="write tables + machine description here")
    p.add_argument("-v", "--verbose", action="store_true", help="log every process")
    args = p.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(BENCHES)
    unknown = set(names) - set(BENCHES)
    if unknown:
        p.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    out_dir = Path(args.json) if args.json else Path(tempfile.mkdtemp(prefix="otelmw-bench-"))
    out_dir.mkdir(parents=True, exist_ok=True)

    mach = h.machine()
    vers = h.versions(VERSIONS)
    header = (f"Machine: {mach['cpu']}, {mach['cores']} cores, {mach['implementation']} "
              f"{mach['python']}, {mach['os']}\nPackages: "
              + ", ".join(f"{k} {v}" for k, v in vers.items()))
    print(header, flush=True)
    results: dict[str, Any] = {}
    outputs: dict[str, str] = {}
    t_all = time.perf_counter()
    jobs = [job for name in names for job in _jobs(name, args)]
    for job in jobs:
        js = out_dir / f"{job.name}.json"
        cmd = [job.python, str(HERE / job.script), "--json", str(js)]
        if args.quick:
            cmd.append("--quick")
        if args.verbose:
            cmd.append("-v")
        t0 = time.perf_counter()
        print(f"\n== {job.title}  ({'quick' if args.quick else 'full'}) ==", flush=True)
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, cwd=str(HERE.parent),
                              env={**os.environ, "PYTHONHASHSEED": "0"})
        outputs[job.name] = proc.stdout
        print(proc.stdout, end="", flush=True)
        print(f"[{job.name}: {time.perf_counter() - t0:.0f} s]", flush=True)
        if proc.returncode != 0 or not js.exists():
            print(f"[{job.name}: FAILED with exit code {proc.returncode}]", flush=True)
            results[job.name] = {"failed": proc.returncode}
            continue
        results[job.name] = json.loads(js.read_text(encoding="utf-8"))
    names = [job.name for job in jobs]

    rows = []
    for name in names:
        for target, ok in results[name].get("targets", {}).items():
            rows.append([name, target, h.verdict(ok)])
        if "failed" in results[name]:
            rows.append([name, "benchmark ran", "FAILED"])
    summary = h.table(["benchmark", "target", "result"], rows)
    print(f"\n== Targets ==\n\n{summary}")
    print(f"\nTotal {time.perf_counter() - t_all:.0f} s; raw results in {out_dir}")
    if args.markdown:
        anchors = {k: v for job in names if job.startswith("openai")
                   for k, v in results.get(job, {}).get("versions", {}).items()
                   if k != "openai"}
        text = [f"<!-- python benchmarks/run.py{' --quick' if args.quick else ''} -->",
                header.replace("\nPackages:", "\n\nPackages:"),
                ("Anchors venv: " + ", ".join(f"{k} {v}" for k, v in anchors.items()))
                if anchors else ""]
        text += [outputs[n] for n in names]
        text += ["### Targets\n", summary]
        Path(args.markdown).write_text("\n".join(text) + "\n", encoding="utf-8")
    return 1 if any("failed" in r for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark 1b — benchmark 1's OpenAI chat call, counted in CPU instructions.

Benchmark 1 times the call; on a shared machine whose speed drifts by ±15-25 %
within seconds its ratios move by ±0.1 between runs of the same code. The
instructions a process executes do not drift: valgrind (``callgrind``) counts
them exactly, so this gives the same comparison a deterministic reading.

Per contender (benchmark 1's ``bare``, ``floor``, ``otelmw`` and the three anchors
at their defaults): two processes under valgrind, side by side, each setting the
contender up (the real ``openai`` client on its in-memory transport, the SDK
``TracerProvider`` + ``BatchSpanProcessor``) and warming it up alike; one then makes
N calls, the other none. Their difference over N is the contender's instructions per
call, and minus the bare call's, its overhead. The cyclic garbage collector is off
for the counted calls: when it runs depends on the whole heap's history (how many
modules a process imported), not on the call, and with it on the counts move by
several thousand instructions between processes of the same code.

An instruction count is not a time (cache misses and branch mispredictions are not
in it): this is a cross-check of benchmark 1, not a replacement. Targets (issue 27,
stricter than benchmark 1's 0.6 and 1.5 in time): otelmw's overhead ≤ 0.5 × the best
default anchor's (the official instrumentation's), ≤ 1.25 × the floor's. Needs
``valgrind`` (Debian: ``apt-get install valgrind``) and, like
benchmark 1, the anchors' virtualenv (``run.py`` runs it there).
"""

from __future__ import annotations

import gc
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _harness as h

CONFIGS = ("bare", "floor", "otelmw", "official", "openinference", "openllmetry")
ANCHORS = ("official", "openinference", "openllmetry")
CALLS = {"full": 1000, "quick": 300}
WARMUP = 200
_COLLECTED = re.compile(r"Collected : (\d+)")


def counted_calls(call: Any, n: int, warmup: int = WARMUP) -> None:
    """The child's part: ``call`` warmed up, then made ``n`` times with the cyclic
    garbage collector off (what valgrind counts, minus the ``n = 0`` process)."""
    for _ in range(warmup):
        call()
    gc.collect()
    gc.disable()
    for _ in range(n):
        call()


def child(config: str, n: int) -> None:
    """Set ``config`` up, warm it up, then make ``n`` calls (run under valgrind)."""
    import bench_openai as b

    counted_calls(b.setup(config)[0], n)


def count(script: str, args: list[str]) -> int:
    """Instructions executed by ``python script --child *args`` under valgrind."""
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
           sys.executable, os.path.abspath(script), "--child", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONHASHSEED": "0"})
    found = _COLLECTED.search(proc.stderr)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(f"valgrind run of {' '.join(args)} failed "
                           f"(exit {proc.returncode}): {proc.stderr[-2000:]}")
    return int(found.group(1))


def per_call(script: str, args: list[str], n: int, serial: bool = False) -> float:
    """Instructions per call of ``script``'s child ``args``: two processes side by side
    (``serial``: one after the other, the same counts), one making ``n`` counted calls
    (its last argument), the other none."""
    with ThreadPoolExecutor(1 if serial else 2) as pool:
        none, some = pool.map(lambda k: count(script, [*args, str(k)]), (0, n))
    return (some - none) / n


def require_valgrind(benchmark: str) -> None:
    """Exit with what to install when valgrind, which counts the instructions, is missing."""
    if shutil.which("valgrind") is None:
        sys.exit(f"benchmark {benchmark} needs valgrind on PATH "
                 "(Debian: apt-get install valgrind)")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = h.common_args(argv, __doc__.splitlines()[0])
    require_valgrind("1b")
    n = CALLS["quick" if args.quick else "full"]
    instr: dict[str, float] = {}
    for config in CONFIGS:
        instr[config] = per_call(__file__, [config], n)
        if args.verbose:
            print(f"{config}: {instr[config]:.0f} instructions per call", file=sys.stderr)
    bare = instr["bare"]
    over = {c: instr[c] - bare for c in CONFIGS if c != "bare"}
    best = min(ANCHORS, key=lambda c: over[c])
    r_anchor, r_floor = over["otelmw"] / over[best], over["otelmw"] / over["floor"]
    import bench_openai as b

    rows = [[b.LABELS["bare"], instr["bare"], None, None]]
    rows += [[b.LABELS[c], instr[c], over[c], None if c == "floor" else over[c] / over["floor"]]
             for c in CONFIGS if c != "bare"]
    print(f"\n### 1b. OpenAI chat call in instructions ({n} calls per contender, "
          "valgrind; per call)\n")
    print(h.table(["configuration", "instructions", "overhead", "overhead / floor"], rows))
    ok_a, ok_f = r_anchor <= 0.5, r_floor <= 1.25
    print(f"\notelmw overhead / best default anchor ({best}) = {r_anchor:.2f} (target "
          f"≤ 0.50: {h.verdict(ok_a)}); / floor = {r_floor:.2f} (≤ 1.25: "
          f"{h.verdict(ok_f)}). Instructions, not time: a cross-check of benchmark 1.")
    result = {"instructions": instr, "overhead": over, "best_anchor": best,
              "ratio_best_anchor": r_anchor, "ratio_floor": r_floor, "calls": n,
              "targets": {"instructions: otelmw ≤ 0.5 × best anchor": ok_a,
                          "instructions: otelmw ≤ 1.25 × floor": ok_f},
              "versions": h.versions(["openai", "opentelemetry-sdk", "otelmw"])}
    h.write_json(args.json, result)
    return result


def child_or_main(child: Any, main: Any) -> None:
    """A counted benchmark's entry: ``--child CONFIG N`` (the process ``count`` runs
    under valgrind) makes ``child(CONFIG, N)``; anything else runs ``main``."""
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]))
    else:
        main()


if __name__ == "__main__":
    child_or_main(child, main)

"""Benchmark 3 — the no-middleware path and the native-runtime normalization bypass.

A ``Pipeline()`` with nothing registered, no observer and no memory adapter:
``run_tool`` for the native runtime (``runtime_id="praisonai"``: results bypass
normalization) and with no runtime id, and ``run_llm``, each against the bare call
of the same ``execute`` callable. Timed with 10 calls unrolled per loop turn (so
the loop itself is a small, equal share); the bare call is measured the same way
in its own process, and overhead = configuration − bare, per round.

Allocations: with ``tracemalloc`` on, after a warm-up, the peak of traced memory
above the starting point during one call (any allocation shows up, even one
freed before the call returns), minus the same figure for the bare call (which
is tracemalloc's own bookkeeping), and the net change over 10 000 calls of
memory allocated from otelmw's code.

Targets: ≤ 0.5 µs over the bare call on the reference machine (scaled by this run's
machine factor, ``_harness.MachineSpeed``); zero allocations.
"""

from __future__ import annotations

import gc
import os
import sys
import tracemalloc
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _harness as h

from otelmw.core.pipeline import Pipeline

ARGS = {"path": "/tmp/notes.txt", "offset": 0, "limit": 100}
REQUEST = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}
RESULT = '{"content": "hello"}'

CONFIGS = {
    "bare-tool": ("bare call: execute(args)", "tool"),
    "run_tool-native": ('run_tool(..., runtime_id="praisonai")', "tool"),
    "run_tool-none": ("run_tool(...) (no runtime id)", "tool"),
    "bare-llm": ("bare call: execute(request)", "llm"),
    "run_llm": ("run_llm(request, execute)", "llm"),
}


def make(config: str) -> Any:
    """A function doing 10 calls of the configuration."""
    pipe = Pipeline()
    run_tool, run_llm = pipe.run_tool, pipe.run_llm

    def execute(payload: Any) -> Any:
        return RESULT

    a, r = ARGS, REQUEST
    if config == "bare-tool":
        def one() -> Any:
            return execute(a)
    elif config == "run_tool-native":
        def one() -> Any:
            return run_tool("read_file", a, execute, runtime_id="praisonai")
    elif config == "run_tool-none":
        def one() -> Any:
            return run_tool("read_file", a, execute)
    elif config == "bare-llm":
        def one() -> Any:
            return execute(r)
    elif config == "run_llm":
        def one() -> Any:
            return run_llm(r, execute)
    else:
        raise ValueError(config)

    def ten() -> None:
        one(); one(); one(); one(); one(); one(); one(); one(); one(); one()  # noqa: E702

    assert one() == RESULT
    return one, ten


def allocations(one: Any) -> dict[str, int]:
    """Bytes allocated by one call (peak above the starting point, so freed
    temporaries count) and net bytes left by 10 000 calls in otelmw's own code."""
    for _ in range(1000):
        one()
    gc.collect()
    tracemalloc.start()
    try:
        for _ in range(100):
            one()
        gc.collect()
        worst = 0
        get, reset = tracemalloc.get_traced_memory, tracemalloc.reset_peak
        for _ in range(300):
            before = get()[0]  # the result tuple is freed before reset_peak()
            reset()
            one()
            worst = max(worst, get()[1] - before)
        gc.collect()
        only_otelmw = [tracemalloc.Filter(True, "*otelmw*")]
        snap0 = tracemalloc.take_snapshot().filter_traces(only_otelmw)
        for _ in range(10_000):
            one()
        gc.collect()
        snap1 = tracemalloc.take_snapshot().filter_traces(only_otelmw)
        net = sum(d.size_diff for d in snap1.compare_to(snap0, "lineno"))
    finally:
        tracemalloc.stop()
    return {"peak_bytes": worst, "net_bytes_10k": net}


PARAMS = {"full": {"n": 20_000, "batches": 9, "rounds": 5},
          "quick": {"n": 10_000, "batches": 5, "rounds": 3}}


def worker(config: str, _round: int, params: dict[str, Any]) -> dict[str, Any]:
    one, ten = make(config)
    res = h.sample(ten, n=params["n"], batches=params["batches"], warmup=2000, inner=10)
    res.update(allocations(one))
    return res


def main(argv: list[str] | None = None) -> dict[str, Any]:
    cfgs = list(CONFIGS)
    args, _, rounds, raw = h.run_rounds(argv, __doc__.splitlines()[0], PARAMS, cfgs, worker,
                                        machine=True)
    speed = h.machine_speed(raw)
    limit = speed.scaled(0.5)
    rows, targets = [], {}
    for c in cfgs:
        label, kind = CONFIGS[c]
        base = f"bare-{kind}"
        over = None if c == base else h.med(
            a["cpu"] - b["cpu"] for a, b in zip(raw[c], raw[base], strict=True))
        # tracemalloc's own bookkeeping (its result tuple and ints) shows up as a few
        # dozen bytes in every measurement: allocations are counted above the bare call's.
        peak = max(r["peak_bytes"] for r in raw[c]) - max(r["peak_bytes"] for r in raw[base])
        net = max(r["net_bytes_10k"] for r in raw[c])
        ok_t = None if over is None else over <= limit
        ok_a = peak <= 0 and net <= 0
        if over is not None:
            targets[f"{label}: ≤ 0.5 µs over bare (here {limit:.2f} µs)"] = ok_t
            targets[f"{label}: zero allocations"] = ok_a
        rows.append([label, h.med(r["cpu"] for r in raw[c]), over, h.verdict(ok_t), peak, net,
                     h.verdict(ok_a) if over is not None else "—"])
    print(f"\n### 3. No-middleware path and native bypass ({rounds} rounds, medians; "
          "process CPU µs per call)\n")
    print(h.table(["path", "µs / call", "over bare µs", "≤ 0.5 µs", "bytes / call over bare",
                   "net bytes / 10k calls", "zero alloc"], rows))
    print(f"\n{speed.note()}")
    result = {"raw": raw, "targets": targets, "machine": speed._asdict()}
    h.write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()

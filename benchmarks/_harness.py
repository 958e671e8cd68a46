"""Shared benchmark machinery: CPU-time sampling, one process per configuration,
interleaved rounds, medians, tables.

Method (why, on a shared 2-core machine):

* Costs are CPU time (``time.process_time`` for the whole process, including
  exporter threads; ``time.thread_time`` for the calling thread), not wall time,
  so a neighbour stealing the core does not count against the code.
* Each configuration runs in its own freshly forked process (a fork of a parent
  that has only imported the shared libraries), so instrumentation patches,
  providers, caches and heap state never leak between configurations.
* Configurations are interleaved: round *r* runs every configuration once, in an
  order rotated (and reversed every other round), so slow drift of the machine
  hits every configuration alike.
* Inside a process a configuration is warmed up, then timed in several batches;
  the process reports the median batch. Across rounds the median is reported,
  and ratios are computed per round (configurations of the same round) and then
  their median is taken.
"""

from __future__ import annotations

import gc
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

_FORK = mp.get_context("fork")


# --------------------------------------------------------------- sampling
def sample(fn: Callable[[], Any], *, n: int, batches: int, warmup: int,
           inner: int = 1) -> dict[str, Any]:
    """Per-call CPU cost of ``fn`` in µs: median over ``batches`` of ``n`` calls.

    ``inner`` is how many operations one ``fn()`` performs (for unrolled loops).
    Returns ``{"cpu": µs (process CPU), "thread": µs (thread CPU), "wall": µs,
    "cpu_batches": [...]}``.
    """
    for _ in range(warmup):
        fn()
    cpu, thr, wall = [], [], []
    ops = n * inner
    for _ in range(batches):
        gc.collect()
        p0, t0, w0 = time.process_time_ns(), time.thread_time_ns(), time.perf_counter_ns()
        for _ in range(n):
            fn()
        p1, t1, w1 = time.process_time_ns(), time.thread_time_ns(), time.perf_counter_ns()
        cpu.append((p1 - p0) / ops / 1e3)
        thr.append((t1 - t0) / ops / 1e3)
        wall.append((w1 - w0) / ops / 1e3)
    return {"cpu": statistics.median(cpu), "thread": statistics.median(thr),
            "wall": statistics.median(wall), "cpu_batches": cpu}


def calibrate(fn: Callable[[], Any], target_s: float, cap: int = 1_000_000) -> int:
    """How many calls of ``fn`` take about ``target_s`` of CPU."""
    n = 1
    while True:
        t0 = time.process_time()
        for _ in range(n):
            fn()
        dt = time.process_time() - t0
        if dt >= 0.02 or n >= cap:
            return max(1, min(cap, int(n * target_s / max(dt, 1e-9))))
        n *= 4


# ------------------------------------------------------- isolated processes
def _child(conn: Any, target: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        result = target(*args)
        conn.send(("ok", result))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)  # no atexit/provider shutdown: a dead collector must not hang us


def run_isolated(target: Callable[..., Any], *args: Any, timeout: float = 300.0) -> Any:
    """Run ``target(*args)`` in a forked child process and return its result."""
    parent, child = _FORK.Pipe(duplex=False)
    proc = _FORK.Process(target=_child, args=(child, target, args), daemon=True)
    proc.start()
    child.close()
    if not parent.poll(timeout):
        proc.kill()
        proc.join()
        raise TimeoutError(f"{getattr(target, '__name__', target)}{args!r} timed out")
    status, payload = parent.recv()
    proc.join(10)
    if proc.is_alive():
        proc.kill()
    if status != "ok":
        raise RuntimeError(f"benchmark process failed:\n{payload}")
    return payload


def interleaved(configs: Sequence[str], rounds: int, worker: Callable[[str, int], Any],
                log: Callable[[str], None] | None = None) -> dict[str, list[Any]]:
    """``worker(config, round)`` in its own process, for every config, ``rounds`` times,
    in rotated/reversed order. Returns config → list of per-round results."""
    out: dict[str, list[Any]] = {c: [] for c in configs}
    k = len(configs)
    for r in range(rounds):
        order = [configs[(i + r) % k] for i in range(k)]
        if r % 2:
            order.reverse()
        for cfg in order:
            t0 = time.perf_counter()
            out[cfg].append(run_isolated(worker, cfg, r))
            if log:
                log(f"  round {r + 1}/{rounds} {cfg:<34} {time.perf_counter() - t0:5.1f}s")
    return out


# -------------------------------------------------------------- statistics
def med(values: Iterable[float]) -> float:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else float("nan")


def spread(values: Iterable[float]) -> float:
    """Relative half-range of the values (a rough noise indicator)."""
    vals = [v for v in values if v is not None]
    if len(vals) < 2:
        return 0.0
    m = statistics.median(vals)
    return (max(vals) - min(vals)) / 2 / m if m else 0.0


# ------------------------------------------------------------------ output
def fmt(v: Any, digits: int = 2) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        if v != v:
            return "—"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        if abs(v) >= 100:
            return f"{v:.1f}"
        return f"{v:.{digits}f}"
    return str(v)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown pipe table (readable in a terminal too)."""
    cells = [[str(h) for h in headers]] + [[fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    # Numbers right-aligned; text (and the first column) left-aligned.
    left = [i == 0 or all(isinstance(r[i], str) for r in rows) for i in range(len(headers))]
    lines = []
    for j, r in enumerate(cells):
        parts = [c.ljust(widths[i]) if left[i] else c.rjust(widths[i]) for i, c in enumerate(r)]
        lines.append("| " + " | ".join(parts) + " |")
        if j == 0:
            lines.append("|" + "|".join(
                ("-" * (w + 2)) if left[i] else ("-" * (w + 1) + ":")
                for i, w in enumerate(widths)) + "|")
    return "\n".join(lines)


def verdict(ok: bool | None) -> str:
    return "—" if ok is None else ("met" if ok else "MISSED")


def write_json(path: str | None, data: Any) -> None:
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, default=str)


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "implementation": platform.python_implementation(), "os": platform.platform()}


def versions(names: Iterable[str]) -> dict[str, str]:
    from importlib import metadata

    out = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = "not installed"
    return out


def common_args(argv: Sequence[str] | None, description: str) -> Any:
    import argparse

    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="fewer rounds and calls (~5x faster)")
    p.add_argument("--rounds", type=int, default=None, help="override the number of rounds")
    p.add_argument("--json", default=None, help="write raw results here")
    p.add_argument("-v", "--verbose", action="store_true", help="log every process")
    return p.parse_args(argv)


def logger(verbose: bool) -> Callable[[str], None] | None:
    if not verbose:
        return None
    return lambda s: print(s, file=sys.stderr, flush=True)


def run_rounds(argv: Sequence[str] | None, description: str,
               param_sets: dict[str, dict[str, Any]], configs: Sequence[str],
               worker: Callable[[str, int, dict[str, Any]], Any], *, machine: bool = False
               ) -> tuple[Any, dict[str, Any], int, dict[str, list[Any]]]:
    """A benchmark's command line and its interleaved rounds:
    ``(args, params, rounds, {config: [result per round]})``. ``machine``: the rounds
    also measure the machine's speed (``MACHINE``, see ``machine_speed``)."""
    args = common_args(argv, description)
    params = dict(param_sets["quick" if args.quick else "full"])
    rounds = args.rounds or params["rounds"]

    def run(config: str, r: int) -> Any:
        return span_cost() if config == MACHINE else worker(config, r, params)

    raw = interleaved([*configs, MACHINE] if machine else configs, rounds, run,
                      logger(args.verbose))
    return args, params, rounds, raw


# ----------------------------------------------------------- machine speed
# The absolute targets (µs) were set on the reference machine of the 30 Nov 2026 run
# (docs/performance.md), where one SDK span cost 10.1 µs: benchmark 2's "bare" span,
# ``tracer.start_span(name).end()`` on a BatchSpanProcessor onto a dropping exporter.
# The machines these benchmarks run on are shared and their speed moves (≈ 3 × slower
# on 1 Dec): a run measures that same span in its own rounds and scales the absolute
# targets by the ratio, so that a target means the same work on every machine.
MACHINE = "machine speed (one SDK span)"
REFERENCE_SPAN_US = 10.1


class MachineSpeed(NamedTuple):
    span_us: float  # one SDK span here (median of the rounds)
    factor: float  # span_us / REFERENCE_SPAN_US: what a reference µs costs here

    def scaled(self, target_us: float) -> float:
        return target_us * self.factor

    def note(self) -> str:
        return (f"Machine factor {self.factor:.2f}: one SDK span costs {self.span_us:.1f} µs "
                f"here, {REFERENCE_SPAN_US} µs on the reference machine of the targets "
                "(30 Nov); the absolute targets above are scaled by it.")


def span_cost(batch_s: float = 0.05, batches: int = 7) -> dict[str, float]:
    """CPU µs of one SDK span (``MACHINE``), measured as benchmark 2 measures its bare
    span."""
    from _otel import dropping_provider

    tp, _ = dropping_provider()
    tracer = tp.get_tracer("bench-machine")

    def bare() -> None:
        tracer.start_span("tool_execution bench.tool_execution_0").end()

    n = calibrate(bare, batch_s)
    cost = sample(bare, n=n, batches=batches, warmup=200)["cpu"]
    tp.shutdown()
    return {"cpu": cost}


def machine_speed(raw: dict[str, list[Any]]) -> MachineSpeed:
    span = med(r["cpu"] for r in raw[MACHINE])
    return MachineSpeed(span, span / REFERENCE_SPAN_US)


def profile(fn: Callable[[], Any], n: int, sort: str = "tottime", warmup: int = 500) -> str:
    """cProfile of ``n`` calls of ``fn`` after a warm-up (text, top functions)."""
    import cProfile
    import io
    import pstats

    for _ in range(warmup):
        fn()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        fn()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats(sort).print_stats(40)
    return out.getvalue()

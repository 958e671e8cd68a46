"""Benchmark 2b — benchmark 2's middleware chain, counted in instructions.

Benchmark 2 times ``Pipeline().run_llm`` / ``run_tool`` with 0, 1 or 5 layers of one
kind beside Hermes Agent's own chain; on a shared machine its µs move by ±20 %
between rounds. This counts its configurations in instructions, which do not drift,
as benchmark 1b counts benchmark 1's call: per configuration two processes under
valgrind side by side, each setting it up (``bench_chain.setup``: the same callbacks,
registered the same way) and warming it up alike; one then makes N calls with the
cyclic garbage collector off, the other none; their difference over N is the
configuration's instructions per call.

Targets (issue 27), benchmark 2's, in instructions:

* untraced otelmw ≤ 0.5 × Hermes per call at 1 and 5 layers of every kind;
* each traced layer, (traced(N) − traced(0)) / N (the untraced layer's cost
  included), ≤ one span in situ + 2 µs of the reference machine. The span in situ is
  benchmark 2's: the traced pipeline with otelmw's layer spans off, with and without
  each callback carrying the contract's span, the difference over N. 2 µs of the
  reference machine are counted at the pace of its bare span: a bare span's
  instructions here (the ``span`` configuration: ``start_span().end()`` on the same
  SDK provider) × 2 / ``REFERENCE_SPAN_US`` (the reference's bare span, 10.1 µs).

Needs valgrind and ``hermes-agent`` (the suite's ``hermes`` environment has both
otelmw and it).
"""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _harness as h
import bench_chain  # (the span processor reads its settings when a provider is made: child)
from bench_instructions import child_or_main, counted_calls, per_call, require_valgrind

CALLS = {"full": 2000, "quick": 500}
# The untraced rows, (kind, layers): benchmark 2's otelmw configurations, in its order.
ROWS = [(kind, layers) for impl, _, kind, layers in map(bench_chain.parse_config,
                                                         bench_chain.configs())
        if impl == "otelmw"]
SPAN = "span"  # a bare span on benchmark 2's provider: the pace of the reference machine


def child(config: str, n: int) -> None:
    """Set ``config`` (a benchmark 2 configuration, or ``SPAN``) up, warm it up, make
    ``n`` calls."""
    # The batch span processor holds every span of the process and exports none while
    # it counts: when its worker thread runs under valgrind is not deterministic (two
    # runs of the same 5-layer configuration read 50k instructions a call apart), and
    # it is the same work for otelmw's spans and the spans they are judged against.
    os.environ.update({"OTEL_BSP_SCHEDULE_DELAY": str(10**9),
                       "OTEL_BSP_MAX_QUEUE_SIZE": str(10**6),
                       "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": str(10**6)})
    if config == SPAN:
        from _otel import dropping_provider

        counted_calls(bench_chain.bare_span(dropping_provider()[0].get_tracer("bench-span")),
                      n)
        return
    counted_calls(bench_chain.setup(config)[0], n)


def counted(config: str, n: int, instr: dict[str, float], verbose: bool) -> float:
    """``config``'s instructions per call over ``n`` calls, counted once into ``instr``."""
    if config not in instr:
        instr[config] = per_call(__file__, [config], n)
        if verbose:
            print(f"{config}: {instr[config]:.0f} instructions per call", file=sys.stderr)
    return instr[config]


def traced_rows(n: int, instr: dict[str, float], verbose: bool
                ) -> tuple[list[list[Any]], dict[str, bool | None], float]:
    """Benchmark 2's traced rows in instructions (see the module docstring): the
    table's rows, their targets and the allowance (2 µs of the reference machine)."""
    def count(config: str) -> float:
        return counted(config, n, instr, verbose)

    allowance = count(SPAN) * 2.0 / h.REFERENCE_SPAN_US
    rows: list[list[Any]] = []
    targets: dict[str, bool | None] = {}
    for kind in bench_chain.KINDS:
        call = bench_chain.call_of(kind)
        for layers in bench_chain.LAYERS:
            layer = (count(f"otelmw-traced/{kind}/{layers}")
                     - count(f"otelmw-traced/{call}/0")) / layers
            in_situ = (count(f"otelmw-callbackspans/{kind}/{layers}")
                       - count(f"otelmw-nolayerspans/{kind}/{layers}")) / layers
            ok = layer - in_situ <= allowance
            targets[f"instructions: traced {kind} layer ≤ span (in situ) + 2 µs (×{layers})"] = ok
            rows.append([kind, layers, layer, in_situ, layer - in_situ, h.verdict(ok)])
    return rows, targets, allowance


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = h.common_args(argv, __doc__.splitlines()[0])
    require_valgrind("2b")
    n = CALLS["quick" if args.quick else "full"]
    instr: dict[str, float] = {}
    rows, targets = [], {}
    for kind, layers in ROWS:
        counts = [counted(f"{impl}/{kind}/{layers}", n, instr, args.verbose)
                  for impl in ("otelmw", "hermes")]
        ratio = counts[0] / counts[1]
        ok = None if layers == 0 else ratio <= 0.5
        if layers:
            targets[f"instructions: untraced {kind} ×{layers} ≤ 0.5 × Hermes"] = ok
        rows.append([f"{kind} call" if layers == 0 else kind, layers, counts[0], counts[1],
                     ratio, h.verdict(ok)])
    print(f"\n### 2b. Middleware chain, untraced, in instructions ({n} calls per "
          "configuration, valgrind; per call)\n")
    print(h.table(["kind", "layers", "otelmw instructions", "Hermes instructions",
                   "otelmw / Hermes", "≤ 0.5×"], rows))
    traced, traced_targets, allowance = traced_rows(n, instr, args.verbose)
    targets.update(traced_targets)
    print(f"\n### 2b. Traced layers in instructions ({n} calls per configuration; per "
          f"layer)\n")
    print(h.table(["kind", "layers", "traced per layer", "span in situ",
                   "per layer − span", "≤ span + 2 µs"], traced))
    print(f"\nA bare span: {instr[SPAN]:,.0f} instructions (the reference machine: "
          f"{h.REFERENCE_SPAN_US} µs), so 2 µs there are {allowance:,.0f} instructions.")
    result = {"instructions": instr, "calls": n, "targets": targets,
              "versions": h.versions(["hermes-agent", "otelmw"])}
    h.write_json(args.json, result)
    return result


if __name__ == "__main__":
    child_or_main(child, main)

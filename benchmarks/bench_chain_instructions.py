"""Benchmark 2b — benchmark 2's middleware chain, counted in instructions.

Benchmark 2 times ``Pipeline().run_llm`` / ``run_tool`` with 0, 1 or 5 layers of one
kind beside Hermes Agent's own chain; on a shared machine its µs move by ±20 %
between rounds. This counts its configurations in instructions, which do not drift,
as benchmark 1b counts benchmark 1's call: per configuration two processes under
valgrind side by side, each setting it up (``bench_chain.setup``: the same callbacks,
registered the same way) and warming it up alike; one then makes N calls with the
cyclic garbage collector off, the other none; their difference over N is the
configuration's instructions per call.

Targets, in instructions:

* untraced otelmw ≤ 0.5 × Hermes per call at 1 and 5 layers of every kind;
* a traced layer's increment, (traced(5) − traced(1)) / 4, ≤ one span in situ + 2 µs
  of the reference machine. The span in situ is benchmark 2's: the traced pipeline
  with otelmw's layer spans off, with and without each callback carrying the
  contract's span; its increment is taken the same way, ((callback spans − no layer
  spans) at 5 layers − the same at 1) / 4. 2 µs of the reference machine are counted
  at the pace of its bare span: a bare span's instructions here (the ``span``
  configuration: ``start_span().end()`` on the same SDK provider) × 2 /
  ``REFERENCE_SPAN_US`` (the reference's bare span, 10.1 µs);
* the once-per-call setup of a call with layers (the frozen original, the call's
  kwargs, the stage or chain set up), traced(1) − traced(0) − the increment, ≤ 0.5 ×
  what Hermes pays for its own per-call copy of the original on the same request or
  arguments (the ``copy/llm`` and ``copy/tool`` configurations:
  ``bench_chain.original_copy``, one ``deepcopy``).

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
COPY = "copy"  # COPY/llm, COPY/tool: Hermes' per-call copy of the original


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
    if config.startswith(f"{COPY}/"):
        counted_calls(bench_chain.original_copy(config.split("/", 1)[1]), n)
        return
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
                ) -> tuple[list[list[Any]], list[list[Any]], dict[str, bool | None], float]:
    """Benchmark 2's traced configurations in instructions (see the module docstring):
    the increment rows, the once-per-call setup rows, their targets and the allowance
    (2 µs of the reference machine)."""
    def count(config: str) -> float:
        return counted(config, n, instr, verbose)

    def increment(impl: str, kind: str) -> float:
        return (count(f"{impl}/{kind}/5") - count(f"{impl}/{kind}/1")) / 4

    allowance = count(SPAN) * 2.0 / h.REFERENCE_SPAN_US
    layer_rows: list[list[Any]] = []
    setup_rows: list[list[Any]] = []
    targets: dict[str, bool | None] = {}
    for kind in bench_chain.KINDS:
        call = bench_chain.call_of(kind)
        layer = increment("otelmw-traced", kind)
        in_situ = increment("otelmw-callbackspans", kind) - increment("otelmw-nolayerspans",
                                                                      kind)
        ok = layer - in_situ <= allowance
        targets[f"instructions: traced {kind} increment ≤ span (in situ) + 2 µs"] = ok
        layer_rows.append([kind, count(f"otelmw-traced/{kind}/1"),
                           count(f"otelmw-traced/{kind}/5"), layer, in_situ, layer - in_situ,
                           h.verdict(ok)])
        setup = count(f"otelmw-traced/{kind}/1") - count(f"otelmw-traced/{call}/0") - layer
        copy = count(f"{COPY}/{call}")
        ok = setup <= 0.5 * copy
        targets[f"instructions: {kind} once-per-call setup ≤ 0.5 × Hermes' copy"] = ok
        setup_rows.append([kind, count(f"otelmw-traced/{call}/0"), setup, copy, setup / copy,
                           h.verdict(ok)])
    return layer_rows, setup_rows, targets, allowance


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
    layer_rows, setup_rows, traced_targets, allowance = traced_rows(n, instr, args.verbose)
    targets.update(traced_targets)
    print(f"\n### 2b. Traced layers in instructions ({n} calls per configuration; the "
          "increment per layer, (traced ×5 − traced ×1) / 4)\n")
    print(h.table(["kind", "traced ×1", "traced ×5", "increment / layer",
                   "span in situ / layer", "increment − span", "≤ span + 2 µs"], layer_rows))
    print(f"\nA bare span: {instr[SPAN]:,.0f} instructions (the reference machine: "
          f"{h.REFERENCE_SPAN_US} µs), so 2 µs there are {allowance:,.0f} instructions.")
    print(f"\n### 2b. Once-per-call setup of a traced call with layers ({n} calls; traced ×1 "
          "− traced ×0 − the increment)\n")
    print(h.table(["kind", "traced call, no layers", "once-per-call setup",
                   "Hermes' copy of the original", "setup / copy", "≤ 0.5×"], setup_rows))
    result = {"instructions": instr, "calls": n, "targets": targets,
              "versions": h.versions(["hermes-agent", "otelmw"])}
    h.write_json(args.json, result)
    return result


if __name__ == "__main__":
    child_or_main(child, main)

"""Benchmark 2b — benchmark 2's untraced middleware chain, counted in instructions.

Benchmark 2 times ``Pipeline().run_llm`` / ``run_tool`` with 0, 1 or 5 layers of one
kind beside Hermes Agent's own chain; on a shared machine its µs move by ±20 %
between rounds. This counts the untraced rows (no observer) in instructions, which
do not drift, as benchmark 1b counts benchmark 1's call: per configuration two
processes under valgrind side by side, each setting it up (``bench_chain.setup``:
the same callbacks, registered the same way) and warming it up alike; one then makes
N calls with the cyclic garbage collector off, the other none; their difference over
N is the configuration's instructions per call.

Target (issue 27): untraced otelmw ≤ 0.5 × Hermes per call at 1 and 5 layers of
every kind. Needs valgrind and ``hermes-agent`` (the suite's ``hermes`` environment
has both otelmw and it).
"""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _harness as h
from bench_instructions import child_or_main, counted_calls, per_call, require_valgrind

CALLS = {"full": 2000, "quick": 500}
ROWS = [("llm", "llm call", 0), ("llm_request", "llm_request", 1),
        ("llm_request", "llm_request", 5), ("llm_execution", "llm_execution", 1),
        ("llm_execution", "llm_execution", 5), ("tool", "tool call", 0),
        ("tool_request", "tool_request", 1), ("tool_request", "tool_request", 5),
        ("tool_execution", "tool_execution", 1), ("tool_execution", "tool_execution", 5)]


def child(config: str, n: int) -> None:
    """Set ``config`` (a benchmark 2 configuration) up, warm it up, make ``n`` calls."""
    import bench_chain

    counted_calls(bench_chain.setup(config)[0], n)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = h.common_args(argv, __doc__.splitlines()[0])
    require_valgrind("2b")
    n = CALLS["quick" if args.quick else "full"]
    instr: dict[str, float] = {}
    rows, targets = [], {}
    for kind, label, layers in ROWS:
        counts = []
        for impl in ("otelmw", "hermes"):
            config = f"{impl}/{kind}/{layers}"
            instr[config] = per_call(__file__, [config], n)
            counts.append(instr[config])
            if args.verbose:
                print(f"{config}: {instr[config]:.0f} instructions per call", file=sys.stderr)
        ratio = counts[0] / counts[1]
        ok = None if layers == 0 else ratio <= 0.5
        if layers:
            targets[f"instructions: untraced {kind} ×{layers} ≤ 0.5 × Hermes"] = ok
        rows.append([label, layers, counts[0], counts[1], ratio, h.verdict(ok)])
    print(f"\n### 2b. Middleware chain, untraced, in instructions ({n} calls per "
          "configuration, valgrind; per call)\n")
    print(h.table(["kind", "layers", "otelmw instructions", "Hermes instructions",
                   "otelmw / Hermes", "≤ 0.5×"], rows))
    result = {"instructions": instr, "calls": n, "targets": targets,
              "versions": h.versions(["hermes-agent", "otelmw"])}
    h.write_json(args.json, result)
    return result


if __name__ == "__main__":
    child_or_main(child, main)

"""Benchmark 4 — raw-result digests by result size and type.

``otelmw.telemetry.content.digests.digest(value)`` (what the observer puts on every
``execute_tool`` span as ``otelmw.result.raw.digest``) for ``str``, ``bytes`` and
``dict`` results of about 100 B, 1 KB, 10 KB, 1 MB, 10 MB and 100 MB of canonical
serialization. The ``dict`` is a typical tool result: ``{"rows": [{"id", "name",
"score", "ok", "text"}, ...], "status": "ok"}``; its size is that of its canonical
JSON. Each (type, size) runs in its own process; CPU µs per digest, median.

The bound (``digests.py``): ``str``/``bytes`` over ``max_bytes`` (default 4 MiB,
``OTELMW_DIGEST_MAX_BYTES``) are hashed as ``sha256-keyed-sampled`` — length + first and
last ``max_bytes/2`` — so their cost stops growing at 4 MiB; a JSON tree whose
canonical JSON exceeds ``max_bytes`` is hashed as ``sha256-keyed-prefix`` over its first
``max_bytes`` bytes (after a bounded size walk of at most 50 000 nodes).

Targets: ≤ 1 µs for results ≤ 1 KB on the reference machine (scaled by this run's
machine factor, ``_harness.MachineSpeed``); bounded cost for huge ones (the 100 MB
figure no more than ~the 10 MB one).
"""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _harness as h

from otelmw.telemetry.content import digests

SIZES = {"100 B": 100, "1 KB": 1_000, "10 KB": 10_000, "1 MB": 1_000_000,
         "10 MB": 10_000_000, "100 MB": 100_000_000}
TYPES = ("str", "bytes", "dict")
_TEXT = "lorem ipsum dolor sit amet, consectetur adipiscing elit. "


def make(kind: str, size: int) -> Any:
    if kind == "str":
        return (_TEXT * (size // len(_TEXT) + 1))[:size]
    if kind == "bytes":
        return (_TEXT.encode() * (size // len(_TEXT) + 1))[:size]
    if size <= 160:
        return {"status": "ok", "text": "x" * max(1, size - 25)}
    rows = []
    used, i = len('{"rows":[],"status":"ok"}'), 0
    while used < size:
        text = _TEXT[: 20 + i % 30]
        row = {"id": i, "name": f"row-{i}", "score": i * 0.5, "ok": True, "text": text}
        rows.append(row)
        # exact canonical JSON length of the row, plus its separating comma
        used += 50 + 2 * len(str(i)) + len(repr(i * 0.5)) + len(text) + (1 if i else 0)
        i += 1
    return {"rows": rows, "status": "ok"}


def configs() -> list[str]:
    return [f"{t}/{s}" for s in SIZES for t in TYPES]


PARAMS = {"full": {"batch_s": 0.15, "batches": 5, "rounds": 3},
          "quick": {"batch_s": 0.05, "batches": 3, "rounds": 1}}


def worker(config: str, _round: int, params: dict[str, Any]) -> dict[str, Any]:
    kind, label = config.split("/")
    value = make(kind, SIZES[label])
    algo_digest, size = digests.digest(value)

    def fn() -> Any:
        return digests.digest(value)

    n = h.calibrate(fn, params["batch_s"])
    res = h.sample(fn, n=n, batches=params["batches"], warmup=min(n, 200))
    res["algorithm"] = algo_digest.split(":", 1)[0]
    res["reported_size"] = size
    if kind == "dict" and SIZES[label] <= 20_000_000:
        res["canonical_size"] = len(digests.canonical_bytes(value))
    else:
        res["canonical_size"] = len(value.encode()) if kind == "str" else (
            len(value) if kind == "bytes" else None)
    return res


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args, _, rounds, raw = h.run_rounds(argv, __doc__.splitlines()[0], PARAMS, configs(),
                                        worker, machine=True)
    speed = h.machine_speed(raw)
    limit = speed.scaled(1.0)
    rows, targets = [], {}
    for label, size in SIZES.items():
        row: list[Any] = [label]
        for kind in TYPES:
            rs = raw[f"{kind}/{label}"]
            us = h.med(r["cpu"] for r in rs)
            row += [us, rs[0]["algorithm"]]
            if size <= 1_000:
                targets[f"{kind} {label} ≤ 1 µs (here {limit:.2f} µs)"] = us <= limit
        rows.append(row)
    for kind in TYPES:
        big, ten = (h.med(r["cpu"] for r in raw[f"{kind}/{s}"]) for s in ("100 MB", "10 MB"))
        targets[f"{kind}: 100 MB costs ≤ 1.5 × 10 MB (bounded)"] = big <= 1.5 * ten
    print(f"\n### 4. Digests by result size ({rounds} rounds, medians; process CPU µs per "
          "digest)\n")
    print(h.table(["size", "str µs", "str algo", "bytes µs", "bytes algo", "dict µs",
                   "dict algo"], rows))
    sizes = ", ".join(f"{lbl}: {raw[f'dict/{lbl}'][0]['canonical_size'] or '?'} B"
                      for lbl in list(SIZES)[:5])
    print(f"\n(dict canonical JSON sizes — {sizes}; max_bytes = {digests.MAX_BYTES} B)")
    print("Targets: " + "; ".join(f"{k}: {h.verdict(v)}" for k, v in targets.items()))
    print(speed.note())
    result = {"raw": raw, "targets": targets, "max_bytes": digests.MAX_BYTES,
              "machine": speed._asdict()}
    h.write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()

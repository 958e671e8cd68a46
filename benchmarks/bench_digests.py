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

The floor of a structured (``dict``) result's digest is what the documented digest
cannot do without: its canonical JSON written by ``orjson`` with sorted keys (the
fastest encoder that writes those bytes for a plain tree) and the keyed SHA-256 of
what the digest hashes (the whole encoding, or its first ``max_bytes`` bytes for a
``sha256-keyed-prefix`` tree), with the digest's own key state (``floor``). The
worker times it in the same process as the digest, batches alternating, and the
ratio is taken per round.

Targets: ``str``/``bytes`` ≤ 1 µs for results ≤ 1 KB on the reference machine (scaled
by this run's machine factor, ``_harness.MachineSpeed``); ``dict`` ≤ 1.5 × its floor at
every size; bounded cost for huge ones (the 100 MB figure no more than ~the 10 MB
one).
"""

from __future__ import annotations

import hashlib
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _harness as h
import orjson

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


KEY = b"bench-digest-key-0123456789abcdef"
_KEYED = hashlib.sha256(digests.key_block(KEY))  # the key block absorbed once, as digests do


def floor(value: Any, limit: int = digests.MAX_BYTES) -> Any:
    """The documented digest's floor for a structured ``value`` (see the module
    docstring): ``orjson`` sorted-key encoding, then the keyed SHA-256 (``KEY``, as the
    worker keys the digests) of what the digest hashes (the first ``limit`` bytes when
    the encoding is longer)."""
    data = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    h = _KEYED.copy()
    h.update(data if len(data) <= limit else memoryview(data)[:limit])
    return h.hexdigest()


def configs() -> list[str]:
    return [f"{t}/{s}" for s in SIZES for t in TYPES]


PARAMS = {"full": {"batch_s": 0.15, "batches": 5, "rounds": 3},
          "quick": {"batch_s": 0.05, "batches": 3, "rounds": 1}}


def worker(config: str, _round: int, params: dict[str, Any]) -> dict[str, Any]:
    kind, label = config.split("/")
    value = make(kind, SIZES[label])
    digests.use_key(KEY)
    algo_digest, size = digests.digest(value)

    def fn() -> Any:
        return digests.digest(value)

    n = h.calibrate(fn, params["batch_s"])
    if kind == "dict":  # the floor in the same process, batches alternating with the digest
        assert floor(value) == algo_digest.split(":", 1)[1], "floor hashes other bytes"

        def floor_fn() -> Any:
            return floor(value)

        timed: dict[str, list[float]] = {"digest": [], "floor": []}
        for _ in range(params["batches"]):
            for name, f in (("digest", fn), ("floor", floor_fn)):
                timed[name].append(h.sample(f, n=n, batches=1, warmup=min(n, 200))["cpu"])
        res: dict[str, Any] = {"cpu": h.med(timed["digest"]), "floor": h.med(timed["floor"])}
    else:
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
            if size <= 1_000 and kind != "dict":
                targets[f"{kind} {label} ≤ 1 µs (here {limit:.2f} µs)"] = us <= limit
        rs = raw[f"dict/{label}"]
        ratio = h.med(r["cpu"] / r["floor"] for r in rs)
        targets[f"dict {label} ≤ 1.5 × floor"] = ratio <= 1.5
        row += [h.med(r["floor"] for r in rs), ratio, h.verdict(ratio <= 1.5)]
        rows.append(row)
    for kind in TYPES:
        big, ten = (h.med(r["cpu"] for r in raw[f"{kind}/{s}"]) for s in ("100 MB", "10 MB"))
        targets[f"{kind}: 100 MB costs ≤ 1.5 × 10 MB (bounded)"] = big <= 1.5 * ten
    print(f"\n### 4. Digests by result size ({rounds} rounds, medians; process CPU µs per "
          "digest)\n")
    print(h.table(["size", "str µs", "str algo", "bytes µs", "bytes algo", "dict µs",
                   "dict algo", "dict floor µs", "dict / floor", "≤ 1.5 × floor"], rows))
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

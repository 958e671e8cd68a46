"""Soak: the reliability agent loop against a flapping OTLP backend, for minutes.

Reuses the agent program and helpers of ``tests/test_reliability_backend.py`` (same
loop, same figures) but cycles the backend through ok → black-holed → ok → erroring →
ok → stopped → restarted on the same port, ``--cycle`` seconds per state, for
``--minutes``, with small queues so drops happen. Prints one JSON line per phase
(per-turn wall/CPU, traced memory and RSS at 20/50/100 % of the phase) and a summary
with drop counts and exit time. Not run in CI (see docs/reliability.md)::

    python benchmarks/soak/soak_backend.py --minutes 10 --cycle 20
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from _support.otlp_receiver import free_port  # noqa: E402
from test_reliability_backend import PortReceiver, clean_env, run_agent  # noqa: E402

STATES = ["ok", "blackhole", "ok", "error", "ok", "stopped"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--cycle", type=float, default=20.0, help="seconds per backend state")
    ap.add_argument("--pace-ms", type=float, default=1.0, help="sleep between agent turns")
    args = ap.parse_args()
    port = free_port()
    rx = PortReceiver(port).start()
    n = max(1, int(args.minutes * 60 / args.cycle))
    phases = [{"name": f"{i:03d}-{STATES[i % len(STATES)]}", "seconds": args.cycle,
               "pace_ms": args.pace_ms, "turns": None, "sync": True, "mem": True}
              for i in range(n)]
    for ph in phases:
        ph.pop("turns")

    def on_sync(name: str) -> None:  # set the backend state for the *next* phase
        i = int(name.split("-")[0]) + 1
        state = STATES[i % len(STATES)]
        if state == "stopped":
            rx.stop()
        else:
            if rx._grpc_server is None:
                rx.start()
            rx.mode = state
        print(json.dumps({"phase_done": name, "received_spans": len(rx.spans())}), flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        env = clean_env(Path(tmp), OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
                        OTEL_BSP_MAX_QUEUE_SIZE="512", OTEL_BSP_MAX_EXPORT_BATCH_SIZE="128",
                        OTEL_EXPORTER_OTLP_TIMEOUT="5")
        run = run_agent(Path(tmp), env, phases, on_sync, timeout=args.minutes * 60 + 120)
    rx.stop()
    for name, ph in run.summary["phases"].items():
        print(json.dumps({"phase": name, **ph}), flush=True)
    print(json.dumps({"turns": run.summary["turns"], "drops": run.summary["drops"],
                      "failures": run.summary["failures"], "exit_s": run.exit_s,
                      "drop_warning_lines": len(run.drop_lines()),
                      "exporter_lines": len(run.exporter_lines())}), flush=True)


if __name__ == "__main__":
    main()

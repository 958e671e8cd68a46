"""``otelmw replay``: the stored telemetry (and the spool) sent to an OTLP endpoint."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ._shared import command, store_dir, store_options
from .terminal import printable
from .traces import report_skipped

if TYPE_CHECKING:
    from ..telemetry.store.readers import SkippedLine


def run(args: argparse.Namespace) -> int:
    from ..telemetry.store.replay import ReplayError, replay

    skipped: list[SkippedLine] = []
    try:
        sent = replay(args.endpoint, args.protocol, store_dir(args), skipped=skipped,
                      signals=args.signals or ("traces", "metrics", "logs"))
    except ReplayError as exc:  # unreachable endpoint, HTTP or gRPC error: no traceback
        print(f"otelmw: replay failed: {printable(exc)}", file=sys.stderr)
        return 1
    except (OSError, RuntimeError) as exc:  # a store that cannot be read or decoded
        print(f"otelmw: replay failed: {type(exc).__name__}: {printable(exc)}",
              file=sys.stderr)
        return 1
    report_skipped(skipped)
    print(", ".join(f"{k}: {v} request(s)" for k, v in sent.items()))
    return 0


_REPLAY_DESCRIPTION = """\
Sends every stored traces, metrics and logs request, unchanged (ids, times,
attributes), to an OTLP endpoint."""
_REPLAY_EXAMPLES = """\
  otelmw replay --endpoint http://localhost:4318
  otelmw replay --protocol grpc --endpoint http://localhost:4317
  otelmw replay --data-dir /var/lib/agent/.otelmw
  otelmw replay --signal traces --endpoint http://localhost:6006"""


def add_command(sub: Any) -> None:
    p = command(sub, "replay", "send the stored telemetry to an OTLP endpoint",
                _REPLAY_DESCRIPTION, _REPLAY_EXAMPLES,
                parents=[store_options()])
    p.add_argument("--endpoint", metavar="URL",
                   help="default: $OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318 "
                        "(4317 for grpc)")
    p.add_argument("--protocol", choices=["http/protobuf", "grpc"], default="http/protobuf",
                   help="OTLP transport (default http/protobuf)")
    p.add_argument("--signal", action="append", dest="signals",
                   choices=["traces", "metrics", "logs"],
                   help="send only this signal (repeatable; default all three), e.g. "
                        "--signal traces for a traces-only backend")
    p.set_defaults(func=run)

"""``python -m _support.one_plugin_hosts DRIVER SERVER_URL``: one turn of that host's
driver; prints ``RESULT {json}`` (the driver's report and what the tools received)."""

from __future__ import annotations

import importlib
import json
import sys

from . import RECEIVED


def main() -> int:
    driver, server_url = sys.argv[1], sys.argv[2]
    module = importlib.import_module(f"{__package__}.{driver}")
    report = module.run_turn(server_url)
    print("RESULT " + json.dumps({**report, "received": RECEIVED}))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

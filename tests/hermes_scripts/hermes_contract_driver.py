"""Run ``hermes_api_driver`` (otelmw instrumenting Hermes), or with ``HX_CONFIG``
``"uninstrumented": true`` ``hermes_turns`` alone (Hermes' own middleware chain), and
record every WARNING logged meanwhile; prints ``LOGS [{logger, message}, ...]`` after
the driver's ``RESULT`` line.
"""

from __future__ import annotations

import json
import logging
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

warnings: list[dict[str, str]] = []


class WarningRecorder(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        warnings.append({"logger": record.name, "message": record.getMessage()})


def main() -> int:
    logging.getLogger().addHandler(WarningRecorder(logging.WARNING))
    if json.loads(os.environ["HX_CONFIG"]).get("uninstrumented"):
        import hermes_turns as driver
    else:
        import hermes_api_driver as driver  # type: ignore[no-redef]
    status = driver.main()
    print("LOGS " + json.dumps(warnings))
    sys.stdout.flush()
    return status


if __name__ == "__main__":
    raise SystemExit(main())

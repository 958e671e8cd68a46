"""The host drivers' side of ``host_scenarios.run_scenario``: what every
``tests/<host>_scripts/driver.py`` does with otelmw and how it reports.

A driver imports this after putting ``tests/`` on ``sys.path``; it imports no otelmw
until called, so a driver whose spec turns otelmw off runs its host without it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

RESULT_PREFIX = "RESULT "


def instrumented(spec: Mapping[str, Any], service: str, host: Any,
                 layers: Sequence[str]) -> Any:
    """otelmw as a scenario has it: telemetry configured for ``service``, then each of the
    spec's ``layers`` (``layers`` when it names none) instrumented, in that order:
    ``"openai"`` by ``otelmw_openai``, any other by ``host`` (the host's instrumentor).
    Returns the telemetry."""
    from otelmw.instrumentation.openai import OpenAIInstrumentor
    from otelmw.telemetry import configure

    telemetry = configure(service_name=service)
    for layer in spec.get("layers", layers):
        (OpenAIInstrumentor() if layer == "openai" else host).instrument()
    return telemetry


def print_result(out: dict[str, Any], telemetry: Any = None) -> None:
    """Prints the ``RESULT`` line: ``out`` and, when otelmw was on (``telemetry``), its
    failure counts; its telemetry is flushed first, so the receiver has it when the test
    reads the result."""
    if telemetry is not None:
        from otelmw import get_pipeline

        out["failures"] = {":".join(k): v for k, v in get_pipeline().failures.counts.items()}
        telemetry.shutdown(15)
    print(RESULT_PREFIX + json.dumps(out, default=str), flush=True)

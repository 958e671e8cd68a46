"""One host scenario in an interpreter of its own: what every host test module does to
run its driver.

A host test (``tests/test_host_<host>.py``) runs each scenario as a fresh process of its
driver script (``tests/<host>_scripts/driver.py SPEC_JSON``) so that instrumenting,
configuring and exiting happen as in a user's program: the child's environment points
its telemetry at the suite's real ``OtlpReceiver`` and its provider client at the
scripted model server, and the driver prints one ``RESULT {json}`` line (what the host
returned, what the tools received) before exiting, which flushes its telemetry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .digest_key import deployment_key
from .distributions import PLUGINS, install_distribution, on_pythonpath
from .driver import RESULT_PREFIX
from .otlp_receiver import OtlpReceiver

TIMEOUT = 120

# Spans and log records exported within 0.1 s of their end, metrics once (at exit): what a
# test waits for arrives soon, and each metric in one export.
PROMPT_EXPORT = {"OTEL_METRIC_EXPORT_INTERVAL": "600000", "OTEL_BSP_SCHEDULE_DELAY": "100",
                 "OTEL_BLRP_SCHEDULE_DELAY": "100"}


def scenario_env(tmp_path: Path, rx: OtlpReceiver, *, service: str | None = None,
                 openai_base_url: str | None = None, strip: tuple[str, ...] = (),
                 **extra: str) -> dict[str, str]:
    """This process's environment without any ``OTEL_*``/``OTELMW_*``/``OPENAI_*``
    setting (nor those starting with ``strip``), then: OTLP to ``rx``, a private
    ``OTELMW_HOME``, the suite's digest key (digests comparable with the test's own),
    the openai client on ``openai_base_url`` if given (no retries), ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "OTELMW_", "OPENAI_", *strip))}
    env.update(OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint,
               OTELMW_HOME=str(tmp_path / "home"),
               OTELMW_DIGEST_KEY=deployment_key().decode(), PYTHONUNBUFFERED="1")
    if service is not None:
        env["OTEL_SERVICE_NAME"] = service
    if openai_base_url is not None:
        env.update(OPENAI_BASE_URL=openai_base_url, OPENAI_API_KEY="dummy",
                   OPENAI_MAX_RETRIES="0")
    env.update(extra)
    return env


def run_ok(cmd: list[str], env: Mapping[str, str], cwd: Path, timeout: float = TIMEOUT
           ) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` (its output captured); it must exit 0."""
    proc = subprocess.run(cmd, env=dict(env), cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def result_of(stdout: str, stderr: str = "") -> dict[str, Any]:
    """A driver's report: the JSON of the last ``RESULT`` line of its ``stdout``. What
    follows the JSON on that line is not the driver's: ``print`` writes the line's end
    apart, and a host's own console thread (CrewAI's panels) can write in between."""
    lines = [x for x in stdout.splitlines() if x.startswith(RESULT_PREFIX)]
    assert lines, f"no {RESULT_PREFIX!r} line\n{stdout}\n{stderr}"
    result: dict[str, Any]
    result, _ = json.JSONDecoder().raw_decode(lines[-1].removeprefix(RESULT_PREFIX))
    return result


def run_scenario(script: Path, spec: Mapping[str, Any], env: Mapping[str, str], cwd: Path,
                 timeout: float = TIMEOUT) -> dict[str, Any]:
    """Run ``script SPEC_JSON``; it must exit 0. Returns its last ``RESULT`` line."""
    proc = run_ok([sys.executable, str(script), json.dumps(spec)], env, cwd, timeout)
    return result_of(proc.stdout, proc.stderr)


def installed_plugin(tmp_path: Path, module: Path, entry_point: str, env: dict[str, str]
                     ) -> Path:
    """A plugin really installed as a user installs one: ``module`` in a site directory
    with a distribution whose ``otelmw.plugins`` entry point is ``entry_point``
    (``name = module:attr``), the directory put first on ``env``'s ``PYTHONPATH``.
    Returns the site directory."""
    name, target = (x.strip() for x in entry_point.split("=", 1))
    site = install_distribution(tmp_path / "site", f"otelmw-test-{name}",
                                {PLUGINS: {name: target}}, {module.name: module.read_text()})
    on_pythonpath(env, site)
    return site


def exported_texts(rx: OtlpReceiver) -> list[str]:
    """Everything ``rx`` got that could carry content, as JSON texts: one for each span
    (its name, attributes, events' attributes and status message) and one for each log
    record (its attributes and body)."""
    blobs = [json.dumps([s.name, s.attributes, [e.attributes for e in s.events],
                         s.status_message], default=str) for s in rx.spans()]
    return blobs + [json.dumps([x.attributes, x.body], default=str) for x in rx.logs()]


def assert_no_canary(rx: OtlpReceiver, canaries: tuple[str, ...]) -> None:
    """No span or log record ``rx`` got carries any of ``canaries``."""
    leaked = [b for b in exported_texts(rx) if any(c in b for c in canaries)]
    assert not leaked, leaked[:2]

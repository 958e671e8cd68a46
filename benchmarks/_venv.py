"""The isolated environment for the OpenAI benchmark's anchors.

The three anchor instrumentations are not otelmw dependencies, so they are never
installed into the environment otelmw is developed in. ``ensure_venv()`` creates
(once) a separate virtualenv without system site-packages and installs into it:
otelmw itself (editable, from this checkout), the anchors (wheels from
``$OTELMW_BENCH_WHEELS`` / ``/tmp/anchors`` when present, otherwise PyPI), and the
packages every contender shares pinned to the versions of the *current*
environment, so the otelmw figures measured there and here are comparable.

Equivalent one command (what this module runs)::

    python -m venv ~/.cache/otelmw-bench/anchors && ~/.cache/otelmw-bench/anchors/bin/pip install \
        -e . --find-links /tmp/anchors opentelemetry-instrumentation-genai-openai==1.3b0 \
        opentelemetry-util-genai==1.3b0 openinference-instrumentation-openai==0.1.66 \
        opentelemetry-instrumentation-openai==0.62.4 openai==<same> httpx==<same> ...
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
DEFAULT_VENV = _CACHE / "otelmw-bench" / "anchors"
WHEELS = Path(os.environ.get("OTELMW_BENCH_WHEELS", "/tmp/anchors"))

ANCHORS = {
    "opentelemetry-instrumentation-genai-openai": "1.3b0",  # official (with util-genai)
    "opentelemetry-util-genai": "1.3b0",
    "openinference-instrumentation-openai": "0.1.66",
    "opentelemetry-instrumentation-openai": "0.62.4",  # OpenLLMetry
}
# Shared by every contender: pinned to what the current environment has.
SHARED = ["openai", "httpx", "pydantic", "wrapt", "opentelemetry-api", "opentelemetry-sdk",
          "opentelemetry-instrumentation", "opentelemetry-semantic-conventions",
          "opentelemetry-proto", "opentelemetry-exporter-otlp-proto-grpc",
          "opentelemetry-exporter-otlp-proto-http", "opentelemetry-exporter-otlp-proto-common",
          "orjson"]


def _pins() -> list[str]:
    out = []
    for name in SHARED:
        try:
            out.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            out.append(name)
    return out


def requirements() -> list[str]:
    return [*(f"{k}=={v}" for k, v in ANCHORS.items()), *_pins()]


def venv_python(path: Path) -> Path:
    return path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _stamp(path: Path) -> Path:
    return path / "otelmw-bench.json"


def ensure_venv(path: Path = DEFAULT_VENV, log=print) -> Path:
    """Create/refresh the anchors venv; returns its python. Idempotent and fast when
    the venv already matches the wanted requirements."""
    reqs = requirements()
    stamp = _stamp(path)
    py = venv_python(path)
    if py.exists() and stamp.exists():
        try:
            if json.loads(stamp.read_text()).get("requirements") == reqs:
                return py
        except ValueError:
            pass
    if not py.exists():
        log(f"[setup] creating anchors venv at {path} (one time, ~1 min)")
        path.parent.mkdir(parents=True, exist_ok=True)
        venv.EnvBuilder(with_pip=True, system_site_packages=False, clear=True).create(path)
    cmd = [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
           "-e", str(ROOT)]
    if WHEELS.is_dir():
        cmd += ["--find-links", str(WHEELS)]
    cmd += reqs
    log("[setup] " + " ".join(cmd))
    subprocess.run(cmd, check=True)
    check = subprocess.run([str(py), "-m", "pip", "check"], capture_output=True, text=True)
    if check.returncode != 0:
        log("[setup] pip check in the anchors venv reports:\n" + check.stdout + check.stderr)
    stamp.write_text(json.dumps({"requirements": reqs}, indent=1))
    return py


if __name__ == "__main__":
    print(ensure_venv(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_VENV))

"""The isolated environments for the OpenAI benchmark's anchors, one per openai major.

The three anchor instrumentations are not otelmw dependencies, so they are never
installed into the environment otelmw is developed in. ``ensure_venv()`` creates
(once) a separate virtualenv without system site-packages and installs into it:
otelmw itself (editable, from this checkout), the anchors (wheels from
``$OTELMW_BENCH_WHEELS`` / ``/tmp/anchors`` when present, otherwise PyPI), the
openai release asked for, and the other packages every contender shares pinned to
the versions of the *current* environment, so the otelmw figures measured there and
here are comparable. The openai releases benchmarked are the ones the test suite's
host matrix pins (``scripts/envs/*.txt``: the newest 3.x and the 2.x Hermes pins),
newest first (``OPENAI_RELEASES``); each gets its own venv (``venv_for``).

Equivalent one command per release (what this module runs)::

    python -m venv ~/.cache/otelmw-bench/anchors-openai3 && \
    ~/.cache/otelmw-bench/anchors-openai3/bin/pip install \
        -e . --find-links /tmp/anchors opentelemetry-instrumentation-genai-openai==1.3b0 \
        opentelemetry-util-genai==1.3b0 openinference-instrumentation-openai==0.1.66 \
        opentelemetry-instrumentation-openai==0.62.4 openai==3.57.0 httpx==<same> ...
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
DEFAULT_VENV = _CACHE / "otelmw-bench" / "anchors"


def _matrix_openai_releases() -> list[str]:
    found = set()
    for env_file in sorted((ROOT / "scripts" / "envs").glob("*.txt")):
        for line in env_file.read_text(encoding="utf-8").splitlines():
            name, sep, release = line.split("#", 1)[0].strip().partition("==")
            if sep and name.strip() == "openai":
                found.add(release.strip())
    return sorted(found, key=lambda v: tuple(int(x) for x in v.split(".")), reverse=True)


OPENAI_RELEASES = _matrix_openai_releases()  # newest first


def venv_for(release: str, base: Path = DEFAULT_VENV) -> Path:
    """The anchors venv of one openai release: ``<base>-openai<major>``."""
    return base.with_name(f"{base.name}-openai{release.split('.')[0]}")
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
          "orjson", "httpx2"]  # openai 3 talks through httpx2


def _pins(openai: str | None) -> list[str]:
    out = []
    for name in SHARED:
        if name == "openai" and openai is not None:
            out.append(f"openai=={openai}")
            continue
        try:
            out.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            out.append(name)
    return out


def requirements(openai: str | None = None) -> list[str]:
    """The anchors plus the shared packages; ``openai`` (a release) instead of the
    current environment's openai."""
    return [*(f"{k}=={v}" for k, v in ANCHORS.items()), *_pins(openai)]


def venv_python(path: Path) -> Path:
    return path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _stamp(path: Path) -> Path:
    return path / "otelmw-bench.json"


def ensure_venv(path: Path = DEFAULT_VENV, log: Callable[[str], None] = print,
                openai: str | None = None) -> Path:
    """Create/refresh the anchors venv (with openai release ``openai``, default the
    current environment's); returns its python. Idempotent and fast when the venv
    already matches the wanted requirements."""
    reqs = requirements(openai)
    stamp = _stamp(path)
    py = venv_python(path)
    if py.exists() and stamp.exists():
        try:
            stamped = json.loads(stamp.read_text())
        except ValueError:
            stamped = {}
        if stamped.get("requirements") == reqs:
            if stamped.get("otelmw") != str(ROOT):  # made for another checkout
                log(f"[setup] pointing the anchors venv's otelmw at {ROOT}")
                subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--no-deps",
                                "--disable-pip-version-check", "-e", str(ROOT)], check=True)
                stamp.write_text(json.dumps({"requirements": reqs, "otelmw": str(ROOT)},
                                            indent=1))
            return py
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
    stamp.write_text(json.dumps({"requirements": reqs, "otelmw": str(ROOT)}, indent=1))
    return py


if __name__ == "__main__":
    base = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_VENV
    for release in OPENAI_RELEASES:
        print(ensure_venv(venv_for(release, base), openai=release))

"""The stack's binaries: what collector/build.sh builds is what the configs need and what
docker-compose.yml runs.

* The collector manifest (collector/builder-config.yaml) pins every component at ONE
  release (beta modules vX, stable modules v1.Y, the builder vX) and docker-compose.yml
  runs the contrib image of that same release; the Jaeger wrapper module
  (collector/jaeger/go.mod) pins the Jaeger module whose commit is the compose image's
  Jaeger release and repeats Jaeger's own ``replace``.
* The built collector (``OTELMW_OTELCOL_BIN``) has exactly the component types the
  three configs use (its own ``components`` listing), the built Jaeger runs, and a second
  ``collector/build.sh`` is a no-op that returns the same binaries.

The static pin checks need PyYAML only; the binary checks need the builds (missing: a
failure under CI, a skip elsewhere).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _support import stack

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "collector" / "builder-config.yaml"
JAEGER_GO_MOD = ROOT / "collector" / "jaeger" / "go.mod"
BUILD_SCRIPT = ROOT / "collector" / "build.sh"
COMPOSE = ROOT / "docker-compose.yml"
CONFIGS = (stack.LOCAL_CONFIG, stack.AGENT_CONFIG, stack.GATEWAY_CONFIG)

# Jaeger's Go module stays on the v1 path: its module version v1.76.0 and the release
# tag v2.13.0 name the same commit (63b27e1810a7); later v2 tags are not module versions.
JAEGER_MODULE_RELEASE = {"v1.76.0": "2.13.0"}
# The exporter the configs' comments tell users to switch to (gateway-tier.yaml: logs
# to a log store with `otlp_http`): built in, so following that advice needs no rebuild.
ADVISED_TYPES = {("exporters", "otlp_http")}
KINDS = ("receivers", "processors", "exporters", "connectors", "extensions")


def _manifest() -> dict[str, Any]:
    data: dict[str, Any] = stack.load_yaml(MANIFEST)
    return data


def _gomods() -> list[tuple[str, str]]:
    manifest = _manifest()
    return [tuple(entry["gomod"].split()) for kind in (*KINDS, "providers")  # type: ignore[misc]
            for entry in manifest.get(kind) or []]


def _release() -> str:
    """The beta release (vX) every non-stable module of the manifest is at."""
    betas = {version for _module, version in _gomods() if version.startswith("v0.")}
    assert len(betas) == 1, f"collector modules at several releases: {sorted(betas)}"
    return betas.pop()


def _compose_image(service: str) -> str:
    image: str = stack.load_yaml(COMPOSE)["services"][service]["image"]
    return image


def test_manifest_pins_one_collector_release() -> None:
    release = _release()
    minor = int(release.split(".")[1])
    stables = {version for _m, version in _gomods() if not version.startswith("v0.")}
    # The collector's stable modules are released together with the beta ones:
    # v1.Y with v0.(Y + 94) (v1.64.0 with v0.158.0, v1.67.0 with v0.161.0).
    assert stables == {f"v1.{minor - 94}.0"}, stables
    assert _manifest()["dist"]["version"].startswith(release.lstrip("v") + "-"), _manifest()
    # The builder checks that otelcol is at its own version: it must be the same.
    builder = re.search(r"^OCB_VERSION=(v\S+)", BUILD_SCRIPT.read_text(), re.M)
    assert builder is not None and builder.group(1) == release
    assert f"builder@{release}" in MANIFEST.read_text()  # the documented command


def test_compose_runs_the_built_collector_release() -> None:
    assert _compose_image("collector") == (
        f"otel/opentelemetry-collector-contrib:{_release().lstrip('v')}")


def test_compose_runs_the_built_jaeger_release() -> None:
    text = JAEGER_GO_MOD.read_text()
    required = re.search(r"^\s*github\.com/jaegertracing/jaeger (v\S+)", text, re.M)
    assert required is not None, "the wrapper module must require Jaeger"
    assert required.group(1) in JAEGER_MODULE_RELEASE, required.group(1)
    assert _compose_image("jaeger") == (
        f"jaegertracing/jaeger:{JAEGER_MODULE_RELEASE[required.group(1)]}")
    assert re.search(r"^tool github\.com/jaegertracing/jaeger/cmd/jaeger$", text, re.M)
    # Jaeger's go.mod replaces sarama; a module that depends on Jaeger must repeat it.
    sarama = r"github\.com/Shopify/sarama"
    assert re.search(rf"^replace {sarama} => {sarama} v1\.33\.0$", text, re.M), text[:400]


def _config_types() -> set[tuple[str, str]]:
    used: set[tuple[str, str]] = set()
    for path in CONFIGS:
        config = stack.load_yaml(path)
        for kind in KINDS:
            used |= {(kind, component.split("/", 1)[0]) for component in config.get(kind) or {}}
    return used


def test_built_collector_has_exactly_the_configs_components() -> None:
    """The binary's own list of components (`components` subcommand) against the types
    the three configs use: nothing missing, nothing the configs do not need."""
    proc = subprocess.run([stack.otelcol_bin(), "components"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    listing = stack._yaml().safe_load(proc.stdout)
    built = {(kind, entry["name"]) for kind in KINDS for entry in listing.get(kind) or []}
    assert built == _config_types() | ADVISED_TYPES, (
        f"missing: {sorted(_config_types() - built)}; "
        f"not used: {sorted(built - _config_types() - ADVISED_TYPES)}")
    assert listing["buildinfo"]["version"] == _manifest()["dist"]["version"]


def test_built_jaeger_is_the_pinned_module() -> None:
    proc = subprocess.run(["go", "version", "-m", stack.jaeger_bin()], capture_output=True,
                          text=True, timeout=60, check=False)
    if proc.returncode != 0:  # no Go on this machine: the binary's own version output
        proc = subprocess.run([stack.jaeger_bin(), "version"], capture_output=True, text=True,
                              timeout=60, check=False)
        assert proc.returncode == 0, proc.stderr
        return
    (module,) = JAEGER_MODULE_RELEASE
    # The main package is Jaeger's own (built from the wrapper module's requirement).
    assert re.search(rf"^\s*mod\s+github\.com/jaegertracing/jaeger\s+{re.escape(module)}\s",
                     proc.stdout, re.M), proc.stdout[:500]
    assert re.search(r"^\s*=>\s+github\.com/Shopify/sarama\s+v1\.33\.0\s", proc.stdout, re.M)
    assert re.search(r"^\s*path\s+github\.com/jaegertracing/jaeger/cmd/jaeger$", proc.stdout,
                     re.M), proc.stdout[:500]


def test_build_script_rerun_is_a_no_op() -> None:
    """With the binaries built, collector/build.sh rebuilds nothing: it prints the paths
    the tests use and says both are cached (a rebuild happens only when a pin changes)."""
    otelcol, jaeger = stack.otelcol_bin(), stack.jaeger_bin()
    if not (otelcol.startswith(str(ROOT / ".cache" / "stack"))
            and jaeger.startswith(str(ROOT / ".cache" / "stack"))):
        import pytest

        pytest.skip("binaries given from outside this checkout's .cache/stack")
    proc = subprocess.run([str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"OTELMW_OTELCOL_BIN={otelcol}",
                                        f"OTELMW_JAEGER_BIN={jaeger}"], proc.stdout
    assert "otelcol: cached" in proc.stderr and "jaeger: cached" in proc.stderr, proc.stderr

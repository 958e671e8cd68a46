"""The hosts' own tests give the same outcome per test with and without ``otelmw run``.

A chosen set of each host's own test files, taken from the host's sdist on PyPI at the
installed version (``pip download --no-binary :all:``, cached under
``.cache/host-suites/``), runs twice, each file in an interpreter of its own: once as
it is, once under ``otelmw run`` (every ``otelmw_*`` instrumentor on, telemetry to a
local store). Only the test files are unpacked (into a temporary directory): they
test the installed host package, as otelmw instruments it. The outcome of every test
id must be the same in both runs, and most tests must pass.

What runs: Hermes Agent's tool dispatch and middleware tests (``test_model_tools*.py``),
its ``transform_llm_output``/``transform_tool_result`` hook tests and plugin helper tests;
praisonaiagents' runtime middleware, parallel tools, tool timeout and schema tests, its
plugin system, plugin registry and gate tests, and its guardrail tests (``SUITES``).

The sdists do not ship every test of the hosts' repositories: hermes-agent 0.19.0's
lacks ``tests/hermes_cli/`` (``test_plugins.py``) and ``tests/run_agent/``,
praisonaiagents 1.7.17's lacks ``tests/unit/`` (``unit/hooks/``). Those are not taken
from the repositories either: the suite's CI reaches package registries only, and the
project commits no third-party code. The hook and middleware behaviour they cover is
pinned by ``test_host_hermes_contract.py`` (Hermes with and without otelmw on the same
turns: requests, answers, callback inputs, warnings) and ``test_host_praisonai.py``
(``has_hooks`` answers what PraisonAI registered). llama-index-core's sdist (0.14.25)
ships no tests at all: ``test_host_llamaindex.py`` runs the same LlamaIndex turns with and
without otelmw instead (what the provider received, the answers, the streamed events, and
what LlamaIndex's own event and span handlers recorded).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest
from _support.components import unavailable

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "host-suites"
TIMEOUT = 600


@dataclass(frozen=True)
class HostSuite:
    """One host's own tests: its distribution and the test files chosen from its sdist."""

    host: str  # the ``host`` marker's name
    distribution: str
    files: tuple[str, ...]  # paths inside the sdist, under its top directory
    least_passed: int  # fewer passing tests than this: the run is broken, not equal


SUITES = {
    "hermes": HostSuite("hermes", "hermes-agent", (
        "tests/test_model_tools.py",
        "tests/test_model_tools_async_bridge.py",
        "tests/test_transform_llm_output_hook.py",
        "tests/test_transform_tool_result_hook.py",
        "tests/test_plugin_utils.py",
        "tests/test_plugin_skills.py",
    ), 85),
    "praisonai": HostSuite("praisonai", "praisonaiagents", (
        "tests/test_runtime_middleware.py",
        "tests/test_parallel_tools.py",
        "tests/test_tool_timeout.py",
        "tests/test_tool_schema_parity.py",
        "tests/test_deferred_progress_tools.py",
        "tests/test_planning_tools.py",
        "tests/test_plugin_system.py",
        "tests/test_plugin_registry_and_gate.py",
        "tests/test_guardrail_blocked_message.py",
    ), 145),
}


def sdist(suite: HostSuite) -> Path:
    """The host's sdist at its installed version, downloaded once into the cache."""
    try:
        version = metadata.version(suite.distribution)
    except metadata.PackageNotFoundError:
        unavailable(f"{suite.distribution} (installed)")
    stem = f"{suite.distribution.replace('-', '_')}-{version}"
    path = CACHE / f"{stem}.tar.gz"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        got = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             "--disable-pip-version-check", "-d", str(CACHE),
             f"{suite.distribution}=={version}"],
            capture_output=True, text=True, timeout=TIMEOUT)
        if got.returncode != 0 or not path.exists():
            unavailable(f"the sdist of {suite.distribution} {version} ({got.stderr[-300:]})")
    return path


def unpack_tests(archive: Path, suite: HostSuite, into: Path) -> list[Path]:
    """The chosen test files (and nothing else of the sdist) under ``into``."""
    with tarfile.open(archive) as tar:
        top = tar.getnames()[0].split("/", 1)[0]
        for name in suite.files:
            member = tar.getmember(f"{top}/{name}")
            target = into / name
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            assert source is not None, name
            target.write_bytes(source.read())
    return [into / name for name in suite.files]


def outcomes(junit: Path) -> dict[str, str]:
    """Each test id of a JUnit XML report and its outcome."""
    found: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = child.tag
        found[f"{case.get('classname')}::{case.get('name')}"] = outcome
    return found


def run_file(test_file: Path, workdir: Path, under_otelmw: bool, tag: str) -> dict[str, str]:
    """One test file in an interpreter of its own (under ``otelmw run``, or not)."""
    junit = workdir / f"{test_file.stem}-{tag}.xml"
    home = workdir / f"home-{tag}"
    home.mkdir(exist_ok=True)
    pytest_cmd = [sys.executable, "-m", "pytest", str(test_file), "-q", "-p",
                  "no:cacheprovider", "-o", "addopts=", "--junitxml", str(junit),
                  "--rootdir", str(workdir), "-p", "no:randomly"]
    otelmw = Path(sys.executable).parent / "otelmw"
    command = [str(otelmw), "run", "--", *pytest_cmd] if under_otelmw else pytest_cmd
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "OTELMW_", "HERMES_", "PYTEST_"))}
    env.update(HERMES_HOME=str(home / "hermes"), HOME=str(home),
               OTELMW_HOME=str(home / "otelmw"), OTELMW_DATA_DIR=str(home / "otelmw-data"),
               OTELMW_QUIET="1", OTEL_METRIC_EXPORT_INTERVAL="600000")
    proc = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert junit.exists(), f"{' '.join(command)}: exit {proc.returncode}\n{proc.stdout[-2000:]}" \
                           f"\n{proc.stderr[-2000:]}"
    return outcomes(junit)


@pytest.mark.parametrize("host", [pytest.param(name, marks=pytest.mark.host(name))
                                  for name in sorted(SUITES)])
def test_host_tests_have_the_same_outcomes_under_otelmw(host: str, tmp_path: Path) -> None:
    suite = SUITES[host]
    files = unpack_tests(sdist(suite), suite, tmp_path)
    plain: dict[str, str] = {}
    instrumented: dict[str, str] = {}
    for test_file in files:
        plain.update(run_file(test_file, tmp_path, False, "plain"))
        instrumented.update(run_file(test_file, tmp_path, True, "otelmw"))
    differ = {test_id: (plain.get(test_id), instrumented.get(test_id))
              for test_id in plain.keys() | instrumented.keys()
              if plain.get(test_id) != instrumented.get(test_id)}
    assert not differ, f"outcomes (without, with otelmw) that differ: {differ}"
    passed = sum(outcome == "passed" for outcome in plain.values())
    assert passed >= suite.least_passed, plain
    print(f"{host}: {len(plain)} tests in {len(files)} files, {passed} passed, "
          "the same outcome each with otelmw run")


"""The suite's xdist scheduling (tests/_support/scheduling.py): longest unit first, the
independent modules spread, each test's time recorded for the next run."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _support import scheduling

TESTS = Path(__file__).resolve().parent


def test_a_unit_is_the_module_the_test_or_the_module_and_parameter() -> None:
    assert scheduling.unit_of("tests/test_stack_jaeger.py::test_x") == "tests/test_stack_jaeger.py"
    crewai = "tests/test_host_crewai.py::test_streamed[sse]"
    assert scheduling.unit_of(crewai) == crewai
    one = "tests/test_one_plugin_every_host.py::test_hook_records_on_each_tool_call[hermes]"
    assert scheduling.unit_of(one) == "tests/test_one_plugin_every_host.py[hermes]"


def fixture_scopes(path: Path) -> list[tuple[str, str]]:
    """(fixture, scope) of each fixture the module defines with a scope beyond a test's."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in node.decorator_list:
            if not isinstance(decorator, ast.Call):
                continue
            for keyword in decorator.keywords:
                if (keyword.arg == "scope" and isinstance(keyword.value, ast.Constant)
                        and keyword.value.value != "function"):
                    found.append((node.name, str(keyword.value.value)))
    return found


@pytest.mark.parametrize("module", sorted(scheduling.SPREAD | scheduling.SPREAD_BY_PARAM))
def test_a_spread_module_has_no_fixture_shared_across_its_units(module: str) -> None:
    path = TESTS.parent / module
    assert path.is_file(), f"{module} (in scheduling.SPREAD) does not exist"
    scopes = fixture_scopes(path)
    if module in scheduling.SPREAD:
        # its tests run on any worker: a module fixture would start once per worker
        assert scopes == [], scopes
    else:
        # one unit per parameter: only parametrized module fixtures (one per parameter)
        assert scopes and "params=" in path.read_text(), scopes


def test_the_longest_unit_starts_first_and_times_are_recorded(tmp_path: Path) -> None:
    # A project of its own, with this suite's scheduler, run on one xdist worker: its
    # order of execution is the scheduler's order of handing out units.
    (tmp_path / ".cache").mkdir()
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -p no:randomly\n")
    (tmp_path / "conftest.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(TESTS)!r})\n"
        "from typing import Any\n"
        "import pytest\n"
        "from _support import scheduling\n"
        "def pytest_configure(config):\n"
        "    if not hasattr(config, 'workerinput'):\n"
        "        config.pluginmanager.register(scheduling.Recorder(\n"
        "            scheduling.durations_file(config.rootpath)), 'durations')\n"
        "@pytest.hookimpl(optionalhook=True)\n"
        "def pytest_xdist_make_scheduler(config: Any, log: Any) -> Any:\n"
        "    return scheduling.make_scheduler(config, log)\n")
    order = tmp_path / "order.txt"
    for name in ("a", "b", "c"):
        (tmp_path / f"test_{name}.py").write_text(
            f"def test_{name}():\n"
            f"    with open({str(order)!r}, 'a') as f:\n"
            f"        f.write({name!r})\n")
    record = tmp_path / ".cache" / "test-durations" / "sched.json"
    record.parent.mkdir()
    # the last run says test_b took longest, then test_c (test_a: no record)
    record.write_text(json.dumps({"test_b.py::test_b": 30.0, "test_c.py::test_c": 5.0}))
    env = {**os.environ, "OTELMW_TEST_ENV": "sched"}
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "1", "--dist", "loadfile",
         "-p", "no:cacheprovider"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert order.read_text() == "bca"
    recorded = json.loads(record.read_text())
    # this run's times replace the record's, for every test it ran
    assert set(recorded) == {"test_a.py::test_a", "test_b.py::test_b", "test_c.py::test_c"}
    assert all(0 <= seconds < 30.0 for seconds in recorded.values()), recorded

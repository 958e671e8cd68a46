"""How pytest-xdist hands the suite's tests to its workers (``scripts/test-all.sh`` runs
each environment with ``-n <CPUs> --dist loadfile``), refined in two ways:

* **Longest first.** Work units go out in the order of their expected duration, longest
  first, so that a 3-minute module (the scale-out run) does not start last and hold one
  worker while the other has nothing left. The expectation is what the tests took in the
  last run of the same matrix environment: the controller records each test's setup,
  call and teardown time under ``.cache/test-durations/<env>.json`` at the end of a run
  (merged with the earlier record: a ``-k`` run keeps the others' times). A unit with no
  record (a new test, a first run) is expected to take ``UNKNOWN_S`` a test.
* **Modules whose tests are independent are spread.** ``loadfile`` keeps a module on one
  worker so that its module-scoped fixtures (a collector, Jaeger, a recorded turn) start
  once. The modules in ``SPREAD`` have none (checked by
  ``tests/test_support_scheduling.py``): each of their tests is a unit of its own, so
  that, say, the CrewAI environment's 20 host tests of ~10 s each run on both workers
  instead of one. The modules in ``SPREAD_BY_PARAM`` share a parametrized module
  fixture (one turn per host): each parameter is a unit.

Only the order and grouping change: every test runs once, in the same environment, as
under plain ``loadfile``.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

# Not test_host_litellm.py: its test of LiteLLM's own OTel callback failed when spread
# (LiteLLM's process-wide callbacks, left by the module's earlier tests, are part of what it
# sees), so it stays whole on one worker.
SPREAD = frozenset({
    "tests/test_host_crewai.py",
    "tests/test_host_google_adk.py",
    "tests/test_host_google_genai.py",
    "tests/test_host_langchain.py",
    "tests/test_host_llamaindex.py",
    "tests/test_host_mcp.py",
    "tests/test_host_mcp_contract_once.py",
    "tests/test_host_openai_agents.py",
    "tests/test_host_praisonai.py",
    "tests/test_host_pydantic_ai.py",
    "tests/test_host_sdk.py",
    "tests/test_host_strands.py",
    "tests/test_host_suites.py",
    "tests/test_peers.py",
})
SPREAD_BY_PARAM = frozenset({"tests/test_one_plugin_every_host.py"})
UNKNOWN_S = 1.0


def durations_file(rootpath: Path) -> Path:
    env = os.environ.get("OTELMW_TEST_ENV") or "default"
    return rootpath / ".cache" / "test-durations" / f"{env}.json"


def read_durations(path: Path) -> dict[str, float]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(v, int | float)}


def unit_of(nodeid: str) -> str:
    """The work unit a test belongs to: its module, its own id (``SPREAD``), or its
    module and parameter (``SPREAD_BY_PARAM``)."""
    module = nodeid.split("::", 1)[0]
    if module in SPREAD:
        return nodeid
    if module in SPREAD_BY_PARAM and nodeid.endswith("]") and "[" in nodeid:
        return f"{module}[{nodeid.rsplit('[', 1)[1]}"
    return module


class Recorder:
    """Controller-side: each test's time (all phases), written at the session's end."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seconds: dict[str, float] = defaultdict(float)

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] += report.duration

    @pytest.hookimpl
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.seconds:
            return
        merged = read_durations(self.path)
        merged.update((k, round(v, 3)) for k, v in self.seconds.items())
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(merged, indent=0, sort_keys=True))
            tmp.replace(self.path)
        except OSError:  # a read-only checkout: the next run schedules by test count
            pass


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The refined ``loadfile`` scheduler (see the module docstring)."""
    from xdist.scheduler import LoadScopeScheduling

    expected = read_durations(durations_file(config.rootpath))

    class LongestFirst(LoadScopeScheduling):  # type: ignore[misc]
        def __init__(self, config: pytest.Config, log: Any) -> None:
            super().__init__(config, log)
            self.costs: dict[str, float] = {}

        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

        def cost(self, unit: str) -> float:
            if unit not in self.costs:
                self.costs[unit] = sum(expected.get(nodeid, UNKNOWN_S)
                                       for nodeid in self.workqueue[unit])
            return self.costs[unit]

        def _assign_work_unit(self, node: Any) -> None:
            # xdist hands out the workqueue's first unit: make it the longest left
            self.workqueue.move_to_end(max(self.workqueue, key=self.cost), last=False)
            super()._assign_work_unit(node)

    return LongestFirst(config, log)

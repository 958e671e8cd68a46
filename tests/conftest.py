"""Fixtures shared by the telemetry test modules, and the host matrix's selection.

A test (or module, ``pytestmark``) that needs a host package carries
``@pytest.mark.host("openai", ...)``. ``scripts/test-all.sh`` runs the suite once per
matrix environment and says what each provides: ``OTELMW_TEST_HOSTS`` (tests needing
any other host are deselected) and ``OTELMW_TEST_ONLY`` (only tests marked for one of
these hosts run; a test marked ``every_env`` runs in every environment). Without
them (plain ``pytest``) every test is selected, and a test whose host is missing
skips — or fails under ``CI=true``.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from _support import scheduling, telemetry_snapshot
from _support.components import HOST_MODULES, env_hosts, require_host
from _support.otlp_receiver import OtlpReceiver
from _support.telemetry import TelemetryHarness

from otelmw.telemetry import uninstrument_threads


def item_hosts(item: pytest.Item) -> frozenset[str]:
    """The hosts an item's ``host`` markers name (a typo is a usage error)."""
    names = frozenset(name for mark in item.iter_markers("host") for name in mark.args)
    unknown = names - HOST_MODULES.keys()
    if unknown:
        raise pytest.UsageError(f"{item.nodeid}: unknown host(s) {sorted(unknown)} in "
                                f"@pytest.mark.host; known: {sorted(HOST_MODULES)}")
    return names


def pytest_configure(config: pytest.Config) -> None:
    # A suite started in the background of a non-interactive shell inherits SIGINT
    # ignored, and so would every program it starts (Ctrl-C and SIGINT tests then see
    # nothing). A handler, unlike SIG_IGN, is reset to the default action on exec.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # An xdist worker starts with COLUMNS=80 and LINES=24 set by execnet, not by the
        # user: the CLI tests' children would take them as a terminal size they were given.
        os.environ.pop("COLUMNS", None)
        os.environ.pop("LINES", None)
    if os.environ.get(telemetry_snapshot.ENV):
        telemetry_snapshot.install(config)
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        config.pluginmanager.register(
            scheduling.Recorder(scheduling.durations_file(config.rootpath)), "otelmw-durations")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` (scripts/test-all.sh), longest first and with the independent
    modules spread (tests/_support/scheduling.py); any other mode is xdist's own."""
    if config.getoption("dist") != "loadfile":
        return None
    return scheduling.make_scheduler(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    provided, only = env_hosts("OTELMW_TEST_HOSTS"), env_hosts("OTELMW_TEST_ONLY")
    if provided is None and only is None:
        return
    keep, drop = [], []
    for item in items:
        hosts = item_hosts(item)
        wanted = (provided is None or hosts <= provided) and (
            only is None or bool(hosts & only) or item.get_closest_marker("every_env") is not None)
        (keep if wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_runtest_setup(item: pytest.Item) -> None:
    for host in sorted(item_hosts(item)):
        require_host(host)


def _utf8(text: str) -> str:
    """``text`` with lone surrogates escaped (``\\ud800``): an xdist worker sends its
    reports to the controller as UTF-8, which a lone surrogate cannot be."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    # The hostile-value tests log strings holding lone surrogates on purpose; captured
    # into a report's sections, they would crash the xdist worker sending it.
    outcome = yield
    report = outcome.get_result()
    report.sections = [(title, _utf8(text)) for title, text in report.sections]
    if isinstance(report.longrepr, str):
        report.longrepr = _utf8(report.longrepr)


@pytest.fixture
def h() -> Iterator[TelemetryHarness]:
    """A fresh in-memory telemetry harness; fails the test if the SDK complained
    (double end, detach errors). A module may define its own ``h``."""
    harness = TelemetryHarness()
    yield harness
    uninstrument_threads()  # a test that patched threads leaves none behind
    harness.close()
    harness.assert_clean()


@pytest.fixture
def rx() -> Iterator[OtlpReceiver]:
    """The suite's real OTLP receiver (gRPC and HTTP on 127.0.0.1), started for one
    test. A module may define its own ``rx`` (a slow one, say)."""
    with OtlpReceiver() as receiver:
        yield receiver

"""One table of settings, one validation rule: ``configure()`` and ``otelmw run``
refuse a bad value with a message naming it; inside a running program
(``opentelemetry-instrument``, the ``otelmw run`` bootstrap) that one setting warns
once and keeps its default, and everything else — instrumentation, the flush at
exit — goes on. Also: a missing Prometheus extra only costs the metrics, and
``service.name`` under ``otelmw run`` is the program's name."""

from __future__ import annotations

import ast
import dataclasses
import logging
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _support.cli import otelmw_cmd
from _support.components import clean_env
from _support.otlp_receiver import OtlpReceiver, free_port

import otelmw
from otelmw.cli.views import spans_from_requests
from otelmw.config import settings as cfg
from otelmw.telemetry.store.readers import read_requests

TIMEOUT = 90
ROOT = Path(otelmw.__file__).resolve().parent
BOOTSTRAP = ROOT / "bootstrap"
DOCS = ROOT.parent / "docs" / "telemetry.md"

# A program using only otelmw's pipeline API (no configure()): one chat span.
APP = textwrap.dedent("""
    from otelmw.core.pipeline import get_pipeline

    pipe = get_pipeline()
    out = pipe.run_llm({"model": "m-1", "messages": []},
                       lambda req: {"id": "r1", "model": "m-1", "choices": [],
                                    "usage": {"prompt_tokens": 1, "completion_tokens": 1}},
                       provider="openai")
    obs = pipe.observer
    print("OUT", out["id"], obs.hook_events if obs else None, flush=True)
""")

# A program that never imports otelmw: one span through the OpenTelemetry API.
PLAIN = textwrap.dedent("""
    from opentelemetry import trace

    with trace.get_tracer("app").start_as_current_span("app-main"):
        pass
    print("RAN", flush=True)
""")


def run(cmd: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=TIMEOUT)


def otelmw_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("otelmw")]


def stored_services(store: Path) -> dict[str, str]:
    return {s.name: s.service for s in spans_from_requests(read_requests("traces", store))}


# ------------------------------------------------------------------ the table itself
@pytest.mark.parametrize(("name", "value", "expected"), [
    ("OTELMW_HOOK_EVENTS", "allx",
     "OTELMW_HOOK_EVENTS='allx': expected one of registered, all, none; did you mean 'all'?"),
    ("OTEL_SDK_DISABLED", "ture",
     "OTEL_SDK_DISABLED='ture': expected true or false; did you mean 'true'?"),
    ("OTEL_BSP_MAX_QUEUE_SIZE", "abc",
     "OTEL_BSP_MAX_QUEUE_SIZE='abc': expected an integer of at least 1"),
    ("OTELMW_SHUTDOWN_TIMEOUT", "x",
     "OTELMW_SHUTDOWN_TIMEOUT='x': expected a number of at least 0"),
    ("OTEL_TRACES_EXPORTER", "otlp,consol",
     "OTEL_TRACES_EXPORTER='otlp,consol': 'consol' is not one of otlp, console, file, none; "
     "did you mean 'console'?"),
    ("OTEL_TRACES_SAMPLER", "always_of", "did you mean 'always_off'?"),
    ("OTEL_TRACES_SAMPLER_ARG", "1.5",
     "OTEL_TRACES_SAMPLER_ARG='1.5': expected a number from 0 to 1"),
    ("OTEL_EXPORTER_PROMETHEUS_PORT", "99999", "expected an integer from 0 to 65535"),
    ("OTEL_RESOURCE_ATTRIBUTES", "team=a,oops", "'oops' is not key=value"),
    ("OTELMW_MIDDLEWARE_METRICS", "of", "expected one of on, off; did you mean 'off'?"),
    ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_onyl",
     "did you mean 'SPAN_ONLY'?"),
])
def test_strict_load_names_variable_value_allowed_values_and_near_miss(
        name: str, value: str, expected: str) -> None:
    with pytest.raises(ValueError) as info:
        cfg.load({name: value})
    assert expected in str(info.value)


def test_lenient_load_warns_once_per_bad_setting_and_keeps_only_that_default(
        caplog: pytest.LogCaptureFixture) -> None:
    env = {"OTELMW_HOOK_EVENTS": "allx", "OTEL_BSP_MAX_QUEUE_SIZE": "abc",
           "OTELMW_SHUTDOWN_TIMEOUT": "2.5", "OTEL_TRACES_EXPORTER": "console"}
    with caplog.at_level(logging.WARNING, logger="otelmw"):
        first = cfg.load(env, strict=False)
        again = cfg.load(env, strict=False)
    assert first[cfg.HOOK_EVENTS] == "registered"
    assert first[cfg.SPAN_BATCH.max_queue_size] == 2048
    assert first[cfg.SHUTDOWN_TIMEOUT] == 2.5  # the good ones are kept
    assert first[cfg.EXPORTERS["traces"]] == ("console",)
    assert again.problems == first.problems and len(first.problems) == 2
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2, warned  # once each, not once per load
    assert any("OTELMW_HOOK_EVENTS='allx'" in w and "using the default (registered)" in w
               for w in warned)


def test_batch_size_larger_than_queue_is_refused() -> None:
    with pytest.raises(ValueError, match="OTEL_BSP_MAX_EXPORT_BATCH_SIZE=600 is larger than "
                                         "OTEL_BSP_MAX_QUEUE_SIZE=100"):
        cfg.load({"OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "600"})
    s = cfg.load({"OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "600"},
                 strict=False)
    assert s[cfg.SPAN_BATCH.max_export_batch_size] == 100


def test_settings_are_immutable_and_an_argument_makes_a_new_one() -> None:
    s = cfg.load({"OTELMW_HOOK_EVENTS": "all"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.values = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.values[cfg.HOOK_EVENTS.name] = "none"  # type: ignore[index]
    override = s.with_value(cfg.NO_THREAD_PROPAGATION, True)
    assert override[cfg.NO_THREAD_PROPAGATION] is True and override.is_set(
        cfg.NO_THREAD_PROPAGATION)
    assert override[cfg.HOOK_EVENTS] == "all"  # the rest as read
    assert s[cfg.NO_THREAD_PROPAGATION] is False and not s.is_set(cfg.NO_THREAD_PROPAGATION)


def test_data_dir_naming_a_file_is_refused(tmp_path: Path) -> None:
    a_file = tmp_path / "not-a-dir"
    a_file.write_text("x")
    with pytest.raises(ValueError, match=f"OTELMW_DATA_DIR=.*{a_file} exists and is not a "
                                         "directory"):
        cfg.load({"OTELMW_DATA_DIR": str(a_file)})


def _environment_reads(tree: ast.AST) -> list[str]:
    """``OTEL_*``/``OTELMW_*`` string literals passed to ``os.environ``/``getenv``."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call | ast.Subscript):
            continue
        src = ast.unparse(node.func if isinstance(node, ast.Call) else node.value)
        if "environ" not in src and "getenv" not in src:
            continue
        args = node.args if isinstance(node, ast.Call) else [node.slice]
        found += [a.value for a in args if isinstance(a, ast.Constant)
                  and isinstance(a.value, str) and a.value.startswith(("OTEL_", "OTELMW_"))]
    return found


def test_only_the_settings_module_reads_the_environment() -> None:
    readers = {}
    for path in ROOT.rglob("*.py"):
        if path.name != "settings.py":
            names = _environment_reads(ast.parse(path.read_text()))
            if names:
                readers[str(path.relative_to(ROOT))] = names
    assert readers == {}, "read these through otelmw.config.settings"
    # ... and the check itself sees a read when there is one
    assert _environment_reads(ast.parse("os.environ.get('OTELMW_X'); os.getenv('OTEL_Y')")) == [
        "OTELMW_X", "OTEL_Y"]


def test_every_setting_is_in_the_configuration_table_and_the_table_has_no_others() -> None:
    section = DOCS.read_text().split("## Configuration", 1)[1]
    table = "\n".join(line for line in section.splitlines() if line.startswith("|"))
    documented = set(re.findall(r"`((?:OTEL|OTELMW)_[A-Z0-9_]+)`", table))
    assert set(cfg.REGISTRY) - documented == set(), "settings missing from docs/telemetry.md"
    assert documented - set(cfg.REGISTRY) == set(), "documented settings otelmw does not read"


# ------------------------------------------------------------------ inside a running program
BAD_INSIDE = {"OTELMW_HOOK_EVENTS": "allx", "OTELMW_SHUTDOWN_TIMEOUT": "x",
              "OTEL_BSP_MAX_QUEUE_SIZE": "abc", "OTEL_SDK_DISABLED": "ture"}


def _assert_warned_once_each_and_kept_telemetry(proc: subprocess.CompletedProcess[str],
                                                rx: OtlpReceiver) -> None:
    assert proc.returncode == 0, proc.stderr
    assert "OUT r1 registered" in proc.stdout  # instrumented, hook events at their default
    assert "Traceback" not in proc.stderr
    assert "Exception ignored" not in proc.stderr
    assert "instrumentation disabled" not in proc.stderr
    lines = otelmw_lines(proc.stderr)
    for name, value in BAD_INSIDE.items():
        mine = [x for x in lines if x.startswith(f"otelmw: {name}={value!r}")]
        assert len(mine) == 1, (name, proc.stderr)
        assert "using the default" in mine[0]
    assert len(lines) == len(BAD_INSIDE), proc.stderr
    # no explicit shutdown in the program: the flush at exit delivered the span
    spans = rx.wait_for_spans(1, timeout=15)
    assert [s.name for s in spans] == ["chat m-1"]
    assert spans[0].resource["service.name"] == "app"  # the program's name (item 3)


def test_opentelemetry_instrument_warns_per_bad_setting_and_keeps_everything_else(
        tmp_path: Path) -> None:
    launcher = shutil.which("opentelemetry-instrument")
    assert launcher, "opentelemetry-instrument comes with opentelemetry-instrumentation"
    (tmp_path / "app.py").write_text(APP)
    with OtlpReceiver() as rx:
        env = clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint, **BAD_INSIDE)
        proc = run([launcher, sys.executable, "app.py"], env, tmp_path)
        _assert_warned_once_each_and_kept_telemetry(proc, rx)


def test_otelmw_bootstrap_inside_a_program_warns_per_bad_setting(tmp_path: Path) -> None:
    """What ``otelmw run`` puts on PYTHONPATH, met by a child process whose
    environment changed after ``otelmw run`` validated it."""
    import os

    (tmp_path / "app.py").write_text(APP)
    with OtlpReceiver() as rx:
        env = clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint, **BAD_INSIDE)
        env["PYTHONPATH"] = os.pathsep.join(x for x in (str(BOOTSTRAP), env.get("PYTHONPATH"))
                                            if x)
        proc = run([sys.executable, "app.py"], env, tmp_path)
        _assert_warned_once_each_and_kept_telemetry(proc, rx)


@pytest.mark.parametrize(("name", "value"), list(BAD_INSIDE.items()))
def test_otelmw_run_refuses_a_bad_setting_before_starting_the_program(
        tmp_path: Path, name: str, value: str) -> None:
    (tmp_path / "app.py").write_text(PLAIN)
    proc = run([*otelmw_cmd(), "run", "--", sys.executable, "app.py"],
               clean_env(tmp_path, **{name: value}), tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"otelmw: error: {name}={value!r}: expected "), proc.stderr
    assert "Traceback" not in proc.stderr
    assert "RAN" not in proc.stdout


# ------------------------------------------------------------------ prometheus extra (item 2)
def _without_prometheus(tmp_path: Path) -> str:
    """A directory that, first on PYTHONPATH, makes ``opentelemetry.exporter.prometheus``
    fail to import the way it does where the extra is not installed."""
    blocked = tmp_path / "no-prometheus" / "opentelemetry" / "exporter"
    blocked.mkdir(parents=True)
    (blocked / "prometheus.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'opentelemetry.exporter.prometheus'\", "
        "name='opentelemetry.exporter.prometheus')\n")
    return str(tmp_path / "no-prometheus")


@pytest.mark.parametrize("missing", ["extra", "port"])
def test_prometheus_trouble_costs_only_the_metrics(tmp_path: Path, missing: str) -> None:
    import os
    import socket

    (tmp_path / "app.py").write_text(APP)
    store = tmp_path / "store"
    env = clean_env(tmp_path, OTEL_METRICS_EXPORTER="prometheus", OTEL_TRACES_EXPORTER="file",
                    OTEL_LOGS_EXPORTER="file", OTELMW_DATA_DIR=str(store))
    holder = None
    if missing == "extra":
        env["PYTHONPATH"] = os.pathsep.join(
            x for x in (_without_prometheus(tmp_path), env.get("PYTHONPATH")) if x)
        check = run([sys.executable, "-c", "import opentelemetry.exporter.prometheus"], env,
                    tmp_path)
        assert "No module named 'opentelemetry.exporter.prometheus'" in check.stderr
    else:
        holder = socket.socket()
        holder.bind(("127.0.0.1", free_port()))
        holder.listen()
        env["OTEL_EXPORTER_PROMETHEUS_PORT"] = str(holder.getsockname()[1])
    try:
        proc = run([*otelmw_cmd(), "run", "--", sys.executable, "app.py"], env, tmp_path)
    finally:
        if holder is not None:
            holder.close()
    assert proc.returncode == 0, proc.stderr
    assert "OUT r1 registered" in proc.stdout  # still instrumented
    lines = otelmw_lines(proc.stderr)
    assert len(lines) == 1, proc.stderr
    assert "metrics are not exported; traces and logs are" in lines[0]
    if missing == "extra":
        assert "pip install 'otelmw[prometheus]'" in lines[0]
    else:
        assert f"127.0.0.1:{env['OTEL_EXPORTER_PROMETHEUS_PORT']}" in lines[0]
    assert "Traceback" not in proc.stderr
    assert stored_services(store) == {"chat m-1": "app"}


# ------------------------------------------------------------------ service.name (item 3)
@pytest.mark.parametrize(("argv", "extra", "service"), [
    (["app.py"], {}, "app"),
    (["-m", "pkg.tool"], {}, "pkg.tool"),
    (["-u", "pkg"], {}, "pkg"),  # a package directory's __main__.py
    (["app.py"], {"OTEL_SERVICE_NAME": "named"}, "named"),
    (["app.py"], {"OTEL_RESOURCE_ATTRIBUTES": "team=a,service.name=from-attrs"}, "from-attrs"),
])
def test_otelmw_run_names_the_service_after_the_program(tmp_path: Path, argv: list[str],
                                                        extra: dict[str, str],
                                                        service: str) -> None:
    (tmp_path / "app.py").write_text(PLAIN)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "tool.py").write_text(PLAIN)
    (tmp_path / "pkg" / "__main__.py").write_text(PLAIN)
    store = tmp_path / "store"
    proc = run([*otelmw_cmd(), "run", "--", sys.executable, *argv],
               clean_env(tmp_path, OTELMW_DATA_DIR=str(store), **extra), tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "RAN" in proc.stdout
    assert stored_services(store) == {"app-main": service}

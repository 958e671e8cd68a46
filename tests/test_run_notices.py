"""``otelmw run`` is never silent: one line at start (instrumentors active and skipped,
with why), one at exit (spans, traces, log records written, where, dropped, targets
left unwrapped), on a terminal's stderr or else the ``otelmw`` logger; an installed
host outside its supported range is one WARNING; ``OTELMW_WRAP`` wraps the script
being run. Real subprocesses, a pseudo-terminal for stderr, the real store and OTLP
receiver; the only thing made up is an out-of-range host (a tiny installed
distribution whose instrumentor asks for ``openai >= 99``)."""

from __future__ import annotations

import logging
import os
import pty
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from _support.cli import otelmw_cmd, pythonpath, read_terminal
from _support.components import clean_env
from _support.distributions import install_distribution
from _support.otlp_receiver import OtlpReceiver, free_port

from otelmw.instrumentation._base import OtelmwInstrumentor, host_unsupported
from otelmw.telemetry.store.readers import read_requests

pytestmark = pytest.mark.timeout(180)
TIMEOUT = 90

AGENT = textwrap.dedent("""\
    import asyncio, logging, pickle, sys

    if "--log" in sys.argv:
        logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                            format="LOG %(name)s %(levelname)s %(message)s")

    class Reply:  # a class of the script: pickles as __main__.Reply
        pass

    def reply(model):
        return {"id": "resp-1", "model": model,
                "choices": [{"message": {"role": "assistant", "content": "4"}}]}

    def call_model(**request):
        return reply(request["model"])

    async def acall_model(**request):
        return reply(request["model"])

    def dispatch(tool_name, args, tool_call_id=None):
        return {"sum": args["a"] + args["b"]}

    def main():
        call_model(model="gpt-script", messages=[{"role": "user", "content": "2+2"}])
        asyncio.run(acall_model(model="gpt-async", messages=[]))
        out = dispatch("add", {"a": 1, "b": 2}, tool_call_id="call-1")
        pickle.loads(pickle.dumps(Reply()))
        print("KINDS", type(call_model).__name__, type(acall_model).__name__,
              type(dispatch).__name__, out["sum"])
        print("MAIN", __name__, __file__, sys.argv[1:], sys.path[0])

    if __name__ == "__main__":
        main()
""")
WRAP = "my_agent:call_model=llm,__main__:acall_model=llm,my_agent:dispatch=tool"


class Run:
    def __init__(self, proc: subprocess.Popen[bytes], stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = proc.returncode, stdout, stderr

    def lines(self, prefix: str) -> list[str]:
        return [x for x in self.stderr.splitlines() if x.startswith(prefix)]


def run(args: list[str], env: dict[str, str], cwd: Path, *, terminal: bool = True) -> Run:
    """``otelmw run -- ARGS`` with stderr on a pseudo-terminal (or a pipe)."""
    cmd = [*otelmw_cmd(), "run", "--", *args]
    if not terminal:
        done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, timeout=TIMEOUT)
        return Run(done, done.stdout.decode(), done.stderr.decode())  # type: ignore[arg-type]
    master, slave = pty.openpty()
    with tempfile.TemporaryFile() as out:  # a file, not a pipe: nothing to drain
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=slave,
                                stdin=subprocess.DEVNULL)
        os.close(slave)
        try:
            stderr = read_terminal(master, proc, TIMEOUT)
            proc.wait(timeout=10)
        finally:
            os.close(master)
            if proc.poll() is None:
                proc.kill()
        assert stderr is not None, f"{cmd} did not finish in {TIMEOUT}s"
        out.seek(0)
        stdout = out.read().decode()
    return Run(proc, stdout, stderr)


@pytest.fixture
def app(tmp_path: Path) -> Path:
    (tmp_path / "my_agent.py").write_text(AGENT)
    return tmp_path


def stored(store: Path, signal: str) -> list[dict]:  # type: ignore[type-arg]
    out = []
    for request in read_requests(signal, store):
        key = "resourceSpans" if signal == "traces" else "resourceLogs"
        leaf = "spans" if signal == "traces" else "logRecords"
        scopes = "scopeSpans" if signal == "traces" else "scopeLogs"
        for resource in request.get(key, []):
            for scope in resource.get(scopes, []):
                out.extend(scope.get(leaf, []))
    return out


EXIT = re.compile(r"^otelmw: wrote (\d+) spans? \((\d+) traces?\) and (\d+) log records? "
                  r"to (.+?); (\d+) dropped(.*)$")


# ------------------------------------------------------------------ start and exit
def test_start_and_exit_lines_name_instrumentors_counts_and_store(app: Path) -> None:
    store = app / "store"
    env = clean_env(app, OTELMW_WRAP=WRAP, OTELMW_DATA_DIR=str(store),
                    OTELMW_HOOK_EVENTS="all",
                    OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="otelmw_anthropic")
    result = run([sys.executable, "my_agent.py"], env, app)
    assert result.returncode == 0, result.stderr
    (start,) = result.lines("otelmw: instrumenting with ")
    active = start.split("instrumenting with ", 1)[1].split(";", 1)[0].split(", ")
    assert "otelmw_openai" in active and "otelmw_anthropic" not in active
    assert "skipped otelmw_anthropic (disabled by OTEL_PYTHON_DISABLED_INSTRUMENTATIONS)" in start
    assert start.endswith(f"telemetry to store {store.resolve()}")
    (end,) = result.lines("otelmw: wrote ")
    match = EXIT.match(end)
    assert match, end
    spans, logs = stored(store, "traces"), stored(store, "logs")
    assert len(spans) == 3 and logs  # two chat spans and a tool span, hook records
    assert int(match[1]) == len(spans)
    assert int(match[2]) == len({s["traceId"] for s in spans}) == 3
    assert int(match[3]) == len(logs)
    assert match[4] == f"store {store.resolve()}"
    assert int(match[5]) == 0 and match[6] == ""  # every target wrapped: nothing to add
    assert result.stderr.index("instrumenting with") < result.stderr.index("otelmw: wrote")


def test_exit_line_names_the_otlp_endpoint_and_what_the_receiver_got(app: Path) -> None:
    with OtlpReceiver() as rx:
        endpoint = rx.grpc_endpoint
        env = clean_env(app, OTELMW_WRAP=WRAP, OTEL_EXPORTER_OTLP_ENDPOINT=endpoint)
        result = run([sys.executable, "my_agent.py"], env, app)
        assert result.returncode == 0, result.stderr
        rx.wait_for_spans(3, timeout=15)
        received = rx.spans()
    (end,) = result.lines("otelmw: wrote ")
    match = EXIT.match(end)
    assert match, end
    assert int(match[1]) == len(received) == 3
    assert match[4] == f"OTLP/grpc {endpoint}"
    assert int(match[5]) == 0


@pytest.mark.parametrize("spool", ["on", "off"])
def test_exit_line_counts_what_a_dead_endpoint_lost(app: Path, spool: str) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    env = clean_env(app, OTELMW_WRAP=WRAP, OTEL_EXPORTER_OTLP_ENDPOINT=dead,
                    OTEL_LOGS_EXPORTER="none", OTEL_METRICS_EXPORTER="none",
                    OTELMW_SHUTDOWN_TIMEOUT="1", OTELMW_DATA_DIR=str(app / "store"),
                    **({"OTELMW_SPOOL_MAX_BYTES": "0"} if spool == "off" else {}))
    result = run([sys.executable, "my_agent.py"], env, app)
    assert result.returncode == 0, result.stderr
    (end,) = result.lines("otelmw: wrote ")
    head = (f"otelmw: wrote 0 spans (0 traces) to OTLP/grpc {dead}, "
            "0 log records to nowhere (exporter none); ")
    if spool == "off":
        assert end.startswith(head + "3 dropped"), end
        assert "spooled" not in end
    else:  # kept for `otelmw replay`, not lost
        assert end.startswith(head + f"0 dropped; 3 spooled in {app / 'store' / 'spool'} "
                              "(`otelmw replay` sends them)"), end


def test_quiet_silences_both_lines(app: Path) -> None:
    env = clean_env(app, OTELMW_WRAP=WRAP, OTELMW_DATA_DIR=str(app / "store"),
                    OTELMW_QUIET="1")
    result = run([sys.executable, "my_agent.py"], env, app)
    assert result.returncode == 0, result.stderr
    assert "KINDS FunctionWrapper" in result.stdout  # instrumented all the same
    assert result.lines("otelmw:") == []


def test_bad_quiet_value_is_an_error_at_start(app: Path) -> None:
    env = clean_env(app, OTELMW_QUIET="maybe")
    result = run([sys.executable, "my_agent.py"], env, app, terminal=False)
    assert result.returncode == 2
    assert "OTELMW_QUIET='maybe'" in result.stderr and "KINDS" not in result.stdout


def test_not_a_terminal_sends_the_lines_to_the_otelmw_logger(app: Path) -> None:
    env = clean_env(app, OTELMW_WRAP=WRAP, OTELMW_DATA_DIR=str(app / "store"))
    result = run([sys.executable, "my_agent.py", "--log"], env, app, terminal=False)
    assert result.returncode == 0, result.stderr
    assert "otelmw: wrote" not in result.stderr and "instrumenting with" not in result.stderr
    # the program configured logging: the exit line reached its handler, at INFO
    (logged,) = [x for x in result.stdout.splitlines() if x.startswith("LOG otelmw")]
    assert logged.startswith("LOG otelmw INFO otelmw: wrote 3 spans (3 traces)")


# ------------------------------------------------------------- out-of-range hosts
FAKE_HOST = textwrap.dedent("""\
    from otelmw.instrumentation._base import OtelmwInstrumentor

    class FutureOpenAI(OtelmwInstrumentor):
        dependencies = ("openai >= 99, < 100",)
        entry_point = "otelmw_future"

        def targets(self):
            raise AssertionError("an out-of-range host must not be instrumented")
""")


def install_fake_distribution(site: Path) -> None:
    """An installed distribution (dist-info on ``sys.path``) with one instrumentor
    entry point whose range the installed openai is outside of."""
    install_distribution(site, "future-openai-instr",
                         {"opentelemetry_instrumentor": {
                             "otelmw_future": "future_openai_instr:FutureOpenAI"}},
                         {"future_openai_instr.py": FAKE_HOST})


def test_out_of_range_host_is_one_warning_and_a_named_skip(app: Path) -> None:
    from importlib.metadata import version

    install_fake_distribution(app / "site")
    env = clean_env(app, OTELMW_DATA_DIR=str(app / "store"),
                    PYTHONPATH=pythonpath(app / "site"))
    result = run([sys.executable, "my_agent.py"], env, app)
    assert result.returncode == 0, result.stderr
    installed = f"openai {version('openai')}"
    reason = f"{installed} is installed, outside the supported range openai >= 99, < 100"
    warnings = [x for x in result.stderr.splitlines() if "otelmw_future not instrumented" in x]
    assert warnings == [f"otelmw: otelmw_future not instrumented: {reason} "
                        "(see README, Host instrumentors)"]
    (start,) = result.lines("otelmw: instrumenting with ")
    assert f"otelmw_future ({reason})" in start


def test_each_otelmw_instrumentor_names_itself_by_its_registered_entry_point() -> None:
    """The name an out-of-range host is reported under is the instrumentor's name in
    the ``opentelemetry_instrumentor`` group (pyproject), derived from its module."""
    import tomllib
    from importlib.metadata import entry_points

    declared = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    ours = [ep for ep in entry_points(group="opentelemetry_instrumentor")
            if ep.value.startswith("otelmw.")]
    # the installed metadata holds every instrumentor pyproject declares, and no stale one
    assert ({ep.name for ep in ours}
            == set(declared["project"]["entry-points"]["opentelemetry_instrumentor"]))
    assert {ep.name: ep.load().entry_point for ep in ours} == {ep.name: ep.name for ep in ours}


class _FutureOpenAI(OtelmwInstrumentor):
    dependencies = ("openai >= 99, < 100",)
    entry_point = "otelmw_future_inproc"

    def targets(self) -> list[object]:  # type: ignore[override]
        raise AssertionError("an out-of-range host must not be instrumented")


def test_out_of_range_under_opentelemetry_instrument_warns_instead_of_debug(
        caplog: pytest.LogCaptureFixture) -> None:
    """``opentelemetry-instrument`` calls ``instrument(raise_exception_on_conflict=True)``
    and logs the conflict at DEBUG; otelmw's instrumentors say it at WARNING, once."""
    pytest.importorskip("openai")
    with caplog.at_level(logging.DEBUG):
        for _ in range(2):
            inst = _FutureOpenAI()
            assert inst.instrument(raise_exception_on_conflict=True) is None
            assert not inst.is_instrumented_by_opentelemetry
            assert inst.skipped_because is not None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].name == "otelmw"
    message = warnings[0].getMessage()
    assert "otelmw_future_inproc" in message and "openai >= 99, < 100" in message
    assert re.search(r"openai \d+\.\d+", message)


def test_missing_host_stays_at_info(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="otelmw"):
        reason = host_unsupported("otelmw_ghost", ["surely-not-installed-pkg >= 1, < 2"])
    assert reason == "surely-not-installed-pkg is not installed"
    assert [r.levelno for r in caplog.records if "otelmw_ghost" in r.getMessage()] == [
        logging.INFO]


# ------------------------------------------------------------ OTELMW_WRAP on the script
def test_wrap_targets_in_the_running_script_are_wrapped(app: Path) -> None:
    store = app / "store"
    env = clean_env(app, OTELMW_WRAP=WRAP, OTELMW_DATA_DIR=str(store))
    result = run([sys.executable, "-u", "my_agent.py", "x", "--flag"], env, app)
    assert result.returncode == 0, result.stderr
    assert "KINDS FunctionWrapper FunctionWrapper FunctionWrapper 3" in result.stdout
    # the script runs as Python runs it: __main__, its path, its arguments, its directory
    assert f"MAIN __main__ my_agent.py ['x', '--flag'] {app}" in result.stdout
    names = sorted(s["name"] for s in stored(store, "traces"))
    assert names == ["chat gpt-async", "chat gpt-script", "execute_tool add"]
    services = {a["value"]["stringValue"] for r in read_requests("traces", store)
                for res in r["resourceSpans"] for a in res["resource"]["attributes"]
                if a["key"] == "service.name"}
    assert services == {"my_agent"}


def test_wrap_target_never_defined_is_reported_at_exit(app: Path) -> None:
    env = clean_env(app, OTELMW_WRAP="my_agent:call_modle=llm,othermod:fn=tool",
                    OTELMW_DATA_DIR=str(app / "store"))
    result = run([sys.executable, "my_agent.py"], env, app)
    assert result.returncode == 0, result.stderr
    assert "KINDS function" in result.stdout
    (end,) = result.lines("otelmw: wrote ")
    assert end.endswith("; OTELMW_WRAP not wrapped: my_agent:call_modle=llm (my_agent.py "
                        "never defined call_modle), othermod:fn=tool (module othermod was "
                        "never imported)"), end


def test_wrap_spec_without_kind_is_an_error_at_start(app: Path) -> None:
    env = clean_env(app, OTELMW_WRAP="my_agent:call_model")
    result = run([sys.executable, "my_agent.py"], env, app, terminal=False)
    assert result.returncode == 2
    assert result.stderr.startswith("otelmw: error: OTELMW_WRAP='my_agent:call_model'")
    assert "has no kind: write my_agent:call_model=llm or my_agent:call_model=tool" in \
        result.stderr
    assert "KINDS" not in result.stdout  # the program never started


@pytest.mark.parametrize(("command", "expected"), [
    (["python3", "-u", "-X", "dev", "agents/my_agent.py", "x"],
     ["python3", "-u", "-X", "dev", "-m", "otelmw.main_script", "agents/my_agent.py", "x"]),
    (["/usr/bin/python3.11", "my_agent.py"],
     ["/usr/bin/python3.11", "-m", "otelmw.main_script", "my_agent.py"]),
    (["python", "other.py"], None),  # no target names it: unchanged
    (["python", "-c", "import my_agent"], None),
    (["python", "-m", "my_agent"], None),
    (["bash", "my_agent.py"], None),  # not a Python interpreter
])
def test_only_python_running_a_targeted_script_goes_through_main_script(
        command: list[str], expected: list[str] | None) -> None:
    from otelmw.config.settings import WrapTarget
    from otelmw.main_script import command_for

    targets = [WrapTarget("my_agent", "call_model", "llm"), WrapTarget("lib", "f", "tool")]
    assert command_for(command, targets) == (command if expected is None else expected)

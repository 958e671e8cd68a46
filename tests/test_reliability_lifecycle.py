"""Process lifecycles: telemetry survives how real programs end.

Every test runs a real program in a fresh interpreter (under ``otelmw run``, or
calling ``configure()`` itself) with the stock OTLP exporter talking to the real
receiver, and ends it the way containers, process pools and forgetful code do:
SIGTERM / SIGINT (with and without the program's own handlers), multiprocessing
children that leave through ``os._exit``, a stream still referenced at exit.
The default batch delay (5 s) is kept, so nothing is exported before the end
unless otelmw flushes it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _support.cli import otelmw_cmd
from _support.components import clean_env, require_module
from _support.otlp_receiver import OtlpReceiver, free_port
from _support.scripted_llm import ScriptedLLMServer

require_module("openai")
pytestmark = pytest.mark.host("openai")

TIMEOUT = 60



@pytest.fixture(scope="module")
def llm() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as server:
        yield server


def child_env(tmp_path: Path, rx: OtlpReceiver, **extra: str) -> dict[str, str]:
    return clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint,
                     OTEL_SERVICE_NAME="lifecycle", OTEL_METRICS_EXPORTER="none",
                     OTELMW_DATA_DIR=str(tmp_path / "store"), **extra)


def otelmw_run(script: Path) -> list[str]:
    return [*otelmw_cmd(), "run", "--", sys.executable, str(script)]


def start(argv: list[str], env: dict[str, str], cwd: Path,
          **popen: object) -> subprocess.Popen[str]:
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **popen)  # type: ignore[call-overload]
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "READY":
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"child did not get ready: {line!r}{out}\n{err}")
    return proc


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"child did not end\n{out}\n{err}")
    return proc.returncode, out, err


def chat_spans(rx: OtlpReceiver, n: int) -> list[str]:
    rx.wait_for(lambda: len([s for s in rx.spans() if s.name.startswith("chat")]) >= n,
                timeout=15)
    return sorted(s.name for s in rx.spans() if s.name.startswith("chat"))


# ---------------------------------------------------------------- 1. signals

CHAT_PROGRAM = """
import os, signal, sys, time
import openai
{prologue}
client = openai.OpenAI(base_url={base!r}, api_key="x", max_retries=0)
for i in range(3):
    client.chat.completions.create(model=f"gpt-sig-{{i}}",
                                   messages=[{{"role": "user", "content": "hi"}}])
{handler}
print("READY", flush=True)
time.sleep({sleep})
print("SLEPT", flush=True)
"""

HANDLERS = {
    # the program's own handler, installed after otelmw: it ends the program its way
    "exit-7": """
def on_term(signum, frame):
    print("HANDLED", signum, flush=True)
    os._exit(7)
signal.signal(signal.SIGTERM, on_term)
""",
    # uvicorn's way: restore the default action and re-raise the signal
    "reraise": """
previous = signal.getsignal(signal.SIGTERM)
def on_term(signum, frame):
    print("HANDLED", signum, flush=True)
    signal.signal(signal.SIGTERM, previous)
    signal.raise_signal(signal.SIGTERM)
signal.signal(signal.SIGTERM, on_term)
""",
}


def chat_program(tmp_path: Path, llm: ScriptedLLMServer, *, prologue: str = "",
                 handler: str = "", sleep: float = 30) -> Path:
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(CHAT_PROGRAM.format(
        base=llm.base_url, prologue=prologue, handler=handler, sleep=sleep)))
    return script


EXPECTED_CHATS = ["chat gpt-sig-0", "chat gpt-sig-1", "chat gpt-sig-2"]


def test_sigterm_under_otelmw_run_flushes_then_dies_by_the_signal(
        tmp_path: Path, rx: OtlpReceiver, llm: ScriptedLLMServer) -> None:
    proc = start(otelmw_run(chat_program(tmp_path, llm)), child_env(tmp_path, rx), tmp_path)
    proc.send_signal(signal.SIGTERM)
    code, out, err = finish(proc)
    assert code == -signal.SIGTERM, err  # the default action still ends it (shell: 143)
    assert "SLEPT" not in out
    assert chat_spans(rx, 3) == EXPECTED_CHATS


def test_sigterm_in_a_program_that_called_configure(
        tmp_path: Path, rx: OtlpReceiver, llm: ScriptedLLMServer) -> None:
    prologue = ("from otelmw.instrumentation.openai import OpenAIInstrumentor\n"
                "from otelmw.telemetry.setup.configuration import configure\n"
                "configure('lifecycle'); OpenAIInstrumentor().instrument()\n")
    script = chat_program(tmp_path, llm, prologue=prologue)
    proc = start([sys.executable, str(script)], child_env(tmp_path, rx), tmp_path)
    proc.send_signal(signal.SIGTERM)
    code, _, err = finish(proc)
    assert code == -signal.SIGTERM, err
    assert chat_spans(rx, 3) == EXPECTED_CHATS


@pytest.mark.parametrize(("handler", "expected_code"), [("exit-7", 7),
                                                        ("reraise", -signal.SIGTERM)])
def test_sigterm_runs_a_handler_the_program_installed_after_otelmw(
        tmp_path: Path, rx: OtlpReceiver, llm: ScriptedLLMServer, handler: str,
        expected_code: int) -> None:
    script = chat_program(tmp_path, llm, handler=HANDLERS[handler])
    proc = start(otelmw_run(script), child_env(tmp_path, rx), tmp_path)
    proc.send_signal(signal.SIGTERM)
    code, out, err = finish(proc)
    assert code == expected_code, err
    assert f"HANDLED {int(signal.SIGTERM)}" in out  # never swallowed
    assert chat_spans(rx, 3) == EXPECTED_CHATS


def test_sigint_keeps_keyboardinterrupt_behaviour(
        tmp_path: Path, rx: OtlpReceiver, llm: ScriptedLLMServer) -> None:
    proc = start(otelmw_run(chat_program(tmp_path, llm)), child_env(tmp_path, rx), tmp_path)
    proc.send_signal(signal.SIGINT)
    code, _, err = finish(proc)
    assert code == -signal.SIGINT, err  # Python's exit status for an uncaught Ctrl-C
    assert "KeyboardInterrupt" in err
    assert chat_spans(rx, 3) == EXPECTED_CHATS


def test_sigint_with_the_default_action_restored_by_the_program(
        tmp_path: Path, rx: OtlpReceiver, llm: ScriptedLLMServer) -> None:
    script = chat_program(tmp_path, llm,
                          handler="signal.signal(signal.SIGINT, signal.SIG_DFL)\n")
    proc = start(otelmw_run(script), child_env(tmp_path, rx), tmp_path)
    proc.send_signal(signal.SIGINT)
    code, _, err = finish(proc)
    assert code == -signal.SIGINT, err
    assert "KeyboardInterrupt" not in err
    assert chat_spans(rx, 3) == EXPECTED_CHATS


def test_an_ignored_sigterm_stays_ignored(
        tmp_path: Path, rx: OtlpReceiver, llm: ScriptedLLMServer) -> None:
    script = chat_program(tmp_path, llm, sleep=1.5)
    # Started with SIGTERM ignored, as a launcher (nohup-like) leaves it: the disposition
    # is inherited across exec. Set by an interpreter that execs ``otelmw run``, not by a
    # ``preexec_fn``: that runs Python in a fork of this process, whose gRPC threads (the
    # receiver's) can leave the child dead before its exec.
    ignoring = [sys.executable, "-c", "import os, signal, sys; "
                "signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "os.execv(sys.argv[1], sys.argv[1:])"]
    proc = start([*ignoring, *otelmw_run(script)], child_env(tmp_path, rx), tmp_path)
    proc.send_signal(signal.SIGTERM)
    code, out, err = finish(proc)
    assert code == 0, err
    assert "SLEPT" in out
    assert chat_spans(rx, 3) == EXPECTED_CHATS


def test_getsignal_shows_the_program_its_own_handlers(tmp_path: Path) -> None:
    code = textwrap.dedent("""
        import signal
        from otelmw.telemetry.setup.configuration import configure
        configure("lifecycle")
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, signal.getsignal(signal.SIGTERM)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        def mine(signum, frame):
            pass
        assert signal.signal(signal.SIGTERM, mine) is signal.SIG_DFL
        assert signal.getsignal(signal.SIGTERM) is mine
        assert signal.signal(signal.SIGTERM, signal.SIG_DFL) is mine
        print("OK")
    """)
    env = clean_env(tmp_path, OTEL_TRACES_EXPORTER="none", OTEL_METRICS_EXPORTER="none",
                    OTEL_LOGS_EXPORTER="none")
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "OK"


# ------------------------------------------------------- 2. fork / multiprocessing

FORK_PROGRAM = """
import multiprocessing as mp, os, sys
from otelmw import get_pipeline
from otelmw.telemetry.setup.configuration import configure

configure("lifecycle")
pipe = get_pipeline()

def tool(args):
    return {{"pid": os.getpid(), **args}}

def work(i):
    return pipe.run_tool("{name}", {{"i": i}}, tool, tool_call_id=f"c{{i}}", raise_errors=True)

def three(k):
    for j in range(3):
        work(k * 10 + j)

if __name__ == "__main__":
    ctx = mp.get_context("{method}")
    kind = sys.argv[1]
    if kind == "process":
        procs = [ctx.Process(target=three, args=(k,)) for k in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        assert [p.exitcode for p in procs] == [0, 0], [p.exitcode for p in procs]
    elif kind == "pool-with":  # the context manager terminates the workers (SIGTERM)
        with ctx.Pool(2) as pool:
            out = pool.map(work, range(12))
        assert len({{r["pid"] for r in out}}) >= 1 and len(out) == 12
    elif kind == "pool-close":  # workers leave through their normal exit path
        pool = ctx.Pool(2)
        out = pool.map(work, range(12))
        pool.close()
        pool.join()
        assert len(out) == 12
    elif kind == "executor":  # concurrent.futures on multiprocessing workers
        from concurrent.futures import ProcessPoolExecutor
        with ProcessPoolExecutor(2, mp_context=ctx) as ex:
            out = list(ex.map(work, range(12)))
        assert len(out) == 12
    elif kind == "bare-fork":
        pids = []
        for k in range(2):
            pid = os.fork()
            if pid == 0:
                three(k)
                sys.exit(0)  # a bare fork child leaves through the interpreter's exit
            pids.append(pid)
        for pid in pids:
            assert os.waitpid(pid, 0)[1] == 0
    print("DONE", flush=True)
"""


@pytest.mark.parametrize(("kind", "method", "n"), [
    ("process", "fork", 6), ("pool-with", "fork", 12), ("pool-close", "fork", 12),
    ("executor", "fork", 12), ("bare-fork", "fork", 6), ("process", "spawn", 6),
    ("pool-close", "spawn", 12),
])
def test_worker_processes_deliver_their_spans(tmp_path: Path, rx: OtlpReceiver, kind: str,
                                              method: str, n: int) -> None:
    script = tmp_path / "workers.py"
    script.write_text(textwrap.dedent(FORK_PROGRAM.format(name="work", method=method)))
    proc = subprocess.run([sys.executable, str(script), kind], env=child_env(tmp_path, rx),
                          cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    assert "DONE" in proc.stdout
    rx.wait_for(lambda: len(rx.spans("execute_tool work")) >= n, timeout=15)
    spans = rx.spans("execute_tool work")
    assert len(spans) == n  # each exactly once: nothing exported twice by parent and child
    assert len({s.attributes["gen_ai.tool.call.id"] for s in spans}) == n


# ------------------------------------------------------ 3. a stream left open at exit

STREAM_PROGRAM = """
import openai
client = openai.OpenAI(base_url={base!r}, api_key="x", max_retries=0)
LEFT = client.chat.completions.create(model="gpt-left", stream=True,
                                      messages=[{{"role": "user", "content": "hi"}}])
FIRST = next(iter(LEFT))  # partly consumed, still referenced at exit
done = client.chat.completions.create(model="gpt-done",
                                      messages=[{{"role": "user", "content": "hi"}}])
print("END", flush=True)
"""


def test_a_stream_still_referenced_at_exit_is_ended_and_exported(
        tmp_path: Path, rx: OtlpReceiver, llm: ScriptedLLMServer) -> None:
    script = tmp_path / "left.py"
    script.write_text(textwrap.dedent(STREAM_PROGRAM.format(base=llm.base_url)))
    proc = subprocess.run(otelmw_run(script), env=child_env(tmp_path, rx), cwd=tmp_path,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    assert chat_spans(rx, 2) == ["chat gpt-done", "chat gpt-left"]
    [left] = rx.spans("chat gpt-left")
    assert left.attributes["otelmw.stream.ended_by"] == "abandoned"
    assert "Calling end() on an ended span" not in proc.stderr


FORKED_STREAM_PROGRAM = """
import multiprocessing as mp
import openai
from otelmw.instrumentation.openai import OpenAIInstrumentor
from otelmw.telemetry.setup.configuration import configure

configure("lifecycle")
OpenAIInstrumentor().instrument()
client = openai.OpenAI(base_url={base!r}, api_key="x", max_retries=0)
if __name__ == "__main__":
    OPEN = client.chat.completions.create(model="gpt-open", stream=True,
                                          messages=[{{"role": "user", "content": "hi"}}])
    next(iter(OPEN))
    child = mp.get_context("fork").Process(target=print, args=("child",))
    child.start()
    child.join()
    for _ in OPEN:  # the parent finishes its stream after the child left
        pass
    print("END", flush=True)
"""


def test_a_fork_child_leaving_does_not_end_its_parents_streams(
        tmp_path: Path, rx: OtlpReceiver, llm: ScriptedLLMServer) -> None:
    script = tmp_path / "forked.py"
    script.write_text(textwrap.dedent(FORKED_STREAM_PROGRAM.format(base=llm.base_url)))
    proc = subprocess.run([sys.executable, str(script)], env=child_env(tmp_path, rx),
                          cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    assert chat_spans(rx, 1) == ["chat gpt-open"]
    time.sleep(1.0)  # a duplicate from the child would have arrived by now
    [span] = rx.spans("chat gpt-open")  # once: not also ended as abandoned in the child
    assert span.attributes["otelmw.stream.ended_by"] == "exhausted"


def test_a_fork_child_reports_only_its_own_losses(tmp_path: Path, rx: OtlpReceiver) -> None:
    code = textwrap.dedent("""
        import multiprocessing as mp
        from otelmw.telemetry.export import guard
        from otelmw.telemetry.setup.configuration import configure
        configure("lifecycle")
        guard.record_drop("span", "queue_full", 5)  # the parent lost 5 before the fork
        if __name__ == "__main__":
            child = mp.get_context("fork").Process(target=print, args=("child",))
            child.start()
            child.join()
    """)
    script = tmp_path / "counts.py"
    script.write_text(code)
    proc = subprocess.run([sys.executable, str(script)], env=child_env(tmp_path, rx),
                          cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    totals = [x for x in proc.stderr.splitlines() if "not delivered in total" in x]
    assert totals == ["otelmw: telemetry not delivered in total: span queue_full: 5 "
                      "(metric otelmw.telemetry.dropped)"]  # the parent's line only


def test_sigterm_with_the_collector_down_spools_within_the_budget(
        tmp_path: Path, rx: OtlpReceiver, llm: ScriptedLLMServer) -> None:
    env = child_env(tmp_path, rx, OTELMW_SHUTDOWN_TIMEOUT="2")
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{free_port()}"  # nobody there
    proc = start(otelmw_run(chat_program(tmp_path, llm)), env, tmp_path)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code, _, err = finish(proc)
    took = time.monotonic() - t0
    assert code == -signal.SIGTERM, err
    assert took < 2 + 1.5, took  # the shutdown budget, not the exporter's 10 s timeout
    assert "3 span(s) and 0 log record(s) could not be delivered and are spooled" in err, err

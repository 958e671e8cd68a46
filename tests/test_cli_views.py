"""What the ``otelmw`` command shows, as a user sees it: help and version, the
waterfall on a real pseudo-terminal (colour, width), ``traces list/tail``,
``tail --follow`` against a program still writing, hostile names, the demo's
first screen. Every case runs the real command in a subprocess."""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from _support.cli import (
    SGR,
    SPAN_ROW,
    TRACE_LINE,
    in_pty,
    ok,
    otelmw,
    otelmw_cmd,
    pythonpath,
    waterfall_rows,
)
from _support.components import clean_env
from _support.otlp_receiver import free_port
from wcwidth import wcswidth

from otelmw.cli import build_parser
from otelmw.cli.views import (
    SpanView,
    events_from_requests,
    spans_from_requests,
)
from otelmw.telemetry.store.readers import read_requests

ESC_NAME = "get_weather\x1b]0;owned\x07\x1b[2J"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One ``otelmw demo`` run with content capture on, its store and environment."""
    root = tmp_path_factory.mktemp("views")
    store = root / "store"
    env = clean_env(root, OTELMW_DATA_DIR=str(store), PYTHONPATH=pythonpath(),
                    OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="SPAN_ONLY")
    env.pop("NO_COLOR", None)
    proc = ok(otelmw("demo", env=env, cwd=root))
    spans = list(spans_from_requests(read_requests("traces", store)))
    return {"root": root, "store": store, "env": env, "proc": proc, "spans": spans}


def _trace_ids(spans: list[SpanView]) -> list[str]:
    """Oldest first."""
    firsts: dict[str, int] = {}
    for s in spans:
        firsts[s.trace_id] = min(firsts.get(s.trace_id, s.start_ns), s.start_ns)
    return sorted(firsts, key=firsts.__getitem__)


# --- 18.7: version, help, argument order ----------------------------------------


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
              ) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    out = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.extend(_commands(sub, (*path, name)))
    return out


def test_version_and_help_for_every_command_and_argument(tmp_path: Path) -> None:
    env = clean_env(tmp_path, PYTHONPATH=pythonpath())
    from otelmw import __version__

    proc = ok(otelmw("--version", env=env, cwd=tmp_path))
    assert proc.stdout.strip() == f"otelmw {__version__}"
    commands = _commands(build_parser())
    assert {c for c, _ in commands} >= {(), ("demo",), ("run",), ("traces",), ("replay",),
                                         ("plugins",), ("traces", "list"), ("traces", "show"),
                                         ("traces", "tail"), ("plugins", "enable")}
    for path, parser in commands:
        proc = ok(otelmw(*path, "--help", env=env, cwd=tmp_path))
        text = proc.stdout
        assert "``" not in text and ":class:" not in text, path  # no reST markup
        assert "examples:" in text, path
        example = text.split("examples:", 1)[1]
        assert f"otelmw {' '.join(path)}".rstrip() in example, path
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    assert choice.help, (path, choice.dest)
                continue
            assert action.help and action.help != argparse.SUPPRESS, (path, action.dest)
            for flag in action.option_strings:
                assert flag in text, (path, flag)
            if action.option_strings and "--help" not in action.option_strings:
                # an example for every option: its long form is used in one
                assert action.option_strings[-1] in example, (path, action.option_strings)


def test_options_are_accepted_after_positionals(demo: dict[str, Any], tmp_path: Path) -> None:
    env = clean_env(tmp_path, PYTHONPATH=pythonpath())
    tid = _trace_ids(demo["spans"])[0]
    store = str(demo["store"])
    for args in (["traces", "show", "--data-dir", store, tid[:8]],
                 ["traces", "show", tid[:8], "--data-dir", store],
                 ["traces", "--data-dir", store, "show", tid[:8], "--color", "never"],
                 ["traces", "tail", "--data-dir", store, "-n", "1"]):
        proc = ok(otelmw(*args, env=env, cwd=tmp_path))
        assert proc.stdout.splitlines()[0] == f"trace {tid}" or "tail" in args, args
        assert len(waterfall_rows(proc.stdout)) == 22, args


def test_run_passes_everything_after_the_double_dash_untouched(tmp_path: Path) -> None:
    env = clean_env(tmp_path, PYTHONPATH=pythonpath(), OTELMW_DATA_DIR=str(tmp_path / "s"))
    argv = ["--version", "-h", "--", "--data-dir", "x y", "traces"]
    code = "import json, sys; print(json.dumps(sys.argv[1:]))"
    proc = ok(otelmw("run", "--", sys.executable, "-c", code, *argv, env=env, cwd=tmp_path))
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == argv


# --- 18.8: traces list / tail ------------------------------------------------------


def test_traces_tail_shows_the_last_n_traces_whole(demo: dict[str, Any]) -> None:
    oldest, newest = _trace_ids(demo["spans"])
    proc = ok(otelmw("traces", "tail", env=demo["env"], cwd=demo["root"]))
    shown = [m.group(1) for m in map(TRACE_LINE.match, proc.stdout.splitlines()) if m]
    assert shown == [oldest, newest]  # oldest first, like tail
    assert len(waterfall_rows(proc.stdout)) == 44
    proc = ok(otelmw("traces", "tail", "-n", "1", env=demo["env"], cwd=demo["root"]))
    shown = [m.group(1) for m in map(TRACE_LINE.match, proc.stdout.splitlines()) if m]
    assert shown == [newest]
    assert len(waterfall_rows(proc.stdout)) == 22
    proc = otelmw("traces", "tail", "-n", "0", env=demo["env"], cwd=demo["root"])
    assert proc.returncode == 2 and "must be at least 1" in proc.stderr


def test_tail_follow_ends_cleanly_on_ctrl_c(demo: dict[str, Any]) -> None:
    proc = subprocess.Popen([*otelmw_cmd(), "traces", "tail", "--follow"], env=demo["env"],
                            cwd=demo["root"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # the store's traces are shown first
        assert TRACE_LINE.match(first.rstrip("\n")), first
        time.sleep(1.0)  # now waiting for more
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err


# --- 17.21: follow shows each trace whole ---------------------------------------

SLOW_TURNS = textwrap.dedent("""
    import sys
    import time

    from opentelemetry import trace

    import mymod

    tracer = trace.get_tracer("app")
    for turn in range(2):
        with tracer.start_as_current_span(f"turn-{turn}"):
            for step in range(3):
                # each child ends long before its turn does: the batch processor
                # (100 ms delay) exports it while the turn is still running
                mymod.dispatch("add", {"a": turn, "b": step})
                time.sleep(0.7)
    print("DONE", flush=True)
""")

MYMOD = textwrap.dedent("""
    def dispatch(tool_name, args, tool_call_id=None):
        return {"sum": args["a"] + args["b"], "tool": tool_name}
""")


def test_tail_follow_shows_each_trace_whole(tmp_path: Path) -> None:
    (tmp_path / "mymod.py").write_text(MYMOD)
    (tmp_path / "slow.py").write_text(SLOW_TURNS)
    store = tmp_path / "store"
    store.mkdir()
    env = clean_env(tmp_path, PYTHONPATH=pythonpath(tmp_path), OTELMW_DATA_DIR=str(store),
                    OTELMW_WRAP="mymod:dispatch=tool", OTEL_BSP_SCHEDULE_DELAY="100")
    tail = subprocess.Popen([*otelmw_cmd(), "traces", "tail", "--follow"], env=env,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    lines: list[str] = []
    assert tail.stdout is not None
    reader = threading.Thread(target=lambda: lines.extend(tail.stdout or ()), daemon=True)
    reader.start()
    try:
        ok(otelmw("run", "--", sys.executable, "slow.py", env=env, cwd=tmp_path))
        spans = list(spans_from_requests(read_requests("traces", store)))
        traces = _trace_ids(spans)
        assert len(traces) == 2 and len(spans) == 8
        # fragments were on disk while the turns ran: one export request per batch
        assert sum(1 for _ in read_requests("traces", store)) > 2
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and sum(
                1 for x in list(lines) if x.startswith(f"trace {traces[-1]}")) == 0:
            time.sleep(0.2)
        time.sleep(1.0)  # two more polls: nothing else is shown
        tail.send_signal(signal.SIGINT)
        tail.wait(timeout=20)
        reader.join(timeout=10)
        err = tail.stderr.read() if tail.stderr else ""
    finally:
        if tail.poll() is None:
            tail.kill()
    out = "".join(lines)
    shown: dict[str, str] = {}
    for block in re.split(r"\n(?=trace [0-9a-f]{32})", "\n" + out):
        m = TRACE_LINE.match(block.strip().split("\n", 1)[0])
        if m:
            shown.setdefault(m.group(1), block)
    assert list(shown) == traces
    for i, tid in enumerate(traces):  # the first time each trace is shown, it is whole
        assert f"turn-{i}" in shown[tid] and shown[tid].count("execute_tool add") == 3, out
        assert waterfall_rows(shown[tid]) == [(0, f"turn-{i}"), *[(1, "execute_tool add")] * 3]
    assert tail.returncode == 130, err


# --- 18.9: the waterfall on a terminal -------------------------------------------


def _cells(line: str) -> int:
    return wcswidth(SGR.sub("", line))


@pytest.mark.parametrize("columns", [160, 100, 72])
def test_show_on_a_terminal_fits_its_width_with_colours(demo: dict[str, Any],
                                                        columns: int) -> None:
    spans = demo["spans"]
    tid = _trace_ids(spans)[0]
    mine = [s for s in spans if s.trace_id == tid]
    status, out = in_pty("traces", "show", tid, env=demo["env"], cwd=demo["root"],
                         columns=columns)
    assert status == 0, out
    lines = out.rstrip("\n").split("\n")
    assert max(_cells(x) for x in lines) <= columns
    assert max(_cells(x) for x in lines) > columns - 12  # it uses the width it has
    # colours: error spans red, ids dim; nothing but SGR sequences
    assert not re.sub(SGR, "", out).count("\x1b")
    plain = SGR.sub("", out)
    errors = sorted(s.name for s in mine if s.status == "ERROR")
    red_rows = [SGR.sub("", x) for x in lines if "\x1b[31m" in x and SPAN_ROW.match(
        SGR.sub("", x))]
    red = sorted(SPAN_ROW.match(x).group("name") for x in red_rows)  # type: ignore[union-attr]
    # a narrow terminal elides long names (…), never their error mark
    assert len(red) == len(errors)
    for n in red:
        assert n in errors or (n.endswith("…") and any(
            e.startswith(n.removesuffix("…")) for e in errors)), n
    assert f"\x1b[2m{tid}" in out
    call_id = next(s.attributes["gen_ai.tool.call.id"] for s in mine
                   if "gen_ai.tool.call.id" in s.attributes)
    assert f"\x1b[2mcall_id={call_id}" in out
    # wrapped, never cut mid-word: every word of a long attribute value appears whole
    message = next(s.attributes["otelmw.result.error_message"] for s in mine
                   if s.name == "execute_tool calculate")
    words = plain.split()
    for word in message.split()[1:]:
        assert word in words, (word, columns)
    assert len(waterfall_rows(plain)) == len(mine)
    assert sum(x.count("[ERROR]") for x in plain.splitlines() if SPAN_ROW.match(x)) == len(red)


def test_show_without_a_terminal_or_with_no_color_has_no_escapes(demo: dict[str, Any]
                                                                   ) -> None:
    tid = _trace_ids(demo["spans"])[0]
    piped = ok(otelmw("traces", "show", tid, env=demo["env"], cwd=demo["root"])).stdout
    assert "\x1b" not in piped
    status, out = in_pty("traces", "show", tid, env={**demo["env"], "NO_COLOR": "1"},
                         cwd=demo["root"], columns=120)
    assert status == 0 and "\x1b" not in out
    assert waterfall_rows(out) == waterfall_rows(piped)


def test_show_puts_each_hook_event_under_its_span_and_shows_content(demo: dict[str, Any]
                                                                    ) -> None:
    store: Path = demo["store"]
    spans = demo["spans"]
    tid = _trace_ids(spans)[0]
    events: dict[str, list[str]] = {}
    for ev in events_from_requests(read_requests("logs", store)):
        if ev.trace_id == tid:
            events.setdefault(ev.span_id, []).append(ev.name.removeprefix("otelmw.hook."))
    assert events
    out = ok(otelmw("traces", "show", tid, env={**demo["env"], "COLUMNS": "160"},
                    cwd=demo["root"])).stdout
    # walk the rows in order: the events printed between a span's row and the
    # next span's row are that span's events, in time order
    order = [s for s in spans if s.trace_id == tid]
    under: list[tuple[str, list[str]]] = []
    for line in out.splitlines():
        m = SPAN_ROW.match(line)
        if m:
            under.append((m.group("name"), []))
        if under:
            under[-1][1].extend(re.findall(r"⚑([a-z_]+)@", line))
    names = {s.span_id: s.name for s in order}
    expected = sorted((names[sid], evs) for sid, evs in events.items())
    assert sorted((n, e) for n, e in under if e) == expected
    # content captured under SPAN_ONLY is shown under its span
    args = next(s.attributes["gen_ai.tool.call.arguments"] for s in order
                if s.name == "execute_tool get_weather")
    assert "Lisbon" in args
    assert f"tool.call.arguments: {args}" in out
    assert "input.messages: " in out


def test_show_shortens_a_tool_result_digest_to_its_algorithm_and_nine_hex_digits(
        demo: dict[str, Any]) -> None:
    tool = next(s for s in demo["spans"] if s.name == "execute_tool get_weather")
    full = str(tool.attributes["otelmw.result.raw.digest"])
    algorithm, _, hexdigest = full.partition(":")
    assert algorithm == "sha256-keyed" and len(hexdigest) == 64
    out = ok(otelmw("traces", "show", tool.trace_id, env={**demo["env"], "COLUMNS": "160"},
                    cwd=demo["root"])).stdout
    assert f"raw={algorithm}:{hexdigest[:9]}…" in out
    assert hexdigest[:10] not in out


# --- 17.22: control characters from the program never reach the terminal raw ----

HOSTILE = textwrap.dedent(f"""
    import mymod
    mymod.dispatch({ESC_NAME!r}, {{"a": 1, "b": 2}})
""")


def test_control_characters_are_escaped_in_everything_printed(tmp_path: Path) -> None:
    (tmp_path / "mymod.py").write_text(MYMOD)
    (tmp_path / "hostile.py").write_text(HOSTILE)
    store = tmp_path / "store"
    env = clean_env(tmp_path, PYTHONPATH=pythonpath(tmp_path), OTELMW_DATA_DIR=str(store),
                    OTELMW_WRAP="mymod:dispatch=tool", OTEL_SERVICE_NAME="svc\x1b[31mred")
    ok(otelmw("run", "--", sys.executable, "hostile.py", env=env, cwd=tmp_path))
    [span] = spans_from_requests(read_requests("traces", store))
    assert span.name == f"execute_tool {ESC_NAME}"  # stored as the program gave it
    shown = "execute_tool get_weather\\x1b]0;owned\\x07\\x1b[2J"
    for args in (["traces", "show", span.trace_id], ["traces", "list"], ["traces", "tail"]):
        proc = ok(otelmw(*args, env=env, cwd=tmp_path))
        assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout, args
        assert shown in proc.stdout or "execute_tool get_weather\\x1b]0;" in proc.stdout, args
        status, out = in_pty(*args, env=env, cwd=tmp_path, columns=200)
        assert status == 0
        assert "\x07" not in out, args
        assert not SGR.sub("", out).count("\x1b"), args  # only the CLI's own colours
        assert "svc\\x1b[31mred" in SGR.sub("", out), args


# --- 18.9 / 18.10: the demo ---------------------------------------------------------


def test_demo_first_trace_fits_the_first_screen_of_160x50(tmp_path: Path) -> None:
    env = clean_env(tmp_path, PYTHONPATH=pythonpath(), OTELMW_DATA_DIR=str(tmp_path / "s"))
    env.pop("NO_COLOR", None)
    status, out = in_pty("demo", env=env, cwd=tmp_path, columns=160, lines=50)
    assert status == 0, out
    plain = [SGR.sub("", x) for x in out.split("\n")]
    starts = [i for i, x in enumerate(plain) if TRACE_LINE.match(x)]
    assert len(starts) == 2
    first = plain[starts[0]:starts[1]]
    assert max(wcswidth(x) for x in plain[starts[0]:]) <= 160  # what the demo draws
    last_row = starts[0] + max(i for i, x in enumerate(first) if SPAN_ROW.match(x))
    # screen rows up to the first trace's last span (a longer log line wraps)
    screen = sum(max(1, -(-wcswidth(x) // 160)) for x in plain[:last_row + 1])
    assert screen <= 50, "\n".join(plain[:60])
    assert len(waterfall_rows("\n".join(first))) == 22
    # one line each says why this is a trace of its own, right above it
    assert plain[starts[0] - 1].startswith("turn 1 is one trace")
    assert plain[starts[1] - 1].startswith("turn 2 is a new turn, so a new trace")
    assert "\x1b[31m" in out  # its errors in red, as `traces show` draws them


def test_demo_summary_counts_what_it_ran(demo: dict[str, Any]) -> None:
    spans: list[SpanView] = demo["spans"]
    chats = sum(1 for s in spans if s.name.startswith("chat "))
    tools = sum(1 for s in spans if s.name.startswith("execute_tool "))
    turns = sum(1 for s in spans if s.name.startswith("invoke_agent "))
    assert (turns, chats, tools) == (2, 8, 6)
    assert (f"ran {turns} turns: {chats} provider calls, {tools} tool calls, "
            "1 middleware failure absorbed (fail-open)") in demo["proc"].stdout


# --- 18.10: replay names the endpoint it tried ------------------------------------


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_replay_errors_name_the_endpoint(demo: dict[str, Any], protocol: str) -> None:
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    proc = otelmw("replay", "--endpoint", endpoint, "--protocol", protocol, "--data-dir",
                  str(demo["store"]), env=clean_env(demo["root"], PYTHONPATH=pythonpath()),
                  cwd=demo["root"])
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    target = f"127.0.0.1:{port}" if protocol == "grpc" else f"{endpoint}/v1/traces"
    assert f"otelmw: replay failed: traces to {target} ({protocol}): " in proc.stderr
    # the default endpoint too
    env = clean_env(demo["root"], PYTHONPATH=pythonpath(),
                    OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}/")
    proc = otelmw("replay", "--data-dir", str(demo["store"]), env=env, cwd=demo["root"])
    assert proc.returncode == 1
    assert f"traces to http://127.0.0.1:{port}/v1/traces (http/protobuf)" in proc.stderr


def test_env_columns_is_respected_off_a_terminal(demo: dict[str, Any]) -> None:
    tid = _trace_ids(demo["spans"])[0]
    for columns in (80, 200):
        out = ok(otelmw("traces", "show", tid, env={**demo["env"], "COLUMNS": str(columns)},
                        cwd=demo["root"])).stdout
        assert max(wcswidth(x) for x in out.splitlines()) <= columns


@pytest.mark.parametrize(("raw", "shown"), [
    ("get_weather\x1b]0;owned\x07\x1b[2J", "get_weather\\x1b]0;owned\\x07\\x1b[2J"),
    ("a\nb\rc\td", "a\\nb\\rc\\td"),
    ("nul\x00 del\x7f", "nul\\x00 del\\x7f"),
    ("csi\x9b2J", "csi\\x9b2J"),  # C1 controls act like ESC [ on many terminals
    ("abc\u202edcba", "abc\\u202edcba"),  # bidi override ("Trojan Source")
    ("zero\u200bwidth", "zero\\u200bwidth"),
    ("Zürich 東京 👩\u200d💻", "Zürich 東京 👩\u200d💻"),  # text and emoji untouched
])
def test_printable_escapes_every_control_character(raw: str, shown: str) -> None:
    from otelmw.cli.terminal import printable

    assert printable(raw) == shown


def test_a_reader_that_leaves_early_gets_no_traceback(demo: dict[str, Any]) -> None:
    # `otelmw traces tail | head -1`: the pipe's reader is gone before the first write
    proc = subprocess.Popen([*otelmw_cmd(), "traces", "tail"], env=demo["env"],
                            cwd=demo["root"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141
    assert "Traceback" not in err and "BrokenPipeError" not in err, err

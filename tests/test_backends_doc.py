"""docs/backends.md says what is true: its otelmw commands parse with the real
command line, its variables are settings otelmw validates (with valid values),
and its traces-only recipes (Phoenix, Tempo) send traces and only traces —
checked against the real OTLP receiver, which takes any signal, so a recipe
that leaked metrics or logs would show."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _support.cli import otelmw_cmd
from _support.components import clean_env
from _support.otlp_receiver import OtlpReceiver

from otelmw.cli import build_parser
from otelmw.config import settings as cfg
from otelmw.telemetry.store.readers import read_requests

DOC = Path(__file__).resolve().parent.parent / "docs" / "backends.md"
TIMEOUT = 90
# Variables the doc names that otelmw does not read itself.
NOT_OTELMW = {"GRAFANA_ADMIN_PASSWORD",  # docker-compose
              "OTEL_EXPORTER_OTLP_HEADERS"}  # read by the OpenTelemetry exporters

APP = textwrap.dedent("""
    from otelmw.core.pipeline import get_pipeline

    out = get_pipeline().run_llm(
        {"model": "m-1", "messages": []},
        lambda req: {"id": "r1", "model": "m-1", "choices": [],
                     "usage": {"prompt_tokens": 1, "completion_tokens": 1}},
        provider="openai")
    print("OUT", out["id"])
""")


def shell_commands() -> list[list[str]]:
    """Every command of the doc's ```bash blocks, continuation lines joined."""
    blocks = re.findall(r"```bash\n(.*?)```", DOC.read_text(), re.S)
    commands = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip()
            if line and not line.startswith("#"):
                commands.append(shlex.split(line))
    return commands


def split_env(words: list[str]) -> tuple[dict[str, str], list[str]]:
    env: dict[str, str] = {}
    rest = list(words)
    if rest and rest[0] == "export":
        rest = rest[1:]
    while rest and re.match(r"^[A-Z_][A-Z0-9_]*=", rest[0]):
        name, _, value = rest.pop(0).partition("=")
        env[name] = value
    return env, rest


def test_the_doc_has_commands_for_every_backend() -> None:
    text = DOC.read_text()
    for section in ("## Jaeger and Grafana", "## Arize Phoenix", "## Grafana Tempo",
                    "## Any OTLP endpoint"):
        assert section in text, section
    commands = shell_commands()
    assert sum(split_env(c)[1][:1] == ["otelmw"] for c in commands) >= 8
    assert any(split_env(c)[1][:2] == ["otelmw", "replay"] for c in commands)


def test_every_otelmw_command_in_the_doc_parses() -> None:
    parser = build_parser()
    seen = 0
    for words in shell_commands():
        _, argv = split_env(words)
        if argv and argv[0] == "otelmw":
            parser.parse_args(argv[1:])  # argparse exits (fails the test) on a bad flag
            seen += 1
    assert seen >= 8


def test_every_variable_in_the_doc_is_a_setting_with_a_valid_value() -> None:
    named = set(re.findall(r"\b((?:OTEL|OTELMW)_[A-Z0-9_]+)\b", DOC.read_text()))
    assert named - set(cfg.REGISTRY) - NOT_OTELMW == set()
    for words in shell_commands():
        env, _ = split_env(words)
        otelmw_env = {k: v for k, v in env.items() if k in cfg.REGISTRY}
        cfg.load(otelmw_env)  # ValueError (fails the test) on a value otelmw refuses


def test_phoenix_recipe_sends_traces_only_and_keeps_the_rest_in_the_store(
        tmp_path: Path) -> None:
    """The doc's `otelmw run` line for Phoenix, against a receiver taking everything."""
    (tmp_path / "my_agent.py").write_text(APP)
    with OtlpReceiver() as rx:
        env = clean_env(tmp_path,
                        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{rx.http_endpoint}/v1/traces",
                        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
                        OTEL_METRICS_EXPORTER="file", OTEL_LOGS_EXPORTER="file",
                        OTELMW_HOOK_EVENTS="all")
        proc = subprocess.run([*otelmw_cmd(), "run", "--", sys.executable, "my_agent.py"],
                              env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=TIMEOUT)
        assert proc.returncode == 0, proc.stderr
        spans = rx.wait_for_spans(1, timeout=15)
        assert rx.request_count("metrics") == 0 and rx.request_count("logs") == 0
    assert [s.name for s in spans] == ["chat m-1"]
    assert spans[0].resource["service.name"] == "my_agent"
    store = tmp_path / ".otelmw"
    assert list(read_requests("metrics", store)) and list(read_requests("logs", store))
    assert not list(store.glob("traces-*.jsonl"))


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_replay_signal_traces_sends_only_the_traces(tmp_path: Path, protocol: str) -> None:
    (tmp_path / "my_agent.py").write_text(APP)
    env = clean_env(tmp_path, OTELMW_HOOK_EVENTS="all")
    ran = subprocess.run([*otelmw_cmd(), "run", "--", sys.executable, "my_agent.py"],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    assert ran.returncode == 0, ran.stderr
    for signal in ("traces", "metrics", "logs"):
        assert list(read_requests(signal, tmp_path / ".otelmw")), signal
    with OtlpReceiver() as rx:
        endpoint = rx.grpc_endpoint if protocol == "grpc" else rx.http_endpoint
        proc = subprocess.run([*otelmw_cmd(), "replay", "--endpoint", endpoint, "--protocol",
                               protocol, "--signal", "traces"], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=TIMEOUT)
        assert proc.returncode == 0, proc.stderr
        spans = rx.wait_for_spans(1, timeout=15)
        assert rx.request_count("metrics") == 0 and rx.request_count("logs") == 0
    assert [s.name for s in spans] == ["chat m-1"]
    assert proc.stdout.strip() == "traces: 1 request(s)"

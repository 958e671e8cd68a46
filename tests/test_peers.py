"""Side by side with the peers: when another instrumentation of a library otelmw
instruments starts beside it under ``opentelemetry-instrument``, otelmw says so once at
start (the package, what every call gets twice, the ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS``
value that turns it off), and what it says is what happens.

Each peer is really installed beside otelmw: its pinned wheels (``PEERS`` below; ``pip
install --no-deps --target``, cached under ``.cache/peers/``) in a directory put first on
the program's ``PYTHONPATH``, everything else (OpenTelemetry, the SDK, otelmw) from the
environment the suite runs in. Never into the suite's environment: there every
``opentelemetry-instrument`` test would get the peer's spans too. A program that knows
nothing of otelmw makes one openai or anthropic call against the scripted server; the
stock OTLP exporter sends to the suite's receiver. What each peer adds (its span's name,
whether it records the prompt by default, whether it emits the GenAI client metrics too)
is written here from running it, not taken from otelmw's table.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest
from _support.cli import otelmw_cmd, pythonpath
from _support.components import clean_env, unavailable
from _support.otlp_receiver import OtlpReceiver, ReceivedMetric, ReceivedSpan
from _support.scripted_llm import ScriptedLLMServer

# The peers' pinned releases declare the SDK releases they instrument. In the SDK floor
# environments ("sdk-*": openai 1.x, anthropic 0.x) the OpenInference peers' ranges
# (openai >= 2.8, anthropic >= 1.8) leave the SDK out: they do not start, and otelmw must
# not name them; that is what is asserted there for them. The official and OpenLLMetry
# peers start there too and add the same as beside the newest SDKs.
pytestmark = [pytest.mark.timeout(600)]
SDK_FLOOR_ENV = os.environ.get("OTELMW_TEST_ENV", "").startswith("sdk-")
try:
    MCP_MAJOR = int(metadata.version("mcp").split(".")[0])
except metadata.PackageNotFoundError:  # the mcp tests are deselected there
    MCP_MAJOR = 0

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "peers"
TIMEOUT = 120
PROMPT = "CANARY-PEER-PROMPT-5e1 what is 2+2?"
DURATION = "gen_ai.client.operation.duration"

PROGRAMS = {
    "openai": """\
import sys
from openai import OpenAI
client = OpenAI(base_url=sys.argv[1] + "/v1", api_key="sk-scripted", max_retries=0)
reply = client.chat.completions.create(
    model="scripted-model", messages=[{"role": "user", "content": sys.argv[2]}])
print("ANSWER", reply.choices[0].message.content)
""",
    "anthropic": """\
import sys
from anthropic import Anthropic
client = Anthropic(base_url=sys.argv[1], api_key="sk-scripted", max_retries=0)
reply = client.messages.create(model="scripted-model", max_tokens=64,
                               messages=[{"role": "user", "content": sys.argv[2]}])
print("ANSWER", reply.content[0].text)
""",
    "litellm": """\
import os, sys
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch from GitHub
import litellm
reply = litellm.completion(model="openai/scripted-model", api_base=sys.argv[1] + "/v1",
                           api_key="sk-scripted",
                           messages=[{"role": "user", "content": sys.argv[2]}])
print("ANSWER", reply.choices[0].message.content)
""",
    "langchain": """\
import sys
from langchain.agents import create_agent
from langchain_openai import ChatOpenAI
model = ChatOpenAI(model="scripted-model", base_url=sys.argv[1] + "/v1", api_key="sk-scripted",
                   max_retries=0)
agent = create_agent(model, tools=[], name="peer-agent")
reply = agent.invoke({"messages": [{"role": "user", "content": sys.argv[2]}]})
print("ANSWER", reply["messages"][-1].content)
""",
    "openai_agents": """\
import sys
from openai import AsyncOpenAI
from agents import Agent, OpenAIChatCompletionsModel, Runner
client = AsyncOpenAI(base_url=sys.argv[1] + "/v1", api_key="sk-scripted", max_retries=0)
agent = Agent(name="peer-agent", instructions="be brief",
              model=OpenAIChatCompletionsModel(model="scripted-model", openai_client=client))
reply = Runner.run_sync(agent, sys.argv[2])
print("ANSWER", reply.final_output)
""",
    "mcp": """\
import asyncio, sys
try:  # mcp 2.x: the in-process Client
    from mcp import Client
    from mcp.server.mcpserver import MCPServer as Server
except ImportError:  # mcp 1.x: a ClientSession over the SDK's in-memory streams
    from mcp.server.fastmcp import FastMCP as Server
    from mcp.shared.memory import create_connected_server_and_client_session as Client
server = Server("peer")

@server.tool()
def add(a: int, b: int) -> int:
    \"\"\"Add two numbers.\"\"\"
    return a + b

async def main() -> None:
    async with Client(server) as client:
        result = await client.call_tool("add", {"a": 2, "b": 2})
    print("ANSWER", result.content[0].text, sys.argv[2][:0])

asyncio.run(main())
""",
}


@dataclass(frozen=True)
class PeerCase:
    """One peer as measured: what it adds to one call."""

    distribution: str
    version: str
    wheels: tuple[str, ...]  # pins installed with --no-deps: the peer and what it needs
    library: str  # a key of PROGRAMS
    project: str  # as the notice names it
    entry_point: str  # its name in OTEL_PYTHON_DISABLED_INSTRUMENTATIONS
    span: str  # the name of its span for a chat call
    records_prompt: bool  # by default
    metrics: bool  # emits gen_ai.client.operation.duration too
    ours: str = "chat scripted-model"  # otelmw's span of the same operation
    nested: bool = True  # its span is a child of otelmw's


_UTIL = "opentelemetry-util-genai==1.3b0"
_TRACELOOP = "opentelemetry-semantic-conventions-ai==0.5.1"
_OPENINFERENCE = ("openinference-instrumentation==0.1.72",
                  "openinference-semantic-conventions==0.1.42")
PEERS = {
    "genai-openai": PeerCase("opentelemetry-instrumentation-genai-openai", "1.3b0", (_UTIL,),
                             "openai", "official OpenTelemetry", "openai",
                             "chat scripted-model", False, True),
    "openllmetry-openai": PeerCase("opentelemetry-instrumentation-openai", "0.62.4",
                                   (_TRACELOOP,), "openai", "OpenLLMetry", "openai",
                                   "openai.chat", True, True),
    "openinference-openai": PeerCase("openinference-instrumentation-openai", "0.1.66",
                                     _OPENINFERENCE, "openai", "OpenInference", "openai",
                                     "ChatCompletion", True, False),
    "genai-anthropic": PeerCase("opentelemetry-instrumentation-genai-anthropic", "1.3b0",
                                (_UTIL,), "anthropic", "official OpenTelemetry", "anthropic",
                                "chat scripted-model", False, True),
    "openllmetry-anthropic": PeerCase("opentelemetry-instrumentation-anthropic", "0.62.4",
                                      (_TRACELOOP,), "anthropic", "OpenLLMetry", "anthropic",
                                      "anthropic.chat", True, True),
    "openinference-anthropic": PeerCase("openinference-instrumentation-anthropic", "3.1.0",
                                        _OPENINFERENCE, "anthropic", "OpenInference",
                                        "anthropic", "messages.create", True, False),
}




@dataclass(frozen=True)
class HostPeerCase:
    """A peer of a host otelmw instruments (a framework, not an SDK), as measured: the
    spans it adds to one run of the program of its library."""

    case: PeerCase  # span: the name the notice quotes
    spans: tuple[str, ...]  # every span of its own in the run
    nested: bool  # every span of its own is in otelmw's trace


_LITELLM, _AGENT = "chat openai/scripted-model", "invoke_agent peer-agent"
HOST_PEERS = {
    "openinference-litellm": HostPeerCase(PeerCase(
        "openinference-instrumentation-litellm", "0.1.51", _OPENINFERENCE, "litellm",
        "OpenInference", "litellm", "completion", True, False, ours=_LITELLM),
        ("completion",), True),
    "openllmetry-litellm": HostPeerCase(PeerCase(
        "opentelemetry-instrumentation-litellm", "0.62.4", (_TRACELOOP,), "litellm",
        "OpenLLMetry", "litellm", "litellm.chat", True, True, ours=_LITELLM),
        ("litellm.chat",), True),
    "genai-langchain": HostPeerCase(PeerCase(
        "opentelemetry-instrumentation-genai-langchain", "1.3b0", (_UTIL,), "langchain",
        "official OpenTelemetry", "langchain", "chat scripted-model", False, True,
        ours=_AGENT), ("invoke_agent peer-agent", "chat scripted-model"), True),
    "openinference-langchain": HostPeerCase(PeerCase(
        "openinference-instrumentation-langchain", "0.1.80", _OPENINFERENCE, "langchain",
        "OpenInference", "langchain", "ChatOpenAI", True, False, ours=_AGENT),
        ("peer-agent", "model", "ChatOpenAI"), True),
    "openllmetry-langchain": HostPeerCase(PeerCase(
        "opentelemetry-instrumentation-langchain", "0.62.4", (_TRACELOOP,), "langchain",
        "OpenLLMetry", "langchain", "ChatOpenAI.chat", True, True, ours=_AGENT),
        ("create_agent peer-agent", "invoke_agent peer-agent", "peer-agent.workflow",
         "execute_task model", "ChatOpenAI.chat",
         # it patches AgentMiddleware's hooks: otelmw's middleware gets its four hook
         # nodes, each traced by node name and by hook (the middleware's class)
         *(f"execute_task {who}.{hook}" for who in ("otelmw", "OtelmwModelMiddleware")
           for hook in ("before_agent", "before_model", "after_model", "after_agent"))),
        False),
    "genai-openai-agents": HostPeerCase(PeerCase(
        "opentelemetry-instrumentation-genai-openai-agents", "1.3b0", (_UTIL,),
        "openai_agents", "official OpenTelemetry", "openai_agents", "invoke_agent peer-agent",
        False, False, ours=_AGENT), ("invoke_workflow Agent workflow",
                                         "invoke_agent peer-agent"), True),
    "openinference-openai-agents": HostPeerCase(PeerCase(
        "openinference-instrumentation-openai-agents", "2.6.0", _OPENINFERENCE,
        "openai_agents", "OpenInference", "openai_agents", "generation", True, False,
        ours=_AGENT), ("Agent workflow", "Agent workflow", "peer-agent", "turn",
                           "generation"), True),
}
PEERS.update({key: host.case for key, host in HOST_PEERS.items()})
# OpenLLMetry's mcp 0.62.4: on mcp 2.x its import hook raises (see the test)
PEERS["openllmetry-mcp"] = PeerCase("opentelemetry-instrumentation-mcp", "0.62.4",
                                    (_TRACELOOP,), "mcp", "OpenLLMetry", "mcp", "", False,
                                    False, ours="execute_tool add")


def peer_site(*keys: str) -> Path:
    """A directory holding the peers' wheels (installed once, cached by their pins)."""
    pins = sorted({pin for key in keys for pin in (
        f"{PEERS[key].distribution}=={PEERS[key].version}", *PEERS[key].wheels)})
    site = CACHE / hashlib.sha256(" ".join(pins).encode()).hexdigest()[:12]
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / ".lock").open("w") as lock:  # matrix environments may run side by side
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (site / ".complete").exists():
            install_peers(site, pins)
    return site


def install_peers(site: Path, pins: list[str]) -> None:
    shutil.rmtree(site, ignore_errors=True)
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet",
                           "--disable-pip-version-check", "--target", str(site), *pins],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        unavailable(f"the peer instrumentations {pins} (pip: {proc.stderr.strip()[-300:]})")
    (site / ".complete").write_text(" ".join(pins) + "\n")


@dataclass
class PeerRun:
    stderr: str
    spans: list[ReceivedSpan]
    metrics: list[ReceivedMetric]

    def notices(self) -> list[str]:
        return [x for x in self.stderr.splitlines() if " is also instrumented by " in x]

    def ours(self, name: str = "chat scripted-model") -> list[ReceivedSpan]:
        return [s for s in self.spans if s.scope_name.startswith("otelmw") and s.name == name]

    def theirs(self, case: PeerCase) -> list[ReceivedSpan]:
        return [s for s in self.spans if s.name == case.span
                and not s.scope_name.startswith("otelmw")]


def run_program(library: str, site: Path | None, tmp: Path, *, launcher: str = "instrument",
                **env_extra: str) -> PeerRun:
    """One call of ``library`` under ``opentelemetry-instrument`` (or ``otelmw run``),
    with the peers in ``site`` installed beside otelmw."""
    tmp.mkdir(parents=True, exist_ok=True)
    program = tmp / f"{library}_call.py"
    program.write_text(PROGRAMS[library])
    with ScriptedLLMServer() as srv, OtlpReceiver() as rx:
        env = clean_env(tmp, OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint,
                        OTEL_SERVICE_NAME="peer-test", OTEL_BSP_SCHEDULE_DELAY="100",
                        OTEL_METRIC_EXPORT_INTERVAL="600000", **env_extra)
        env = {k: v for k, v in env.items()
               if not k.startswith(("OPENAI_", "ANTHROPIC_", "TRACELOOP_", "OPENINFERENCE_"))}
        env["PYTHONPATH"] = pythonpath(*([site] if site else []))
        if launcher == "instrument":
            cmd = [str(Path(sys.executable).with_name("opentelemetry-instrument")),
                   sys.executable, str(program), srv.root_url, PROMPT]
        else:
            cmd = [*otelmw_cmd(), "run", "--", sys.executable, str(program), srv.root_url, PROMPT]
        proc = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True,
                              timeout=TIMEOUT)
        assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        assert "ANSWER" in proc.stdout
        rx.wait_for(lambda: bool(rx.spans()))  # one batch, at exit
        if library != "mcp":  # a tool call: no GenAI client metric
            rx.wait_for_metric(DURATION)
        return PeerRun(proc.stderr, rx.spans(), rx.metrics())


def disabling_values(notice: str) -> dict[str, str]:
    """What the notice says each ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=VALUE`` turns off."""
    found = re.finditer(r"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=(\S+) turns (it off|off [^;(]+)",
                        notice)
    return {("it" if m.group(2) == "it off" else m.group(2).removeprefix("off ").strip()):
            m.group(1) for m in found}


def prompt_recorded(span: ReceivedSpan) -> bool:
    return any(PROMPT in str(v) for v in span.attributes.values())


def duration_scopes(run: PeerRun) -> list[str]:
    return sorted(m.scope_name for m in run.metrics if m.name == DURATION)


SDK_PEERS = [k for k, c in PEERS.items() if c.library in ("openai", "anthropic")]


@pytest.mark.parametrize("key", [pytest.param(k, marks=pytest.mark.host(PEERS[k].library))
                                 for k in SDK_PEERS])
def test_a_peer_beside_otelmw_is_announced_and_doubles_what_the_notice_says(
        key: str, tmp_path: Path) -> None:
    case = PEERS[key]
    if SDK_FLOOR_ENV and case.project == "OpenInference":
        run = run_program(case.library, peer_site(key), tmp_path)
        assert run.notices() == [], run.notices()  # out of its range: it does not start
        assert run.theirs(case) == [] and len(run.ours()) == 1
        return
    run = run_program(case.library, peer_site(key), tmp_path)
    (notice,) = run.notices()
    assert notice.startswith(f"otelmw: {case.library} is also instrumented by "
                             f"{case.distribution} {case.version} ({case.project}): every "
                             f"{case.library} call gets a second ")
    # what doubles, as said and as it happens
    (ours,) = run.ours()
    (theirs,) = run.theirs(case)
    assert theirs.parent_span_id == ours.span_id and theirs.trace_id == ours.trace_id
    assert f"`{case.span}`" in notice or (case.span.startswith("chat ")
                                         and "`chat {model}`" in notice)
    assert prompt_recorded(theirs) is case.records_prompt
    assert not prompt_recorded(ours)  # otelmw's content capture is off by default
    assert ("records" in notice or "recording" in notice) is case.records_prompt
    # the value it names turns the peer off, and otelmw keeps its span
    off = assert_metrics_and_turned_off_as_said(run, case, notice, key, tmp_path)
    assert off.theirs(case) == []
    assert len(off.ours()) == 1 and len(duration_scopes(off)) == 1


def assert_metrics_and_turned_off_as_said(run: PeerRun, case: PeerCase, notice: str, key: str,
                                           tmp_path: Path) -> PeerRun:
    """The duration points double exactly when the notice says so, and the value the
    notice names for the peer turns it off (no notice then); the run without it."""
    assert len(duration_scopes(run)) == (2 if case.metrics else 1), duration_scopes(run)
    assert ("gen_ai.client.operation.duration" in notice) is case.metrics
    values = disabling_values(notice)
    assert values["it"] == case.entry_point, values
    assert values["otelmw's"] == f"otelmw_{case.library}", values
    off = run_program(case.library, peer_site(key), tmp_path / "off",
                      OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=values["it"])
    assert off.notices() == []
    return off


HOST_MARKERS = {"litellm": ("litellm", "openai"), "langchain": ("langchain", "openai"),
                "openai_agents": ("openai-agents", "openai"), "mcp": ("mcp",)}


@pytest.mark.parametrize("key", [pytest.param(k, marks=pytest.mark.host(
    *HOST_MARKERS[c.case.library])) for k, c in HOST_PEERS.items()])
def test_a_peer_of_a_host_beside_otelmw_is_announced_and_adds_what_the_notice_says(
        key: str, tmp_path: Path) -> None:
    host = HOST_PEERS[key]
    case = host.case
    run = run_program(case.library, peer_site(key), tmp_path)
    (notice,) = run.notices()
    assert notice.startswith(f"otelmw: {case.library} is also instrumented by "
                             f"{case.distribution} {case.version} ({case.project}): every "
                             f"{case.library} call gets ")
    (ours,) = run.ours(case.ours)
    theirs = sorted((s for s in run.spans if not s.scope_name.startswith("otelmw")),
                    key=lambda s: s.start_ns)
    assert sorted(s.name for s in theirs) == sorted(host.spans)
    templated = case.span.replace("peer-agent", "{name}").replace("scripted-model", "{model}")
    assert f"`{templated}`" in notice, (templated, notice)
    assert all(s.trace_id == ours.trace_id for s in theirs) is host.nested
    if not host.nested:
        assert "trace of its own" in notice
    named = [s for s in theirs if s.name == case.span]
    assert named and any(prompt_recorded(s) for s in named) is case.records_prompt
    assert not prompt_recorded(ours)
    assert ("records" in notice or "recording" in notice) is case.records_prompt
    off = assert_metrics_and_turned_off_as_said(run, case, notice, key, tmp_path)
    assert len(off.ours(case.ours)) == 1
    assert [s for s in off.spans if not s.scope_name.startswith("otelmw")] == []


@pytest.mark.host("mcp")
@pytest.mark.skipif(MCP_MAJOR < 2, reason="mcp 2.x behaviour (on mcp 1.x: the test below)")
def test_openllmetry_mcp_on_mcp_2_breaks_otelmws_client_span_as_the_notice_says(
        tmp_path: Path) -> None:
    """OpenLLMetry's mcp 0.62.4 declares any mcp; on mcp 2.x its import hook raises
    (it wraps ``streamablehttp_client``, gone in 2.x), which stops the import hooks
    after it: otelmw's client-side ``execute_tool`` span is lost, and the notice says so.
    Turned off, otelmw's span is back."""
    run = run_program("mcp", peer_site("openllmetry-mcp"), tmp_path)
    (notice,) = run.notices()
    assert "opentelemetry-instrumentation-mcp 0.62.4 (OpenLLMetry)" in notice
    assert "`streamablehttp_client`" in notice and "span is lost" in notice
    assert "streamablehttp_client" in run.stderr
    assert run.ours("execute_tool add") == []
    assert [s.name for s in run.spans if s.scope_name.startswith("opentelemetry.inst")] == []
    values = disabling_values(notice)
    assert values["it"] == "mcp"
    off = run_program("mcp", peer_site("openllmetry-mcp"), tmp_path / "off",
                      OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=values["it"])
    assert off.notices() == [] and len(off.ours("execute_tool add")) == 1


@pytest.mark.host("mcp")
@pytest.mark.skipif(MCP_MAJOR >= 2, reason="mcp 1.x behaviour (on mcp 2.x: the test above)")
def test_openllmetry_mcp_on_mcp_1_adds_a_span_per_tool_the_server_runs_as_the_notice_says(
        tmp_path: Path) -> None:
    """On mcp 1.x OpenLLMetry's mcp instruments: the tool the server runs gets a span of
    its own (``add.tool``) beside otelmw's, which are all there; turned off, none."""
    run = run_program("mcp", peer_site("openllmetry-mcp"), tmp_path)
    (notice,) = run.notices()
    assert "opentelemetry-instrumentation-mcp 0.62.4 (OpenLLMetry)" in notice
    assert "on mcp 1.x a span of its own for each tool the server runs (`{tool}.tool`" in notice
    theirs = [s for s in run.spans if not s.scope_name.startswith("otelmw")]
    assert "add.tool" in [s.name for s in theirs]
    tool = next(s for s in theirs if s.name == "add.tool")
    assert {"traceloop.entity.input", "traceloop.entity.output"} <= set(tool.attributes)
    assert len(run.ours("execute_tool add")) == 2  # the client's and the server's
    values = disabling_values(notice)
    assert values["it"] == "mcp"
    off = run_program("mcp", peer_site("openllmetry-mcp"), tmp_path / "off",
                      OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=values["it"])
    assert off.notices() == [] and len(off.ours("execute_tool add")) == 2
    assert [s for s in off.spans if not s.scope_name.startswith("otelmw")] == []


@pytest.mark.host("openai")
@pytest.mark.skipif(SDK_FLOOR_ENV, reason="the OpenInference openai peer does not start there")
def test_peers_sharing_an_entry_point_name_are_named_together(tmp_path: Path) -> None:
    """The three openai peers all call their entry point ``openai``: one line names them
    all, and says the one value turns them off together (as it does)."""
    keys = ("genai-openai", "openllmetry-openai", "openinference-openai")
    site = peer_site(*keys)
    run = run_program("openai", site, tmp_path, OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="requests")
    (notice,) = run.notices()
    for key in keys:
        assert f"{PEERS[key].distribution} {PEERS[key].version} ({PEERS[key].project})" in notice
        assert len(run.theirs(PEERS[key])) == 1, key
    assert len(run.ours()) == 1
    assert "they share the entry-point name 'openai'" in notice
    values = disabling_values(notice)
    (together,) = [v for what, v in values.items() if what != "otelmw's"]
    assert together == "requests,openai"  # the user's own setting kept
    off = run_program("openai", site, tmp_path / "off",
                      OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=together)
    assert off.notices() == [] and len(off.spans) == 1 and len(off.ours()) == 1
    mine_off = run_program("openai", site, tmp_path / "mine-off",
                           OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=values["otelmw's"])
    assert mine_off.notices() == [] and mine_off.ours() == []  # nothing doubles: no notice
    assert all(len(mine_off.theirs(PEERS[k])) == 1 for k in keys)


@pytest.mark.host("openai")
def test_otelmw_run_starts_no_peer_and_says_nothing_of_them(tmp_path: Path) -> None:
    """``otelmw run`` starts only otelmw's instrumentors: an installed peer doubles
    nothing there, and no notice claims it does."""
    run = run_program("openai", peer_site("openllmetry-openai"), tmp_path, launcher="run")
    assert run.notices() == []
    assert len(run.ours()) == 1 and run.theirs(PEERS["openllmetry-openai"]) == []


@pytest.mark.host("openai")
def test_no_peer_no_notice(tmp_path: Path) -> None:
    run = run_program("openai", None, tmp_path)
    assert run.notices() == [] and len(run.spans) == 1

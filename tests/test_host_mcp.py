"""The MCP host (``otelmw_mcp``) on real MCP clients and servers, offline (no model).

Each scenario runs in a fresh process (``tests/mcp_scripts/driver.py``): a real
``mcp`` client calls a real MCP server (``tests/mcp_scripts/weather_server.py``) in
process (``mcp.Client(server)``, 2.x), as a stdio subprocess, or as a streamable-HTTP
server process on 127.0.0.1 (``--http``), a server process configuring its own
telemetry; both processes export through the stock OTLP exporter to one real
``OtlpReceiver``. The same tests run on ``mcp`` 2.x (``current``) and 1.x (``mcp1``)
where the API exists there. Marked ``host("mcp")``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pytest
from _support.distributions import PLUGINS, install_distribution
from _support.host_scenarios import run_scenario, scenario_env
from _support.otlp_receiver import OtlpReceiver, ReceivedSpan
from _support.telemetry import TelemetryHarness

from otelmw.core import Pipeline, record_protocol_operation

pytestmark = pytest.mark.host("mcp")

SCRIPTS = Path(__file__).resolve().parent / "mcp_scripts"
INTERNAL, SERVER, CLIENT, ERROR = 1, 2, 3, 2
CANARY = "CANARY-RESULT-4e1b"


def _mcp_major() -> int:
    try:
        return int(version("mcp").split(".")[0])
    except PackageNotFoundError:  # an environment without the host: its tests are deselected
        return 0


MCP2 = _mcp_major() >= 2
needs_mcp2 = pytest.mark.skipif(not MCP2, reason="mcp.Client is 2.x")
# The server side's tool span: the SDK's own SERVER span, enriched (2.x); otelmw's own (1.x)
SERVER_SPAN = "tools/call" if MCP2 else "execute_tool"


def client_and_server(spans: list[ReceivedSpan], tool: str
                      ) -> tuple[list[ReceivedSpan], list[ReceivedSpan]]:
    """The client's and the server's tool spans of ``tool`` (a server span carries the
    inbound request's ``jsonrpc.request.id``; a client span does not)."""
    mine = [s for s in spans if s.attributes.get("gen_ai.tool.name") == tool
            and s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    server = [s for s in mine if "jsonrpc.request.id" in s.attributes]
    assert all(s.name == f"{SERVER_SPAN} {tool}" for s in server), [s.name for s in server]
    return [s for s in mine if s not in server], server


def child_env(tmp_path: Path, rx: OtlpReceiver, extra: dict[str, str] | None) -> dict[str, str]:
    return scenario_env(tmp_path, rx, OTEL_METRIC_EXPORT_INTERVAL="500", **(extra or {}))


def drive(spec: dict[str, Any], rx: OtlpReceiver, tmp_path: Path,
          env: dict[str, str] | None = None) -> dict[str, Any]:
    return run_scenario(SCRIPTS / "driver.py", spec, child_env(tmp_path, rx, env), tmp_path)


def tool_spans(rx: OtlpReceiver, name: str | None = None) -> list[ReceivedSpan]:
    """Every span that is a tool call (otelmw's or the SDK's server span)."""
    return [s for s in rx.spans() if s.attributes.get("gen_ai.operation.name") == "execute_tool"
            and (name is None or s.attributes.get("gen_ai.tool.name") == name)]


def by_service(spans: list[ReceivedSpan], service: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.resource.get("service.name") == service]


def texts(out: dict[str, Any]) -> list[Any]:
    return [r.get("text", r.get("raised")) for r in out["results"]]


# -------------------------------------------------------------------- in process

def test_in_process_call_is_one_tool_call_on_each_side_in_one_trace(
        rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"transport": "memory", "calls": [["get_weather", "Oslo"]]}, rx, tmp_path)
    assert texts(out) == [f"sunny in Oslo {CANARY}"] and out["ran"] == ["get_weather:Oslo"]
    rx.wait_for(lambda: len(tool_spans(rx)) >= 2)
    client, server = client_and_server(rx.spans(), "get_weather")
    # one otelmw span on the client; on the server the SDK's own span enriched (2.x,
    # not doubled) or otelmw's (1.x)
    assert len(client) == 1 and len(server) == 1, [s.name for s in rx.spans()]
    c, s = client[0], server[0]
    assert c.name == "execute_tool get_weather"
    if MCP2:
        assert s.kind == SERVER and s.scope_name == "mcp-python-sdk"
        assert s.parent_span_id == c.span_id
        assert c.attributes["mcp.protocol.version"] and s.attributes["mcp.protocol.version"]
    assert c.trace_id == s.trace_id
    for span in (c, s):
        assert span.attributes["mcp.method.name"] == "tools/call"
        assert span.attributes["otelmw.runtime.id"] == "mcp"
        assert span.attributes["otelmw.result.status"] == "ok"
        assert span.attributes["otelmw.result.raw.digest"].startswith("sha256")
    assert s.attributes["jsonrpc.request.id"]
    # no model gave this call an id: the server's is its JSON-RPC request id, the client's none
    assert s.attributes["gen_ai.tool.call.id"] == s.attributes["jsonrpc.request.id"]
    assert "gen_ai.tool.call.id" not in c.attributes
    assert CANARY not in json.dumps([c.attributes, s.attributes])  # no content by default
    points = rx.wait_for_metric("mcp.client.operation.duration")
    assert points and rx.wait_for_metric("mcp.server.operation.duration")
    assert out["failures"] == {}


def test_in_process_is_error_a_raising_tool_a_json_rpc_error_and_a_block(
        rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"transport": "memory", "client_plugins": ["block", "observe"],
                 "calls": [["broken", "x"], ["rpc_error", "y"], ["forbidden", "z"]]},
                rx, tmp_path)
    broken, rpc, blocked = out["results"]
    assert broken["is_error"] and broken["type"] == "CallToolResult"  # as without otelmw
    if MCP2:  # a JSON-RPC error raises in the client (1.x makes it an isError result)
        assert rpc["raised"] == "MCPError: upstream unavailable"
    assert blocked == {"text": "forbidden by the client policy", "is_error": True,
                       "type": "CallToolResult"}
    assert "forbidden:z" not in out["ran"]  # the block never reached the server
    assert "client:forbidden:blocked" in out["seen"]
    rx.wait_for(lambda: len(tool_spans(rx)) >= 5)
    (c_broken,), (s_broken,) = client_and_server(rx.spans(), "broken")
    assert c_broken.attributes["error.type"] == "tool_error" and c_broken.status_code == ERROR
    assert c_broken.attributes["otelmw.result.success"] is False
    assert s_broken.status_code == ERROR  # the tool raised in the server
    if MCP2:
        (c_rpc,), (s_rpc,) = client_and_server(rx.spans(), "rpc_error")
        assert c_rpc.status_code == ERROR and "MCPError" in c_rpc.attributes["error.type"]
        assert s_rpc.attributes["error.type"] == "-32001"  # the SDK's own marking stands
    (c_block,) = tool_spans(rx, "forbidden")
    assert c_block.attributes["otelmw.result.status"] == "blocked"
    assert "mcp.method.name" not in c_block.attributes  # nothing was sent


def test_a_wrapper_answers_from_its_cache_without_the_server(
        rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"transport": "memory", "client_plugins": ["cache", "rewrite"],
                 "calls": [["get_weather", "Oslo"], ["get_weather", "Oslo"]]}, rx, tmp_path)
    # the rewrite reached the server; the second call came from the cache
    assert texts(out) == [f"sunny in Oslo+client {CANARY}"] * 2
    assert out["ran"] == ["get_weather:Oslo+client"]
    assert [r["type"] for r in out["results"]] == ["CallToolResult"] * 2
    rx.wait_for(lambda: len(tool_spans(rx)) >= 3)
    client, server = client_and_server(rx.spans(), "get_weather")
    assert len(client) == 2 and len(server) == 1
    wrappers = rx.spans("tool_execution mcp-test-client.cached")
    assert {w.parent_span_id for w in wrappers} >= {c.span_id for c in client}


def test_a_call_inside_a_framework_tool_enriches_it_and_runs_the_contract_once(
        rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"transport": "memory", "nested": True, "client_plugins": ["observe"],
                 "calls": [["get_weather", "Oslo"]]}, rx, tmp_path)
    assert texts(out) == [f"sunny in Oslo {CANARY}"]
    rx.wait_for(lambda: len(tool_spans(rx)) >= 2)
    (outer,) = [s for s in rx.spans() if s.name == "execute_tool ask_weather_service"]
    # no client span of its own: the framework's span carries the MCP attributes
    client, server = client_and_server(rx.spans(), "get_weather")
    assert client == [] and len(server) == 1, [s.name for s in rx.spans()]
    assert outer.attributes["mcp.method.name"] == "tools/call"
    assert outer.attributes["gen_ai.tool.call.id"] == "call_framework_1"
    assert server[0].trace_id == outer.trace_id
    # post_tool_call fired for the framework call and the server side, not a client MCP call
    assert sorted(out["seen"]) == ["client:ask_weather_service:ok", "client:get_weather:ok"]


# ------------------------------------------------------------ stdio subprocess

def test_stdio_client_and_server_processes_end_up_in_one_trace(
        rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"transport": "stdio", "calls": [["get_weather", "Oslo"], ["broken", "x"]],
                 "client_plugins": ["rewrite"], "server_plugins": ["rewrite", "block"]},
                rx, tmp_path)
    # both rewrites reached the tool (the client's, then the server's sees '+')
    first, broken = out["results"]
    assert first["text"] == f"sunny in Oslo+client {CANARY}" and not first["is_error"]
    assert broken["is_error"]
    rx.wait_for(lambda: len(by_service(tool_spans(rx), "mcp-server")) >= 2, timeout=20)
    client = by_service(tool_spans(rx), "mcp-client")
    server = by_service(tool_spans(rx), "mcp-server")
    assert len(client) == 2 and len(server) == 2, [(s.name, s.resource) for s in rx.spans()]
    for name in ("get_weather", "broken"):
        (c,) = [s for s in client if s.attributes["gen_ai.tool.name"] == name]
        (s,) = [s for s in server if s.attributes["gen_ai.tool.name"] == name]
        assert s.trace_id == c.trace_id  # the context travelled in params._meta
        assert c.attributes["network.transport"] == "pipe" if MCP2 else True
        assert s.attributes["otelmw.runtime.id"] == "mcp"
    (s_broken,) = [s for s in server if s.attributes["gen_ai.tool.name"] == "broken"]
    assert s_broken.status_code == ERROR  # the tool raised in the server process


def test_stdio_server_side_rewrite_and_block(rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"transport": "stdio", "server_plugins": ["rewrite", "block"],
                 "calls": [["get_weather", "Oslo"], ["forbidden", "z"]]}, rx, tmp_path)
    weather, blocked = out["results"]
    assert weather["text"] == f"sunny in Oslo+server {CANARY}"  # the server rewrote it
    assert blocked["is_error"] and blocked["text"] == "forbidden by the server policy"
    rx.wait_for(lambda: len(by_service(tool_spans(rx), "mcp-server")) >= 2, timeout=20)
    (s_block,) = by_service(tool_spans(rx, "forbidden"), "mcp-server")
    assert s_block.attributes["otelmw.result.status"] == "blocked"


@needs_mcp2
def test_stdio_session_api_is_one_tool_call(rx: OtlpReceiver, tmp_path: Path) -> None:
    out = drive({"transport": "session", "calls": [["get_weather", "Oslo"]]}, rx, tmp_path)
    assert texts(out) == [f"sunny in Oslo {CANARY}"]
    rx.wait_for(lambda: len(by_service(tool_spans(rx), "mcp-server")) >= 1, timeout=20)
    assert len(by_service(tool_spans(rx), "mcp-client")) == 1


def test_the_host_answers_as_without_otelmw(rx: OtlpReceiver, tmp_path: Path) -> None:
    spec = {"transport": "stdio", "calls": [["get_weather", "Oslo"], ["broken", "x"],
                                            ["forbidden", "z"]]}
    bare = drive({**spec, "bare": True}, rx, tmp_path)
    observed = drive(spec, rx, tmp_path)
    assert observed["results"] == bare["results"]


# ------------------------------------------------------------ streamable HTTP
# A client process and a server process (the SDK's streamable HTTP transport, the
# server on 127.0.0.1, stopping by itself) in one trace, the contract on both sides.

class HttpServer:
    """``weather_server.py --http`` in a process of its own; stops when its stdin
    closes (``stop``) or by its own deadline."""

    def __init__(self, rx: OtlpReceiver, tmp_path: Path, plugins: list[str]) -> None:
        env = child_env(tmp_path, rx, {"MCP_TEST_SERVER_PLUGINS": json.dumps(plugins)})
        self.proc = subprocess.Popen([sys.executable, str(SCRIPTS / "weather_server.py"),
                                      "--http"], env=env, cwd=tmp_path, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith("LISTENING "), line + self.stop()
        self.url = f"http://127.0.0.1:{int(line.split()[1])}/mcp"

    def stop(self) -> str:
        """Let the server end (its telemetry flushed); its stderr."""
        _, err = self.proc.communicate(timeout=60)  # closes stdin: the server's signal
        return err


def test_a_client_and_an_http_server_process_are_one_trace_with_the_contract_on_both(
        rx: OtlpReceiver, tmp_path: Path) -> None:
    server = HttpServer(rx, tmp_path, ["rewrite", "block"])
    try:
        out = drive({"transport": "http", "url": server.url, "client_plugins": ["rewrite"],
                     "calls": [["get_weather", "Oslo"], ["forbidden", "z"],
                               ["broken", "x"]]}, rx, tmp_path)
    finally:
        err = server.stop()
    assert server.proc.returncode == 0, err
    weather, blocked, broken = out["results"]
    # the client's rewrite reached the server's tool; the server's block answered
    assert weather == {"text": f"sunny in Oslo+client {CANARY}", "is_error": False,
                       "type": "CallToolResult"}
    assert blocked["is_error"] and blocked["text"] == "forbidden by the server policy"
    assert broken["is_error"]
    rx.wait_for(lambda: len(by_service(tool_spans(rx), "mcp-server")) >= 3, timeout=20)
    client = by_service(tool_spans(rx), "mcp-client")
    server_calls = by_service(tool_spans(rx), "mcp-server")
    assert len(client) == 3 and len(server_calls) == 3, [s.name for s in rx.spans()]
    spans = {s.span_id: s for s in rx.spans()}
    sessions = set()
    for name in ("get_weather", "forbidden", "broken"):
        (c,) = [s for s in client if s.attributes["gen_ai.tool.name"] == name]
        (s,) = [s for s in server_calls if s.attributes["gen_ai.tool.name"] == name]
        assert s.trace_id == c.trace_id  # the context travelled in params._meta
        parent, chain = spans.get(s.parent_span_id or ""), []
        while parent is not None:
            chain.append(parent.span_id)
            parent = spans.get(parent.parent_span_id or "")
        assert c.span_id in chain  # the server's tool call under the client's
        ca, sa = c.attributes, s.attributes
        assert ca["mcp.method.name"] == sa["mcp.method.name"] == "tools/call"
        assert ca["otelmw.runtime.id"] == sa["otelmw.runtime.id"] == "mcp"
        assert sa["network.transport"] == "tcp"
        assert sa["gen_ai.tool.call.id"] == sa["jsonrpc.request.id"]
        sessions.add(sa.get("mcp.session.id"))
        if MCP2:
            assert ca["network.transport"] == "tcp"
            assert ca["mcp.protocol.version"] == sa["mcp.protocol.version"]
    # one streamable-HTTP session (1.x); the protocol 2.x negotiates (2026-07-28) has none
    assert sessions == {None} if MCP2 else (len(sessions) == 1 and None not in sessions)
    # the contract on each side: the client's rewrite span, the server's block, the results
    assert rx.spans("tool_request mcp-test-client.rewrite_city")
    (s_block,) = [s for s in server_calls if s.attributes["gen_ai.tool.name"] == "forbidden"]
    assert s_block.attributes["otelmw.result.status"] == "blocked"
    (c_block,) = [s for s in client if s.attributes["gen_ai.tool.name"] == "forbidden"]
    assert c_block.attributes["error.type"] == "tool_error"  # an isError result came back
    (s_broken,) = [s for s in server_calls if s.attributes["gen_ai.tool.name"] == "broken"]
    assert s_broken.status_code == ERROR
    (c_ok,) = [s for s in client if s.attributes["gen_ai.tool.name"] == "get_weather"]
    assert c_ok.attributes["otelmw.result.status"] == "ok"


# ------------------------------------------------------------------ metrics

def test_protocol_durations_go_through_the_observer_to_its_own_meter() -> None:
    """The adapter reports each timed request through the host API; the observer
    records it on the meter it was made with (not the global one), as every other
    metric of the contract."""
    harness = TelemetryHarness()
    try:
        attrs = {"mcp.method.name": "tools/call", "gen_ai.tool.name": "get_weather",
                 "network.transport": "pipe", "error.type": "tool_error"}
        record_protocol_operation("mcp", "client", 0.03, attrs, pipeline=harness.pipeline)
        record_protocol_operation("mcp", "server", 0.02, attrs, pipeline=harness.pipeline)
        record_protocol_operation("a2a", "client", 0.01, attrs, pipeline=harness.pipeline)
        record_protocol_operation("mcp", "client", 0.01, attrs, pipeline=Pipeline())
        metrics = harness.metrics()
        assert sorted(metrics) == ["mcp.client.operation.duration",
                                   "mcp.server.operation.duration"]
        (client,) = metrics["mcp.client.operation.duration"]
        assert client.count == 1 and client.sum == pytest.approx(0.03)
        assert dict(client.attributes) == attrs
        assert list(client.explicit_bounds)[:3] == [0.01, 0.02, 0.05]  # MCP's buckets
        harness.assert_clean()
    finally:
        harness.close()


# ------------------------------------------------------------------ zero code

def _plugin_site(tmp_path: Path) -> Path:
    """An installed otelmw plugin (an ``otelmw.plugins`` entry point) whose
    ``tool_request`` rewrite marks the city once, on whichever side sees it first."""
    return install_distribution(tmp_path / "site", "mcp-city-plugin",
                                {PLUGINS: {"mcp_city": "mcp_city_plugin:register"}},
                                {"mcp_city_plugin.py": MCP_CITY_PLUGIN})


MCP_CITY_PLUGIN = """\
def register(ctx):
    def mark(**kw):
        city = kw['args'].get('city', '')
        if '+plugin' in city:
            return None
        return {'args': {**kw['args'], 'city': city + '+plugin'}}
    ctx.register_middleware('tool_request', mark)
"""


def test_otelmw_run_instruments_an_unmodified_client_and_its_server(
        rx: OtlpReceiver, tmp_path: Path) -> None:
    from _support.cli import otelmw

    site = _plugin_site(tmp_path)
    env = child_env(tmp_path, rx, {"OTEL_SERVICE_NAME": "plain-mcp"})
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(site), env.get("PYTHONPATH")) if x)
    enabled = otelmw("plugins", "enable", "mcp_city", env=env, cwd=tmp_path)
    assert enabled.returncode == 0, enabled.stderr
    proc = otelmw("run", "--", sys.executable, str(SCRIPTS / "plain_program.py"),
                  env=env, cwd=tmp_path)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    # the client's plugin rewrote the arguments the server's tool received
    assert "RESULT sunny in Paris+plugin" in proc.stdout, proc.stdout
    rx.wait_for(lambda: len(tool_spans(rx)) >= 2, timeout=20)
    client, server = client_and_server(rx.spans(), "get_weather")
    assert len(client) == 1 and len(server) == 1, [s.name for s in rx.spans()]
    assert client[0].trace_id == server[0].trace_id  # the server process joined the trace
    # the run's own contract key (otelmw run makes one): the server inherits it, honours
    # the client's word and does not run mcp_city a second time; its span is still made
    assert server[0].attributes["otelmw.mcp.contract.verdict"] == "honoured"
    assert list(server[0].attributes["otelmw.mcp.contract.skipped_plugins"]) == ["mcp_city"]
    layers = rx.spans("tool_request mcp_city.mark")
    assert len(layers) == 1 and layers[0].parent_span_id == client[0].span_id

"""An unmodified MCP program (a client and the stdio server it starts) under
``opentelemetry-instrument``, offline, no model.

The OpenTelemetry distro's zero-code path: ``opentelemetry-instrument python
plain_program.py``; neither the client nor the server imports otelmw, which takes part
only through its entry points (the ``otelmw`` configurator, ``otelmw_mcp``). The client
starts its server with its own environment, so the launcher's bootstrap instruments the
server process too. Both export through the stock OTLP exporter to one real
``OtlpReceiver``. Runs on ``mcp`` 2.x (``current``) and 1.x (``mcp1``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from _support.components import clean_env
from _support.otlp_receiver import OtlpReceiver, ReceivedSpan

pytestmark = pytest.mark.host("mcp")

SCRIPTS = Path(__file__).resolve().parent / "mcp_scripts"
PROGRAM = SCRIPTS / "plain_program.py"
TIMEOUT = 120
INTERNAL, SERVER, STATUS_ERROR = 1, 2, 2


def _mcp2() -> bool:
    try:
        return int(version("mcp").split(".")[0]) >= 2
    except PackageNotFoundError:  # an environment without the host: deselected there
        return False


def opentelemetry_instrument() -> str:
    """The launcher beside the interpreter running the tests, else the one on PATH."""
    beside = Path(sys.executable).with_name("opentelemetry-instrument")
    launcher = str(beside) if beside.exists() else shutil.which("opentelemetry-instrument")
    assert launcher, "opentelemetry-instrument comes with opentelemetry-instrumentation"
    return launcher


def tool_calls(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    return [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]


def test_an_unmodified_client_and_its_stdio_server_are_one_trace(tmp_path: Path) -> None:
    for program in (PROGRAM, SCRIPTS / "plain_server.py"):
        assert not re.search(r"^\s*(import|from)\s+otelmw", program.read_text(), re.MULTILINE)
    with OtlpReceiver() as rx:
        env = clean_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint,
                        OTEL_SERVICE_NAME="zero-code-mcp",
                        OTEL_METRIC_EXPORT_INTERVAL="600000",  # one export, at exit
                        OTEL_BSP_SCHEDULE_DELAY="100", OTEL_BLRP_SCHEDULE_DELAY="100")
        proc = subprocess.run([opentelemetry_instrument(), sys.executable, str(PROGRAM)],
                              env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=TIMEOUT)
        assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        assert "RESULT sunny in Paris" in proc.stdout  # the host's answer, unchanged
        rx.wait_for(lambda: len(tool_calls(rx.spans())) >= 2, timeout=20)
        durations = {m: rx.wait_for_metric(m) for m in ("mcp.client.operation.duration",
                                                        "mcp.server.operation.duration")}
        spans = rx.spans()
    calls = tool_calls(spans)
    server = [s for s in calls if "jsonrpc.request.id" in s.attributes]
    client = [s for s in calls if s not in server]
    assert len(client) == 1 and len(server) == 1, [(s.name, s.attributes) for s in spans]
    c, s = client[0], server[0]
    # one trace: the server process's tool call under the client's, through params._meta
    assert c.trace_id == s.trace_id
    by_id = {x.span_id: x for x in spans}
    chain, parent = [], by_id.get(s.parent_span_id or "")
    while parent is not None:
        chain.append(parent.span_id)
        parent = by_id.get(parent.parent_span_id or "")
    assert c.span_id in chain, [(x.name, x.span_id, x.parent_span_id) for x in spans]
    assert c.name == "execute_tool get_weather" and c.kind == INTERNAL
    if _mcp2():  # the SDK's own server span is the server's tool call (enriched)
        assert s.name == "tools/call get_weather" and s.kind == SERVER
        assert c.attributes["network.transport"] == "pipe"
        assert c.attributes["mcp.protocol.version"] == s.attributes["mcp.protocol.version"]
    else:
        assert s.name == "execute_tool get_weather"
    for span in (c, s):
        a = span.attributes
        assert a["gen_ai.tool.name"] == "get_weather" and a["mcp.method.name"] == "tools/call"
        assert a["otelmw.runtime.id"] == "mcp" and a["otelmw.result.status"] == "ok"
        assert a["otelmw.result.success"] is True and span.status_code != STATUS_ERROR
        assert span.resource["service.name"] == "zero-code-mcp"
    assert s.attributes["gen_ai.tool.call.id"] == s.attributes["jsonrpc.request.id"]
    assert "gen_ai.tool.call.id" not in c.attributes
    for name, metrics in durations.items():
        points = [p for m in metrics for p in m.data_points
                  if p.attributes.get("gen_ai.tool.name") == "get_weather"]
        assert sum(p.value["count"] for p in points) == 1, name

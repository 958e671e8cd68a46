"""One contract run per MCP tool call across processes (``otelmw_mcp``'s client's signed
word on the plugins it ran, ``otelmw/instrumentation/mcp/contract_word.py``).

A real ``mcp`` client (``tests/mcp_scripts/driver.py``) and the stdio server it starts
(``weather_server.py``), both under otelmw, with the same plugin (``mw``: appends
``-MW`` to the city each time it runs) enabled on both sides; the tool's answer says
what it received. Both processes export to one real ``OtlpReceiver``. Runs on ``mcp``
2.x (``current``) and 1.x (``mcp1``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from _support.host_scenarios import run_scenario, scenario_env
from _support.otlp_receiver import OtlpReceiver, ReceivedSpan

pytestmark = pytest.mark.host("mcp")

SCRIPTS = Path(__file__).resolve().parent / "mcp_scripts"
CANARY = "CANARY-RESULT-4e1b"
KEY = hashlib.sha256(b"otelmw-mcp-contract-test").hexdigest()
OTHER_KEY = hashlib.sha256(b"not the server's key").hexdigest()
SHARED_LAYER = "tool_request mcp-test-shared.add_mw"
SERVER_LAYER = "tool_request mcp-test-server.rewrite_city"
VERDICT, SKIPPED = "otelmw.mcp.contract.verdict", "otelmw.mcp.contract.skipped_plugins"


def drive(spec: dict[str, Any], rx: OtlpReceiver, tmp_path: Path,
          client_key: str | None = None) -> dict[str, Any]:
    env = scenario_env(tmp_path, rx, OTEL_METRIC_EXPORT_INTERVAL="500")
    if client_key is not None:  # the stdio server inherits it (the driver's server_params)
        env["OTELMW_MCP_CONTRACT_KEY"] = client_key
    return run_scenario(SCRIPTS / "driver.py", {"transport": "stdio", **spec}, env, tmp_path)


def tool_calls(spans: list[ReceivedSpan]) -> tuple[list[ReceivedSpan], list[ReceivedSpan]]:
    """(the client's, the server's) ``get_weather`` tool spans (the server's carries the
    inbound ``jsonrpc.request.id``)."""
    mine = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"
            and s.attributes.get("gen_ai.tool.name") == "get_weather"]
    server = [s for s in mine if "jsonrpc.request.id" in s.attributes]
    return [s for s in mine if s not in server], server


def services(spans: list[ReceivedSpan]) -> list[str]:
    return sorted(str(s.resource.get("service.name")) for s in spans)


def ancestors(span: ReceivedSpan, spans: list[ReceivedSpan]) -> list[str]:
    by_id = {s.span_id: s for s in spans}
    chain, parent = [], by_id.get(span.parent_span_id or "")
    while parent is not None:
        chain.append(parent.span_id)
        parent = by_id.get(parent.parent_span_id or "")
    return chain


def settle(rx: OtlpReceiver, *layers: str) -> list[ReceivedSpan]:
    """Every span, once both tool spans and the named layer spans have arrived."""
    rx.wait_for(lambda: len(tool_calls(rx.spans())[1]) >= 1
                and len(tool_calls(rx.spans())[0]) >= 1
                and all(rx.spans(name) for name in layers), timeout=20)
    return rx.spans()


def test_without_a_key_each_side_runs_its_plugins(rx: OtlpReceiver, tmp_path: Path) -> None:
    """The default: no key, no word sent, none honoured; the plugin runs on both sides
    (the measured double run)."""
    out = drive({"calls": [["get_weather", "Paris"]], "client_plugins": ["mw"],
                 "server_plugins": ["mw"]}, rx, tmp_path)
    assert [r["text"] for r in out["results"]] == [f"sunny in Paris-MW-MW {CANARY}"]
    spans = settle(rx, SHARED_LAYER)
    rx.wait_for(lambda: len(rx.spans(SHARED_LAYER)) >= 2, timeout=20)
    assert services(rx.spans(SHARED_LAYER)) == ["mcp-client", "mcp-server"]
    _, server = tool_calls(spans)
    assert VERDICT not in server[0].attributes and SKIPPED not in server[0].attributes


def test_with_the_shared_key_the_plugin_runs_once_and_the_server_s_own_still_runs(
        rx: OtlpReceiver, tmp_path: Path) -> None:
    """Client and server share ``OTELMW_MCP_CONTRACT_KEY`` (the stdio server inherits the
    client's environment): the shared plugin runs in the client only, the server-only
    plugin on the server, and the server's span is still made, under the client's."""
    out = drive({"calls": [["get_weather", "Paris"]], "client_plugins": ["mw"],
                 "server_plugins": ["mw", "rewrite"]}, rx, tmp_path, client_key=KEY)
    # -MW exactly once (the client's run); +server: the server's own plugin ran
    assert [r["text"] for r in out["results"]] == [f"sunny in Paris-MW+server {CANARY}"]
    spans = settle(rx, SHARED_LAYER, SERVER_LAYER)
    assert services(rx.spans(SHARED_LAYER)) == ["mcp-client"]
    assert services(rx.spans(SERVER_LAYER)) == ["mcp-server"]
    client, server = tool_calls(spans)
    assert len(client) == 1 and len(server) == 1, [s.name for s in spans]
    c, s = client[0], server[0]
    assert s.resource["service.name"] == "mcp-server" and c.trace_id == s.trace_id
    assert c.span_id in ancestors(s, spans)  # parented on the client's call
    assert s.attributes[VERDICT] == "honoured"
    assert list(s.attributes[SKIPPED]) == ["mcp-test-shared"]
    assert s.attributes["otelmw.result.status"] == "ok"
    assert VERDICT not in c.attributes
    layer = next(x for x in spans if x.name == SERVER_LAYER)
    assert layer.parent_span_id == s.span_id
    assert out["failures"] == {}


def test_a_forged_word_is_not_honoured_by_a_server_without_a_key(
        rx: OtlpReceiver, tmp_path: Path) -> None:
    """A caller writes its own word (well formed, signed with a key of its own) and the
    server has no key: it runs its plugin (the safe default)."""
    out = drive({"calls": [["get_weather", "Paris"]], "client_bare": True, "client_plugins": ["mw"],
                 "server_plugins": ["mw"], "forge": OTHER_KEY}, rx, tmp_path)
    assert [r["text"] for r in out["results"]] == [f"sunny in Paris-MW {CANARY}"]
    rx.wait_for(lambda: bool(rx.spans(SHARED_LAYER) and tool_calls(rx.spans())[1]),
                timeout=20)
    assert services(rx.spans(SHARED_LAYER)) == ["mcp-server"]
    _, server = tool_calls(rx.spans())
    assert server[0].attributes[VERDICT] == "unverified"
    assert SKIPPED not in server[0].attributes


def test_a_word_signed_with_another_key_is_not_honoured(
        rx: OtlpReceiver, tmp_path: Path) -> None:
    """The server has its key; the forged word is signed with another: refused."""
    out = drive({"calls": [["get_weather", "Paris"]], "client_bare": True, "client_plugins": ["mw"],
                 "server_plugins": ["mw"], "forge": OTHER_KEY,
                 "server_env": {"OTELMW_MCP_CONTRACT_KEY": KEY}}, rx, tmp_path)
    assert [r["text"] for r in out["results"]] == [f"sunny in Paris-MW {CANARY}"]
    rx.wait_for(lambda: bool(rx.spans(SHARED_LAYER) and tool_calls(rx.spans())[1]),
                timeout=20)
    _, server = tool_calls(rx.spans())
    assert server[0].attributes[VERDICT] == "bad_signature"


def test_a_server_with_a_different_key_runs_its_plugins(
        rx: OtlpReceiver, tmp_path: Path) -> None:
    """Both under otelmw, each with its own key (a remote server that does not share the
    client's secret): the client's genuine word is not honoured there."""
    out = drive({"calls": [["get_weather", "Paris"]], "client_plugins": ["mw"],
                 "server_plugins": ["mw"], "server_env": {"OTELMW_MCP_CONTRACT_KEY": OTHER_KEY}},
                rx, tmp_path, client_key=KEY)
    assert [r["text"] for r in out["results"]] == [f"sunny in Paris-MW-MW {CANARY}"]
    spans = settle(rx, SHARED_LAYER)
    assert tool_calls(spans)[1][0].attributes[VERDICT] == "bad_signature"


def test_the_trusting_configuration_honours_a_word_signed_with_the_server_s_key(
        rx: OtlpReceiver, tmp_path: Path) -> None:
    """A caller holding the server's key (the trusting configuration) is taken at its
    word: the plugin it says it ran is skipped on the server."""
    out = drive({"calls": [["get_weather", "Paris"]], "client_bare": True, "client_plugins": ["mw"],
                 "server_plugins": ["mw"], "forge": KEY,
                 "server_env": {"OTELMW_MCP_CONTRACT_KEY": KEY}}, rx, tmp_path)
    assert [r["text"] for r in out["results"]] == [f"sunny in Paris {CANARY}"]
    rx.wait_for(lambda: bool(tool_calls(rx.spans())[1]), timeout=20)
    _, server = tool_calls(rx.spans())
    assert server[0].attributes[VERDICT] == "honoured"
    assert list(server[0].attributes[SKIPPED]) == ["mcp-test-shared"]
    assert not rx.spans(SHARED_LAYER)


def test_in_one_process_the_server_skips_what_the_client_ran(
        rx: OtlpReceiver, tmp_path: Path) -> None:
    """Client and server in one process share one pipeline: with a key, the server side
    runs none of the plugins again (the client side ran every one of them)."""
    out = drive({"transport": "memory", "calls": [["get_weather", "Paris"]],
                 "client_plugins": ["mw"], "server_plugins": ["rewrite"]}, rx, tmp_path,
                client_key=KEY)
    assert [r["text"] for r in out["results"]] == [f"sunny in Paris-MW+server {CANARY}"]
    assert out["ran"] == ["get_weather:Paris-MW+server"]
    spans = settle(rx, SHARED_LAYER)
    _, server = tool_calls(spans)
    assert server[0].attributes[VERDICT] == "honoured"
    assert sorted(server[0].attributes[SKIPPED]) == ["mcp-test-server", "mcp-test-shared"]
    assert len(rx.spans(SHARED_LAYER)) == 1 and len(rx.spans(SERVER_LAYER)) == 1

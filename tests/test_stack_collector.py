"""The three collector configs load and run in the collector the suite builds.

Each of ``collector/otelcol-config.yaml`` (the local stack), ``gateway.yaml`` (agent
tier) and ``gateway-tier.yaml`` (gateway tier) goes through our distribution's own
validator (``otelcol-otelmw validate``) and a real start, with only what is specific to a
host substituted (``_support.stack.render_collector_config``): listeners on
127.0.0.1 and free ports, the compose service names (``jaeger``, ``jaeger-collector``)
by local addresses, container paths by temporary directories, and for the agent tier
the DNS resolver's name by a static list of the two local gateways (no DNS name
resolves to several local addresses here). The gateway tier talks TLS to Jaeger with
a CA made for the test. A started collector must report healthy on its
``health_check`` extension, log no deprecation (no deprecated component type name) and
no error, and stop cleanly.

Needs the built collector and Jaeger (``OTELMW_OTELCOL_BIN``/``OTELMW_JAEGER_BIN``, or
a build under .cache/stack): missing, the tests fail under CI and skip elsewhere.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _support import stack

pytestmark = pytest.mark.timeout(300)


@dataclass
class Jaegers:
    plain: stack.Jaeger  # the local config's target (compose: insecure gRPC)
    tls: stack.Jaeger  # the gateway tier's target: TLS with a CA of the test's
    ca: stack.TLSFiles


@pytest.fixture(scope="module")
def jaeger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jaegers]:
    plain_dir, tls_dir = tmp_path_factory.mktemp("jaeger"), tmp_path_factory.mktemp("jaeger-tls")
    tls = stack.make_tls(tls_dir / "tls")
    with stack.running_jaeger(plain_dir) as plain, stack.running_jaeger(
            tls_dir, extra_config=stack.jaeger_tls_config(tls_dir, tls)) as secure:
        yield Jaegers(plain, secure, tls)


def _static_gateways(ports: list[int]) -> Any:
    def edit(config: Any) -> None:
        resolver = config["exporters"]["load_balancing"]["resolver"]
        assert set(resolver) == {"dns"}, resolver
        resolver["static"] = {"hostnames": [f"{stack.HOST}:{p}" for p in ports]}
        del resolver["dns"]
    return edit


def render(name: str, tmp: Path, jaeger: Jaegers) -> stack.Collector:
    """The collector of config ``name``, rendered for this host (not started)."""
    state = tmp / f"{name}-state"
    state.mkdir()
    if name == "otelcol-config.yaml":
        store = tmp / "store"
        store.mkdir()
        return stack.collector(tmp, stack.LOCAL_CONFIG, "local", replace={
            "jaeger:4317": jaeger.plain.otlp_grpc, "/data/otelmw": str(store),
            "/var/lib/otelcol": str(state)})
    if name == "gateway.yaml":
        return stack.collector(tmp, stack.AGENT_CONFIG, "agent",
                               edit=_static_gateways([stack.free_port(), stack.free_port()]))
    return stack.collector(tmp, stack.GATEWAY_CONFIG, "gateway", replace={
        "jaeger-collector:4317": f"localhost:{jaeger.tls.ports['JAEGER_OTLP_GRPC_PORT']}",
        "/etc/otelcol/tls": str(jaeger.ca.ca.parent), "/var/lib/otelcol": str(state)})


CONFIGS = ["otelcol-config.yaml", "gateway.yaml", "gateway-tier.yaml"]
SHIPPED = {"otelcol-config.yaml": stack.LOCAL_CONFIG, "gateway.yaml": stack.AGENT_CONFIG,
           "gateway-tier.yaml": stack.GATEWAY_CONFIG}
# Lines a healthy start of any config may not log (zap's console/JSON level names).
BAD_LINE = re.compile(r"\b(error|ERROR|warn|WARN)\b|deprecated", re.IGNORECASE)


@pytest.mark.parametrize("name", CONFIGS)
def test_config_validates(name: str, tmp_path: Path, jaeger: Jaegers) -> None:
    collector = render(name, tmp_path, jaeger)
    proc = stack.validate(collector.config_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "deprecated" not in (proc.stdout + proc.stderr).lower(), proc.stderr


@pytest.mark.parametrize("name", CONFIGS)
def test_shipped_config_validates_unmodified(name: str) -> None:
    """Nothing a user must edit: the repository file itself passes the validator
    (validation resolves no host name and opens no file or port)."""
    proc = stack.validate(SHIPPED[name])
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("name", CONFIGS)
def test_config_starts_healthy_and_stops(name: str, tmp_path: Path,
                                         jaeger: Jaegers) -> None:
    collector = render(name, tmp_path, jaeger)
    collector.start()
    try:
        assert collector.process.running
        text = collector.process.text()
        assert "Everything is ready" in text, collector.process.tail()
    finally:
        collector.stop()
    assert collector.process.popen is not None
    assert collector.process.popen.returncode == 0, collector.process.tail()
    # The agent tier alone: its load_balancing exporter dials the two gateways, which
    # this test does not start (test_stack_scaleout.py runs the tiers together).
    refused = "connect: connection refused" if name == "gateway.yaml" else "\0"
    bad = [line for line in collector.process.text().splitlines()
           if BAD_LINE.search(line) and not line.startswith("=====") and refused not in line]
    assert not bad, "\n".join(bad)

"""The scale-out profile for real: two agent-tier collectors (``collector/gateway.yaml``)
load-balance by trace id to two gateway-tier collectors (``collector/gateway-tier.yaml``,
tail sampling as shipped: decision_wait 60 s, keep errors, keep > 5 s, 10 % of the rest),
which export over TLS (a CA made for the test) to Jaeger. Each gateway gets a Jaeger of
its own, so where a trace was decided is visible. The only substitutions: ports and
paths, the Jaeger address, and the agents' DNS resolver replaced by a static list of the
two local gateways (no DNS name resolves to two local addresses here).

Traffic: concurrent ``stack_scripts/scaleout_agent.py`` processes whose turns span two
processes (the turn's root and LLM span in one, its tool span in a worker that continues
the W3C trace context), each process exporting to a different agent collector, so the
spans of one trace reach the gateway tier through both agents. Every fifth turn's tool
fails (the ERROR span comes from the worker). What otelmw exported is read from the
programs' stores (``OTEL_TRACES_EXPORTER=otlp,file``).

Phase 1 (no faults): every trace that is kept arrives whole in exactly one gateway's
Jaeger; every error trace is kept; the kept fraction of healthy traces is 10 % within
three binomial standard deviations. Phase 2: gateway 2 is stopped mid-run and started
again: traces it held undecided are lost (the documented in-flight window: its traces
that began before the stop), nothing that began after the stop is lost (the agents'
queues hold the spans while it is down), and gateway 1's traces are untouched. The
numbers measured are printed (docs/stack.md quotes them).

Needs the built collector and Jaeger, ``openssl`` (missing: fail under CI, skip
elsewhere). Takes about three minutes: each phase waits out decision_wait.
"""

from __future__ import annotations

import math
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _support import ReceivedSpan, stack
from _support.components import clean_env

pytestmark = pytest.mark.timeout(900)

SCRIPT = Path(__file__).resolve().parent / "stack_scripts" / "scaleout_agent.py"
PROCESSES = 4
ERROR_EVERY = 5
DECISION_WAIT_S = 60.0  # collector/gateway-tier.yaml (checked below)
BASELINE = 0.10


@dataclass
class Tier:
    agents: list[stack.Collector]
    gateways: list[stack.Collector]
    jaegers: list[stack.Jaeger]


@pytest.fixture(scope="module")
def tier(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tier]:
    tmp = tmp_path_factory.mktemp("scaleout")
    tls = stack.make_tls(tmp / "tls")
    sampling = stack.load_yaml(stack.GATEWAY_CONFIG)["processors"]["tail_sampling"]
    assert sampling["decision_wait"] == f"{DECISION_WAIT_S:.0f}s"
    with ExitStack() as stop:
        jaegers = []
        for i in (1, 2):
            jdir = tmp / f"jaeger-{i}"
            jdir.mkdir()
            jaegers.append(stop.enter_context(stack.running_jaeger(
                jdir, extra_config=stack.jaeger_tls_config(jdir, tls))))
        gateways = [stack.collector(tmp, stack.GATEWAY_CONFIG, f"gateway-{i}", replace={
            "jaeger-collector:4317": f"localhost:{j.ports['JAEGER_OTLP_GRPC_PORT']}",
            "/etc/otelcol/tls": str(tls.ca.parent),
            "/var/lib/otelcol": str(tmp / f"gateway-{i}-state")})
            for i, j in ((1, jaegers[0]), (2, jaegers[1]))]
        hostnames = [f"{stack.HOST}:{g.ports[4317]}" for g in gateways]

        def static_resolver(config: Any) -> None:
            resolver = config["exporters"]["load_balancing"]["resolver"]
            assert set(resolver) == {"dns"}
            resolver.pop("dns")
            resolver["static"] = {"hostnames": hostnames}

        agents = [stack.collector(tmp, stack.AGENT_CONFIG, f"agent-{i}", edit=static_resolver)
                  for i in (1, 2)]
        for collector in (*gateways, *agents):
            collector.start()
            stop.callback(collector.stop)
        yield Tier(agents, gateways, jaegers)


@dataclass
class Turn:
    trace_id: str
    error: bool
    started: float


@dataclass
class Phase:
    turns: list[Turn] = field(default_factory=list)
    sent: dict[str, set[str]] = field(default_factory=dict)  # trace id -> span ids
    stored: list[dict[str, list[ReceivedSpan]]] = field(default_factory=list)  # per Jaeger


def run_phase(tier: Tier, tmp: Path, turns: int, pause_s: float,
              during: Any = None) -> Phase:
    """PROCESSES concurrent programs of ``turns`` turns each; ``during(progress)`` runs
    meanwhile (progress: the number of turns done so far). Returns once every turn's
    decision was due (last start + decision_wait) and a batch later."""
    phase = Phase()
    procs = []
    for k in range(PROCESSES):
        own, other = tier.agents[k % 2], tier.agents[(k + 1) % 2]
        env = clean_env(tmp / f"p{k}")
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=own.otlp_grpc, OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
                   OTEL_TRACES_EXPORTER="otlp,file", OTEL_LOGS_EXPORTER="none",
                   OTEL_METRICS_EXPORTER="none", OTEL_BSP_SCHEDULE_DELAY="200",
                   OTELMW_DATA_DIR=str(tmp / f"store-{k}"))
        procs.append(subprocess.Popen(
            [sys.executable, str(SCRIPT), "turns", str(turns), str(ERROR_EVERY),
             other.otlp_grpc, str(pause_s)], env=env, cwd=tmp, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True))
    lock = threading.Lock()

    def read(proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("TURN "):
                _, trace_id, error, started = line.split()
                with lock:
                    phase.turns.append(Turn(trace_id, error == "1", float(started)))

    readers = [threading.Thread(target=read, args=(p,), daemon=True) for p in procs]
    for reader in readers:
        reader.start()
    if during is not None:
        during(lambda: len(phase.turns))
    for proc in procs:
        assert proc.wait(timeout=300) == 0, proc.stderr.read() if proc.stderr else ""
    for reader in readers:
        reader.join(timeout=30)
    assert len(phase.turns) == PROCESSES * turns
    for k in range(PROCESSES):
        for span in stack.read_store(tmp / f"store-{k}", "traces"):
            phase.sent.setdefault(span.trace_id, set()).add(span.span_id)
    assert set(phase.sent) == {t.trace_id for t in phase.turns}
    assert all(len(ids) == 3 for ids in phase.sent.values())  # invoke_agent, chat, tool
    due = max(t.started for t in phase.turns) + DECISION_WAIT_S + 8.0
    time.sleep(max(0.0, due - time.time()))
    for jaeger in tier.jaegers:
        phase.stored.append({t.trace_id: jaeger.trace(t.trace_id) for t in phase.turns})
    return phase


def kept_in(phase: Phase, trace_id: str) -> list[int]:
    """The gateways (0, 1) whose Jaeger holds any span of the trace."""
    return [i for i, stored in enumerate(phase.stored) if stored[trace_id]]


def test_kept_traces_whole_on_one_gateway_errors_kept_baseline_fraction(
        tier: Tier, tmp_path: Path) -> None:
    phase = run_phase(tier, tmp_path, turns=100, pause_s=0.1)
    healthy = [t for t in phase.turns if not t.error]
    errors = [t for t in phase.turns if t.error]
    kept_healthy = 0
    per_gateway = [0, 0]
    for turn in phase.turns:
        where = kept_in(phase, turn.trace_id)
        assert len(where) <= 1, f"trace {turn.trace_id} decided on both gateways"
        if where:
            (gateway,) = where
            per_gateway[gateway] += 1
            ids = sorted(s.span_id for s in phase.stored[gateway][turn.trace_id])
            assert ids == sorted(phase.sent[turn.trace_id]), f"trace {turn.trace_id} not whole"
            kept_healthy += not turn.error
        else:
            assert not turn.error, f"error trace {turn.trace_id} was not kept"
    n = len(healthy)
    tolerance = 3 * math.sqrt(n * BASELINE * (1 - BASELINE))
    print(f"\nscale-out phase 1: {len(phase.turns)} traces ({len(errors)} with an error), "
          f"kept {len(errors)} errors + {kept_healthy}/{n} healthy "
          f"({kept_healthy / n:.1%}; 10 % +- {tolerance / n:.1%}); per gateway {per_gateway}",
          file=sys.stderr)
    assert abs(kept_healthy - BASELINE * n) <= tolerance, (kept_healthy, n)
    assert min(per_gateway) > 0, per_gateway  # both gateways took traces


def test_a_gateway_stopped_mid_run_loses_only_its_in_flight_traces(
        tier: Tier, tmp_path: Path) -> None:
    gateway = tier.gateways[1]
    window: dict[str, float] = {}

    def stop_and_return(progress: Any) -> None:
        stack.wait_until("half of the turns", lambda: progress() >= PROCESSES * 50,
                         timeout=120)
        window["stop"] = time.time()
        gateway.stop()
        time.sleep(8)
        gateway.start()
        window["back"] = time.time()

    phase = run_phase(tier, tmp_path, turns=100, pause_s=0.1, during=stop_and_return)
    lost = partial = 0
    for turn in phase.turns:
        where = kept_in(phase, turn.trace_id)
        assert len(where) <= 1, turn
        whole = bool(where) and sorted(
            s.span_id for s in phase.stored[where[0]][turn.trace_id]) == sorted(
            phase.sent[turn.trace_id])
        if turn.started >= window["stop"]:
            # Began while the gateway was down or after: the agents' queues held its
            # spans; it was decided whole after the gateway came back.
            if turn.error:
                assert whole, f"error trace {turn.trace_id} (after the stop) lost"
            elif where:
                assert whole, turn
        elif where == [0]:
            assert whole, f"gateway 1's trace {turn.trace_id} damaged"
        elif turn.error and not whole:
            # Held undecided by the stopped gateway: its in-flight window.
            assert turn.started >= window["stop"] - DECISION_WAIT_S, turn
            lost += not where
            partial += bool(where)
    errors_before = sum(t.error for t in phase.turns if t.started < window["stop"])
    print(f"\nscale-out phase 2: gateway 2 down {window['back'] - window['stop']:.1f}s; "
          f"{len(phase.turns)} traces; of {errors_before} error traces begun before the stop, "
          f"{lost} lost and {partial} kept in part (in flight on the stopped gateway)",
          file=sys.stderr)
    assert lost + partial <= errors_before

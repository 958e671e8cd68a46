"""A host that records its own duration and usage points under otelmw's metric names
(``CallInfo.host_measured`` for calls, ``Pipeline.turn(host_measured=)`` for turns: Google
ADK's meter): otelmw records none of its own where the
host's reach the same meter provider (a query summing the metric would count the call
twice), and records its own where they do not (otherwise the call would have none).

The host's meter is the global meter provider's (a host asks ``metrics.get_meter``); the
observer here is given the harness's provider, made the global one by patching the
lookup (the process's real global provider can be set once only). The ADK end-to-end
case is ``tests/test_host_google_adk.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from _support.telemetry import TelemetryHarness, payload_for
from opentelemetry import metrics

from otelmw.core import CallInfo, open_call
from otelmw.telemetry import TelemetryObserver

OWN_POINTS = ("gen_ai.client.operation.duration", "gen_ai.client.token.usage",
              "gen_ai.execute_tool.duration")
USAGE = {"choices": [{"message": {"role": "assistant", "content": "ok"}}],
         "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}}


@pytest.fixture(params=["global provider", "private provider"])
def h(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
      ) -> Iterator[TelemetryHarness]:
    harness = TelemetryHarness()
    if request.param == "global provider":  # where the host's points go too
        monkeypatch.setattr(metrics, "get_meter_provider", lambda: harness.meter_provider)
        harness.observer.close()
        harness.observer = TelemetryObserver(
            harness.tracer_provider, harness.meter_provider, harness.logger_provider,
            failures=harness.pipeline.failures)
        harness.pipeline.observer = harness.observer
    yield harness
    harness.close()


def shared(h: TelemetryHarness) -> bool:
    return metrics.get_meter_provider() is h.meter_provider


def calls(h: TelemetryHarness, host_measured: bool) -> None:
    """One model request and one tool call, each told host-measured or not."""
    h.pipeline.run_llm(payload_for("llm"), lambda request: USAGE, provider="openai",
                       model="gpt-test", host_measured=host_measured)
    call = CallInfo(operation="execute_tool", tool_name="lookup", runtime_id="host",
                    host_measured=host_measured)
    opened = open_call(call, {"q": 1}, h.pipeline)
    h.pipeline.run_tool("lookup", {"q": 1}, lambda args: "found", call=opened.call)


def counts(h: TelemetryHarness) -> dict[str, int]:
    return {name: sum(point.count for point in h.points(name)) for name in OWN_POINTS}


def test_a_host_measured_call_has_otelmws_points_only_where_the_hosts_go_elsewhere(
        h: TelemetryHarness) -> None:
    calls(h, host_measured=True)
    expected = 0 if shared(h) else 1
    assert counts(h) == {"gen_ai.client.operation.duration": expected,
                         "gen_ai.client.token.usage": 2 * expected,
                         "gen_ai.execute_tool.duration": expected}
    # the spans and otelmw's own metrics are there either way
    assert [s.name for s in h.spans()] == ["chat gpt-test", "execute_tool lookup"]
    (result,) = h.points("otelmw.tool.results")
    assert result.value == 1
    h.assert_clean()


def test_a_call_not_host_measured_has_otelmws_points(h: TelemetryHarness) -> None:
    calls(h, host_measured=False)
    assert counts(h) == {"gen_ai.client.operation.duration": 1,
                         "gen_ai.client.token.usage": 2, "gen_ai.execute_tool.duration": 1}
    h.assert_clean()


@pytest.mark.parametrize("host_measured", [True, False])
def test_a_host_measured_turn_has_otelmws_point_only_where_the_hosts_go_elsewhere(
        h: TelemetryHarness, host_measured: bool) -> None:
    with h.pipeline.turn("weather", host_measured=host_measured):
        h.pipeline.run_llm(payload_for("llm"), lambda request: USAGE, provider="openai",
                           model="gpt-test")
    expected = 0 if host_measured and shared(h) else 1
    assert sum(p.count for p in h.points("gen_ai.invoke_agent.duration")) == expected
    # the turn's span either way, and its call measured by otelmw (not host-measured)
    assert sorted(s.name for s in h.spans()) == ["chat gpt-test", "invoke_agent weather"]
    assert counts(h)["gen_ai.client.operation.duration"] == 1
    h.assert_clean()


def test_a_global_provider_set_after_the_observer_was_made_counts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The program makes otelmw's meter provider the global one only after building the
    observer: the host's points land there from then on, so otelmw's are left out."""
    harness = TelemetryHarness()
    try:
        calls(harness, host_measured=True)
        assert counts(harness)["gen_ai.execute_tool.duration"] == 1  # not shared yet
        monkeypatch.setattr(metrics, "get_meter_provider", lambda: harness.meter_provider)
        calls(harness, host_measured=True)
        assert counts(harness) == {"gen_ai.client.operation.duration": 1,
                                   "gen_ai.client.token.usage": 2,
                                   "gen_ai.execute_tool.duration": 1}  # no second point
        harness.assert_clean()
    finally:
        harness.close()


def test_the_pipelines_own_calls_are_not_host_measured() -> None:
    from otelmw.core import RuntimeContext

    context: Any = RuntimeContext()
    for call in (CallInfo.for_chat(context, api_request_id="r", provider=None, model=None,
                                   api_mode=None, server=(None, None)),
                 CallInfo.for_tool(context, api_request_id="r", tool_name="t",
                                   tool_call_id=None, runtime_id=None),
                 CallInfo.for_embeddings(context, provider=None, model=None,
                                         server=(None, None))):
        assert call.host_measured is False

"""A fault inside the layer-span telemetry never costs the call, its spans or
its context: the failure is counted once per call site, the layer span is still
ended and exported, and the OpenTelemetry context is back where it was.

The faults are real ones a user can meet: a metrics SDK whose ``record``
raises (a broken view or exporter hook), and a span whose ``set_attributes``
raises (a misbehaving span implementation or processor).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from _support.calls import EXEC_KIND, MODES, OPS, PLUGIN, REQUEST_KIND, run_call
from _support.telemetry import (
    TelemetryHarness,
    add_rewriters,
    add_wrappers,
    host_base,
    is_child,
    op_span_name,
    payload_for,
    response_for,
    rw_name,
    w_name,
)
from opentelemetry import trace
from opentelemetry.sdk.trace import Span as SdkSpan

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def h() -> Iterator[TelemetryHarness]:
    """Like the shared ``h``, but the test itself checks the internal failures."""
    harness = TelemetryHarness()
    yield harness
    harness.close()
    assert harness.complaints == [], harness.complaints


class BrokenHistogram:
    def __init__(self) -> None:
        self.calls = 0

    def record(self, *args: Any, **kwargs: Any) -> None:
        self.calls += 1
        raise RuntimeError("metrics pipeline is broken")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("mode", MODES)
def test_broken_layer_metric_loses_no_span(h: TelemetryHarness, mode: str, op: str) -> None:
    broken = BrokenHistogram()
    h.observer.inst.middleware_duration = broken  # type: ignore[assignment]
    add_rewriters(h, mode, op, ["rewrite", "none"])
    add_wrappers(h, mode, op, ["pass", "pass"])
    base = host_base(h, op)
    result = run_call(h.pipeline, mode, op, payload_for(op), base.in_mode(mode))

    assert result == response_for(op)
    assert base.calls == [{**payload_for(op), "k0": 0}]
    assert broken.calls == 4  # every layer tried to record
    assert h.internal_failures() == {("telemetry", "layer_finished"): 4}
    # Every layer span ended, with its outcome, in the right place of the tree.
    top = h.one(op_span_name(op))
    rewrites = [h.one(rw_name(op, i)) for i in range(2)]
    assert [s.attributes["otelmw.middleware.outcome"] for s in rewrites] == [
        "rewritten", "unchanged"]
    assert all(is_child(s, top) for s in rewrites)
    chain = [top, h.one(w_name(op, 0)), h.one(w_name(op, 1)), h.one("base")]
    for parent, child in itertools.pairwise(chain):
        assert is_child(child, parent), (child.name, parent.name)
    assert h.one(w_name(op, 0)).attributes["otelmw.middleware.outcome"] == "passed"
    # The context is restored: nothing of the call is current afterwards.
    assert trace.get_current_span() is trace.INVALID_SPAN


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("mode", MODES)
def test_rewrite_attributes_failure_still_ends_the_rewrite_span(
        h: TelemetryHarness, mode: str, op: str, monkeypatch: pytest.MonkeyPatch) -> None:
    real = SdkSpan.set_attributes
    prefix = f"{REQUEST_KIND[op]} "

    def set_attributes(self: SdkSpan, attributes: Any) -> None:
        # the rewrite's own facts fail (its outcome and kind are set apart, at its end)
        if self.name.startswith(prefix) and "otelmw.rewrite.source" in attributes:
            raise RuntimeError("span refuses attributes")
        real(self, attributes)

    monkeypatch.setattr(SdkSpan, "set_attributes", set_attributes)
    add_rewriters(h, mode, op, ["rewrite"])
    add_wrappers(h, mode, op, ["pass"])
    base = host_base(h, op, span=False)
    result = run_call(h.pipeline, mode, op, payload_for(op), base.in_mode(mode))

    assert result == response_for(op)
    assert base.calls == [{**payload_for(op), "k0": 0}]  # the rewrite still applied
    assert h.internal_failures() == {("telemetry", "rewrite_finished"): 1}
    top = h.one(op_span_name(op))
    rewrite = h.one(rw_name(op, 0))  # ended and exported despite the fault
    assert is_child(rewrite, top)
    assert rewrite.attributes["otelmw.middleware.outcome"] == "rewritten"
    assert "otelmw.rewrite.source" not in rewrite.attributes  # the part that failed
    assert is_child(h.one(w_name(op, 0)), top)  # the next layer is not nested under it
    assert h.one(w_name(op, 0)).attributes["otelmw.middleware.kind"] == EXEC_KIND[op]
    assert h.one(w_name(op, 0)).attributes["otelmw.middleware.plugin"] == PLUGIN
    assert trace.get_current_span() is trace.INVALID_SPAN

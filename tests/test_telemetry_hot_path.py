"""The invariants behind the observer's speed tricks (docs/performance.md), checked.

* Per-layer and per-endpoint constants are shared by every span of that layer or
  endpoint, so nothing may write into them.
* The layer token is built without the NamedTuple's Python-level constructor: it
  must still be a well-formed ``LayerToken``.
* The seam methods served by one span object are that object's bound methods (no
  dispatch frame per layer).
* Content and digests go on a span only when it records.
* The tracer is fetched once, not per span.
"""

from __future__ import annotations

from typing import Any

import pytest
from _support.calls import EXEC_KIND, MODEL, MODES, OPS, PLUGIN, REQUEST_KIND, callback, run_call
from _support.telemetry import TelemetryHarness
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from otelmw import Pipeline, RuntimeMiddlewareRegistry
from otelmw.core.contract import CallInfo
from otelmw.telemetry.content import digests
from otelmw.telemetry.content.policy import SPAN_ONLY, ContentPolicy
from otelmw.telemetry.setup.observer import TelemetryObserver
from otelmw.telemetry.spans import operation
from otelmw.telemetry.spans.layer import LayerInfo, LayerToken

pytestmark = pytest.mark.timeout(60)


def _add_layers(h: TelemetryHarness, op: str) -> None:
    reg = h.pipeline.registry
    payload = "request" if op == "llm" else "args"
    reg.add_middleware(f"{op}_request", lambda **k: {payload: {**k[payload], "n": 1}}, PLUGIN)
    reg.add_middleware(f"{op}_request", lambda **k: None, PLUGIN)
    reg.add_middleware(f"{op}_execution", lambda **k: k["next_call"](), PLUGIN)

    def failing(**k: Any) -> Any:
        raise RuntimeError("wrapper broke")

    reg.add_middleware(f"{op}_execution", failing, PLUGIN)


def _run(h: TelemetryHarness, mode: str, op: str, n: int = 3) -> None:
    payload = {"model": MODEL} if op == "llm" else {"q": 1}
    for _ in range(n):
        run_call(h.pipeline, mode, op, payload, lambda p: {"id": "r", "model": MODEL})


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("mode", MODES)
def test_cached_layer_constants_are_never_written(h: TelemetryHarness, mode: str,
                                                  op: str) -> None:
    _add_layers(h, op)
    _run(h, mode, op, n=1)
    infos: list[LayerInfo] = list(h.observer.layers._infos.values())
    assert len(infos) == 4
    before = [(dict(i.attributes), {k: dict(v) for k, v in i.metric_attributes.items()})
              for i in infos]
    _run(h, mode, op)
    after = [(dict(i.attributes), {k: dict(v) for k, v in i.metric_attributes.items()})
             for i in infos]
    assert after == before
    for info, (attrs, by_outcome) in zip(infos, after, strict=True):
        assert set(attrs) == {"otelmw.middleware.kind", "otelmw.middleware.name",
                              "otelmw.middleware.position", "otelmw.middleware.plugin"}
        for outcome, metric_attrs in by_outcome.items():  # no error.type, no call's ids
            assert metric_attrs == {"otelmw.middleware.kind": info.layer.kind,
                                    "otelmw.middleware.name": info.layer.name,
                                    "otelmw.middleware.outcome": outcome}


@pytest.mark.parametrize("mode", MODES)
def test_cached_endpoint_attributes_are_copied_per_call(h: TelemetryHarness,
                                                        mode: str) -> None:
    def fail(request: Any) -> Any:
        raise RuntimeError("provider down")

    with h.pipeline.turn(session_id="conv-1", turn_id="turn-1"):
        run_call(h.pipeline, mode, "llm", {"model": MODEL}, lambda r: {"model": "answered"})
        with pytest.raises(RuntimeError):
            run_call(h.pipeline, mode, "llm", {"model": MODEL}, fail)
    (endpoint,) = h.observer.chat._endpoints.values()
    assert endpoint.span_attributes == {"gen_ai.operation.name": "chat",
                                        "gen_ai.provider.name": "openai",
                                        "gen_ai.request.model": MODEL}
    assert endpoint.metric_attributes == endpoint.span_attributes
    # The first call's answering model is not on the failed call's point, nor the
    # failure on the first's.
    points = {p.attributes.get("error.type"): p.attributes
              for p in h.points("gen_ai.client.operation.duration")}
    assert points[None]["gen_ai.response.model"] == "answered"
    assert "gen_ai.response.model" not in points["builtins.RuntimeError"]


@pytest.mark.parametrize("op", OPS)
def test_layer_token_is_a_layer_token_and_seam_methods_are_bound(h: TelemetryHarness,
                                                                 op: str) -> None:
    obs = h.observer
    assert obs.rewrite_started == obs.wrapper_started == obs.layers.started
    assert obs.wrapper_finished == obs.layers.finished
    assert obs.rewrite_finished == obs.layers.rewrite_finished
    _add_layers(h, op)
    layer = h.pipeline.registry.all_layers()[0]
    call = CallInfo(operation="chat" if op == "llm" else "execute_tool")
    token = obs.wrapper_started(call, layer, 0)
    assert type(token) is LayerToken
    assert token.span.is_recording()
    assert token.info.layer is layer and token.info.position == 0
    assert isinstance(token.start, float) and token.context_token is not None
    assert trace.get_current_span() is token.span
    obs.wrapper_finished(call, token, "passed", None)
    assert trace.get_current_span() is trace.INVALID_SPAN
    span = h.one(f"{layer.kind} {layer.name}")
    assert span.context == token.span.get_span_context()
    assert dict(span.attributes or {})["otelmw.middleware.outcome"] == "passed"


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("mode", MODES)
def test_nothing_is_rendered_or_digested_for_a_span_that_does_not_record(
        monkeypatch: pytest.MonkeyPatch, mode: str, op: str) -> None:
    rendered: list[Any] = []
    digested: list[Any] = []
    real_render = ContentPolicy.render

    def render(self: ContentPolicy, value: Any) -> str:
        rendered.append(value)
        return real_render(self, value)

    def digest(value: Any) -> tuple[str, int]:
        digested.append(value)
        return digests.digest(value)

    monkeypatch.setattr(ContentPolicy, "render", render)
    monkeypatch.setattr(operation, "digest", digest)
    pipe = Pipeline(normalizers=RuntimeMiddlewareRegistry())
    obs = TelemetryObserver(TracerProvider(sampler=ALWAYS_OFF),
                            content=ContentPolicy(SPAN_ONLY), failures=pipe.failures,
                            hook_events="none")
    pipe.observer = obs
    # a rewrite and a wrapper (their input/output values) inside a turn (its input
    # and answer): nothing rendered for those spans either
    pipe.registry.add_middleware(REQUEST_KIND[op], callback(mode, "rw", lambda **kw: None),
                                 plugin=PLUGIN)
    pipe.registry.add_middleware(EXEC_KIND[op], callback(mode, "w", lambda **kw: kw[
        "next_call"]()), plugin=PLUGIN)
    try:
        payload = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
        with pipe.turn("agent"):
            result = run_call(pipe, mode, op, payload if op == "llm" else {"q": 1},
                              lambda p: {"id": "r"})
        assert result == {"id": "r"}
    finally:
        obs.close()
    assert rendered == [] and digested == []
    assert pipe.failures.counts == {}


def test_the_tracer_is_fetched_once(h: TelemetryHarness,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def no_lookup(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a tracer looked up per call")

    monkeypatch.setattr(trace, "get_tracer", no_lookup)
    _add_layers(h, "llm")
    _add_layers(h, "tool")
    with h.pipeline.turn(agent_name="agent"):
        _run(h, "sync", "llm", n=1)
        _run(h, "sync", "tool", n=1)
    scopes = {s.instrumentation_scope.name for s in h.spans() if s.instrumentation_scope}
    assert scopes == {"otelmw"}
    assert len(h.spans()) == 1 + 2 * 5

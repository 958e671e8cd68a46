"""Benchmark 1 — instrumented OpenAI chat call: per-call overhead over the bare call.

A real ``openai.OpenAI`` client whose HTTP layer is an in-memory
``MockTransport`` (of ``httpx2`` on openai 3, ``httpx`` on 2) returning a canned
``chat.completion``; an SDK
``TracerProvider`` + ``BatchSpanProcessor`` onto an exporter that drops what it
gets. Contenders: no instrumentation, a *floor* (one wrapt wrapper, one span with
the same GenAI attributes, nothing else), otelmw (``OpenAIInstrumentor`` with a
``TelemetryObserver`` on that provider, no middleware), and the three anchors:
the official GenAI instrumentation (opentelemetry-instrumentation-genai-openai +
opentelemetry-util-genai), OpenInference and OpenLLMetry — each at its defaults
(and, for the two that capture prompt content by default, also with content
capture switched off). otelmw and the official one, which capture no content by
default, are also measured with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=
SPAN_ONLY`` (messages, system instructions and tool definitions rendered as JSON on
the span): a figure, not a target. Meter/logger providers are left at the API's no-op
default for every contender.

Overhead is measured *paired*, inside each contender's process: batches
alternate between the instrumented method and the original one (every wrapt
proxy the instrumentation put on ``openai`` classes swapped out and back), so the
≈ 600 µs SDK call and its process-to-process drift cancel out. The contender's
absolute cost minus the bare process's is shown as a cross-check.

The anchors are not otelmw dependencies: ``run.py`` runs this module with the
python of a separate virtualenv (see ``_venv.py``); run standalone only there.

Targets: otelmw overhead ≤ 0.6 × the best anchor's, and ≤ 1.5 × the floor's, both
with content capture off (otelmw's default). With capture on, the table shows
otelmw's overhead over the best anchor that captures content too.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _harness as h

# Imported once in the parent, before forking: every contender shares them.
import openai

# openai 3 talks through httpx2 (httpx's successor, same API); 2.x through httpx.
if int(openai.__version__.split(".")[0]) >= 3:
    import httpx2 as httpx
else:
    import httpx  # type: ignore[no-redef]
from _otel import DroppingExporter, dropping_provider
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

MODEL = "gpt-4o-mini"
MESSAGES = [
    {"role": "system", "content": "You are a terse assistant."},
    {"role": "user", "content": "Say hello in five words."},
]
CANNED = json.dumps({
    "id": "chatcmpl-bench0001", "object": "chat.completion", "created": 1_700_000_000,
    "model": "gpt-4o-mini-2024-07-18", "system_fingerprint": "fp_bench",
    "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                 "message": {"role": "assistant", "content": "Hello there, how are you?",
                             "refusal": None}}],
    "usage": {"prompt_tokens": 21, "completion_tokens": 7, "total_tokens": 28},
}).encode()

ANCHORS = ("official", "openinference", "openllmetry")
CONFIGS = ("bare", "floor", "otelmw", "otelmw-content", "official", "official-content",
           "openinference", "openinference-nocontent", "openllmetry", "openllmetry-nocontent")
# Contenders that put the prompt and answer on the span (the anchors' defaults for two).
CAPTURING = ("official-content", "openinference", "openllmetry")
CAPTURE_ENV = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
               # the official one captures only on the latest experimental conventions
               "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}
LABELS = {
    "bare": "uninstrumented",
    "floor": "floor (1 wrapt wrapper, 1 span)",
    "otelmw": "otelmw OpenAIInstrumentor",
    "otelmw-content": "otelmw, content capture SPAN_ONLY",
    "official": "official genai-openai 1.3b0",
    "official-content": "official, content capture SPAN_ONLY",
    "openinference": "OpenInference 0.1.66",
    "openinference-nocontent": "OpenInference, hide inputs/outputs",
    "openllmetry": "OpenLLMetry 0.62.4",
    "openllmetry-nocontent": "OpenLLMetry, TRACELOOP_TRACE_CONTENT=false",
}


def _handler(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, content=CANNED, headers={"content-type": "application/json"})


def make_client() -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-bench", max_retries=0,
                         http_client=httpx.Client(transport=httpx.MockTransport(_handler)))


def install_floor(tp: TracerProvider) -> None:
    """The floor: one wrapt wrapper, one span with the GenAI attributes otelmw records
    (the conventions' ``gen_ai.*`` and ``openai.*`` keys; not otelmw's own)."""
    import wrapt
    from opentelemetry.trace import SpanKind

    tracer = tp.get_tracer("floor")
    attach, detach, set_in = otel_context.attach, otel_context.detach, trace.set_span_in_context

    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        model = kwargs.get("model")
        url = instance._client.base_url
        attrs = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                 "gen_ai.request.model": model, "server.address": url.host,
                 "server.port": url.port or 443}
        for key in ("temperature", "max_tokens"):
            v = kwargs.get(key)
            if v is not None:
                attrs["gen_ai.request." + key] = v
        span = tracer.start_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=attrs)
        token = attach(set_in(span))
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__qualname__)
            span.end()
            raise
        finally:
            detach(token)
        usage = result.usage
        end = {"gen_ai.response.id": result.id, "gen_ai.response.model": result.model,
               "gen_ai.response.finish_reasons": [c.finish_reason for c in result.choices],
               "gen_ai.usage.input_tokens": usage.prompt_tokens,
               "gen_ai.usage.output_tokens": usage.completion_tokens,
               "openai.api.type": "chat_completions"}
        if result.system_fingerprint:
            end["openai.response.system_fingerprint"] = result.system_fingerprint
        if result.service_tier:
            end["openai.response.service_tier"] = result.service_tier
        span.set_attributes(end)
        span.end()
        return result

    wrapt.wrap_function_wrapper("openai.resources.chat.completions.completions",
                                "Completions.create", wrapper)


def install(config: str, tp: TracerProvider, lp: Any = None) -> None:
    """Instrument ``openai`` as ``config`` says, onto the tracer provider ``tp`` (and
    the logger provider ``lp`` for the events of content capture; ``None``: the API's
    no-op default)."""
    if config == "bare":
        return
    if config.endswith("-content"):
        os.environ.update(CAPTURE_ENV)  # each contender runs in its own process
    if config == "floor":
        install_floor(tp)
    elif config.startswith("otelmw"):
        from otelmw.core.pipeline import get_pipeline
        from otelmw.instrumentation.openai import OpenAIInstrumentor
        from otelmw.telemetry.setup.observer import TelemetryObserver

        pipe = get_pipeline()
        pipe.observer = TelemetryObserver(tracer_provider=tp, logger_provider=lp,
                                          failures=pipe.failures)
        OpenAIInstrumentor().instrument(tracer_provider=tp)
    elif config.startswith("official"):
        from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor as Official

        Official().instrument(tracer_provider=tp, logger_provider=lp)
    elif config.startswith("openinference"):
        if config.endswith("nocontent"):
            os.environ["OPENINFERENCE_HIDE_INPUTS"] = "true"
            os.environ["OPENINFERENCE_HIDE_OUTPUTS"] = "true"
        from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInference

        OpenInference().instrument(tracer_provider=tp)
    elif config.startswith("openllmetry"):
        if config.endswith("nocontent"):
            os.environ["TRACELOOP_TRACE_CONTENT"] = "false"
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetry

        OpenLLMetry().instrument(tracer_provider=tp)
    else:
        raise ValueError(config)


def setup(config: str, messages: list[dict[str, str]] = MESSAGES, lp: Any = None
          ) -> tuple[Any, DroppingExporter, TracerProvider]:
    """``config`` installed (``install``) and one call made; the call, the span
    exporter and the tracer provider. Every call sends the same ``messages``."""
    tp, exporter = dropping_provider()
    install(config, tp, lp)
    client = make_client()

    def call() -> Any:
        return client.chat.completions.create(model=MODEL, messages=messages,  # type: ignore[arg-type]
                                              temperature=0.2, max_tokens=64)

    first = call()
    assert first.choices[0].message.content, "canned response not parsed"
    return call, exporter, tp


# Paired batches are short (``pair_n`` calls, ≈ 0.1 s here) and many: the shared
# machine's speed drifts by ±15-25 % within seconds, and a pair only cancels the drift
# that its two halves share.
PARAMS = {"full": {"n": 200, "batches": 3, "warmup": 200, "rounds": 4, "pairs": 64,
                   "pair_n": 50},
          "quick": {"n": 100, "batches": 3, "warmup": 100, "rounds": 2, "pairs": 12,
                    "pair_n": 25}}


def installed_wrappers() -> list[tuple[Any, str, Any, Any]]:
    """Every wrapt proxy an instrumentation put on an ``openai`` class or module:
    (owner, attribute, wrapper, original)."""
    import wrapt

    base = getattr(wrapt, "BaseObjectProxy", wrapt.ObjectProxy)
    found: dict[tuple[int, str], tuple[Any, str, Any, Any]] = {}
    for name, mod in list(sys.modules.items()):
        if mod is None or not (name == "openai" or name.startswith("openai.")):
            continue
        owners = [mod] + [v for v in vars(mod).values() if isinstance(v, type)
                          and (v.__module__ or "").startswith("openai")]
        for owner in owners:
            for attr, value in list(vars(owner).items()):
                if isinstance(value, base):
                    found[(id(owner), attr)] = (owner, attr, value, value.__wrapped__)
    return list(found.values())


def worker(config: str, _round: int, params: dict[str, int]) -> dict[str, Any]:
    """Absolute cost of the configuration, plus — for instrumented ones — its
    overhead measured *paired* in the same process: batches alternate between the
    instrumented method and the original (the wrapt proxies swapped out)."""
    call, exporter, tp = setup(config)
    res = h.sample(call, n=params["n"], batches=params["batches"], warmup=params["warmup"])
    calls = params["warmup"] + params["n"] * params["batches"] + 1
    tp.force_flush()
    res["spans_per_call"] = exporter.spans / calls
    wrappers = installed_wrappers()
    res["wrappers"] = len(wrappers)
    if wrappers:
        def on() -> None:
            for owner, attr, wrapper, _ in wrappers:
                setattr(owner, attr, wrapper)

        def off() -> None:
            for owner, attr, _, original in wrappers:
                setattr(owner, attr, original)

        diffs = []
        for _ in range(params["pairs"]):
            off()
            bare = h.sample(call, n=params["pair_n"], batches=1, warmup=10)["cpu"]
            on()
            inst = h.sample(call, n=params["pair_n"], batches=1, warmup=10)["cpu"]
            diffs.append(inst - bare)
        res["paired_overhead"] = h.med(diffs)
    return res


def profile(config: str = "otelmw", n: int = 3000) -> str:
    """cProfile of ``n`` calls (text, top functions by own time)."""
    return h.profile(setup(config)[0], n, warmup=300)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args, _, rounds, raw = h.run_rounds(argv, __doc__.splitlines()[0], PARAMS,
                                             list(CONFIGS), worker)
    base = [r["cpu"] for r in raw["bare"]]
    inst = [c for c in CONFIGS if c != "bare"]
    # Primary figure: the paired in-process overhead (immune to process-to-process
    # drift); cross-check: the process's absolute cost minus the bare process's.
    ov = {c: [r["paired_overhead"] for r in raw[c]] for c in inst}
    ov_abs = {c: [r["cpu"] - b for r, b in zip(raw[c], base, strict=True)] for c in inst}
    anchors_all = [c for c in inst if c in ANCHORS or c.endswith("nocontent")]
    best_anchor = [min(ov[a][i] for a in ANCHORS) for i in range(rounds)]
    best_any = [min(ov[a][i] for a in anchors_all) for i in range(rounds)]
    r_anchor = h.med(o / b for o, b in zip(ov["otelmw"], best_anchor, strict=True))
    r_anchor_any = h.med(o / b for o, b in zip(ov["otelmw"], best_any, strict=True))
    r_floor = h.med(o / f for o, f in zip(ov["otelmw"], ov["floor"], strict=True))
    best_capturing = [min(ov[a][i] for a in CAPTURING) for i in range(rounds)]
    r_content = h.med(o / b for o, b in zip(ov["otelmw-content"], best_capturing, strict=True))
    rows = [[LABELS["bare"], h.med(base), h.med(r["thread"] for r in raw["bare"]), None, None,
             None, 0.0, f"±{100 * h.spread(base):.0f}%"]]
    for c in inst:
        rows.append([LABELS[c], h.med(r["cpu"] for r in raw[c]),
                     h.med(r["thread"] for r in raw[c]), h.med(ov[c]),
                     None if c == "floor" else h.med(
                         o / f for o, f in zip(ov[c], ov["floor"], strict=True)),
                     h.med(ov_abs[c]), h.med(r["spans_per_call"] for r in raw[c]),
                     f"±{100 * h.spread(r['cpu'] for r in raw[c]):.0f}%"])
    print(f"\n### 1. OpenAI chat call overhead ({rounds} rounds, medians; process CPU µs "
          "per call)\n")
    print(h.table(["configuration", "call µs", "call µs (thread)", "overhead µs (paired)",
                   "overhead / floor", "overhead µs (vs bare process)", "spans/call",
                   "spread"], rows))
    ok_a, ok_f = r_anchor <= 0.6, r_floor <= 1.5
    print(f"\notelmw overhead / best default anchor = {r_anchor:.2f} (target ≤ 0.60: "
          f"{h.verdict(ok_a)}); / best anchor incl. no-content variants = {r_anchor_any:.2f}; "
          f"/ floor = {r_floor:.2f} (target ≤ 1.50: {h.verdict(ok_f)}). Ratios are per-round "
          "medians of the paired overheads.")
    print(f"With content capture on: otelmw / best capturing anchor = {r_content:.2f} "
          f"({', '.join(CAPTURING)}; a figure, no target).")
    result = {"raw": raw, "overhead": {c: h.med(ov[c]) for c in inst},
              "overhead_vs_bare_process": {c: h.med(ov_abs[c]) for c in inst},
              "ratio_best_anchor": r_anchor, "ratio_best_anchor_any": r_anchor_any,
              "ratio_floor": r_floor, "ratio_content_best_capturing": r_content,
              "targets": {"otelmw ≤ 0.6 × best anchor": ok_a, "otelmw ≤ 1.5 × floor": ok_f},
              "versions": h.versions(["openai", "httpx", "opentelemetry-sdk", "wrapt",
                                      "opentelemetry-instrumentation-genai-openai",
                                      "opentelemetry-util-genai",
                                      "openinference-instrumentation-openai",
                                      "opentelemetry-instrumentation-openai", "otelmw",
                                      "httpx2"])}
    h.write_json(args.json, result)
    return result


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--profile":
        print(profile(sys.argv[2] if len(sys.argv) > 2 else "otelmw"))
    else:
        main()

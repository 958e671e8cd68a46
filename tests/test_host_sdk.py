"""OpenAI and Anthropic SDK instrumentors against a real scripted HTTP server."""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support.components import clean_env, require_module
from _support.otlp_receiver import OtlpReceiver
from _support.scripted_llm import ScriptedLLMServer
from _support.sdk_releases import needs, openai_lacks
from _support.telemetry import SdkTelemetry, observing

openai = require_module("openai")
anthropic = require_module("anthropic")
pytestmark = pytest.mark.host("openai", "anthropic")

from otelmw import get_pipeline  # noqa: E402
from otelmw.instrumentation.anthropic import AnthropicInstrumentor  # noqa: E402
from otelmw.instrumentation.openai import OpenAIInstrumentor  # noqa: E402

MSGS = [{"role": "user", "content": "hello"}]


@pytest.fixture()
def tel() -> Iterator[SdkTelemetry]:
    with observing(SdkTelemetry(), OpenAIInstrumentor(), AnthropicInstrumentor()) as t:
        yield t


@pytest.fixture()
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as srv:
        yield srv


def test_sync_chat_completion_span_has_semconv_attributes(tel: SdkTelemetry,
                                                          server: ScriptedLLMServer) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    resp = client.chat.completions.create(model="gpt-test", messages=MSGS, temperature=0.5)
    (span,) = tel.chat_spans()
    rec = server.requests[-1]
    assert span.name == "chat gpt-test" and span.kind.name == "CLIENT"
    a = span.attributes
    assert a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.model"] == "gpt-test"
    assert a["gen_ai.request.temperature"] == 0.5
    assert a["gen_ai.response.id"] == resp.id == rec.response_id
    assert a["gen_ai.usage.input_tokens"] == resp.usage.prompt_tokens
    assert a["gen_ai.usage.output_tokens"] == resp.usage.completion_tokens
    assert list(a["gen_ai.response.finish_reasons"]) == ["stop"]
    assert a["server.address"] == "127.0.0.1" and a["server.port"] == server.port
    assert a["otelmw.api_mode"] == "chat_completions"
    assert len(tel.metric_points("gen_ai.client.operation.duration")) == 1


def test_streaming_usage_chunk_recorded_and_span_ends_on_exhaustion(
        tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    stream = client.chat.completions.create(model="gpt-s", messages=MSGS, stream=True,
                                            stream_options={"include_usage": True})
    assert tel.chat_spans() == []  # not ended while the stream is open
    chunks = list(stream)
    (span,) = tel.chat_spans()
    usage = [c.usage for c in chunks if c.usage is not None][-1]
    assert span.attributes["otelmw.stream.ended_by"] == "exhausted"
    assert span.attributes["gen_ai.usage.input_tokens"] == usage.prompt_tokens
    assert span.attributes["gen_ai.usage.output_tokens"] == usage.completion_tokens
    assert list(span.attributes["gen_ai.response.finish_reasons"]) == ["stop"]


def test_streaming_with_block_and_early_break_ends_span_once(
        tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    server.push_text("one two three four five six")
    with client.chat.completions.create(model="gpt-b", messages=MSGS, stream=True) as stream:
        for _ in stream:
            break
    (span,) = tel.chat_spans()
    assert span.attributes["otelmw.stream.ended_by"] == "closed"
    stream.close()  # closing again must not end it twice
    assert len(tel.chat_spans()) == 1


def test_async_and_async_streaming_chat(tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    async def run() -> None:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        await client.chat.completions.create(model="gpt-a1", messages=MSGS)
        stream = await client.chat.completions.create(
            model="gpt-a2", messages=MSGS, stream=True, stream_options={"include_usage": True})
        async for _ in stream:
            pass

    asyncio.run(run())
    names = sorted(s.name for s in tel.chat_spans())
    assert names == ["chat gpt-a1", "chat gpt-a2"]
    streamed = next(s for s in tel.chat_spans() if s.name == "chat gpt-a2")
    assert streamed.attributes["otelmw.stream.ended_by"] == "exhausted"
    assert streamed.attributes["gen_ai.usage.output_tokens"] >= 1


@needs(openai_lacks(responses=True))
def test_responses_api_create(tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    resp = client.responses.create(model="gpt-r", input="hi")
    (span,) = tel.chat_spans()
    assert span.attributes["otelmw.api_mode"] == "responses"
    assert span.attributes["gen_ai.response.id"] == resp.id
    assert span.attributes["gen_ai.usage.input_tokens"] == resp.usage.input_tokens


def test_anthropic_messages_create_and_stream(tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    client = anthropic.Anthropic(base_url=server.root_url, api_key="x", max_retries=0)
    msg = client.messages.create(model="claude-t", max_tokens=20, messages=MSGS)
    for _ in client.messages.create(model="claude-s", max_tokens=20, messages=MSGS,
                                    stream=True):
        pass
    spans = {s.name: s for s in tel.chat_spans()}
    sync, streamed = spans["chat claude-t"], spans["chat claude-s"]
    assert sync.attributes["gen_ai.provider.name"] == "anthropic"
    assert sync.attributes["gen_ai.response.id"] == msg.id
    assert sync.attributes["gen_ai.usage.output_tokens"] == msg.usage.output_tokens
    # stop_reason "end_turn" in the conventions' values, as the official instrumentation maps it
    assert msg.stop_reason == "end_turn"
    assert list(sync.attributes["gen_ai.response.finish_reasons"]) == ["stop"]
    assert streamed.attributes["otelmw.stream.ended_by"] == "exhausted"
    assert streamed.attributes["gen_ai.usage.input_tokens"] >= 1


def test_anthropic_async_create(tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    async def run() -> Any:
        client = anthropic.AsyncAnthropic(base_url=server.root_url, api_key="x", max_retries=0)
        return await client.messages.create(model="claude-a", max_tokens=20, messages=MSGS)

    msg = asyncio.run(run())
    (span,) = tel.chat_spans()
    assert span.attributes["gen_ai.response.id"] == msg.id


def test_provider_error_marks_span_error(tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    server.push_error(500, "boom")
    with pytest.raises(openai.InternalServerError) as info:
        client.chat.completions.create(model="gpt-e", messages=MSGS)
    (span,) = tel.chat_spans()
    assert span.status.status_code.name == "ERROR"
    t = type(info.value)
    assert span.attributes["error.type"] == f"{t.__module__}.{t.__qualname__}"


def test_otelmw_llm_request_middleware_applies_to_plain_sdk_calls(
        tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    def pin_model(**kw: Any) -> Any:
        request = dict(kw["request"])
        request["model"] = "gpt-pinned"
        return {"request": request, "source": "router", "reason": "pin"}

    reg = get_pipeline().registry
    reg.add_middleware("llm_request", pin_model, plugin="sdk-test")
    try:
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        client.chat.completions.create(model="gpt-asked", messages=MSGS)
    finally:
        reg.remove_plugin("sdk-test")
    assert server.requests[-1].body["model"] == "gpt-pinned"
    rewrite = next(s for s in tel.spans.get_finished_spans() if s.name.startswith("llm_request"))
    assert rewrite.attributes["otelmw.middleware.outcome"] == "rewritten"
    assert rewrite.attributes["otelmw.rewrite.source"] == "router"


def test_nested_host_layer_gets_one_chat_span_enriched_by_sdk(
        tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)

    def host_adapter(request: dict[str, Any]) -> Any:  # a host calling the SDK inside
        resp = client.chat.completions.create(**request)
        return {"text": resp.choices[0].message.content}  # host's own summary shape

    get_pipeline().run_llm({"model": "gpt-host", "messages": MSGS}, host_adapter,
                           provider="hosty")
    (span,) = tel.chat_spans()
    assert span.attributes["gen_ai.provider.name"] == "hosty"
    assert span.attributes["server.address"] == "127.0.0.1"  # from the SDK layer
    assert span.attributes["gen_ai.response.id"] == server.requests[-1].response_id
    assert span.attributes["gen_ai.usage.input_tokens"] >= 1
    assert len(tel.metric_points("gen_ai.client.operation.duration")) == 1


def test_uninstrument_restores_originals_and_emits_nothing(server: ScriptedLLMServer) -> None:
    import openai.resources.chat.completions as mod  # a module up to 1.4x, a package since

    original = mod.Completions.__dict__["create"]
    t = SdkTelemetry()
    pipe = get_pipeline()
    saved, pipe.observer = pipe.observer, t.observer
    inst = OpenAIInstrumentor()
    inst.instrument()
    assert mod.Completions.__dict__["create"] is not original
    inst.uninstrument()
    try:
        assert mod.Completions.__dict__["create"] is original
        pipe.observer = None
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        client.chat.completions.create(model="gpt-u", messages=MSGS)
        assert t.chat_spans() == []
    finally:
        pipe.observer = saved


def test_missing_host_is_skipped_with_one_log_line(monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    from otelmw import autoinstrument
    from otelmw.instrumentation._base import OtelmwInstrumentor

    class Ghost(OtelmwInstrumentor):
        dependencies = ("surely-not-installed-pkg >= 1",)

        def targets(self) -> list[Any]:
            raise AssertionError("must not be reached")

    class EP:
        name = "otelmw_ghost"

        def load(self) -> Any:
            return Ghost

    monkeypatch.setattr(autoinstrument.metadata, "entry_points", lambda group: [EP()])
    with caplog.at_level(logging.INFO, logger="otelmw"):
        assert autoinstrument.instrument_all().active == ()
    lines = [r for r in caplog.records if "otelmw_ghost" in r.getMessage()]
    assert len(lines) == 1 and "surely-not-installed-pkg" in lines[0].getMessage()
    assert lines[0].levelno == logging.INFO


def test_instrumentation_dependencies_are_honest_ranges() -> None:
    from importlib.metadata import version

    from opentelemetry.instrumentation.dependencies import get_dependency_conflicts

    # The releases installed here (any environment of the matrix) are in range;
    # tests/test_host_matrix.py checks the ranges against the matrix itself.
    for inst in (OpenAIInstrumentor(), AnthropicInstrumentor()):
        deps = list(inst.instrumentation_dependencies())
        assert deps and all("<" in d and ">=" in d for d in deps)
        assert get_dependency_conflicts(deps) is None, (deps, version("openai"))


PROGRAM = """
import openai
client = openai.OpenAI(base_url={base!r}, api_key="x", max_retries=0)
r = client.chat.completions.create(model="gpt-run", messages=[{{"role": "user", "content": "hi"}}])
print(r.choices[0].message.content)
"""


def test_otelmw_run_lights_up_an_unmodified_openai_program(tmp_path: Path,
                                                            server: ScriptedLLMServer) -> None:
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(PROGRAM.format(base=server.base_url)))
    assert "otelmw" not in script.read_text()
    with OtlpReceiver() as rx:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OTEL_", "OTELMW_"))}
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint, OTEL_SERVICE_NAME="app",
                   OTELMW_HOME=str(tmp_path / "home"), OTEL_METRIC_EXPORT_INTERVAL="60000")
        proc = subprocess.run([sys.executable, "-m", "otelmw.cli", "run", "--", sys.executable,
                               str(script)], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        rx.wait_for(lambda: any(s.name == "chat gpt-run" for s in rx.spans()), timeout=30)
        (span,) = [s for s in rx.spans() if s.name == "chat gpt-run"]
        assert span.attributes["gen_ai.provider.name"] == "openai"
        assert span.resource["service.name"] == "app"


def test_sdk_create_signatures_unchanged_by_wrapping(tel: SdkTelemetry) -> None:
    from openai.resources.chat.completions import Completions

    params = inspect.signature(Completions.create).parameters
    assert "messages" in params and "model" in params


def test_otelmw_run_does_not_import_hosts_the_program_never_uses(tmp_path: Path) -> None:
    script = tmp_path / "plain.py"
    script.write_text("import sys\nprint(sorted(m for m in ('openai', 'anthropic', "
                      "'praisonaiagents') if m in sys.modules))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OTELMW_"))}
    env.update(OTEL_TRACES_EXPORTER="none", OTEL_METRICS_EXPORTER="none",
               OTEL_LOGS_EXPORTER="none", OTELMW_HOME=str(tmp_path / "home"))
    proc = subprocess.run([sys.executable, "-m", "otelmw.cli", "run", "--", sys.executable,
                           str(script)], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_opentelemetry_instrument_lights_up_an_unmodified_openai_program(
        tmp_path: Path, server: ScriptedLLMServer) -> None:
    import shutil

    launcher = shutil.which("opentelemetry-instrument")
    assert launcher, "opentelemetry-instrument comes with opentelemetry-instrumentation"
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(PROGRAM.format(base=server.base_url)))
    with OtlpReceiver() as rx:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OTEL_", "OTELMW_"))}
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=rx.grpc_endpoint, OTEL_SERVICE_NAME="oi-app",
                   OTELMW_HOME=str(tmp_path / "home"), OTEL_METRIC_EXPORT_INTERVAL="60000")
        proc = subprocess.run([launcher, sys.executable, str(script)], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        rx.wait_for(lambda: any(s.name == "chat gpt-run" for s in rx.spans()), timeout=30)
        (span,) = [s for s in rx.spans() if s.name == "chat gpt-run"]
        assert span.attributes["gen_ai.provider.name"] == "openai"
        assert span.resource["service.name"] == "oi-app"


def test_bad_settings_under_auto_instrumentation_fall_back_instead_of_failing_the_import(
        tmp_path: Path) -> None:
    """Under an instrumentor the program is already running: a typo in an otelmw
    setting gives one warning and the default, never an exception at ``import openai``
    (``configure()`` raises on the same values, see test_setup_configure)."""
    code = textwrap.dedent("""
        import logging
        logging.basicConfig(level=logging.WARNING, format="%(message)s")
        from otelmw.instrumentation.openai import OpenAIInstrumentor
        OpenAIInstrumentor().instrument()
        import openai
        from otelmw.core.pipeline import get_pipeline
        obs = get_pipeline().observer
        print("OBSERVER", obs.hook_events, obs.layer_metrics, obs.content.on_spans)
    """)
    env = clean_env(tmp_path, OTELMW_HOOK_EVENTS="bogus", OTELMW_MIDDLEWARE_METRICS="maybe",
                    OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="EVERYTHING")
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "OBSERVER registered True False" in proc.stdout
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("otelmw:")]
    assert len(warnings) == 3, proc.stderr
    for name in ("OTELMW_HOOK_EVENTS", "OTELMW_MIDDLEWARE_METRICS",
                 "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"):
        assert sum(name in w for w in warnings) == 1, (name, warnings)


# ------------------------------------------- the chat span describes what was sent
def _rewrite(model: str | None = None, **params: Any) -> Any:
    """An ``llm_request`` rewrite setting ``model`` and ``params`` (None: removed)."""
    def rewrite(**kw: Any) -> Any:
        request = dict(kw["request"])
        if model is not None:
            request["model"] = model
        for key, value in params.items():
            if value is None:
                request.pop(key, None)
            else:
                request[key] = value
        return {"request": request, "source": "router"}
    return rewrite


@pytest.fixture()
def plugin() -> Iterator[Any]:
    reg = get_pipeline().registry
    try:
        yield lambda kind, fn: reg.add_middleware(kind, fn, plugin="sdk-test")
    finally:
        reg.remove_plugin("sdk-test")


def _create(is_async: bool, server: ScriptedLLMServer, **request: Any) -> Any:
    if not is_async:
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        return client.chat.completions.create(messages=MSGS, **request)

    async def run() -> Any:
        aclient = openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        return await aclient.chat.completions.create(messages=MSGS, **request)
    return asyncio.run(run())


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_chat_span_describes_the_rewritten_request(tel: SdkTelemetry, server: ScriptedLLMServer,
                                                   plugin: Any, is_async: bool) -> None:
    plugin("llm_request", _rewrite("gpt-pinned", temperature=0.1, max_tokens=None))
    _create(is_async, server, model="gpt-asked", temperature=0.9, max_tokens=50)
    sent = server.requests[-1].body
    assert (sent["model"], sent["temperature"], "max_tokens" in sent) == ("gpt-pinned", 0.1,
                                                                         False)
    (span,) = tel.chat_spans()
    assert span.name == "chat gpt-pinned"
    a = span.attributes
    assert a["gen_ai.request.model"] == "gpt-pinned"
    assert a["otelmw.request.original_model"] == "gpt-asked"
    assert a["gen_ai.request.temperature"] == 0.1
    assert "gen_ai.request.max_tokens" not in a  # the rewrite removed it
    (point,) = tel.metric_points("gen_ai.client.operation.duration")
    assert point.attributes["gen_ai.request.model"] == "gpt-pinned"


def test_rewrite_that_keeps_the_model_records_no_original_model(
        tel: SdkTelemetry, server: ScriptedLLMServer, plugin: Any) -> None:
    plugin("llm_request", _rewrite(max_tokens=7))
    _create(False, server, model="gpt-same")
    (span,) = tel.chat_spans()
    assert span.name == "chat gpt-same" and span.attributes["gen_ai.request.max_tokens"] == 7
    assert "otelmw.request.original_model" not in span.attributes


def test_chat_span_follows_a_request_a_wrapper_passes_on(
        tel: SdkTelemetry, server: ScriptedLLMServer, plugin: Any) -> None:
    def fallback(**kw: Any) -> Any:  # a wrapper that sends another model downstream
        return kw["next_call"]({**kw["request"], "model": "gpt-fallback"})

    plugin("llm_execution", fallback)
    _create(False, server, model="gpt-first", temperature=0.3)
    assert server.requests[-1].body["model"] == "gpt-fallback"
    (span,) = tel.chat_spans()
    assert span.name == "chat gpt-fallback"
    assert span.attributes["otelmw.request.original_model"] == "gpt-first"
    assert span.attributes["gen_ai.request.temperature"] == 0.3


# ------------------------------------------------------------- nested model calls
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_model_call_inside_a_wrapper_gets_its_own_chat_span(
        tel: SdkTelemetry, server: ScriptedLLMServer, plugin: Any, is_async: bool) -> None:
    # A guardrail asking another model first; the judge's own call passes through it.
    def judge(**kw: Any) -> Any:
        if kw["request"]["model"] != "gpt-judge":
            client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
            client.chat.completions.create(model="gpt-judge", messages=MSGS)
        return kw["next_call"](kw["request"])

    async def ajudge(**kw: Any) -> Any:
        if kw["request"]["model"] != "gpt-judge":
            client = openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
            await client.chat.completions.create(model="gpt-judge", messages=MSGS)
        return await kw["next_call"](kw["request"])

    plugin("llm_execution", ajudge if is_async else judge)
    resp = _create(is_async, server, model="gpt-main")
    sent = {r.body["model"]: r for r in server.requests}
    spans = {s.name: s for s in tel.spans.get_finished_spans()}
    outer, inner = spans["chat gpt-main"], spans["chat gpt-judge"]
    wrapper = next(s for s in tel.spans.get_finished_spans() if s.name.startswith(
        "llm_execution ") and s.parent.span_id == outer.context.span_id)
    assert inner.parent.span_id == wrapper.context.span_id
    assert outer.attributes["gen_ai.response.id"] == resp.id == sent["gpt-main"].response_id
    assert inner.attributes["gen_ai.response.id"] == sent["gpt-judge"].response_id
    assert outer.attributes["gen_ai.usage.input_tokens"] == sent["gpt-main"].usage[
        "input_tokens"]
    points = tel.metric_points("gen_ai.client.operation.duration")
    assert sorted(p.attributes["gen_ai.request.model"] for p in points) == ["gpt-judge",
                                                                            "gpt-main"]


# --------------------------------------------------------------------- embeddings
def _embedding_spans(tel: SdkTelemetry) -> list[Any]:
    return [s for s in tel.spans.get_finished_spans() if s.name.startswith("embeddings")]


def test_embeddings_span_and_metrics(tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    resp = client.embeddings.create(model="emb-small", input=["alpha", "beta gamma"])
    rec = server.requests[-1]
    assert rec.api == "embeddings" and len(resp.data) == 2
    (span,) = _embedding_spans(tel)
    assert span.name == "embeddings emb-small" and span.kind.name == "CLIENT"
    a = span.attributes
    assert a["gen_ai.operation.name"] == "embeddings"
    assert a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.model"] == a["gen_ai.response.model"] == "emb-small"
    assert a["gen_ai.usage.input_tokens"] == resp.usage.prompt_tokens == rec.usage[
        "input_tokens"]
    assert a["gen_ai.embeddings.dimension.count"] == len(resp.data[0].embedding) == 8
    assert "gen_ai.request.encoding_formats" not in a  # not specified by the caller
    assert a["server.address"] == "127.0.0.1" and a["server.port"] == server.port
    assert tel.chat_spans() == []
    (duration,) = tel.metric_points("gen_ai.client.operation.duration")
    assert duration.attributes["gen_ai.operation.name"] == "embeddings"
    assert duration.attributes["gen_ai.response.model"] == "emb-small"
    (tokens,) = tel.metric_points("gen_ai.client.token.usage")
    assert tokens.attributes["gen_ai.token.type"] == "input"
    assert tokens.sum == resp.usage.prompt_tokens


def test_async_embeddings_with_encoding_format_and_dimensions(
        tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    async def run() -> Any:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        encoded = await client.embeddings.create(model="emb-b64", input="hello",
                                                 encoding_format="base64")
        await client.embeddings.create(model="emb-16", input=[[1, 2, 3]], dimensions=16,
                                       encoding_format="float")
        return encoded

    encoded = asyncio.run(run())
    assert isinstance(encoded.data[0].embedding, str)  # the caller asked for base64
    spans = {s.name: s.attributes for s in _embedding_spans(tel)}
    b64, sized = spans["embeddings emb-b64"], spans["embeddings emb-16"]
    assert list(b64["gen_ai.request.encoding_formats"]) == ["base64"]
    assert b64["gen_ai.embeddings.dimension.count"] == 8  # measured on the base64 vector
    assert list(sized["gen_ai.request.encoding_formats"]) == ["float"]
    assert sized["gen_ai.embeddings.dimension.count"] == 16
    assert [r.body["dimensions"] for r in server.requests if "dimensions" in r.body] == [16]


def test_embeddings_error_marks_span_and_metric(tel: SdkTelemetry,
                                                server: ScriptedLLMServer) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    server.push_error(500, "boom")
    with pytest.raises(openai.InternalServerError) as info:
        client.embeddings.create(model="emb-e", input="x")
    (span,) = _embedding_spans(tel)
    t = type(info.value)
    assert span.status.status_code.name == "ERROR"
    assert span.attributes["error.type"] == f"{t.__module__}.{t.__qualname__}"
    (point,) = tel.metric_points("gen_ai.client.operation.duration")
    assert point.attributes["error.type"] == span.attributes["error.type"]


def test_embeddings_inside_a_host_chat_call_is_a_span_of_its_own(
        tel: SdkTelemetry, server: ScriptedLLMServer) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)

    def host_adapter(request: dict[str, Any]) -> Any:  # retrieval, then the model call
        client.embeddings.create(model="emb-rag", input="query")
        return client.chat.completions.create(**request)

    resp = get_pipeline().run_llm({"model": "gpt-rag", "messages": MSGS}, host_adapter,
                                  provider="openai")
    (chat,) = tel.chat_spans()
    (emb,) = _embedding_spans(tel)
    assert emb.parent.span_id == chat.context.span_id
    assert chat.attributes["gen_ai.response.id"] == resp.id
    assert chat.attributes["gen_ai.response.model"] == "gpt-rag"
    assert emb.attributes["gen_ai.response.model"] == "emb-rag"


@pytest.mark.parametrize("stage", ["llm_request", "pre_api_request"])
def test_model_call_from_a_rewrite_or_hook_is_its_own_chat_span(
        tel: SdkTelemetry, server: ScriptedLLMServer, stage: str) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)

    def classify(**kw: Any) -> None:  # asks a small model, changes nothing
        if kw["request"]["model"] != "gpt-small":
            client.chat.completions.create(model="gpt-small", messages=MSGS)

    reg = get_pipeline().registry
    (reg.add_middleware if stage == "llm_request" else reg.add_hook)(stage, classify,
                                                                      plugin="sdk-test")
    try:
        resp = client.chat.completions.create(model="gpt-big", messages=MSGS)
    finally:
        reg.remove_plugin("sdk-test")
    finished = tel.spans.get_finished_spans()
    spans = {s.name: s for s in finished}
    outer, small = spans["chat gpt-big"], spans["chat gpt-small"]
    # a rewrite's call is under the rewrite's span, a hook's under the call's span
    parent = next((s for s in finished if s.name.startswith("llm_request ")
                   and s.parent.span_id == outer.context.span_id), outer)
    assert (parent is outer) == (stage == "pre_api_request")
    assert small.parent.span_id == parent.context.span_id
    assert outer.attributes["gen_ai.response.id"] == resp.id
    assert small.attributes["gen_ai.response.id"] != resp.id

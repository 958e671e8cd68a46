"""otelmw covers the attribute keys the official OpenTelemetry GenAI instrumentations
emit, scenario by scenario (issue 16, non-streaming calls).

Each test is a program written like one of the conformance suite's scenarios
(``semantic-conventions-conformance``, ``scenarios/gen-ai/python/{openai,anthropic}``):
the same SDK calls with the same parameters, here against the scripted server. Its
``chat``/``embeddings`` spans and metric points must carry every key the official
instrumentation emitted (``tests/data/conformance/``, see ORIGIN.md there) that the
scenario's requests can produce, and the values the official code computes.

Not checked here: the content attributes (``gen_ai.input.messages`` and the other
three; their shape is the message schema test's), the inference event, and the
streaming scenario (its own tests).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _support.scripted_llm import ScriptedLLMServer, ScriptedReply
from _support.sdk_releases import anthropic_lacks, needs, openai_lacks
from _support.telemetry import TelemetryHarness
from opentelemetry.sdk.trace import ReadableSpan

from otelmw import get_pipeline
from otelmw.instrumentation.anthropic import AnthropicInstrumentor
from otelmw.instrumentation.openai import OpenAIInstrumentor
from otelmw.telemetry import attributes as a
from otelmw.telemetry.content.policy import SPAN_AND_EVENT
from otelmw.telemetry.shapes.responses import ResponseFacts
from otelmw.telemetry.spans.chat import request_attributes

DATA = Path(__file__).resolve().parent / "data" / "conformance"
CHAT_SPAN, EMBEDDINGS_SPAN = "gen_ai.inference.client", "gen_ai.embeddings.client"

# Keys a request produces only when it sets the parameter: the conformance
# contract gives the sampling options to inference (and streaming) only.
SAMPLING = frozenset({a.GEN_AI_REQUEST_TOP_P, a.GEN_AI_REQUEST_TOP_K,
                      a.GEN_AI_REQUEST_FREQUENCY_PENALTY, a.GEN_AI_REQUEST_PRESENCE_PENALTY,
                      a.GEN_AI_REQUEST_SEED, a.GEN_AI_REQUEST_STOP_SEQUENCES})
STRUCTURED = frozenset({a.GEN_AI_OUTPUT_TYPE})  # structured_output's response_format only
TOOLS = frozenset({a.GEN_AI_TOOL_DEFINITIONS})  # a request that sends tools only


@dataclass(frozen=True, slots=True)
class Official:
    """What the official instrumentation emitted over its directory's scenarios."""

    spans: dict[str, frozenset[str]]
    metrics: dict[str, frozenset[str]]

    @classmethod
    def load(cls, name: str) -> Official:
        data = json.loads((DATA / f"{name}.data.json").read_text())
        return cls({k: frozenset(v) for k, v in data["spans"].items()},
                   {k: frozenset(v) for k, v in data["metrics"].items()})

    def span_keys(self, span_type: str, not_exercised: frozenset[str]) -> frozenset[str]:
        return self.spans[span_type] - not_exercised


OPENAI = Official.load("openai.opentelemetry-openai")
ANTHROPIC = Official.load("anthropic.opentelemetry-anthropic")

# The conformance scenarios' images and document (1x1 PNG, one-page PDF, base64).
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJ"
       "RU5ErkJggg==")
PDF = "JVBERi0xLjQKMSAwIG9iago8PC9UeXBlL0NhdGFsb2cvUGFnZXMgMiAwIFI+PgplbmRvYmoK"
SYSTEM = "You are a helpful assistant."
WEATHER_SCHEMA = {"type": "object",
                  "properties": {"location": {"type": "string",
                                              "description": "The city and state"}},
                  "required": ["location"]}


@pytest.fixture()
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(tool_args={"get_current_weather": {"location": "Seattle"}}) as srv:
        yield srv


class Instrumented:
    """The harness observing the default pipeline, which otelmw's SDK instrumentors use."""

    def __init__(self, h: TelemetryHarness, instrumentor: Any) -> None:
        self.h, self.instrumentor = h, instrumentor
        self.saved = get_pipeline().observer

    def __enter__(self) -> TelemetryHarness:
        get_pipeline().observer = self.h.observer
        self.instrumentor.instrument()
        return self.h

    def __exit__(self, *exc: object) -> None:
        self.instrumentor.uninstrument()
        get_pipeline().observer = self.saved


@pytest.fixture()
def h() -> Iterator[TelemetryHarness]:
    """The scenarios run as the conformance runs did: content captured (SPAN_AND_EVENT),
    so the official content keys are part of every comparison."""
    harness = TelemetryHarness(SPAN_AND_EVENT)
    yield harness
    harness.close()
    harness.assert_clean()


@pytest.fixture()
def openai_sdk(h: TelemetryHarness) -> Iterator[TelemetryHarness]:
    with Instrumented(h, OpenAIInstrumentor()) as harness:
        yield harness


@pytest.fixture()
def anthropic_sdk(h: TelemetryHarness) -> Iterator[TelemetryHarness]:
    with Instrumented(h, AnthropicInstrumentor()) as harness:
        yield harness


def model_spans(h: TelemetryHarness, operation: str) -> list[ReadableSpan]:
    """otelmw's spans of one operation (not the Anthropic SDK's own spans)."""
    return [s for s in h.spans() if s.attributes is not None
            and s.attributes.get(a.GEN_AI_OPERATION_NAME) == operation]


def assert_covers(h: TelemetryHarness, official: Official, span_type: str, operation: str,
                  not_exercised: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """Every span and metric point of the operation carries the official keys the
    scenario can produce; returns the spans' attributes."""
    wanted = official.span_keys(span_type, not_exercised)
    spans = [dict(s.attributes or {}) for s in model_spans(h, operation)]
    assert spans
    for attrs in spans:
        assert wanted <= attrs.keys(), sorted(wanted - attrs.keys())
    for metric, keys in official.metrics.items():
        points = [p for p in h.points(metric)
                  if p.attributes.get(a.GEN_AI_OPERATION_NAME) == operation]
        assert points, metric
        for point in points:
            assert keys <= point.attributes.keys(), (metric, sorted(keys - point.attributes.keys()))
    return spans


# ------------------------------------------------------------------ openai

def openai_client(server: ScriptedLLMServer) -> Any:
    import openai

    return openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)


def openai_weather_tool() -> dict[str, Any]:
    return {"type": "function",
            "function": {"name": "get_current_weather", "description": "Weather of a place",
                         "parameters": dict(WEATHER_SCHEMA, additionalProperties=False)}}


@pytest.mark.host("openai")
@needs(openai_lacks(chat_params=("service_tier",)))
def test_openai_inference(openai_sdk: TelemetryHarness, server: ScriptedLLMServer) -> None:
    response = openai_client(server).chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "system", "content": SYSTEM},
                  {"role": "user", "content": "Say this is a test"}],
        max_tokens=100, temperature=0.5, top_p=0.9, frequency_penalty=0.1,
        presence_penalty=0.2, stop=["\n\n"], seed=42, service_tier="default")
    (span,) = assert_covers(openai_sdk, OPENAI, CHAT_SPAN, a.OP_CHAT, STRUCTURED | TOOLS)
    assert span[a.GEN_AI_REQUEST_TOP_P] == 0.9
    assert span[a.GEN_AI_REQUEST_FREQUENCY_PENALTY] == 0.1
    assert span[a.GEN_AI_REQUEST_PRESENCE_PENALTY] == 0.2
    assert span[a.GEN_AI_REQUEST_SEED] == 42
    assert list(span[a.GEN_AI_REQUEST_STOP_SEQUENCES]) == ["\n\n"]
    assert span[a.GEN_AI_REQUEST_MAX_TOKENS] == 100
    assert span[a.GEN_AI_REQUEST_TEMPERATURE] == 0.5
    assert span[a.OPENAI_REQUEST_SERVICE_TIER] == "default"
    assert span[a.OPENAI_RESPONSE_SYSTEM_FINGERPRINT] == response.system_fingerprint
    assert span[a.GEN_AI_RESPONSE_ID] == response.id
    assert span[a.GEN_AI_RESPONSE_MODEL] == response.model
    assert list(span[a.GEN_AI_RESPONSE_FINISH_REASONS]) == ["stop"]
    assert (span[a.SERVER_ADDRESS], span[a.SERVER_PORT]) == ("127.0.0.1", server.port)
    assert a.GEN_AI_REQUEST_CHOICE_COUNT not in span  # n not set: the default is not recorded
    assert a.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS not in span  # no cached tokens reported


@pytest.mark.host("openai")
def test_openai_tool_calling(openai_sdk: TelemetryHarness, server: ScriptedLLMServer) -> None:
    client, tool = openai_client(server), openai_weather_tool()
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM},
                                      {"role": "user", "content": "Weather in Seattle today?"}]
    server.push_tool_calls([("get_current_weather", {"location": "Seattle"})])
    first = client.chat.completions.create(model="gpt-4o-mini", messages=messages,
                                           tools=[tool], tool_choice="auto", max_tokens=100,
                                           temperature=0.5)
    message = first.choices[0].message
    messages.append(message.model_dump(exclude_none=True))
    for call in message.tool_calls or []:
        place = json.loads(call.function.arguments)["location"]
        messages.append({"role": "tool", "content": f"70 degrees and sunny in {place}",
                         "tool_call_id": call.id})
    client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=[tool],
                                   max_tokens=100, temperature=0.5)
    spans = assert_covers(openai_sdk, OPENAI, CHAT_SPAN, a.OP_CHAT, SAMPLING | STRUCTURED)
    # OpenAI's finish reasons go on the span as the API sends them (not mapped).
    assert [list(s[a.GEN_AI_RESPONSE_FINISH_REASONS]) for s in spans] == [["tool_calls"],
                                                                          ["stop"]]


@pytest.mark.host("openai")
@needs(openai_lacks(chat_params=("modalities", "audio")))
def test_openai_multimodal(openai_sdk: TelemetryHarness, server: ScriptedLLMServer) -> None:
    client = openai_client(server)
    client.chat.completions.create(
        model="gpt-4o-mini", max_tokens=100, temperature=0.5,
        messages=[{"role": "system", "content": SYSTEM},
                  {"role": "user", "content": [
                      {"type": "text", "text": "What is in this image?"},
                      {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                  ]}])
    client.chat.completions.create(
        model="gpt-4o-audio-preview", modalities=["text", "audio"],
        audio={"voice": "alloy", "format": "wav"}, max_tokens=100, temperature=0.5,
        messages=[{"role": "system", "content": SYSTEM},
                  {"role": "user", "content": [
                      {"type": "text", "text": "Repeat what you hear."},
                      {"type": "input_audio", "input_audio": {"data": "bW9jaw==", "format": "wav"}},
                  ]}])
    spans = assert_covers(openai_sdk, OPENAI, CHAT_SPAN, a.OP_CHAT, SAMPLING | STRUCTURED | TOOLS)
    assert [s[a.GEN_AI_REQUEST_MODEL] for s in spans] == ["gpt-4o-mini", "gpt-4o-audio-preview"]


@pytest.mark.host("openai")
def test_openai_structured_output(openai_sdk: TelemetryHarness,
                                  server: ScriptedLLMServer) -> None:
    server.push('{"location": "Seattle", "temperature": 70, "conditions": "sunny"}')
    schema = {"type": "object", "additionalProperties": False,
              "properties": {"location": {"type": "string"}, "temperature": {"type": "integer"},
                             "conditions": {"enum": ["sunny", "cloudy", "rainy"]}},
              "required": ["location", "temperature", "conditions"]}
    openai_client(server).chat.completions.create(
        model="gpt-4o-mini", max_tokens=100, temperature=0.5,
        messages=[{"role": "system", "content": SYSTEM},
                  {"role": "user", "content": "What is the weather in Seattle?"}],
        response_format={"type": "json_schema",
                         "json_schema": {"name": "forecast", "strict": True, "schema": schema}})
    (span,) = assert_covers(openai_sdk, OPENAI, CHAT_SPAN, a.OP_CHAT, SAMPLING | TOOLS)
    assert span[a.GEN_AI_OUTPUT_TYPE] == "json"


@pytest.mark.host("openai")
@pytest.mark.parametrize(("response_format", "output_type"), [
    ({"type": "json_object"}, "json"), ({"type": "text"}, "text")])
def test_openai_output_type_named_as_the_official_instrumentation_does(
        openai_sdk: TelemetryHarness, server: ScriptedLLMServer,
        response_format: dict[str, str], output_type: str) -> None:
    openai_client(server).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "json please"}],
        response_format=response_format, n=2)
    (span,) = model_spans(openai_sdk, a.OP_CHAT)
    assert span.attributes is not None
    assert span.attributes[a.GEN_AI_OUTPUT_TYPE] == output_type
    assert span.attributes[a.GEN_AI_REQUEST_CHOICE_COUNT] == 2


@pytest.mark.host("openai")
def test_openai_choice_without_finish_reason_counts_as_error() -> None:
    """One reason per choice, "error" for a choice the server left without one (the
    official OpenAI instrumentation's rule)."""
    from openai.types.chat import ChatCompletion
    from openai.types.chat.chat_completion import Choice

    choices = [Choice.model_construct(index=0, finish_reason="length"),
               Choice.model_construct(index=1, finish_reason=None)]
    facts = ResponseFacts()
    facts.absorb(ChatCompletion.model_construct(id="c", model="m", choices=choices, usage=None,
                                                service_tier=None, system_fingerprint=None))
    assert facts.finish_reasons == ["length", "error"]


@pytest.mark.host("openai")
def test_openai_embeddings(openai_sdk: TelemetryHarness, server: ScriptedLLMServer) -> None:
    response = openai_client(server).embeddings.create(
        model="text-embedding-3-small", input=["Say this is a test", "And this is another one"],
        encoding_format="float", dimensions=256)
    (span,) = assert_covers(openai_sdk, OPENAI, EMBEDDINGS_SPAN, a.OP_EMBEDDINGS)
    assert span[a.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] == len(response.data[0].embedding) == 256
    assert list(span[a.GEN_AI_REQUEST_ENCODING_FORMATS]) == ["float"]
    assert span[a.GEN_AI_RESPONSE_MODEL] == response.model
    assert span[a.GEN_AI_USAGE_INPUT_TOKENS] == response.usage.prompt_tokens
    (point,) = [p for p in openai_sdk.points(a.M_TOKEN_USAGE)]
    assert point.attributes[a.GEN_AI_TOKEN_TYPE] == "input"


@pytest.mark.host("openai")
def test_openai_cached_and_reasoning_tokens(openai_sdk: TelemetryHarness,
                                     server: ScriptedLLMServer) -> None:
    server.push(ScriptedReply(text="cached", cache_read_tokens=3, reasoning_tokens=2))
    response = openai_client(server).chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "a long shared prefix"}])
    (span,) = model_spans(openai_sdk, a.OP_CHAT)
    assert span.attributes is not None
    assert span.attributes[a.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 3
    assert span.attributes[a.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] == 2
    # OpenAI counts cached tokens inside prompt_tokens already: nothing is added.
    assert span.attributes[a.GEN_AI_USAGE_INPUT_TOKENS] == response.usage.prompt_tokens
    assert span.attributes[a.GEN_AI_USAGE_OUTPUT_TOKENS] == response.usage.completion_tokens


@pytest.mark.host("openai")
def test_openai_failure_marks_every_metric_point(openai_sdk: TelemetryHarness,
                                                 server: ScriptedLLMServer) -> None:
    import openai

    server.push_error(400, "bad request")
    with pytest.raises(openai.BadRequestError):
        openai_client(server).chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}], top_p=0.5)
    (span,) = model_spans(openai_sdk, a.OP_CHAT)
    assert span.attributes is not None and span.attributes[a.GEN_AI_REQUEST_TOP_P] == 0.5
    (point,) = openai_sdk.points(a.M_OPERATION_DURATION)
    wanted = OPENAI.metrics[a.M_OPERATION_DURATION] - {a.GEN_AI_RESPONSE_MODEL}  # no response
    assert wanted | {a.ERROR_TYPE} <= point.attributes.keys()
    assert point.attributes[a.ERROR_TYPE] == span.attributes[a.ERROR_TYPE]


# --------------------------------------------------------------- anthropic

def anthropic_client(server: ScriptedLLMServer) -> Any:
    import anthropic

    return anthropic.Anthropic(base_url=server.root_url, api_key="test", max_retries=0)


def sampling(**options: float) -> dict[str, Any]:
    """Anthropic 2.x's ``create`` has no temperature/top_p/top_k parameters: they go in
    ``extra_body`` there (the request sent is the same as the scenario's)."""
    import anthropic

    if "temperature" in inspect.signature(anthropic.resources.Messages.create).parameters:
        return options
    return {"extra_body": options}


# The conformance mock server reports prompt-cache usage on its text answers.
def cached_answer(text: str = "This is a response.", **kw: Any) -> ScriptedReply:
    return ScriptedReply(text=text, cache_read_tokens=3, cache_creation_tokens=5, **kw)


def cached_tool_use() -> ScriptedReply:
    return ScriptedReply(tool_calls=[("get_current_weather", {"location": "Seattle"})],
                         cache_read_tokens=3, cache_creation_tokens=5)


@pytest.mark.host("anthropic")
def test_anthropic_inference(anthropic_sdk: TelemetryHarness,
                             server: ScriptedLLMServer) -> None:
    server.push(cached_answer())
    message = anthropic_client(server).messages.create(
        model="claude-sonnet-4-20250514", system=SYSTEM,
        messages=[{"role": "user", "content": "Say this is a test"}],
        max_tokens=100, stop_sequences=["\n\n"], **sampling(temperature=0.5, top_p=0.9, top_k=10))
    (span,) = assert_covers(anthropic_sdk, ANTHROPIC, CHAT_SPAN, a.OP_CHAT)
    assert span[a.GEN_AI_REQUEST_TOP_P] == 0.9
    assert span[a.GEN_AI_REQUEST_TOP_K] == 10
    assert list(span[a.GEN_AI_REQUEST_STOP_SEQUENCES]) == ["\n\n"]
    assert span[a.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 3
    assert span[a.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] == 5
    # Cache tokens are part of the input tokens (the conventions' rule).
    assert span[a.GEN_AI_USAGE_INPUT_TOKENS] == message.usage.input_tokens + 3 + 5
    assert list(span[a.GEN_AI_RESPONSE_FINISH_REASONS]) == ["stop"]  # end_turn
    assert span[a.GEN_AI_RESPONSE_ID] == message.id
    (point,) = [p for p in anthropic_sdk.points(a.M_TOKEN_USAGE)
                if p.attributes[a.GEN_AI_TOKEN_TYPE] == "input"]
    assert point.sum == span[a.GEN_AI_USAGE_INPUT_TOKENS]


@pytest.mark.host("anthropic")
def test_anthropic_tool_calling(anthropic_sdk: TelemetryHarness,
                                server: ScriptedLLMServer) -> None:
    client = anthropic_client(server)
    tool = {"name": "get_current_weather", "description": "Weather of a place",
            "input_schema": WEATHER_SCHEMA}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Seattle today?"}]
    server.push(cached_tool_use(), cached_answer())
    first = client.messages.create(model="claude-sonnet-4-20250514", system=SYSTEM,
                                   messages=messages, tools=[tool], max_tokens=100,
                                   **sampling(temperature=0.5))
    messages.append({"role": "assistant", "content": first.content})
    messages.append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": block.id,
         "content": f"70 degrees and sunny in {block.input['location']}"}
        for block in first.content if block.type == "tool_use"]})
    client.messages.create(model="claude-sonnet-4-20250514", system=SYSTEM, messages=messages,
                           tools=[tool], max_tokens=100, **sampling(temperature=0.5))
    spans = assert_covers(anthropic_sdk, ANTHROPIC, CHAT_SPAN, a.OP_CHAT, SAMPLING)
    assert [list(s[a.GEN_AI_RESPONSE_FINISH_REASONS]) for s in spans] == [["tool_call"],
                                                                          ["stop"]]


@pytest.mark.host("anthropic")
def test_anthropic_multimodal(anthropic_sdk: TelemetryHarness,
                              server: ScriptedLLMServer) -> None:
    client = anthropic_client(server)
    server.push(cached_answer(), cached_answer())
    for kind, media_type, data, ask in (("image", "image/png", PNG, "What is in this image?"),
                                        ("document", "application/pdf", PDF, "Summarise this.")):
        client.messages.create(
            model="claude-sonnet-4-20250514", system=SYSTEM, max_tokens=100,
            **sampling(temperature=0.5),
            messages=[{"role": "user", "content": [
                {"type": "text", "text": ask},
                {"type": kind, "source": {"type": "base64", "media_type": media_type,
                                          "data": data}}]}])
    assert len(assert_covers(anthropic_sdk, ANTHROPIC, CHAT_SPAN, a.OP_CHAT, SAMPLING)) == 2


@pytest.mark.host("anthropic")
@pytest.mark.parametrize(("stop_reason", "finish_reason"), [
    ("max_tokens", "length"), ("stop_sequence", "stop"), ("refusal", "refusal")])
def test_anthropic_stop_reasons_mapped_as_the_official_instrumentation_maps_them(
        anthropic_sdk: TelemetryHarness, server: ScriptedLLMServer, stop_reason: str,
        finish_reason: str) -> None:
    server.push(ScriptedReply(text="cut", finish_reason=stop_reason))
    anthropic_client(server).messages.create(model="claude-sonnet-4-20250514", max_tokens=1,
                                             messages=[{"role": "user", "content": "x"}])
    (span,) = model_spans(anthropic_sdk, a.OP_CHAT)
    assert span.attributes is not None
    assert list(span.attributes[a.GEN_AI_RESPONSE_FINISH_REASONS]) == [finish_reason]
    assert a.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS not in span.attributes  # reported as 0


# ------------------------------------------------- content capture on, as the suite runs

@pytest.mark.host("openai", "anthropic")
@needs(openai_lacks(chat_params=("max_completion_tokens",))
       + anthropic_lacks(create_params=("service_tier",)))
def test_coverage_is_the_same_with_content_capture_on(server: ScriptedLLMServer) -> None:
    """The suite runs with SPAN_AND_EVENT; no parameter depends on the capture mode."""
    harness = TelemetryHarness(SPAN_AND_EVENT)
    try:
        with Instrumented(harness, OpenAIInstrumentor()):
            openai_client(server).chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}],
                top_p=0.9, seed=42, stop="END", max_completion_tokens=7)
        server.push(cached_answer())
        with Instrumented(harness, AnthropicInstrumentor()):
            anthropic_client(server).messages.create(
                model="claude-sonnet-4-20250514", max_tokens=10, service_tier="standard_only",
                **sampling(top_k=3),
                messages=[{"role": "user", "content": "x"}])
        chat_openai, chat_anthropic = (dict(s.attributes or {})
                                       for s in model_spans(harness, a.OP_CHAT))
        assert list(chat_openai[a.GEN_AI_REQUEST_STOP_SEQUENCES]) == ["END"]  # str → list
        assert chat_openai[a.GEN_AI_REQUEST_SEED] == 42
        assert chat_openai[a.GEN_AI_REQUEST_MAX_TOKENS] == 7  # OpenAI's newer name for it
        assert chat_anthropic[a.GEN_AI_REQUEST_TOP_K] == 3
        assert chat_anthropic[a.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] == 5
        assert not [k for k in chat_anthropic if k.startswith("openai.")]  # service_tier sent
        harness.assert_clean()
    finally:
        harness.close()


# ------------------------------------------- the request parameters, one at a time

@pytest.mark.parametrize(("request_params", "provider", "expected"), [
    ({"stop": "END"}, "openai", {a.GEN_AI_REQUEST_STOP_SEQUENCES: ["END"]}),
    ({"stop_sequences": ["a", "b"]}, "anthropic", {a.GEN_AI_REQUEST_STOP_SEQUENCES: ["a", "b"]}),
    ({"n": 3}, "openai", {a.GEN_AI_REQUEST_CHOICE_COUNT: 3}),
    ({"n": 1}, "openai", {}),
    ({"response_format": {"type": "json_object"}}, "openai", {a.GEN_AI_OUTPUT_TYPE: "json"}),
    ({"response_format": dict}, "openai", {a.GEN_AI_OUTPUT_TYPE: "json"}),  # parse(model)
    ({"text": {"format": {"type": "json_schema"}}}, "openai", {a.GEN_AI_OUTPUT_TYPE: "json"}),
    ({"text": {"format": {"type": "text"}}}, "openai", {a.GEN_AI_OUTPUT_TYPE: "text"}),
    ({"service_tier": "flex"}, "openai", {a.OPENAI_REQUEST_SERVICE_TIER: "flex"}),
    ({"service_tier": "auto"}, "openai", {}),
    ({"service_tier": "standard_only"}, "anthropic", {}),
    ({"max_completion_tokens": 9, "max_tokens": 5}, "openai", {a.GEN_AI_REQUEST_MAX_TOKENS: 9}),
    ({"extra_body": {"top_k": 4, "temperature": 1.0}, "temperature": 0.2}, "anthropic",
     {a.GEN_AI_REQUEST_TOP_K: 4, a.GEN_AI_REQUEST_TEMPERATURE: 0.2}),  # the request's own win
])
def test_each_shaped_request_parameter_is_read_alone(
        request_params: dict[str, Any], provider: str, expected: dict[str, Any]) -> None:
    """Each key read after the one pass over the request is read when it is the only
    one (the pass notices it), and means what the official instrumentations read."""
    attrs: dict[str, Any] = {}
    request_attributes({"model": "m", "messages": [], **request_params}, attrs, provider)
    assert attrs == expected

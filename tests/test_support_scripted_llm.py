"""Self-tests for the scripted LLM server, driven by the real ``openai`` and ``anthropic`` SDKs."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anthropic
import httpx
import openai
import pytest
from _support.scripted_llm import ScriptedLLMServer, ScriptedReply
from _support.sdk_releases import needs, openai_lacks

pytestmark = pytest.mark.host("openai", "anthropic")

CHAT_TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
RESP_TOOLS: list[Any] = [
    {"type": "function", "name": "get_weather", "parameters": {"type": "object"}, "strict": False}
]
ANTH_TOOLS: list[Any] = [{"name": "get_weather", "input_schema": {"type": "object"}}]
QUESTION = "What is the weather in Paris?"  # 29 chars; + "user" role -> 33 chars -> 9 tokens


@pytest.fixture
def llm() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(tool_first=True, tool_args={"get_weather": {"city": "Paris"}}) as srv:
        yield srv


@pytest.fixture
def oai(llm: ScriptedLLMServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=llm.base_url, api_key="sk-test", max_retries=0)


@pytest.fixture
def claude(llm: ScriptedLLMServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=llm.root_url, api_key="sk-ant-test", max_retries=0)


def test_openai_chat_tool_call_then_answer(llm: ScriptedLLMServer, oai: openai.OpenAI) -> None:
    llm.push_tool_calls([("get_weather", {"city": "Lyon"}), ("get_time", {"tz": "CET"})])
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    first = oai.chat.completions.create(model="gpt-test", messages=messages, tools=CHAT_TOOLS)

    assert (first.id, first.model, first.object) == ("chatcmpl-1", "gpt-test", "chat.completion")
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    calls = choice.message.tool_calls or []
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [  # type: ignore[union-attr]
        ("call_1", "get_weather", {"city": "Lyon"}),
        ("call_2", "get_time", {"tz": "CET"}),
    ]
    assert first.usage is not None and first.usage.prompt_tokens == math.ceil(33 / 4)
    assert first.usage.total_tokens == first.usage.prompt_tokens + first.usage.completion_tokens

    messages.append(choice.message.model_dump(exclude_none=True))
    for call in calls:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "Sunny, 24C " * 10})
    second = oai.chat.completions.create(model="gpt-test", messages=messages, tools=CHAT_TOOLS)
    assert second.id == "chatcmpl-2"
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "done: " + ("Sunny, 24C " * 10)[:50]
    assert second.choices[0].message.tool_calls is None

    reqs = llm.requests
    assert [(r.method, r.path, r.api, r.status) for r in reqs] == [
        ("POST", "/v1/chat/completions", "chat", 200)
    ] * 2
    assert reqs[0].headers["authorization"] == "Bearer sk-test"
    assert reqs[1].body["messages"][-1]["tool_call_id"] == "call_2"
    for req, resp in zip(reqs, (first, second), strict=True):
        assert req.response_id == resp.id
        assert resp.usage is not None
        assert req.usage == {
            "input_tokens": resp.usage.prompt_tokens,
            "output_tokens": resp.usage.completion_tokens,
        }
    assert second.usage is not None and second.usage.prompt_tokens > first.usage.prompt_tokens


def test_openai_chat_streaming_with_usage(llm: ScriptedLLMServer, oai: openai.OpenAI) -> None:
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    stream = oai.chat.completions.create(
        model="gpt-stream",
        messages=messages,
        tools=CHAT_TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert {c.id for c in chunks} == {"chatcmpl-1"} and {c.model for c in chunks} == {"gpt-stream"}
    *body, usage_chunk = chunks
    assert usage_chunk.choices == [] and usage_chunk.usage is not None
    assert all(c.usage is None for c in body)
    assert body[-1].choices[0].finish_reason == "tool_calls"
    deltas = [tc for c in body for tc in (c.choices[0].delta.tool_calls or [])]
    assert deltas[0].id == "call_1" and deltas[0].function.name == "get_weather"  # type: ignore[union-attr]
    args = "".join(d.function.arguments or "" for d in deltas)  # type: ignore[union-attr]
    assert len(deltas) > 2 and json.loads(args) == {"city": "Paris"}  # default policy, tool_args
    recorded = llm.requests[-1]
    assert recorded.stream and recorded.response_id == "chatcmpl-1"
    assert recorded.usage == {
        "input_tokens": usage_chunk.usage.prompt_tokens,
        "output_tokens": usage_chunk.usage.completion_tokens,
    }

    messages.append(
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": args},
                }
            ],
        }
    )
    messages.append({"role": "tool", "tool_call_id": "call_1", "content": "rain"})
    no_usage = list(
        oai.chat.completions.create(
            model="gpt-stream", messages=messages, tools=CHAT_TOOLS, stream=True
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in no_usage) == "done: rain"
    assert no_usage[-1].choices[0].finish_reason == "stop"
    assert all(c.usage is None and c.choices for c in no_usage)  # no usage chunk unless asked


@needs(openai_lacks(responses=True))
def test_openai_responses_api(llm: ScriptedLLMServer, oai: openai.OpenAI) -> None:
    first = oai.responses.create(model="gpt-resp", input=QUESTION, tools=RESP_TOOLS)
    assert (first.id, first.model, first.status) == ("resp_1", "gpt-resp", "completed")
    (call,) = first.output
    assert call.type == "function_call"
    assert (call.name, json.loads(call.arguments), call.call_id) == (
        "get_weather",
        {"city": "Paris"},
        "call_1",
    )
    assert first.usage is not None
    assert first.usage.input_tokens == math.ceil(len(QUESTION) / 4)
    assert llm.requests[-1].usage == {
        "input_tokens": first.usage.input_tokens,
        "output_tokens": first.usage.output_tokens,
    }

    follow_up: list[Any] = [
        {"role": "user", "content": QUESTION},
        {
            "type": "function_call",
            "call_id": call.call_id,
            "name": call.name,
            "arguments": call.arguments,
        },
        {"type": "function_call_output", "call_id": call.call_id, "output": "cloudy"},
    ]
    second = oai.responses.create(model="gpt-resp", input=follow_up, tools=RESP_TOOLS)
    assert second.id == "resp_2" and second.output_text == "done: cloudy"
    assert second.output[0].type == "message"

    llm.push_tool_calls([("get_weather", {"city": "Nice"})], text="Let me check.")
    events = list(oai.responses.create(model="gpt-resp", input=QUESTION, stream=True))
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert text == "Let me check." and json.loads(args) == {"city": "Nice"}
    final = events[-1].response  # type: ignore[union-attr]
    assert final.id == "resp_3" and final.usage is not None
    assert [o.type for o in final.output] == ["message", "function_call"]
    assert llm.requests[-1].usage == {
        "input_tokens": final.usage.input_tokens,
        "output_tokens": final.usage.output_tokens,
    }

    with oai.responses.stream(model="gpt-resp", input="hello") as helper:
        streamed = helper.get_final_response()
    assert streamed.output_text == "ok" and streamed.id == "resp_4"


def test_anthropic_messages_create(llm: ScriptedLLMServer, claude: anthropic.Anthropic) -> None:
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    first = claude.messages.create(
        model="claude-test", max_tokens=256, messages=messages, tools=ANTH_TOOLS
    )
    assert (first.id, first.model, first.stop_reason) == ("msg_1", "claude-test", "tool_use")
    (block,) = first.content
    assert block.type == "tool_use"
    assert (block.id, block.name, block.input) == ("toolu_1", "get_weather", {"city": "Paris"})
    assert first.usage.input_tokens == math.ceil(33 / 4)
    req = llm.requests[-1]
    assert (req.path, req.api) == ("/v1/messages", "messages")
    assert "anthropic-version" in req.headers
    auth = req.headers.get("x-api-key", "") + req.headers.get("authorization", "")
    assert "sk-ant-test" in auth  # SDK versions differ: x-api-key vs. Bearer
    assert req.usage == {"input_tokens": 9, "output_tokens": first.usage.output_tokens}

    messages.append({"role": "assistant", "content": [block.model_dump(exclude_none=True)]})
    result = [{"type": "text", "text": "Light breeze, 19C"}]
    messages.append(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": block.id, "content": result}],
        }
    )
    second = claude.messages.create(model="claude-test", max_tokens=256, messages=messages)
    assert second.id == "msg_2" and second.stop_reason == "end_turn"
    assert [(b.type, getattr(b, "text", None)) for b in second.content] == [
        ("text", "done: Light breeze, 19C")
    ]
    assert llm.requests[-1].usage == {
        "input_tokens": second.usage.input_tokens,
        "output_tokens": second.usage.output_tokens,
    }


def test_anthropic_streaming(llm: ScriptedLLMServer, claude: anthropic.Anthropic) -> None:
    llm.push_tool_calls([("get_weather", {"city": "Oslo", "units": "C"})], text="Checking.")
    raw = list(
        claude.messages.create(
            model="claude-s",
            max_tokens=64,
            messages=[{"role": "user", "content": QUESTION}],
            tools=ANTH_TOOLS,
            stream=True,
        )
    )
    types = [e.type for e in raw]
    assert types[0] == "message_start" and types[-2:] == ["message_delta", "message_stop"]
    assert types.count("content_block_start") == 2 and types.count("content_block_stop") == 2
    starts = [e.content_block for e in raw if e.type == "content_block_start"]
    assert [b.type for b in starts] == ["text", "tool_use"]
    assert starts[1].id == "toolu_1"  # type: ignore[union-attr]
    partial = "".join(
        e.delta.partial_json
        for e in raw
        if e.type == "content_block_delta" and e.delta.type == "input_json_delta"
    )
    assert json.loads(partial) == {"city": "Oslo", "units": "C"}
    delta = raw[-2]
    assert delta.delta.stop_reason == "tool_use"  # type: ignore[union-attr]
    assert llm.requests[-1].usage == {
        "input_tokens": raw[0].message.usage.input_tokens,  # type: ignore[union-attr]
        "output_tokens": delta.usage.output_tokens,  # type: ignore[union-attr]
    }

    with claude.messages.stream(
        model="claude-s",
        max_tokens=64,
        messages=[{"role": "user", "content": QUESTION}],
        tools=ANTH_TOOLS,
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == ""  # default policy: tool call only
    assert final.id == "msg_2" and final.stop_reason == "tool_use"
    assert [(b.type, getattr(b, "input", None)) for b in final.content] == [
        ("tool_use", {"city": "Paris"})
    ]
    assert llm.requests[-1].usage == {
        "input_tokens": final.usage.input_tokens,
        "output_tokens": final.usage.output_tokens,
    }


def test_injected_errors_surface_in_sdks(
    llm: ScriptedLLMServer, oai: openai.OpenAI, claude: anthropic.Anthropic
) -> None:
    llm.push_error(429, "slow down", retry_after=0)
    with pytest.raises(openai.RateLimitError) as oai_err:
        oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert oai_err.value.status_code == 429 and "slow down" in str(oai_err.value)
    assert oai_err.value.response.headers["retry-after"] == "0"

    llm.push(ScriptedReply(error_status=529, error_message="overloaded"))
    with pytest.raises(anthropic.APIStatusError) as anth_err:
        claude.messages.create(model="c", max_tokens=8, messages=[{"role": "user", "content": "x"}])
    assert anth_err.value.status_code == 529
    assert anth_err.value.body == {  # type: ignore[comparison-overlap]
        "type": "error",
        "error": {"type": "overloaded_error", "message": "overloaded"},
    }

    # The SDK's own retry consumes the next scripted reply.
    llm.push_error(503, retry_after=0)
    llm.push_text("recovered")
    retrying = openai.OpenAI(base_url=llm.base_url, api_key="k", max_retries=1)
    ok = retrying.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert ok.choices[0].message.content == "recovered"
    assert [r.status for r in llm.requests] == [429, 529, 503, 200]
    assert llm.pending() == 0


def test_default_policy_models_and_recording() -> None:
    with ScriptedLLMServer(default_text="fine", models=["m-a", "m-b"]) as llm:
        client = openai.OpenAI(base_url=llm.base_url, api_key="k", max_retries=0)
        assert [m.id for m in client.models.list()] == ["m-a", "m-b"]
        claude = anthropic.Anthropic(base_url=llm.root_url, api_key="k", max_retries=0)
        assert [m.id for m in claude.models.list()] == ["m-a", "m-b"]

        # tool_first is off: tools are offered but the model answers text.
        answer = client.chat.completions.create(
            model="m-a", messages=[{"role": "user", "content": "hi"}], tools=CHAT_TOOLS
        )
        assert answer.choices[0].message.content == "fine"
        llm.tool_first = True
        called = client.chat.completions.create(
            model="m-a", messages=[{"role": "user", "content": "hi"}], tools=CHAT_TOOLS
        )
        assert called.choices[0].message.tool_calls[0].function.arguments == "{}"  # type: ignore[index]

        miss = httpx.post(f"{llm.root_url}/v1/audio/speech", json={"input": "x"})
        assert miss.status_code == 404 and "error" in miss.json()
        bad = httpx.post(f"{llm.base_url}/chat/completions", content=b"not json")
        assert bad.status_code == 400

        def ask(i: int) -> str:
            r = client.chat.completions.create(
                model=f"m-{i}", messages=[{"role": "user", "content": f"q{i}"}]
            )
            return r.id

        with ThreadPoolExecutor(8) as pool:
            ids = list(pool.map(ask, range(16)))
        assert len(set(ids)) == 16
        chat = [r for r in llm.wait_for_requests(20) if r.api == "chat" and r.status == 200]
        assert sorted(r.body["model"] for r in chat[2:]) == sorted(f"m-{i}" for i in range(16))
        assert {r.response_id for r in chat[2:]} == set(ids)
        assert [r.api for r in llm.requests[:2]] == ["models", "models"]

        llm.push_text("queued")
        llm.clear()
        assert llm.requests == [] and llm.pending() == 0


def test_openai_embeddings_floats_base64_and_dimensions(llm: ScriptedLLMServer,
                                                        oai: openai.OpenAI) -> None:
    import base64
    import struct

    floats = oai.embeddings.create(model="emb", input=["one", "two"])
    assert [len(d.embedding) for d in floats.data] == [8, 8]
    assert floats.data[0].embedding != floats.data[1].embedding  # one vector per input
    assert floats.usage.prompt_tokens == math.ceil(len("onetwo") / 4)
    again = oai.embeddings.create(model="emb", input="one", encoding_format="base64")
    raw = base64.b64decode(again.data[0].embedding)
    assert list(struct.unpack("<8f", raw)) == pytest.approx(floats.data[0].embedding)
    sized = oai.embeddings.create(model="emb", input="one", dimensions=3)
    assert len(sized.data[0].embedding) == 3
    recs = [r for r in llm.requests if r.api == "embeddings"]
    assert len(recs) == 3 and recs[0].usage == {"input_tokens": 2, "output_tokens": 0}
    llm.push_error(429, "slow down")
    with pytest.raises(openai.RateLimitError):
        oai.embeddings.create(model="emb", input="x")

"""How otelmw reads a provider's response: ``get`` answers as ``getattr(obj, key, None)``
on every shape (pydantic models through pydantic's own storage, without raising), and a
host's chat span whose SDK layer read the raw response does not read the host's answer
again (``spans/chat.py``: ``_read_already``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pydantic
import pytest
from _support.sdk_releases import needs, openai_lacks
from openai.types.chat import ChatCompletion

from otelmw.telemetry.shapes.responses import ResponseFacts, get
from otelmw.telemetry.spans.chat import _read_already

CHAT = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "hi"}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        "undeclared": {"kept": True}}
RESPONSE = {"id": "resp_1", "object": "response", "created_at": 1.0, "model": "m",
            "output": [], "parallel_tool_calls": False, "tool_choice": "auto", "tools": [],
            "status": "completed",
            "usage": {"input_tokens": 4, "output_tokens": 6, "total_tokens": 10,
                      "input_tokens_details": {"cached_tokens": 1,
                                               "cache_write_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 2}}}
KEYS = ("id", "model", "choices", "usage", "undeclared", "nope", "prompt_tokens",
        "input_tokens", "output_tokens", "completion_tokens", "input_tokens_details",
        "prompt_tokens_details", "output_text", "status", "model_dump", "__class__")


class Private(pydantic.BaseModel):
    """A model of the program's own: a property, a private attribute, extras."""

    model_config = pydantic.ConfigDict(extra="allow")
    name: str = "n"
    _secret: str = pydantic.PrivateAttr(default="s")

    @property
    def shown(self) -> str:
        return self.name.upper()


class Lazy:
    """A class whose own ``__getattr__`` answers every name."""

    def __getattr__(self, key: str) -> Any:
        return f"lazy:{key}"


class Raising:
    @property
    def id(self) -> str:
        raise RuntimeError("no id")


NO_RESPONSES = openai_lacks(responses=True)  # openai 1.x before the Responses API


def _response() -> Any:
    from openai.types.responses import Response

    return Response.model_validate(RESPONSE)


def _objects() -> list[Any]:
    chat = ChatCompletion.model_validate(CHAT)
    responses = [] if NO_RESPONSES else [_response(), _response().usage]
    return [chat, chat.usage, chat.choices[0], *responses, Private(extra_field=7),
            SimpleNamespace(id="ns", model=None), Lazy()]


@pytest.mark.parametrize("obj", _objects(), ids=lambda o: type(o).__name__)
def test_get_answers_as_getattr_does(obj: Any) -> None:
    for key in (*KEYS, "shown", "extra_field", "name", "_secret"):
        assert get(obj, key) == getattr(obj, key, None), key


def test_get_of_a_raising_attribute_is_none() -> None:
    assert get(Raising(), "id") is None
    assert get(None, "id") is None and get({"id": 1}, "id") == 1


@needs(NO_RESPONSES)
def test_facts_from_a_responses_api_answer() -> None:
    facts = ResponseFacts()
    facts.absorb(_response())
    assert (facts.response_id, facts.model, facts.input_tokens, facts.output_tokens,
            facts.cache_read_tokens, facts.reasoning_tokens) == ("resp_1", "m", 4, 6, 1, 2)


def test_a_host_answer_is_read_only_when_the_sdk_layer_missed_a_fact() -> None:
    full = ResponseFacts()
    full.absorb(ChatCompletion.model_validate(CHAT))
    assert _read_already(full)
    assert not _read_already(None)
    for missing in ("response_id", "model", "input_tokens", "output_tokens"):
        partial = ResponseFacts()
        partial.absorb(ChatCompletion.model_validate(CHAT))
        setattr(partial, missing, None)
        assert not _read_already(partial), missing
    partial.finish_reasons = []
    assert not _read_already(partial)

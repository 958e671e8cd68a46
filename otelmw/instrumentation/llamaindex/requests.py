"""A LlamaIndex model request in the OpenAI chat shape otelmw's plugins and spans see,
and a rewrite of it mapped back onto the call.

The request is ``{"model", "messages", <the LLM's own settings that are set>, <the
call's keyword arguments>}``: ``messages`` are the call's ``ChatMessage`` objects as
OpenAI chat messages (text content, ``tool_calls`` from ``ToolCallBlock``s or the
provider's own, ``tool_call_id``); the settings are the LLM's ``temperature``,
``max_tokens``, ``top_p`` and friends when set; the keyword arguments (``tools``,
``tool_choice``, ``parallel_tool_calls``… as the provider class formatted them) as they
are. A rewrite goes back as: changed messages → new ``ChatMessage`` objects (an
unchanged one stays the host's own object), a changed or added LLM setting (``model``
included) → a copy of the LLM with it, anything else → the call's keyword arguments.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

# The LLM's own fields a request shows (when set) and a rewrite sets on a copy of it.
_SETTINGS = ("temperature", "max_tokens", "top_p", "frequency_penalty", "presence_penalty",
             "seed", "stop")


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError):
        return str(value)


def _tool_call(block: Any) -> dict[str, Any]:
    return {"id": block.tool_call_id, "type": "function",
            "function": {"name": block.tool_name, "arguments": _text(block.tool_kwargs)}}


def _provider_tool_call(call: Any) -> dict[str, Any] | None:
    """An OpenAI SDK tool call object (or its dict) of ``additional_kwargs``."""
    if isinstance(call, dict):
        return call
    dump = getattr(call, "model_dump", None)
    if callable(dump):
        dumped = dump(exclude_none=True)
        return dumped if isinstance(dumped, dict) else None
    return None


def message_dict(message: Any) -> dict[str, Any]:
    """One ``ChatMessage`` as an OpenAI chat message."""
    role = getattr(message.role, "value", message.role)
    out: dict[str, Any] = {"role": str(role)}
    blocks = list(getattr(message, "blocks", None) or ())
    texts = [b.text for b in blocks if getattr(b, "block_type", None) == "text"]
    calls = [_tool_call(b) for b in blocks if getattr(b, "block_type", None) == "tool_call"]
    extra = getattr(message, "additional_kwargs", None) or {}
    if not calls and isinstance(extra.get("tool_calls"), list):
        calls = [c for c in map(_provider_tool_call, extra["tool_calls"]) if c is not None]
    out["content"] = "".join(texts) if texts or not calls else None
    if calls:
        out["tool_calls"] = calls
    for key in ("tool_call_id", "name"):
        value = extra.get(key)
        if isinstance(value, str):
            out[key] = value
    return out


class RequestView(NamedTuple):
    """One chat call's request as otelmw sees it, and what it was made of."""

    request: dict[str, Any]
    messages: list[Any]  # the host's ChatMessage objects
    kwargs: dict[str, Any]  # the call's keyword arguments
    settings: dict[str, Any]  # the LLM's own settings shown in the request


def model_name(llm: Any) -> str | None:
    for attr in ("model", "model_name"):
        value = getattr(llm, attr, None)
        if isinstance(value, str) and value:
            return value
    return None


def request_view(llm: Any, messages: Any, kwargs: dict[str, Any]) -> RequestView:
    hosted = list(messages)
    settings = {name: getattr(llm, name) for name in _SETTINGS
                if getattr(llm, name, None) is not None}
    request: dict[str, Any] = {"model": model_name(llm),
                               "messages": [message_dict(m) for m in hosted],
                               **settings, **kwargs}
    return RequestView(request, hosted, kwargs, settings)


def _message_of(wanted: dict[str, Any], original: Any) -> Any:
    """A ``ChatMessage`` of a rewritten OpenAI chat message (the original's provider
    fields kept where the rewrite did not say otherwise)."""
    from llama_index.core.base.llms.types import ChatMessage, TextBlock, ToolCallBlock

    extra = dict(getattr(original, "additional_kwargs", None) or {})
    for key in ("tool_call_id", "name"):
        if isinstance(wanted.get(key), str):
            extra[key] = wanted[key]
    blocks: list[Any] = []
    content = wanted.get("content")
    if isinstance(content, list):  # content parts: their text
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    if content:
        blocks.append(TextBlock(text=str(content)))
    for call in wanted.get("tool_calls") or ():
        function = call.get("function") or {}
        blocks.append(ToolCallBlock(tool_call_id=call.get("id"),
                                    tool_name=function.get("name") or "",
                                    tool_kwargs=function.get("arguments") or {}))
    if "tool_calls" in extra and "tool_calls" in wanted:
        extra["tool_calls"] = wanted["tool_calls"]
    return ChatMessage(role=wanted.get("role", "user"), blocks=blocks, additional_kwargs=extra)


class Applied(NamedTuple):
    """What the host's call is made with after a rewrite."""

    messages: list[Any]
    kwargs: dict[str, Any]
    llm_update: dict[str, Any]  # LLM fields to set on a copy (empty: the LLM itself)


def applied(view: RequestView, llm: Any, payload: Any) -> Applied:
    """The host's call for ``payload`` (the request the execution chain hands on)."""
    if payload is view.request or not isinstance(payload, dict):
        return Applied(view.messages, view.kwargs, {})
    before = view.request["messages"]
    wanted = payload.get("messages", before)
    messages = view.messages
    if wanted is not before and wanted != before:
        messages = [view.messages[i] if i < len(before) and m == before[i]
                    else _message_of(m, view.messages[i] if i < len(view.messages) else None)
                    for i, m in enumerate(wanted) if isinstance(m, dict)]
    kwargs = dict(view.kwargs)
    update: dict[str, Any] = {}
    fields = getattr(type(llm), "model_fields", {})
    for key, value in payload.items():
        if key == "messages":
            continue
        if key == "model":
            if value != view.request.get("model") and isinstance(value, str) and value:
                update[_model_field(llm)] = value
            continue
        if key in kwargs:
            kwargs[key] = value
        elif key in fields:
            if value != view.settings.get(key, getattr(llm, key, None)):
                update[key] = value
        else:
            kwargs[key] = value
    for key in view.kwargs.keys() - payload.keys():
        kwargs.pop(key, None)
    return Applied(messages, kwargs, update)


def _model_field(llm: Any) -> str:
    return "model" if isinstance(getattr(llm, "model", None), str) else "model_name"

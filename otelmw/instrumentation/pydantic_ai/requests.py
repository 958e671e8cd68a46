"""A pydantic-ai model request as otelmw's ``llm_request`` stage sees it, and back.

otelmw's plugins and its ``chat`` span read a request in the OpenAI chat shape
(``{"model", "messages", "tools", "temperature", ...}``), on every host. pydantic-ai
holds the request as its own messages, settings and parameters, so the adapter hands
the plugins a view in that shape (``RequestView``) and maps a rewrite of it back onto
what pydantic-ai sends (``RequestView.applied``): changed settings; messages added,
removed or with a new text (system, user and assistant text; the instructions' text).
Messages the rewrite left as they were stay pydantic-ai's own objects, parts and
all. A changed ``model`` is not applied (pydantic-ai picks the model in its own
``before_model_request`` / ``prepare_model_request``); it is counted and ignored.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import replace
from typing import Any, NamedTuple

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters

from .results import failed

# pydantic-ai ``ModelSettings`` keys that are also OpenAI request keys (same meaning).
SETTING_KEYS = ("temperature", "max_tokens", "top_p", "seed", "presence_penalty",
                "frequency_penalty", "parallel_tool_calls")
_STOP = "stop_sequences"  # pydantic-ai's name; the view's is ``stop``


class Source(NamedTuple):
    """Where one view message came from: ``kind`` ``part`` (``messages[message].parts
    [part]``), ``response`` (``messages[message]``) or ``instructions``."""

    kind: str
    message: int = -1
    part: int = -1


def _user_content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    items: list[dict[str, Any]] = []
    for item in content:
        if isinstance(item, str):
            items.append({"type": "text", "text": item})
        else:  # images, documents, audio: named, never inlined
            items.append({"type": "text", "text": f"[{type(item).__name__}]"})
    return items


def _part_message(part: ModelRequestPart) -> dict[str, Any] | None:
    if isinstance(part, SystemPromptPart):
        return {"role": "system", "content": part.content}
    if isinstance(part, UserPromptPart):
        return {"role": "user", "content": _user_content(part.content)}
    if isinstance(part, ToolReturnPart):
        return {"role": "tool", "tool_call_id": part.tool_call_id,
                "content": part.model_response_str()}
    response_text = getattr(part, "model_response", None)
    if callable(response_text):  # retry feedback (and the deprecated retry prompt): the
        # text the model is sent
        text = response_text()
        call_id = getattr(part, "tool_call_id", None)
        if getattr(part, "tool_name", None) is None or call_id is None:
            return {"role": "user", "content": text}
        return {"role": "tool", "tool_call_id": call_id, "content": text}
    return None


def _response_message(response: ModelResponse) -> dict[str, Any]:
    texts = [p.content for p in response.parts if isinstance(p, TextPart)]
    calls = [{"id": p.tool_call_id, "type": "function",
              "function": {"name": p.tool_name, "arguments": p.args_as_json_str()}}
             for p in response.parts if isinstance(p, ToolCallPart)]
    out: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        out["tool_calls"] = calls
    return out


def _tool_definitions(params: ModelRequestParameters) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {
        "name": t.name, "description": t.description or "",
        "parameters": t.parameters_json_schema}} for t in params.function_tools]


def _instructions(params: ModelRequestParameters) -> str | None:
    parts = getattr(params, "instruction_parts", None) or ()
    texts = [p.content for p in parts if isinstance(getattr(p, "content", None), str)]
    return "\n\n".join(texts) if texts else None


def _key(message: Any) -> str:
    return json.dumps(message, sort_keys=True, default=str)


class RequestView:
    """One pydantic-ai model request in the OpenAI chat shape (``request``), and the
    way back (``applied``)."""

    __slots__ = ("messages", "params", "request", "settings", "sources")

    def __init__(self, model_name: str, messages: list[ModelMessage], settings: Any,
                 params: ModelRequestParameters, stream: bool) -> None:
        self.messages, self.settings, self.params = messages, settings, params
        view: list[dict[str, Any]] = []
        sources: list[Source] = []
        instructions = _instructions(params)
        if instructions is not None:
            view.append({"role": "system", "content": instructions})
            sources.append(Source("instructions"))
        for i, message in enumerate(messages):
            if isinstance(message, ModelResponse):
                view.append(_response_message(message))
                sources.append(Source("response", i))
                continue
            for j, part in enumerate(message.parts):
                shaped = _part_message(part)
                if shaped is not None:
                    view.append(shaped)
                    sources.append(Source("part", i, j))
        request: dict[str, Any] = {"model": model_name, "messages": view}
        given = dict(settings or {})
        for key in SETTING_KEYS:
            if given.get(key) is not None:
                request[key] = given[key]
        if given.get(_STOP):
            request["stop"] = list(given[_STOP])
        tools = _tool_definitions(params)
        if tools:
            request["tools"] = tools
        if stream:
            request["stream"] = True
        self.request, self.sources = request, sources

    def applied(self, effective: Any) -> tuple[list[ModelMessage], Any, ModelRequestParameters]:
        """The messages, settings and parameters to send for ``effective`` (the request
        after otelmw's ``llm_request`` stage)."""
        if effective is self.request or not isinstance(effective, dict):
            return self.messages, self.settings, self.params
        original = self.request
        if effective.get("model") != original["model"]:
            failed("llm_request", ValueError(
                "a rewrite of 'model' is not applied on pydantic-ai (the model is chosen "
                "by pydantic-ai's own model request hooks)"))
        settings = self._settings(effective)
        messages, params = self.messages, self.params
        new = effective.get("messages")
        if isinstance(new, list) and new != original["messages"]:
            messages, params = self._messages(new)
        return messages, settings, params

    def _settings(self, effective: dict[str, Any]) -> Any:
        original = self.request
        changed: dict[str, Any] = {}
        for key in (*SETTING_KEYS, "stop"):
            if effective.get(key) != original.get(key):
                changed[_STOP if key == "stop" else key] = effective.get(key)
        if not changed:
            return self.settings
        settings = dict(self.settings or {})
        for key, value in changed.items():
            if value is None:
                settings.pop(key, None)
            else:
                settings[key] = value
        return settings

    def _messages(self, new: list[Any]) -> tuple[list[ModelMessage], ModelRequestParameters]:
        """Rebuild the message list: unchanged view messages keep their pydantic-ai
        objects; an edited text replaces that part's or response's text; new ones
        become new parts."""
        old = self.request["messages"]
        units: list[tuple[Source | None, dict[str, Any] | None]] = []  # (source, edited)
        matcher = difflib.SequenceMatcher(a=[_key(m) for m in old],
                                          b=[_key(m) for m in new], autojunk=False)
        for op, a0, a1, b0, b1 in matcher.get_opcodes():
            if op == "equal":
                units.extend((self.sources[k], None) for k in range(a0, a1))
            elif op == "replace" and a1 - a0 == b1 - b0:
                units.extend((self.sources[a0 + k], new[b0 + k]) for k in range(a1 - a0))
            elif op in ("replace", "insert"):
                units.extend((None, m) for m in new[b0:b1])
            # "delete": the messages are dropped
        params = self.params
        if not any(src is not None and src.kind == "instructions" for src, _ in units):
            params = replace(params, instruction_parts=[])
        out: list[ModelMessage] = []
        group: list[ModelRequestPart] = []
        group_from: int | None = None  # the original request the parts came from

        def flush() -> None:
            nonlocal group, group_from
            if group:
                base = self.messages[group_from] if group_from is not None else None
                out.append(replace(base, parts=group) if isinstance(base, ModelRequest)
                           else ModelRequest(parts=group))
            group, group_from = [], None

        for src, edited in units:
            if src is not None and src.kind == "instructions":
                if edited is not None and isinstance(edited.get("content"), str):
                    params = _with_instructions(params, edited["content"])
                continue
            if src is not None and src.kind == "response":
                flush()
                response = self.messages[src.message]
                assert isinstance(response, ModelResponse)
                out.append(response if edited is None else _edited_response(response, edited))
                continue
            if src is not None:
                message = self.messages[src.message]
                assert isinstance(message, ModelRequest)
                part = message.parts[src.part]
                if group_from is not None and group_from != src.message:
                    flush()
                group_from = src.message
                group.append(part if edited is None else _edited_part(part, edited))
                continue
            assert edited is not None
            made = _new_message(edited)
            if isinstance(made, ModelResponse):
                flush()
                out.append(made)
            elif made is not None:
                group.append(made)
        flush()
        return out, params


def _with_instructions(params: ModelRequestParameters, text: str) -> ModelRequestParameters:
    parts = list(getattr(params, "instruction_parts", None) or ())
    if not parts:
        return params
    return replace(params, instruction_parts=[replace(parts[0], content=text)])


def _text_of(message: dict[str, Any]) -> str | None:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [c.get("text") for c in content if isinstance(c, dict)]
        return "".join(t for t in texts if isinstance(t, str))
    return None


def _edited_part(part: ModelRequestPart, edited: dict[str, Any]) -> ModelRequestPart:
    text = _text_of(edited)
    if text is None or not isinstance(part, SystemPromptPart | UserPromptPart | ToolReturnPart):
        return part
    edited_part: ModelRequestPart = replace(part, content=text)  # type: ignore[arg-type]
    return edited_part


def _edited_response(response: ModelResponse, edited: dict[str, Any]) -> ModelResponse:
    text = _text_of(edited)
    if text is None:
        return response
    others = [p for p in response.parts if not isinstance(p, TextPart)]
    return replace(response, parts=[TextPart(content=text), *others])


def _new_message(message: Any) -> ModelRequestPart | ModelResponse | None:
    if not isinstance(message, dict):
        return None
    role, text = message.get("role"), _text_of(message)
    if text is None:
        return None
    if role in ("system", "developer"):
        return SystemPromptPart(content=text)
    if role == "user":
        return UserPromptPart(content=text)
    if role == "assistant":
        return ModelResponse(parts=[TextPart(content=text)])
    return None

"""The GenAI conventions' message shapes, built from what providers send and answer.

Pure functions from OpenAI chat completions, the Responses API and Anthropic messages
(requests as dicts, responses and stream chunks as dicts or SDK objects; Hermes and
PraisonAI hand the pipeline the same OpenAI/Anthropic shapes) to the JSON-schema shapes
of ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (``role`` + ``parts``, output
messages with ``finish_reason``), ``gen_ai.system_instructions`` (a list of parts) and
``gen_ai.tool.definitions``. Parts: ``text``, ``tool_call`` (arguments parsed when they
are JSON), ``tool_call_response``, ``blob`` (inline base64 data), ``file`` (a provider
file id), ``uri``, ``reasoning``. Blocks of a type the conventions have no part for are
left out, as the official instrumentations do.

Where the system prompt goes follows the conventions: instructions given *apart from*
the chat history (Anthropic's ``system``, the Responses API's ``instructions``) are
``gen_ai.system_instructions``; a ``system``/``developer`` message *in* the history
(OpenAI chat) stays in ``gen_ai.input.messages`` with its role.

Nothing here redacts or truncates: ``ContentPolicy.render_messages`` does, part
content by part content (``CONTENT_FIELDS`` names them).
"""

from __future__ import annotations

import base64
import json
import math
import mimetypes
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final, NamedTuple

from .responses import ANTHROPIC_FINISH_REASONS, SEQUENCES, get

Part = dict[str, Any]
Message = dict[str, Any]

# The content each part (and tool definition) type carries, and how it may be cut:
# ``text`` a string, ``binary`` base64 (cut at a 4-character boundary), ``any`` any JSON
# value (a structured one cut as its JSON text), ``optional`` a field the schema does
# not require (a tool's description and parameter schema: left out whole when it does
# not fit, never cut: a cut schema is no schema).
TEXT, BINARY, ANY, OPTIONAL = "text", "binary", "any", "optional"
CONTENT_FIELDS: Final[dict[str, tuple[tuple[str, str], ...]]] = {
    "text": (("content", TEXT),),
    "reasoning": (("content", TEXT),),
    "blob": (("content", BINARY),),
    "uri": (("uri", TEXT),),
    "tool_call": (("arguments", ANY),),
    "tool_call_response": (("response", ANY),),
    "function": (("description", OPTIONAL), ("parameters", OPTIONAL)),  # a tool definition
}

_MAX_DEPTH = 32
# OpenAI accepts "wav" and "mp3" for input_audio ("audio/mp3" is not a registered type).
_AUDIO_MIME = {"wav": "audio/wav", "mp3": "audio/mpeg"}
DOCUMENT = "document"  # a modality the schema allows as a string (official instrumentations)

# Built once (``isinstance(v, str | bool | int)`` builds the union on every call).
_SCALARS = (str, bool, int)


class RequestContent(NamedTuple):
    """The content attributes of one chat request (each empty when the request has none)."""

    input_messages: list[Message]
    system_instructions: list[Part]
    tool_definitions: list[dict[str, Any]]


# ---------------------------------------------------------------- values
def plain(value: Any, budget: list[int] | None = None, depth: int = 0) -> Any:
    """``value`` as JSON data (SDK models dumped, bytes as base64, non-finite floats and
    unknown objects as text), at most ``budget[0]`` nodes (the rest left out)."""
    if budget is None:
        budget = [4096]
    budget[0] -= 1
    if value is None or isinstance(value, _SCALARS):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth >= _MAX_DEPTH or budget[0] < 0:
        return "…"
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if budget[0] < 0:
                break
            out[k if isinstance(k, str) else str(k)] = plain(v, budget, depth + 1)
        return out
    if isinstance(value, SEQUENCES):
        items = []
        for v in value:
            if budget[0] < 0:
                break
            items.append(plain(v, budget, depth + 1))
        return items
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return plain(dump(mode="json", exclude_none=True), budget, depth + 1)
        except Exception:
            pass
    try:
        return str(value)[:4096]
    except Exception:
        return f"<{type(value).__name__}>"


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


_MAX_PARSED = 65536  # longer argument texts stay text (they will be cut anyway)


def _arguments(raw: Any) -> Any:
    """Tool-call arguments as an object where the text is JSON, else as they came."""
    if isinstance(raw, str):
        if len(raw) > _MAX_PARSED:
            return raw
        try:
            return plain(json.loads(raw))
        except ValueError:
            return raw
    return plain(raw)


def _seq(value: Any) -> Sequence[Any]:
    # Only a materialized sequence is walked: iterating a generator would drain the
    # caller's request before the SDK reads it.
    return value if isinstance(value, SEQUENCES) else ()


# ---------------------------------------------------------------- media
def _media_from_url(url: str, modality: str, mime_type: str | None = None) -> Part:
    """A ``data:`` URL as a blob, any other URL as a uri part."""
    if url.startswith("data:"):
        header, _, payload = url[5:].partition(",")
        mime = header.split(";", 1)[0] or mime_type
        if ";base64" not in header.lower():
            payload = base64.b64encode(urllib.parse.unquote_to_bytes(payload)).decode("ascii")
        return _blob(modality, mime, payload)
    return _media("uri", modality, mime_type, "uri", url)


def _media(kind: str, modality: str, mime_type: str | None, key: str, value: str) -> Part:
    """A blob, file or uri part (``mime_type`` left out when unknown: it is optional)."""
    part: Part = {"type": kind, "modality": modality}
    if mime_type:
        part["mime_type"] = mime_type
    part[key] = value
    return part


def _file_part(file_id: str, modality: str, mime_type: str | None = None) -> Part:
    return _media("file", modality, mime_type, "file_id", file_id)


def _blob(modality: str, mime_type: str | None, base64_data: str) -> Part:
    return _media("blob", modality, mime_type, "content", "".join(base64_data.split()))


def _openai_file(descriptor: Any) -> Part | None:
    """OpenAI's ``file``/``input_file``: a hosted file id, inline data or a URL."""
    filename = _str(get(descriptor, "filename"))
    mime = mimetypes.guess_type(filename)[0] if filename else None
    file_id = _str(get(descriptor, "file_id"))
    if file_id:
        return _file_part(file_id, DOCUMENT, mime)
    data = _str(get(descriptor, "file_data"))
    if data:
        if data.startswith("data:"):
            return _media_from_url(data, DOCUMENT, mime)
        return _blob(DOCUMENT, mime, data)
    url = _str(get(descriptor, "file_url"))
    return _media_from_url(url, DOCUMENT, mime) if url else None


def _anthropic_source(source: Any, modality: str) -> Part | None:
    """An Anthropic image/document ``source``: base64, url, text, file or content."""
    kind, mime = get(source, "type"), _str(get(source, "media_type"))
    if kind == "base64":
        data = _str(get(source, "data"))
        return _blob(modality, mime, data) if data is not None else None
    if kind == "url":
        url = _str(get(source, "url"))
        return _media_from_url(url, modality, mime) if url else None
    if kind == "file":
        file_id = _str(get(source, "file_id"))
        return _file_part(file_id, modality, mime) if file_id else None
    if kind == "text":
        data = _str(get(source, "data"))
        return {"type": "text", "content": data} if data is not None else None
    if kind == "content":
        content = get(source, "content")
        if isinstance(content, str):
            return {"type": "text", "content": content}
        texts = [t for b in _seq(content) if isinstance(t := get(b, "text"), str)]
        return {"type": "text", "content": "\n".join(texts)} if texts else None
    return None


# ---------------------------------------------------------------- content blocks
def content_parts(content: Any) -> list[Part]:
    """A message's content (a string, or blocks of OpenAI chat, the Responses API or
    Anthropic, dicts or SDK objects) as parts."""
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[Part] = []
    if content is None:  # (an assistant message with tool calls; no system instructions)
        return parts
    for block in _seq(content):
        part = _block_part(block)
        if part is not None:
            parts.append(part)
    return parts


def _block_part(block: Any) -> Part | None:
    if isinstance(block, str):
        return {"type": "text", "content": block}
    kind = get(block, "type")
    if kind in ("text", "input_text", "output_text") or (kind is None and get(block, "text")):
        text = _str(get(block, "text"))
        return {"type": "text", "content": text} if text is not None else None
    if kind == "refusal":
        refusal = _str(get(block, "refusal"))
        return {"type": "text", "content": refusal} if refusal is not None else None
    if kind in ("image_url", "input_image"):  # OpenAI chat / Responses
        image = get(block, "image_url")
        url = image if isinstance(image, str) else _str(get(image, "url"))
        if url:
            return _media_from_url(url, "image")
        file_id = _str(get(block, "file_id"))
        return _file_part(file_id, "image") if file_id else None
    if kind == "input_audio":
        audio = get(block, "input_audio")
        data, fmt = _str(get(audio, "data")), get(audio, "format")
        if data is None:
            return None
        return _blob("audio", _AUDIO_MIME.get(fmt) if isinstance(fmt, str) else None, data)
    if kind in ("file", "input_file"):  # chat nests the descriptor under "file"
        return _openai_file(get(block, "file") or block)
    if kind == "image":  # Anthropic
        return _anthropic_source(get(block, "source"), "image")
    if kind == "document":
        return _anthropic_source(get(block, "source"), DOCUMENT)
    if kind == "tool_use":
        return {"type": "tool_call", "id": _str(get(block, "id")),
                "name": _str(get(block, "name")) or "", "arguments": plain(get(block, "input"))}
    if kind == "tool_result":
        return {"type": "tool_call_response", "id": _str(get(block, "tool_use_id")),
                "response": plain(get(block, "content"))}
    if kind == "thinking":
        thinking = _str(get(block, "thinking"))
        return {"type": "reasoning", "content": thinking} if thinking is not None else None
    if kind == "redacted_thinking":
        data = _str(get(block, "data"))
        return {"type": "reasoning", "content": data} if data is not None else None
    return None


def _openai_tool_calls(tool_calls: Any) -> list[Part]:
    parts: list[Part] = []
    for tc in _seq(tool_calls):
        fn = get(tc, "function")
        if fn is None:  # a custom tool call
            fn = get(tc, "custom")
            args = plain(get(fn, "input"))
        else:
            args = _arguments(get(fn, "arguments"))
        parts.append({"type": "tool_call", "id": _str(get(tc, "id")),
                      "name": _str(get(fn, "name")) or "", "arguments": args})
    return parts


# ``reasoning_content`` (DeepSeek, vLLM, OpenRouter and other OpenAI-compatible servers)
# or ``reasoning`` (Hermes keeps it on assistant messages), in the order looked up.
_REASONING_FIELDS = ("reasoning_content", "reasoning")
# pydantic model class → whether it neither declares the reasoning fields nor has an
# attribute of their names: its instances then hold them, if at all, among their
# undeclared fields (``__pydantic_extra__``). Bounded by the classes a process answers with.
_UNDECLARED: dict[type, bool] = {}


def _reasoning_fields(message: Any) -> list[Any]:
    """``get(message, key)`` of each of ``_REASONING_FIELDS``, fields a message seldom
    has. The SDKs' objects are pydantic models, and ``getattr`` of a field one lacks
    raises inside pydantic's ``__getattr__`` (several times a hit's cost, on every
    response); a model keeps the fields it does not declare in ``__pydantic_extra__``,
    so they are looked up there, both from one read of it."""
    if not isinstance(message, dict) and message is not None and _undeclared(type(message)):
        try:
            held = vars(message)
            extra = message.__pydantic_extra__
        except Exception:
            pass  # not the model it looked like: read as any object
        else:
            if not isinstance(extra, dict):
                extra = {}
            return [held[key] if key in held else extra.get(key) for key in _REASONING_FIELDS]
    return [get(message, key) for key in _REASONING_FIELDS]


def _undeclared(cls: type) -> bool:
    """``_UNDECLARED``'s verdict for ``cls``, worked out on its first message."""
    undeclared = _UNDECLARED.get(cls)
    if undeclared is None:
        fields = getattr(cls, "__pydantic_fields__", None)
        undeclared = isinstance(fields, dict) and not any(
            key in fields or any(key in vars(k) for k in cls.__mro__)
            for key in _REASONING_FIELDS)
        if len(_UNDECLARED) < 256:
            _UNDECLARED[cls] = undeclared
    return undeclared


def _reasoning_text(message: Any) -> Part | None:
    """A message's reasoning text (the first of ``_REASONING_FIELDS`` that holds one)."""
    for text in _reasoning_fields(message):
        if isinstance(text, str) and text:
            return {"type": "reasoning", "content": text}
    return None


def _chat_message_parts(message: Any) -> list[Part]:
    """One OpenAI chat or Anthropic message's parts."""
    role, content = get(message, "role"), get(message, "content")
    if role == "tool":  # OpenAI chat: a tool result
        return [{"type": "tool_call_response", "id": _str(get(message, "tool_call_id")),
                 "response": plain(content)}]
    parts: list[Part] = []
    if role == "assistant":
        reasoning = _reasoning_text(message)
        if reasoning is not None:
            parts.append(reasoning)
    parts += content_parts(content)
    if role == "assistant":
        refusal = _str(get(message, "refusal"))
        if refusal:
            parts.append({"type": "text", "content": refusal})
        parts += _openai_tool_calls(get(message, "tool_calls"))
    return parts


def _message(role: Any, parts: list[Part], name: Any = None) -> Message:
    msg: Message = {"role": role if isinstance(role, str) and role else "user", "parts": parts}
    if isinstance(name, str) and name:
        msg["name"] = name
    return msg


# ---------------------------------------------------------------- Responses API items
_CALL_ARGUMENTS = {"function_call": "arguments", "custom_tool_call": "input"}
_CALL_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output",
                           "computer_call_output"})


def _call_id(item: Any) -> str | None:
    return _str(get(item, "call_id")) or _str(get(item, "id"))


def _reasoning_parts(item: Any) -> list[Part]:
    parts = [{"type": "reasoning", "content": t} for b in _seq(get(item, "summary"))
             if isinstance(t := get(b, "text"), str)]
    parts += [{"type": "reasoning", "content": t} for b in _seq(get(item, "content"))
              if get(b, "type") == "reasoning_text" and isinstance(t := get(b, "text"), str)]
    return parts


def _tool_call_item(item: Any, kind: str) -> Part:
    raw = get(item, _CALL_ARGUMENTS[kind])
    return {"type": "tool_call", "id": _call_id(item), "name": _str(get(item, "name")) or "",
            "arguments": _arguments(raw) if kind == "function_call" else plain(raw)}


def _responses_input(value: Any) -> list[Message]:
    if isinstance(value, str):
        return [_message("user", [{"type": "text", "content": value}])]
    messages: list[Message] = []
    for item in _seq(value):
        kind = get(item, "type")
        if kind in _CALL_ARGUMENTS:
            msg = _message("assistant", [_tool_call_item(item, kind)])
        elif kind in _CALL_OUTPUTS:
            msg = _message("tool", [{"type": "tool_call_response", "id": _call_id(item),
                                     "response": plain(get(item, "output"))}])
        elif kind == "reasoning":
            msg = _message("assistant", _reasoning_parts(item))
        elif isinstance(get(item, "role"), str):
            msg = _message(get(item, "role"), content_parts(get(item, "content")),
                           get(item, "name"))
        else:
            continue
        if not msg["parts"]:
            continue
        # Parallel tool calls are one assistant turn that the flat item list splits up.
        if (messages and msg["role"] == "assistant" and messages[-1]["role"] == "assistant"
                and _only_calls(msg) and _only_calls(messages[-1])):
            messages[-1]["parts"] += msg["parts"]
            continue
        messages.append(msg)
    return messages


def _only_calls(msg: Message) -> bool:
    return all(p["type"] == "tool_call" for p in msg["parts"])


# ---------------------------------------------------------------- requests
def system_parts(system: Any) -> list[Part]:
    """Anthropic's ``system`` / the Responses API's ``instructions``: a string or blocks."""
    if isinstance(system, str):
        return [{"type": "text", "content": system}] if system else []
    return [p for p in content_parts(system) if p["type"] == "text"]


def tool_definitions(tools: Any) -> list[dict[str, Any]]:
    """OpenAI chat (``{"type": "function", "function": {...}}``), Responses (flat) and
    Anthropic (``input_schema``) tools; built-in tools by their type."""
    out: list[dict[str, Any]] = []
    for tool in _seq(tools):
        kind, fn = get(tool, "type"), get(tool, "function")
        schema_key = "parameters"
        if fn is None:
            fn = tool
            if get(tool, "input_schema") is not None or (kind in (None, "custom")
                                                         and get(tool, "name")):
                schema_key = "input_schema"  # Anthropic's custom tools
            elif kind != "function":
                if isinstance(kind, str):  # built-in tools; OpenAI's custom tools nest
                    name = _str(get(tool, "name")) or _str(get(get(tool, kind), "name"))
                    out.append({"type": kind, "name": name or kind})
                continue
        definition: dict[str, Any] = {"type": "function", "name": _str(get(fn, "name")) or ""}
        description, schema = _str(get(fn, "description")), plain(get(fn, schema_key))
        if description:
            definition["description"] = description
        if isinstance(schema, dict | bool):  # a draft-07 schema is an object or a bool
            definition["parameters"] = schema
        out.append(definition)
    return out


def request_content(request: Any) -> RequestContent:
    """The content attributes of a chat request: OpenAI chat or Anthropic ``messages``
    (and Anthropic's ``system``), or the Responses API's ``input`` and ``instructions``."""
    if not isinstance(request, Mapping):
        return RequestContent([], [], [])
    inputs = list(newest_input_messages(request))
    inputs.reverse()
    return RequestContent(inputs, system_instructions(request),
                          tool_definitions(request.get("tools")))


def newest_input_messages(request: Any) -> Iterator[Message]:
    """A chat request's input messages (``request_content``'s), newest first, each
    shaped when it is reached: the input messages attribute keeps the newest ones that
    fit the content limit, and an agent's conversation only grows, so the older ones
    are never looked at."""
    if not isinstance(request, Mapping):
        return iter(())
    messages = request.get("messages")
    if messages is not None:
        return _chat_inputs_newest_first(_seq(messages))
    return reversed(_responses_input(request.get("input")))


def _chat_inputs_newest_first(messages: Sequence[Any]) -> Iterator[Message]:
    for m in reversed(messages):
        parts = _chat_message_parts(m)
        if parts:
            yield _message(get(m, "role"), parts, get(m, "name"))


def system_instructions(request: Mapping[str, Any]) -> list[Part]:
    """Anthropic's ``system`` or the Responses API's ``instructions`` (chat requests
    keep theirs among the messages)."""
    if request.get("messages") is not None:
        return system_parts(request.get("system"))
    return system_parts(request.get("instructions"))


# ---------------------------------------------------------------- finish reasons
# The span's ``gen_ai.response.finish_reasons`` keep OpenAI's own words, as the official
# OpenAI instrumentation does; output messages need the schema's, for every provider.
_FINISH = {"tool_calls": "tool_call", "function_call": "tool_call",  # OpenAI chat
           **ANTHROPIC_FINISH_REASONS,  # the span's mapping for Anthropic
           "completed": "stop", "failed": "error", "cancelled": "error"}  # Responses status
_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


def finish_reason(reason: Any) -> str:
    """A provider's finish/stop reason as the conventions name it (``stop``, ``length``,
    ``content_filter``, ``tool_call``, ``error``; others as the provider said); ``error``
    when there is none, as the official instrumentations do."""
    if not isinstance(reason, str) or not reason:
        return "error"
    return _FINISH.get(reason, reason)


# ---------------------------------------------------------------- responses
def output_messages(response: Any) -> list[Message]:
    """The output messages of a full response: one per choice (OpenAI chat), the one
    generation of a Responses API response or an Anthropic message."""
    choices = get(response, "choices")
    if isinstance(choices, SEQUENCES):
        out = []
        for choice in choices:
            message = get(choice, "message")
            if message is None:
                continue
            out.append({"role": _str(get(message, "role")) or "assistant",
                        "parts": _chat_message_parts(message),
                        "finish_reason": finish_reason(get(choice, "finish_reason"))})
        return out
    output = get(response, "output")
    if isinstance(output, SEQUENCES) and get(response, "object") == "response":
        return _responses_output(response, output)
    content = get(response, "content")
    if isinstance(content, SEQUENCES) and get(response, "type") == "message":
        return [{"role": _str(get(response, "role")) or "assistant",
                 "parts": content_parts(content),
                 "finish_reason": finish_reason(get(response, "stop_reason"))}]
    return []


def _responses_output(response: Any, output: Sequence[Any]) -> list[Message]:
    """A Responses API response is one generation: its output items (reasoning, text,
    tool calls) are the parts of one assistant message."""
    parts: list[Part] = []
    for item in output:
        kind = get(item, "type")
        if kind == "message":
            parts += content_parts(get(item, "content"))
        elif kind in _CALL_ARGUMENTS:
            parts.append(_tool_call_item(item, kind))
        elif kind == "reasoning":
            parts += _reasoning_parts(item)
    if not parts:
        return []
    status = get(response, "status")
    if any(p["type"] == "tool_call" for p in parts) and status == "completed":
        reason = "tool_call"
    elif status == "incomplete":
        why = get(get(response, "incomplete_details"), "reason")
        reason = _INCOMPLETE.get(why, why) if isinstance(why, str) else "incomplete"
    else:
        reason = finish_reason(status)
    return [{"role": "assistant", "parts": parts, "finish_reason": reason}]


# Text fields of an OpenAI chat delta: (field, block key, part type); tool calls use
# their own indexes (>= 0).
_DELTA_TEXTS = (("reasoning_content", -2, "reasoning"), ("reasoning", -2, "reasoning"),
                ("content", -1, "text"), ("refusal", -1, "text"))


class _StreamedChoice:
    """One choice (or the one Anthropic message) being assembled from stream chunks."""

    __slots__ = ("blocks", "finish", "role")

    def __init__(self) -> None:
        self.role = "assistant"
        self.finish: Any = None
        self.blocks: dict[int, Part] = {}  # by block / tool-call index, in arrival order

    def block(self, index: Any, fresh: Part) -> Part:
        key = index if isinstance(index, int) else len(self.blocks)
        got = self.blocks.get(key)
        if got is None:
            got = self.blocks[key] = fresh
        return got


class OutputCollector:
    """The output messages of one chat response, whole or streamed: ``add_response``
    takes a full response, ``add_chunk`` one stream chunk or event (OpenAI chat deltas,
    Anthropic content-block events, the Responses API's final ``response.*`` event).
    Streamed text is kept up to ``cap`` characters per part."""

    __slots__ = ("_cap", "_choices", "_response")

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._response: Any = None
        self._choices: dict[int, _StreamedChoice] = {}

    def add_response(self, response: Any) -> None:
        if response is not None:
            self._response = response

    def _grow(self, part: Part, key: str, more: Any) -> None:
        if isinstance(more, str) and more:
            have = part.get(key) or ""
            if len(have) < self._cap:  # bounded: a long stream keeps its first cap chars
                part[key] = have + more[: self._cap - len(have)]

    def _choice(self, index: Any) -> _StreamedChoice:
        key = index if isinstance(index, int) else 0
        choice = self._choices.get(key)
        if choice is None:
            choice = self._choices[key] = _StreamedChoice()
        return choice

    def add_chunk(self, chunk: Any) -> None:
        kind = get(chunk, "type")
        if isinstance(kind, str):
            self._event(kind, chunk)
            return
        for ch in _seq(get(chunk, "choices")):
            choice = self._choice(get(ch, "index"))
            delta = get(ch, "delta")
            role = get(delta, "role")
            if isinstance(role, str) and role:
                choice.role = role
            for key, block_key, part_type in _DELTA_TEXTS:
                more = get(delta, key)
                if isinstance(more, str) and more:
                    self._grow(choice.block(block_key, {"type": part_type, "content": ""}),
                               "content", more)
            for tc in _seq(get(delta, "tool_calls")):
                call = choice.block(get(tc, "index"), {"type": "tool_call", "id": None,
                                                       "name": "", "arguments": ""})
                if isinstance(get(tc, "id"), str):
                    call["id"] = get(tc, "id")
                fn = get(tc, "function")
                if isinstance(get(fn, "name"), str):
                    call["name"] += get(fn, "name")
                self._grow(call, "arguments", get(fn, "arguments"))
            if get(ch, "finish_reason"):
                choice.finish = get(ch, "finish_reason")

    def _event(self, kind: str, event: Any) -> None:
        if kind.startswith("response.") and kind in ("response.completed",
                                                     "response.incomplete", "response.failed"):
            self.add_response(get(event, "response"))
            return
        choice = self._choice(0)
        if kind == "content_block_start":  # Anthropic
            block = get(event, "content_block")
            btype = get(block, "type")
            fresh: Part | None = None
            if btype == "text":
                fresh = {"type": "text", "content": _str(get(block, "text")) or ""}
            elif btype == "thinking":
                fresh = {"type": "reasoning", "content": _str(get(block, "thinking")) or ""}
            elif btype == "tool_use":
                fresh = {"type": "tool_call", "id": _str(get(block, "id")),
                         "name": _str(get(block, "name")) or "", "arguments": ""}
            if fresh is not None:
                choice.block(get(event, "index"), fresh)
        elif kind == "content_block_delta":
            index, delta = get(event, "index"), get(event, "delta")
            got = choice.blocks.get(index) if isinstance(index, int) else None
            if got is None:
                return
            dtype = get(delta, "type")
            if dtype == "text_delta":
                self._grow(got, "content", get(delta, "text"))
            elif dtype == "thinking_delta":
                self._grow(got, "content", get(delta, "thinking"))
            elif dtype == "input_json_delta":
                self._grow(got, "arguments", get(delta, "partial_json"))
        elif kind == "message_start":
            role = get(get(event, "message"), "role")
            if isinstance(role, str):
                choice.role = role
        elif kind == "message_delta":
            choice.finish = get(get(event, "delta"), "stop_reason") or choice.finish

    def messages(self) -> list[Message]:
        """What was collected, as output messages (``[]`` when nothing was)."""
        if self._response is not None:
            return output_messages(self._response)
        out = []
        for _, choice in sorted(self._choices.items()):
            parts = []
            for part in choice.blocks.values():
                # Copies: whoever renders them cuts them in place, the collector's stay.
                if part["type"] == "tool_call":
                    part = {**part, "arguments": _arguments(part["arguments"] or None)}
                else:
                    part = dict(part)
                parts.append(part)
            if parts:
                out.append({"role": choice.role, "parts": parts,
                            "finish_reason": finish_reason(choice.finish)})
        return out

"""Google Gen AI (``google-genai``, the Gemini API and Vertex AI) shapes: requests,
responses and stream chunks → the GenAI conventions' attributes and messages.

A request is the keywords of ``Models.generate_content`` (``model``, ``contents``,
``config``: a ``GenerateContentConfig`` or its dict); a response or stream chunk a
``GenerateContentResponse`` (or its dict, in the API's camelCase or the SDK's
snake_case). ``contents`` is read as the SDK reads it (``t_contents``): a string, a
part or a content, or a list of them, where consecutive parts (and strings) are one
user message. Roles: the API's ``model`` is ``assistant``; a user content of function
responses only is a ``tool`` message, as OpenAI's tool messages are.

Pure functions, as the other shapes (``messages.py``, ``responses.py``, which know
nothing of these), and the two readers a chat span of a Gemini request uses instead of
theirs (``GeminiResponseFacts``, ``GeminiOutputCollector``: ``spans/chat.py`` picks them
by the call's ``api_mode``, ``API_MODE``); ``events.py`` reads a Gemini request
(``is_request``) and response (``is_response``) here.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from .. import attributes
from ..content.values import clean_str, otlp_number
from .messages import Message, OutputCollector, Part, plain
from .responses import SEQUENCES, ResponseFacts, get

# The ``api_mode`` of the Google Gen AI adapter's chat calls.
API_MODE = "generate_content"

# Numeric ``config`` keys → the chat span's request attributes.
_NUMERIC_CONFIG = {"temperature": attributes.GEN_AI_REQUEST_TEMPERATURE,
                   "top_p": attributes.GEN_AI_REQUEST_TOP_P,
                   "top_k": attributes.GEN_AI_REQUEST_TOP_K,
                   "max_output_tokens": attributes.GEN_AI_REQUEST_MAX_TOKENS,
                   "frequency_penalty": attributes.GEN_AI_REQUEST_FREQUENCY_PENALTY,
                   "presence_penalty": attributes.GEN_AI_REQUEST_PRESENCE_PENALTY,
                   "seed": attributes.GEN_AI_REQUEST_SEED}
_CAMEL = {"top_p": "topP", "top_k": "topK", "max_output_tokens": "maxOutputTokens",
          "frequency_penalty": "frequencyPenalty", "presence_penalty": "presencePenalty",
          "candidate_count": "candidateCount", "stop_sequences": "stopSequences",
          "response_mime_type": "responseMimeType",
          "response_schema": "responseSchema", "response_json_schema": "responseJsonSchema",
          "system_instruction": "systemInstruction",
          "function_call": "functionCall", "function_response": "functionResponse",
          "inline_data": "inlineData", "file_data": "fileData", "mime_type": "mimeType",
          "file_uri": "fileUri", "finish_reason": "finishReason",
          "usage_metadata": "usageMetadata", "response_id": "responseId",
          "model_version": "modelVersion", "prompt_token_count": "promptTokenCount",
          "candidates_token_count": "candidatesTokenCount",
          "cached_content_token_count": "cachedContentTokenCount",
          "thoughts_token_count": "thoughtsTokenCount",
          "function_declarations": "functionDeclarations",
          "parameters_json_schema": "parametersJsonSchema"}
# The tools a model runs itself (``Tool`` fields besides function declarations).
_BUILT_IN_TOOLS = ("google_search", "google_search_retrieval", "code_execution",
                   "url_context", "retrieval", "google_maps", "computer_use",
                   "enterprise_web_search", "file_search")
# FinishReason → the output messages' finish reason (``tool_call`` when the candidate
# calls a function); other reasons as the API names them, in lower case.
_FINISH = {"STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter",
           "RECITATION": "content_filter", "BLOCKLIST": "content_filter",
           "PROHIBITED_CONTENT": "content_filter", "SPII": "content_filter",
           "IMAGE_SAFETY": "content_filter", "FINISH_REASON_UNSPECIFIED": "error",
           "OTHER": "error", "MALFORMED_FUNCTION_CALL": "error"}


def field(obj: Any, key: str) -> Any:
    """``obj``'s ``key`` (snake_case, the SDK's), or its camelCase spelling in a dict
    (the API's JSON, which the SDK accepts too). Read for every request and response:
    a dict is told by ``isinstance(dict)`` (an ABC check costs several times more)."""
    if isinstance(obj, dict):
        value = obj.get(key)
        if value is None:
            camel = _CAMEL.get(key)
            if camel is not None:
                value = obj.get(camel)
        return value
    if obj is None:
        return None
    try:
        return getattr(obj, key, None)
    except Exception:
        return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _enum_name(value: Any) -> str | None:
    """An SDK enum member's value (a ``str`` enum) or a plain string."""
    inner = getattr(value, "value", value)
    return inner if isinstance(inner, str) and inner else None


def _int(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63:
        return value
    return None


# ---------------------------------------------------------------- detection
def is_response(obj: Any) -> bool:
    """A ``GenerateContentResponse`` (a whole response or a stream chunk), or its dict
    (candidates or usage metadata)."""
    if type(obj).__name__ == "GenerateContentResponse":
        return True
    return isinstance(obj, dict) and ("candidates" in obj or "usageMetadata" in obj
                                      or "usage_metadata" in obj)


def is_request(request: Any) -> bool:
    """The keywords of a ``generate_content`` call (``contents``, not ``messages``)."""
    return isinstance(request, dict) and "contents" in request and "messages" not in request


# ---------------------------------------------------------------- parts
def part_of(part: Any) -> Part | None:
    """One Gemini ``Part`` (or a string) as a message part; ``None``: none fits."""
    if isinstance(part, str):
        return {"type": "text", "content": part}
    text = _str(get(part, "text"))
    if text is not None:
        return {"type": "reasoning" if get(part, "thought") is True else "text",
                "content": text}
    call = field(part, "function_call")
    if call is not None:
        return {"type": "tool_call", "id": _str(get(call, "id")),
                "name": _str(get(call, "name")) or "", "arguments": plain(get(call, "args"))}
    answer = field(part, "function_response")
    if answer is not None:
        return {"type": "tool_call_response", "id": _str(get(answer, "id")),
                "response": plain(get(answer, "response"))}
    inline = field(part, "inline_data")
    if inline is not None:
        data, mime = get(inline, "data"), _str(field(inline, "mime_type"))
        if isinstance(data, bytes | bytearray):
            data = base64.b64encode(bytes(data)).decode("ascii")
        if not isinstance(data, str):
            return None
        blob: Part = {"type": "blob", "modality": _modality(mime)}
        if mime:
            blob["mime_type"] = mime
        blob["content"] = data
        return blob
    file = field(part, "file_data")
    if file is not None:
        uri, mime = _str(field(file, "file_uri")), _str(field(file, "mime_type"))
        if not uri:
            return None
        shaped: Part = {"type": "uri", "modality": _modality(mime)}
        if mime:
            shaped["mime_type"] = mime
        shaped["uri"] = uri
        return shaped
    return None


def _modality(mime: str | None) -> str:
    kind = mime.split("/", 1)[0] if mime else ""
    return kind if kind in ("image", "audio", "video") else "document"


def _parts(parts: Any) -> list[Part]:
    if not isinstance(parts, SEQUENCES):
        return []
    return [p for p in map(part_of, parts) if p is not None]


def _role(role: Any, parts: list[Part]) -> str:
    if role == "model":
        return "assistant"
    if parts and all(p["type"] == "tool_call_response" for p in parts):
        return "tool"
    return role if isinstance(role, str) and role else "user"


def _is_content(item: Any) -> bool:
    return not isinstance(item, str) and (get(item, "parts") is not None
                                          or isinstance(get(item, "role"), str))


# ---------------------------------------------------------------- requests
def input_messages(contents: Any) -> list[Message]:
    """``contents`` as input messages, oldest first (the SDK's ``t_contents`` rules:
    consecutive parts and strings are one user message)."""
    items = contents if isinstance(contents, SEQUENCES) else [contents]
    messages: list[Message] = []
    loose: list[Part] = []

    def flush() -> None:
        if loose:
            messages.append({"role": _role("user", loose), "parts": list(loose)})
            loose.clear()

    for item in items:
        if item is None:
            continue
        if _is_content(item):
            flush()
            parts = _parts(get(item, "parts"))
            if parts:
                messages.append({"role": _role(get(item, "role"), parts), "parts": parts})
        else:
            part = part_of(item)
            if part is not None:
                loose.append(part)
    flush()
    return messages


def newest_input_messages(request: Mapping[str, Any]) -> list[Message]:
    """A request's input messages, newest first (``messages.newest_input_messages``'s
    order)."""
    return list(reversed(input_messages(request.get("contents"))))


def config_of(request: Mapping[str, Any]) -> Any:
    return request.get("config")


def system_instructions(request: Mapping[str, Any]) -> list[Part]:
    """``config.system_instruction`` (a string, a part, a content or a list): its text."""
    system = field(config_of(request), "system_instruction")
    if system is None:
        return []
    if _is_content(system):
        system = get(system, "parts")
    items = system if isinstance(system, SEQUENCES) else [system]
    return [p for p in map(part_of, items) if p is not None and p["type"] == "text"]


def tool_definitions(request: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``config.tools``: function declarations, Python functions (the SDK declares and
    calls them itself: their name and docstring) and built-in tools by their kind."""
    out: list[dict[str, Any]] = []
    tools = field(config_of(request), "tools")
    for tool in tools if isinstance(tools, SEQUENCES) else ():
        if callable(tool) and not isinstance(tool, dict):
            name = getattr(tool, "__name__", None)
            definition: dict[str, Any] = {"type": "function",
                                          "name": name if isinstance(name, str) else ""}
            doc = getattr(tool, "__doc__", None)
            if isinstance(doc, str) and doc.strip():
                definition["description"] = doc.strip()
            out.append(definition)
            continue
        declarations = field(tool, "function_declarations")
        for declaration in declarations if isinstance(declarations, SEQUENCES) else ():
            definition = {"type": "function", "name": _str(get(declaration, "name")) or ""}
            description = _str(get(declaration, "description"))
            if description:
                definition["description"] = description
            schema = field(declaration, "parameters_json_schema")
            if schema is None:
                schema = get(declaration, "parameters")
            schema = plain(schema)
            if isinstance(schema, dict | bool):
                definition["parameters"] = schema
            out.append(definition)
        for kind in _BUILT_IN_TOOLS:
            if field(tool, kind) is not None:
                out.append({"type": kind, "name": kind})
    return out


def request_attributes(config: Any, attrs: dict[str, Any]) -> None:
    """The conventions' request parameters that a request's ``config`` sets, into
    ``attrs`` (parameters, not content: recorded whatever the capture mode)."""
    if config is None:
        return
    for key, attr in _NUMERIC_CONFIG.items():
        value = otlp_number(field(config, key))
        if value is not None:
            attrs[attr] = value
    count = field(config, "candidate_count")  # the default (1) is not recorded
    if type(count) is int and count != 1 and otlp_number(count) is not None:
        attrs[attributes.GEN_AI_REQUEST_CHOICE_COUNT] = count
    stop = field(config, "stop_sequences")
    if isinstance(stop, SEQUENCES):
        sequences = [clean_str(s, 64) for s in stop[:16] if isinstance(s, str)]
        if sequences:
            attrs[attributes.GEN_AI_REQUEST_STOP_SEQUENCES] = sequences
    # ``gen_ai.output.type`` by the response MIME type, the official instrumentation's
    # mapping; a response schema alone asks for JSON too.
    mime = field(config, "response_mime_type")
    if isinstance(mime, str) and mime:
        attrs[attributes.GEN_AI_OUTPUT_TYPE] = (
            "json" if mime == "application/json" else
            "text" if mime == "text/plain" else clean_str(mime, 64))
    elif field(config, "response_schema") is not None or field(
            config, "response_json_schema") is not None:
        attrs[attributes.GEN_AI_OUTPUT_TYPE] = "json"


# ---------------------------------------------------------------- responses
def absorb_response(facts: Any, response: Any) -> None:
    """A whole response's (or one stream chunk's) facts into ``facts`` (a
    ``ResponseFacts``): its id, model version, candidates' finish reasons (the API's
    words in lower case, as the official instrumentation records them) and usage.
    A stream's chunks each call this; their usage is cumulative (the last one wins)."""
    rid = _str(field(response, "response_id"))
    if rid and facts.response_id is None:
        facts.response_id = rid
    model = _str(field(response, "model_version"))
    if model:
        facts.model = model
    candidates = get(response, "candidates")
    for candidate in candidates if isinstance(candidates, SEQUENCES) else ():
        reason = _enum_name(field(candidate, "finish_reason"))
        if reason:
            facts.add_finish(reason.lower())
    usage = field(response, "usage_metadata")
    if usage is None:
        return
    prompt = _int(field(usage, "prompt_token_count"))
    if prompt is not None:
        facts.input_tokens = prompt
    output = _int(field(usage, "candidates_token_count"))
    thoughts = _int(field(usage, "thoughts_token_count"))
    if output is not None or thoughts is not None:
        # The output tokens count the thinking too (the conventions' rule; Gemini
        # counts them apart), as the official instrumentation adds them.
        facts.output_tokens = (output or 0) + (thoughts or 0)
    if thoughts is not None:
        facts.reasoning_tokens = thoughts
    cached = _int(field(usage, "cached_content_token_count"))
    if cached is not None:
        facts.cache_read_tokens = cached


def finish_reason(reason: Any, parts: list[Part]) -> str:
    """A candidate's finish reason as the output messages' schema names it."""
    name = _enum_name(reason)
    if name == "STOP" and any(p["type"] == "tool_call" for p in parts):
        return "tool_call"
    if name is None:
        return "tool_call" if any(p["type"] == "tool_call" for p in parts) else "error"
    return _FINISH.get(name, name.lower())


def output_messages(response: Any) -> list[Message]:
    """One output message per candidate of a whole response."""
    out: list[Message] = []
    candidates = get(response, "candidates")
    for candidate in candidates if isinstance(candidates, SEQUENCES) else ():
        parts = _parts(get(get(candidate, "content"), "parts"))
        if parts:
            out.append({"role": "assistant", "parts": parts,
                        "finish_reason": finish_reason(field(candidate, "finish_reason"),
                                                       parts)})
    return out


class StreamedCandidates:
    """The candidates of a streamed response, assembled chunk by chunk: consecutive
    text of one kind (text, thought) grows one part, up to ``cap`` characters; every
    other part is kept as it came."""

    __slots__ = ("_candidates", "_cap")

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._candidates: dict[int, tuple[list[Part], list[Any]]] = {}

    def add_chunk(self, chunk: Any) -> None:
        candidates = get(chunk, "candidates")
        for position, candidate in enumerate(
                candidates if isinstance(candidates, SEQUENCES) else ()):
            index = get(candidate, "index")
            key = index if isinstance(index, int) else position
            parts, finish = self._candidates.setdefault(key, ([], [None]))
            reason = field(candidate, "finish_reason")
            if reason is not None:
                finish[0] = reason
            for part in _parts(get(get(candidate, "content"), "parts")):
                last = parts[-1] if parts else None
                if (last is not None and part["type"] in ("text", "reasoning")
                        and last["type"] == part["type"]):
                    have = last["content"]
                    if len(have) < self._cap:
                        last["content"] = have + part["content"][: self._cap - len(have)]
                else:
                    parts.append(part)

    def messages(self) -> list[Message]:
        out: list[Message] = []
        for _, (parts, finish) in sorted(self._candidates.items()):
            if parts:
                copies = [dict(p) for p in parts]  # the renderer cuts them in place
                out.append({"role": "assistant", "parts": copies,
                            "finish_reason": finish_reason(finish[0], copies)})
        return out


class GeminiOutputCollector(OutputCollector):
    """``messages.OutputCollector`` for a Gemini call: a whole response's candidates, or
    a stream's, assembled (``StreamedCandidates``); any other shape as the base reads it."""

    __slots__ = ("_streamed", "_whole")

    def __init__(self, cap: int) -> None:
        super().__init__(cap)
        self._whole: Any = None
        self._streamed = StreamedCandidates(cap)

    def add_response(self, response: Any) -> None:
        if is_response(response):
            self._whole = response
        else:
            super().add_response(response)

    def add_chunk(self, chunk: Any) -> None:
        if is_response(chunk):
            self._streamed.add_chunk(chunk)
        else:
            super().add_chunk(chunk)

    def messages(self) -> list[Message]:
        if self._whole is not None:
            return output_messages(self._whole)
        return self._streamed.messages() or super().messages()


class GeminiResponseFacts(ResponseFacts):
    """``responses.ResponseFacts`` for a Gemini call (``absorb_response``); any other
    shape as the base reads it."""

    __slots__ = ()

    def absorb(self, obj: Any) -> None:
        if not is_response(obj):
            super().absorb(obj)
            return
        if self.output is not None:
            self.output.add_response(obj)
        absorb_response(self, obj)

    def absorb_chunk(self, chunk: Any) -> None:
        if not is_response(chunk):
            super().absorb_chunk(chunk)
            return
        self.chunks += 1
        if self.output is not None:
            self.output.add_chunk(chunk)
        absorb_response(self, chunk)


# ---------------------------------------------------------------- embeddings
def embedding_dimensions(response: Any) -> int | None:
    """The length of an ``EmbedContentResponse``'s first vector."""
    embeddings = get(response, "embeddings")
    if not isinstance(embeddings, SEQUENCES) or not embeddings:
        return None
    values = get(embeddings[0], "values")
    return len(values) or None if isinstance(values, SEQUENCES) else None

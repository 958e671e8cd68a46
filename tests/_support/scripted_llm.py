"""A scripted, OpenAI/Anthropic/Gemini-compatible LLM HTTP server on 127.0.0.1 for offline
agent turns.

Endpoints (matched by path suffix, so ``/v1/...`` and ``/v1/v1/...`` both work):
``GET /models``, ``POST /chat/completions``, ``POST /responses``, ``POST /messages``; JSON, or
SSE when ``"stream": true``; the Gemini API's ``POST .../models/{model}:generateContent``
(JSON), ``:streamGenerateContent`` (SSE), ``:embedContent`` and ``:batchEmbedContents``
(api ``gemini`` / ``gemini_embeddings``; function calls carry ids ``fc_<n>``);
``POST /embeddings`` (JSON: one deterministic vector per input, ``dimensions`` long
(default 8), floats or ``encoding_format: base64`` float32s; a queued error reply applies,
a text reply is consumed and ignored). Replies come from a FIFO script
(:meth:`ScriptedLLMServer.push`); when it is empty the default policy applies: last input is
a tool result -> text ``"done: <first 50 chars of it>"``; tools offered and ``tool_first`` ->
call the first tool with ``tool_args.get(name, {})``; otherwise text ``default_text``. Every
request is recorded.
Note: SDK clients retry 429/5xx by default; use ``max_retries=0`` when injecting errors.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import struct
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from _support import LocalHandler, LocalHTTPServer, Service

__all__ = ["RecordedRequest", "ScriptedLLMServer", "ScriptedReply"]

_FINGERPRINT = "fp_scripted"
_ROUTES = {"/chat/completions": "chat", "/responses": "responses", "/messages": "messages",
           "/embeddings": "embeddings"}
EMBEDDING_DIMENSIONS = 8
_ERROR_TYPES = {401: "authentication_error", 429: "rate_limit_error", 529: "overloaded_error"}
Event = tuple[str | None, Any]  # (SSE event name or None, JSON payload or raw string)


@dataclass
class ScriptedReply:
    """One scripted model turn: text and/or tool calls, or an injected HTTP error."""

    text: str | None = None
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    error_status: int | None = None
    error_message: str = "scripted error"
    retry_after: float | None = None
    delay: float = 0.0  # seconds to wait before answering
    # Prompt-cache usage reported with the answer (part of the input tokens): OpenAI chat
    # ``prompt_tokens_details.cached_tokens``; Anthropic ``cache_read_input_tokens`` /
    # ``cache_creation_input_tokens`` (reported beside ``input_tokens``).
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    reasoning_tokens: int = 0  # OpenAI chat: completion_tokens_details.reasoning_tokens
    finish_reason: str | None = None  # the wire's own stop/finish reason, overriding the default


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any  # parsed JSON (None when absent or not JSON)
    api: str  # 'chat' | 'responses' | 'messages' | 'embeddings' | 'gemini' | 'gemini_embeddings'
    #           | 'models' | 'unknown'
    stream: bool = False
    status: int = 200
    response_id: str | None = None
    usage: dict[str, int] | None = None  # {"input_tokens": .., "output_tokens": ..}
    reply: ScriptedReply | None = None


def _text(content: Any) -> str:
    """Flatten a message content (str | list of parts/blocks) to plain text."""
    if isinstance(content, list):
        parts = [p if isinstance(p, str) else p.get("text") or p.get("content") for p in content]
        return "".join(p for p in parts if isinstance(p, str))
    return "" if content is None else str(content)


def _chars(obj: Any) -> int:
    if isinstance(obj, str):
        return len(obj)
    values = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, list) else []
    return sum(_chars(v) for v in values)


def _tokens(chars: int) -> int:
    return max(1, math.ceil(chars / 4))


def _pieces(text: str, size: int = 8) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _inspect(api: str, body: dict[str, Any]) -> tuple[str | None, list[str], int]:
    """Return (tool result text if the last input is one, offered tool names, prompt chars)."""
    if api == "gemini":
        return _inspect_gemini(body)
    if api == "gemini_embeddings":
        return None, [], _chars(body.get("content")) + _chars(body.get("requests"))
    if api == "embeddings":
        return None, [], sum(_chars(x) if isinstance(x, str) else len(x) if isinstance(
            x, list) else 1 for x in _embedding_inputs(body))
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    if api == "responses":
        inp = body.get("input")
        items = [inp] if isinstance(inp, str) else list(inp or [])
        last = items[-1] if items and isinstance(items[-1], dict) else {}
        is_result = last.get("type") == "function_call_output"
        names = [t.get("name", "") for t in tools if t.get("type") == "function"]
        chars = _chars(items) + _chars(body.get("instructions"))
        return (_text(last.get("output")) if is_result else None), names, chars
    msgs = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    last = msgs[-1] if msgs else {}
    if api == "chat":
        result = _text(last.get("content")) if last.get("role") == "tool" else None
        names = [(t.get("function") or {}).get("name") or t.get("name", "") for t in tools]
        return result, names, _chars(msgs)
    content = last.get("content") if last.get("role") == "user" else None
    blocks = [b for b in content or [] if isinstance(b, dict) and b.get("type") == "tool_result"]
    result = _text(blocks[-1].get("content")) if blocks else None
    return result, [t.get("name", "") for t in tools], _chars(msgs) + _chars(body.get("system"))


def _inspect_gemini(body: dict[str, Any]) -> tuple[str | None, list[str], int]:
    contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
    last = contents[-1] if contents else {}
    answers = [p["functionResponse"] for p in last.get("parts") or []
               if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)]
    result = json.dumps(answers[-1].get("response"), sort_keys=True) if answers else None
    names = [d.get("name", "") for t in body.get("tools") or [] if isinstance(t, dict)
             for d in t.get("functionDeclarations") or [] if isinstance(d, dict)]
    return result, names, _chars(contents) + _chars(body.get("systemInstruction"))


def _gemini_route(path: str) -> tuple[str, str, bool] | None:
    """(api, model, stream) of a Gemini API path ``.../models/{model}:{method}``."""
    last = path.rsplit("/", 1)[-1]
    model, _, method = last.partition(":")
    if method in ("generateContent", "streamGenerateContent"):
        return "gemini", model, method == "streamGenerateContent"
    if method in ("embedContent", "batchEmbedContents"):
        return "gemini_embeddings", model, False
    return None


def _gemini_embeddings_json(body: dict[str, Any]) -> dict[str, Any]:
    """One deterministic vector per content (``outputDimensionality`` long, default 8):
    ``embedding`` for ``embedContent``, ``embeddings`` for ``batchEmbedContents``."""
    def vector(request: dict[str, Any]) -> dict[str, Any]:
        dims = request.get("outputDimensionality")
        dims = dims if isinstance(dims, int) and dims > 0 else EMBEDDING_DIMENSIONS
        seed = hashlib.sha256(json.dumps(request.get("content")).encode()).digest()
        return {"values": [(seed[i % 32] - 128) / 128 for i in range(dims)]}

    requests = body.get("requests")
    if isinstance(requests, list):
        return {"embeddings": [vector(r) for r in requests if isinstance(r, dict)]}
    return {"embedding": vector(body)}


def _embedding_inputs(body: dict[str, Any]) -> list[Any]:
    """The inputs of an embeddings request: a str, a token list, or a list of either."""
    inp = body.get("input")
    if isinstance(inp, list) and inp and not all(isinstance(x, int) for x in inp):
        return inp
    return [inp]


def _embeddings_json(body: dict[str, Any], model: str, prompt_tokens: int) -> dict[str, Any]:
    dims = body.get("dimensions")
    dims = dims if isinstance(dims, int) and dims > 0 else EMBEDDING_DIMENSIONS
    data = []
    for index, item in enumerate(_embedding_inputs(body)):
        seed = hashlib.sha256(json.dumps(item).encode()).digest()
        vector = [(seed[i % 32] - 128) / 128 for i in range(dims)]
        value: Any = vector
        if body.get("encoding_format") == "base64":
            value = base64.b64encode(struct.pack(f"<{dims}f", *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": value})
    usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}
    return {"object": "list", "data": data, "model": model, "usage": usage}


def _error_body(status: int, message: str, anthropic: bool) -> dict[str, Any]:
    kind = _ERROR_TYPES.get(status) or ("invalid_request_error" if status < 500 else "api_error")
    if anthropic:
        return {"type": "error", "error": {"type": kind, "message": message}}
    kind = "server_error" if kind == "api_error" else kind
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


class _Handler(LocalHandler):
    def _send_json(self, status: int, payload: Any, extra: Mapping[str, str]) -> None:
        self.send_body(status, json.dumps(payload).encode(), "application/json", extra)

    def _send_sse(self, events: Iterator[Event], extra: Mapping[str, str], delay: float) -> None:
        self.send_head(200, "text/event-stream; charset=utf-8", extra)
        try:
            for name, data in events:
                text = data if isinstance(data, str) else json.dumps(data)
                self.send_chunk(
                    ((f"event: {name}\n" if name else "") + f"data: {text}\n\n").encode()
                )
                time.sleep(delay)
            self.send_chunk(b"")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def do_GET(self) -> None:
        self._dispatch("GET", None)

    def do_POST(self) -> None:
        raw = self.read_body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        self._dispatch("POST", body)

    def _dispatch(self, method: str, body: Any) -> None:
        llm: ScriptedLLMServer = self.server.owner
        path = self.path.split("?", 1)[0].rstrip("/")
        headers = {k.lower(): v for k, v in self.headers.items()}
        anthropic = "anthropic-version" in headers or path.endswith("/messages")
        extra = dict.fromkeys(("x-request-id", "request-id"), llm._new_id("req_"))
        api = next((a for suffix, a in _ROUTES.items() if path.endswith(suffix)), "unknown")
        if method == "GET":
            api = "models" if path.endswith("/models") or "/models/" in path else "unknown"
        stream = isinstance(body, dict) and bool(body.get("stream"))
        gemini = _gemini_route(path) if method == "POST" else None
        if gemini is not None:
            api, gemini_model, stream = gemini
        rec = RecordedRequest(method, self.path, headers, body, api, stream)
        if gemini is not None and isinstance(body, dict):  # the model is in the path
            body = {**body, "model": gemini_model}
        if api == "models":
            llm._record(rec)
            self._send_json(200, llm._models_payload(path, anthropic), extra)
            return
        if api == "unknown" or not isinstance(body, dict):
            rec.status = 404 if api == "unknown" else 400
            llm._record(rec)
            msg = f"scripted server: cannot handle {method} {self.path}"
            self._send_json(rec.status, _error_body(rec.status, msg, anthropic), extra)
            return
        reply, prompt_tokens = llm._next_reply(api, body)
        rec.reply = reply
        time.sleep(reply.delay)
        if reply.error_status is not None:
            rec.status = reply.error_status
            llm._record(rec)
            if reply.retry_after is not None:
                extra["retry-after"] = str(reply.retry_after)
            payload = _error_body(reply.error_status, reply.error_message, anthropic)
            self._send_json(reply.error_status, payload, extra)
            return
        if api == "gemini_embeddings":
            llm._record(rec)
            self._send_json(200, _gemini_embeddings_json(body), extra)
            return
        if api == "embeddings":
            rec.usage = {"input_tokens": prompt_tokens, "output_tokens": 0}
            llm._record(rec)
            model = str(body.get("model") or llm.models[0])
            self._send_json(200, _embeddings_json(body, model, prompt_tokens), extra)
            return
        out_chars = len(reply.text or "")
        out_chars += sum(len(name) + len(json.dumps(args)) for name, args in reply.tool_calls)
        usage = {"input_tokens": prompt_tokens, "output_tokens": _tokens(out_chars)}
        builder = {"chat": _ChatAPI, "responses": _ResponsesAPI, "messages": _MessagesAPI,
                   "gemini": _GeminiAPI}[api]
        turn = builder(llm, body, reply, usage)
        rec.response_id, rec.usage = turn.id, usage
        llm._record(rec)
        if stream:
            self._send_sse(turn.events(), extra, llm.stream_delay)
        else:
            self._send_json(200, turn.json(), extra)


class _Turn:
    """One model answer rendered for a specific wire API (JSON body or SSE event stream)."""

    prefix, call_prefix = "", "call_"

    def __init__(
        self, llm: ScriptedLLMServer, body: dict[str, Any], reply: ScriptedReply, usage: Any
    ) -> None:
        self.llm, self.body, self.text, self.reply = llm, body, reply.text or "", reply
        self.model = str(body.get("model") or llm.models[0])
        self.inp, self.out = usage["input_tokens"], usage["output_tokens"]
        self.id, self.created = llm._new_id(self.prefix), int(time.time())
        self.calls = [(llm._new_id(self.call_prefix), n, a) for n, a in reply.tool_calls]

    def json(self) -> dict[str, Any]:
        raise NotImplementedError

    def events(self) -> Iterator[Event]:
        raise NotImplementedError


class _ChatAPI(_Turn):
    prefix = "chatcmpl-"

    def _usage(self) -> dict[str, Any]:
        total = self.inp + self.out
        usage: dict[str, Any] = {"prompt_tokens": self.inp, "completion_tokens": self.out,
                                 "total_tokens": total}
        if self.reply.cache_read_tokens:
            usage["prompt_tokens_details"] = {"cached_tokens": self.reply.cache_read_tokens}
        if self.reply.reasoning_tokens:
            usage["completion_tokens_details"] = {"reasoning_tokens": self.reply.reasoning_tokens}
        return usage

    def _base(self, obj: str) -> dict[str, Any]:
        base = {"id": self.id, "object": obj, "created": self.created, "model": self.model}
        return base | {"system_fingerprint": _FINGERPRINT}

    def json(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.calls:
            message["tool_calls"] = [
                {"id": c, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
                for c, n, a in self.calls
            ]
        finish = self.reply.finish_reason or ("tool_calls" if self.calls else "stop")
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
        return self._base("chat.completion") | {"choices": [choice], "usage": self._usage()}

    def events(self) -> Iterator[Event]:
        include_usage = bool((self.body.get("stream_options") or {}).get("include_usage"))
        extra = {"usage": None} if include_usage else {}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> Event:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return None, self._base("chat.completion.chunk") | {"choices": [choice]} | extra

        yield chunk({"role": "assistant", "content": "" if self.text else None})
        for piece in _pieces(self.text):
            yield chunk({"content": piece})
        for i, (cid, name, args) in enumerate(self.calls):
            head = {"index": i, "id": cid, "type": "function"}
            yield chunk({"tool_calls": [head | {"function": {"name": name, "arguments": ""}}]})
            for piece in _pieces(json.dumps(args)):
                yield chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
        yield chunk({}, "tool_calls" if self.calls else "stop")
        if include_usage:
            final = {"choices": [], "usage": self._usage()}
            yield None, self._base("chat.completion.chunk") | final
        yield None, "[DONE]"


class _ResponsesAPI(_Turn):
    prefix = "resp_"

    def _items(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        if self.text:
            part = {"type": "output_text", "text": self.text, "annotations": [], "logprobs": []}
            item = {"type": "message", "id": self.llm._new_id("msg_"), "status": "completed"}
            items.append(item | {"role": "assistant", "content": [part]})
        for cid, name, args in self.calls:
            item = {"type": "function_call", "id": "fc_" + cid.removeprefix("call_")}
            item |= {"call_id": cid, "name": name, "arguments": json.dumps(args)}
            items.append(item | {"status": "completed"})
        return items

    def _response(self, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        usage = {"input_tokens": self.inp, "input_tokens_details": {"cached_tokens": 0}}
        usage |= {"output_tokens": self.out, "output_tokens_details": {"reasoning_tokens": 0}}
        usage |= {"total_tokens": self.inp + self.out}
        resp = {"id": self.id, "object": "response", "created_at": self.created, "status": status}
        resp |= {"model": self.model, "output": output, "error": None, "incomplete_details": None}
        resp |= {"instructions": self.body.get("instructions"), "metadata": {}, "top_p": 1.0}
        resp |= {"parallel_tool_calls": True, "temperature": 1.0}
        resp |= {"text": {"format": {"type": "text"}}, "tools": self.body.get("tools") or []}
        resp |= {"tool_choice": self.body.get("tool_choice", "auto")}
        return resp | {"usage": usage if status == "completed" else None}

    def json(self) -> dict[str, Any]:
        return self._response("completed", self._items())

    def events(self) -> Iterator[Event]:
        seq = iter(range(1_000_000))

        def ev(kind: str, **data: Any) -> Event:
            return kind, {"type": kind, "sequence_number": next(seq), **data}

        yield ev("response.created", response=self._response("in_progress", []))
        yield ev("response.in_progress", response=self._response("in_progress", []))
        items = self._items()
        for idx, item in enumerate(items):
            at = {"item_id": item["id"], "output_index": idx}
            if item["type"] == "message":
                part, pos = item["content"][0], {**at, "content_index": 0}
                pending = item | {"status": "in_progress", "content": []}
                yield ev("response.output_item.added", output_index=idx, item=pending)
                yield ev("response.content_part.added", **pos, part=part | {"text": ""})
                for piece in _pieces(part["text"]):
                    yield ev("response.output_text.delta", **pos, delta=piece, logprobs=[])
                yield ev("response.output_text.done", **pos, text=part["text"], logprobs=[])
                yield ev("response.content_part.done", **pos, part=part)
            else:
                pending = item | {"arguments": "", "status": "in_progress"}
                yield ev("response.output_item.added", output_index=idx, item=pending)
                for piece in _pieces(item["arguments"]):
                    yield ev("response.function_call_arguments.delta", **at, delta=piece)
                done = {"name": item["name"], "arguments": item["arguments"]}
                yield ev("response.function_call_arguments.done", **at, **done)
            yield ev("response.output_item.done", output_index=idx, item=item)
        yield ev("response.completed", response=self._response("completed", items))


class _MessagesAPI(_Turn):
    prefix, call_prefix = "msg_", "toolu_"

    def _message(self, content: list[Any], stop: str | None, out_tokens: int) -> dict[str, Any]:
        usage = {"input_tokens": self.inp, "output_tokens": out_tokens}
        usage |= {"cache_creation_input_tokens": self.reply.cache_creation_tokens,
                  "cache_read_input_tokens": self.reply.cache_read_tokens}
        msg = {"id": self.id, "type": "message", "role": "assistant", "model": self.model}
        msg |= {"content": content, "stop_reason": stop, "stop_sequence": None}
        return msg | {"usage": usage}

    def _blocks(self) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = [{"type": "text", "text": self.text}] if self.text else []
        uses = [{"type": "tool_use", "id": c, "name": n, "input": a} for c, n, a in self.calls]
        return blocks + uses

    def json(self) -> dict[str, Any]:
        stop = self.reply.finish_reason or ("tool_use" if self.calls else "end_turn")
        return self._message(self._blocks(), stop, self.out)

    def events(self) -> Iterator[Event]:
        def ev(kind: str, **data: Any) -> Event:
            return kind, {"type": kind, **data}

        yield ev("message_start", message=self._message([], None, 1))
        yield ev("ping")
        for idx, block in enumerate(self._blocks()):
            if block["type"] == "text":
                yield ev("content_block_start", index=idx, content_block=block | {"text": ""})
                for piece in _pieces(block["text"]):
                    delta = {"type": "text_delta", "text": piece}
                    yield ev("content_block_delta", index=idx, delta=delta)
            else:
                yield ev("content_block_start", index=idx, content_block=block | {"input": {}})
                for piece in _pieces(json.dumps(block["input"])):
                    delta = {"type": "input_json_delta", "partial_json": piece}
                    yield ev("content_block_delta", index=idx, delta=delta)
            yield ev("content_block_stop", index=idx)
        stop = {"stop_reason": "tool_use" if self.calls else "end_turn", "stop_sequence": None}
        yield ev("message_delta", delta=stop, usage={"output_tokens": self.out})
        yield ev("message_stop")


class _GeminiAPI(_Turn):
    """The Gemini API's ``GenerateContentResponse`` (camelCase JSON); a stream is one
    chunk per text piece, the function calls and the finish reason and usage last."""

    prefix, call_prefix = "gresp_", "fc_"

    def _usage(self) -> dict[str, Any]:
        return {"promptTokenCount": self.inp, "candidatesTokenCount": self.out,
                "totalTokenCount": self.inp + self.out}

    def _chunk(self, parts: list[dict[str, Any]], last: bool) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": self.model,
                                 "responseId": self.id}
        if last:
            candidate["finishReason"] = self.reply.finish_reason or "STOP"
            chunk["usageMetadata"] = self._usage()
        return chunk

    def _calls(self) -> list[dict[str, Any]]:
        return [{"functionCall": {"id": cid, "name": n, "args": a}} for cid, n, a in self.calls]

    def json(self) -> dict[str, Any]:
        parts = ([{"text": self.text}] if self.text else []) + self._calls()
        return self._chunk(parts, True)

    def events(self) -> Iterator[Event]:
        pieces = _pieces(self.text)
        calls = self._calls()
        for i, piece in enumerate(pieces):
            yield None, self._chunk([{"text": piece}], i == len(pieces) - 1 and not calls)
        if calls or not pieces:
            yield None, self._chunk(calls, True)


class ScriptedLLMServer(Service):
    """Scripted OpenAI (chat + responses) and Anthropic (messages) compatible server."""

    def __init__(
        self,
        *,
        tool_first: bool = False,
        tool_args: Mapping[str, Mapping[str, Any]] | None = None,
        default_text: str = "ok",
        models: Sequence[str] = ("scripted-model",),
        stream_delay: float = 0.0,
    ) -> None:
        self.tool_first = tool_first
        self.tool_args = {name: dict(args) for name, args in (tool_args or {}).items()}
        self.default_text = default_text
        self.models = list(models)
        self.stream_delay = stream_delay  # seconds between SSE frames
        self._lock = threading.Condition()
        self._queue: deque[ScriptedReply] = deque()
        self._requests: list[RecordedRequest] = []
        self._ids: Counter[str] = Counter()
        self._http: LocalHTTPServer | None = None

    @classmethod
    def calling_tools(cls, city: str, tools: Iterable[str] = ("get_weather",)
                      ) -> ScriptedLLMServer:
        """The host tests' model: it first calls the first tool it is offered, with
        ``{"city": city}`` if that tool is one of ``tools``, then answers."""
        return cls(tool_first=True, tool_args={name: {"city": city} for name in tools})

    def start(self) -> ScriptedLLMServer:
        if self._http is None:
            self._http = LocalHTTPServer(_Handler, self)
            self._http.start_background("scripted-llm")
        return self

    def stop(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            http.stop()

    @property
    def port(self) -> int:
        if self._http is None:
            raise RuntimeError("server not started")
        return self._http.port

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:PORT`` -- the ``base_url`` for the Anthropic SDK."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` -- the ``base_url`` for the OpenAI SDK."""
        return f"{self.root_url}/v1"

    def push(self, *replies: ScriptedReply | str) -> None:
        """Queue replies (a plain ``str`` is a text reply)."""
        with self._lock:
            self._queue.extend(ScriptedReply(text=r) if isinstance(r, str) else r for r in replies)

    def push_text(self, text: str, *, delay: float = 0.0) -> None:
        self.push(ScriptedReply(text=text, delay=delay))

    def push_tool_calls(
        self, calls: Sequence[tuple[str, Mapping[str, Any]]], *, text: str | None = None
    ) -> None:
        self.push(ScriptedReply(text=text, tool_calls=[(n, dict(a)) for n, a in calls]))

    def push_error(
        self, status: int, message: str = "scripted error", *, retry_after: float | None = None
    ) -> None:
        reply = ScriptedReply(error_status=status, error_message=message, retry_after=retry_after)
        self.push(reply)

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> list[RecordedRequest]:
        with self._lock:
            if not self._lock.wait_for(lambda: len(self._requests) >= n, timeout):
                raise TimeoutError(f"{len(self._requests)} requests after {timeout}s, wanted {n}")
            return list(self._requests)

    def clear(self) -> None:
        """Forget recorded requests and drop any still-queued replies."""
        with self._lock:
            self._requests.clear()
            self._queue.clear()

    # ---- internals, called from handler threads
    def _new_id(self, prefix: str) -> str:
        with self._lock:
            self._ids[prefix] += 1
            return f"{prefix}{self._ids[prefix]}"

    def _record(self, rec: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(rec)
            self._lock.notify_all()

    def _next_reply(self, api: str, body: dict[str, Any]) -> tuple[ScriptedReply, int]:
        tool_result, tool_names, prompt_chars = _inspect(api, body)
        with self._lock:
            reply = self._queue.popleft() if self._queue else None
        if reply is None:
            if tool_result is not None:
                reply = ScriptedReply(text=f"done: {tool_result[:50]}")
            elif tool_names and self.tool_first:
                name = tool_names[0]
                reply = ScriptedReply(tool_calls=[(name, dict(self.tool_args.get(name, {})))])
            else:
                reply = ScriptedReply(text=self.default_text)
        return reply, _tokens(prompt_chars)

    def _models_payload(self, path: str, anthropic: bool) -> dict[str, Any]:
        def one(mid: str) -> dict[str, Any]:
            if anthropic:
                info = {"type": "model", "id": mid, "display_name": mid}
                return info | {"created_at": "2025-01-01T00:00:00Z"}
            return {"id": mid, "object": "model", "created": 1735689600, "owned_by": "scripted"}

        if "/models/" in path:
            return one(path.rsplit("/", 1)[1])
        data = [one(m) for m in self.models]
        if anthropic:
            ends = {"first_id": self.models[0], "last_id": self.models[-1]}
            return {"data": data, "has_more": False} | ends
        return {"object": "list", "data": data}

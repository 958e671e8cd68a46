"""The server side: each inbound ``tools/call`` is a tool call through the pipeline in
the server process, parented on the trace context the client sent in ``params._meta``;
the plugins the client already ran on the call are skipped when its signed word on
them is honoured (``contract_word``).
A ``tools/call`` carries no id of a model's: the server's tool call is identified by its
JSON-RPC request id (``gen_ai.tool.call.id`` and ``jsonrpc.request.id`` alike).

2.x: otelmw's ``ServerMiddleware`` (``ToolCallMiddleware``) runs innermost in the
SDK's own middleware chain (composed with ``Server.middleware`` where the SDK composes
it; the list itself is left as the user made it), so it sees the request after the
user's middleware and a rewrite changes what the handler validates and runs. The
SDK's ``tools/call {name}`` SERVER span (its ``OpenTelemetryMiddleware``, on by
default) is the tool call's span: otelmw records the call on it instead of adding a
second one. 1.x (no tracing of its own): ``FastMCP``'s ``ToolManager.call_tool``,
under a span of otelmw's own.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate

from ...core import (
    CallInfo,
    enrich_tool_call,
    get_pipeline,
    open_call,
    record_protocol_operation,
    tool_plugins,
)
from ...telemetry import attributes
from .contract_word import Check, check
from .results import RUNTIME_ID, ChainOutcome, answer_of, chain_outcome, result_is_error
from .shared import TOOLS_CALL, error_result, failed


def _client_context(meta: Any) -> Any:
    """The trace context the client sent in ``params._meta`` (SEP-414), or None."""
    if meta is None:
        return None
    carrier = meta if isinstance(meta, Mapping) else (
        meta.model_dump(by_alias=True) if hasattr(meta, "model_dump") else None)
    if not carrier or "traceparent" not in carrier:
        return None
    return propagate.extract({k: v for k, v in carrier.items() if isinstance(v, str)})


def _has_sdk_span(server: Any) -> bool:
    return any(type(m).__name__ == "OpenTelemetryMiddleware"
               for m in getattr(server, "middleware", ()) or ())


def compose_server_middleware(wrapped: Any, instance: Any, args: tuple[Any, ...],
                              kwargs: dict[str, Any]) -> Any:
    """``ServerRunner._compose_server_middleware(inner)`` (2.x): otelmw's middleware
    goes innermost, next to the SDK's request handling."""
    try:
        inner = args[0] if args else kwargs["inner"]
        layer = ToolCallMiddleware(instance)
        return wrapped(partial(layer, call_next=inner))
    except Exception as exc:
        failed("compose_server_middleware", exc)
        return wrapped(*args, **kwargs)


class ToolCallMiddleware:
    """A ``ServerMiddleware`` (``(ctx, call_next) -> result``) running each
    ``tools/call`` through the pipeline; every other method passes through."""

    __slots__ = ("runner",)

    def __init__(self, runner: Any) -> None:
        self.runner = runner

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        if ctx.method != TOOLS_CALL:
            return await call_next(ctx)
        try:
            params = ctx.params
            name = params["name"]
            arguments = params.get("arguments")
            if not isinstance(name, str):
                return await call_next(ctx)
            on_sdk_span = _has_sdk_span(getattr(self.runner, "server", None))
            parent = None if on_sdk_span else _client_context(ctx.meta)
            attrs = _server_attributes(ctx)
            word = check(ctx.meta, name, arguments)
        except Exception as exc:
            failed("tools/call", exc)
            return await call_next(ctx)

        async def send(tool_args: Any) -> Any:
            forwarded = ctx if tool_args == arguments else dataclasses.replace(
                ctx, params={**params, "arguments": tool_args})
            return await call_next(forwarded)

        return await served_tool_call(
            name, arguments, send, attrs, parent, on_sdk_span,
            lambda answer, is_error: self._wire(ctx, error_result(answer, is_error)), word)

    def _wire(self, ctx: Any, result: Any) -> Any:
        """otelmw's own answer (a block, a transformed result) in the wire shape the
        SDK's handler would have produced (a short-circuiting middleware owns it)."""
        serialize = getattr(self.runner, "_serialize", None)
        if serialize is not None:
            try:
                return serialize(TOOLS_CALL, ctx.protocol_version, result)
            except Exception as exc:
                failed("tools/call", exc)
        return result


def _server_attributes(ctx: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {attributes.MCP_METHOD_NAME: TOOLS_CALL}
    version = getattr(ctx, "protocol_version", None)
    if isinstance(version, str):
        attrs[attributes.MCP_PROTOCOL_VERSION] = version
    request_id = getattr(ctx, "request_id", None)
    if request_id is not None:
        attrs[attributes.JSONRPC_REQUEST_ID] = str(request_id)
    request = getattr(ctx, "request", None)  # the HTTP request (streamable HTTP)
    if request is not None:
        attrs[attributes.NETWORK_TRANSPORT] = "tcp"
        headers = getattr(request, "headers", None)
        session = headers.get("mcp-session-id") if headers is not None else None
        if isinstance(session, str):
            attrs[attributes.MCP_SESSION_ID] = session
    return attrs


async def served_tool_call(name: str, arguments: Any, send: Callable[[Any], Awaitable[Any]],
                           attrs: dict[str, Any], parent: Any, on_sdk_span: bool,
                           own_answer: Callable[[Any, bool], Any],
                           word: Check | None = None) -> Any:
    """One inbound ``tools/call`` through the pipeline, in the client's trace (``parent``,
    or the SDK's own server span when ``on_sdk_span``): ``send(arguments)`` is the SDK's
    own handling of the call (the tool), and ``own_answer(text, is_error)`` what the
    SDK expects back when otelmw answers instead (a block, a transformed result).
    ``word``: the server's check of the client's word on the contract it ran
    (``contract_word``): honoured, the plugins the client ran are skipped here. The
    server's duration point is recorded whatever happens."""
    outcome = ChainOutcome()
    skipped: list[str] = []
    described = dict(attrs)
    if word is not None:
        try:
            skipped = word.skipped(tool_plugins())
            described[attributes.OTELMW_MCP_CONTRACT_VERDICT] = word.verdict
            if skipped:
                described[attributes.OTELMW_MCP_CONTRACT_SKIPPED_PLUGINS] = skipped
        except Exception as exc:
            failed("contract_word", exc)

    async def execute(tool_args: Any) -> Any:
        outcome.sent = True
        outcome.raw = await send(tool_args)
        return outcome.raw

    start = time.perf_counter()
    error: str | None = None
    token = otel_context.attach(parent) if parent is not None else None
    out_token = chain_outcome.set(outcome)
    try:
        opened = open_call(CallInfo(operation="execute_tool", tool_name=name,
                                    tool_call_id=attrs.get(attributes.JSONRPC_REQUEST_ID),
                                    runtime_id=RUNTIME_ID), arguments,
                           on_host_span=on_sdk_span)
        enrich_tool_call(opened, described)
        out = await get_pipeline().arun_tool(name, arguments, execute, runtime_id=RUNTIME_ID,
                                             raise_errors=True, call=opened.call,
                                             skip_plugins=skipped)
        answer, is_error = answer_of(out, outcome)
        if answer is outcome.raw and (outcome.sent or outcome.normalized is not None):
            result = answer
        else:
            result = own_answer(answer, is_error)
        if result_is_error(result):
            error = "tool_error"
        return result
    except BaseException as exc:
        error = type(exc).__qualname__
        raise
    finally:
        chain_outcome.reset(out_token)
        if token is not None:
            otel_context.detach(token)
        point = {**attrs, attributes.GEN_AI_TOOL_NAME: name,
                 attributes.GEN_AI_OPERATION_NAME: "execute_tool"}
        point.pop(attributes.JSONRPC_REQUEST_ID, None)  # per request: not a metric dimension
        if error is not None:
            point[attributes.ERROR_TYPE] = error
        record_protocol_operation("mcp", "server", time.perf_counter() - start, point)


# ------------------------------------------------------------------------- 1.x

async def tool_manager_call_tool(wrapped: Any, instance: Any, args: tuple[Any, ...],
                                 kwargs: dict[str, Any]) -> Any:
    """``ToolManager.call_tool(name, arguments, context, ...)`` (1.x ``FastMCP``; looked
    up at each call, so a server made before instrumentation is observed too): the
    tool call in the server."""
    try:
        rest = dict(kwargs)
        name = args[0] if args else rest.pop("name")
        arguments = args[1] if len(args) > 1 else rest.pop("arguments", None)
        rest_args = args[2:]
        context = rest_args[0] if rest_args else rest.get("context")
        request = getattr(context, "_request_context", None)
        meta = getattr(request, "meta", None)
        parent = _client_context(meta)
        attrs = _server_attributes(request) if request is not None else {
            attributes.MCP_METHOD_NAME: TOOLS_CALL}
        if not isinstance(name, str):
            raise TypeError("tool name is not a string")
        word = check(meta, name, arguments)
    except Exception as exc:
        failed("ToolManager.call_tool", exc)
        return await wrapped(*args, **kwargs)

    async def send(tool_args: Any) -> Any:
        return await wrapped(name, tool_args, *rest_args, **rest)

    # the SDK passes a CallToolResult on as is
    return await served_tool_call(name, arguments, send, attrs, parent, False, error_result,
                                  word)

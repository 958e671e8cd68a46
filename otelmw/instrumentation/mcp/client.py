"""The client side: each ``tools/call`` (``ClientSession.call_tool``, 1.x and 2.x;
``mcp.Client.call_tool``, 2.x) is a tool call through the pipeline, unless a tool call
is already in flight (a framework's tool that calls MCP, or ``Client.call_tool`` above
its session's): then the MCP attributes go on that call's span and the request is
sent as the caller made it (the contract runs once)."""

from __future__ import annotations

import time
from typing import Any

from opentelemetry import propagate

from ...core import (
    current_tool_call,
    enrich_tool_call,
    get_pipeline,
    record_protocol_operation,
    tool_plugins,
)
from ...telemetry import attributes
from .contract_word import with_word, word_for
from .results import RUNTIME_ID, ChainOutcome, answer_of, chain_outcome, result_is_error
from .shared import TOOLS_CALL, error_result, failed, transport_of


def _split(args: tuple[Any, ...], kwargs: dict[str, Any]
           ) -> tuple[str, Any, tuple[Any, ...], dict[str, Any]]:
    """(name, arguments, the other positional args, the other keyword args)."""
    rest = dict(kwargs)
    name = args[0] if args else rest.pop("name")
    arguments = args[1] if len(args) > 1 else rest.pop("arguments", None)
    if not isinstance(name, str):
        raise TypeError("tool name is not a string")
    return name, arguments, args[2:], rest


def client_attributes(instance: Any) -> dict[str, Any]:
    """The MCP attributes a client knows before it sends (2.x: the negotiated
    protocol version; ``mcp.Client``: the transport of its server)."""
    attrs: dict[str, Any] = {attributes.MCP_METHOD_NAME: TOOLS_CALL}
    version = getattr(instance, "protocol_version", None)
    if isinstance(version, str):
        attrs[attributes.MCP_PROTOCOL_VERSION] = version
    transport = transport_of(getattr(instance, "server", None))
    if transport is not None:
        attrs[attributes.NETWORK_TRANSPORT] = transport
    return attrs


def session_call_tool(injects_context: bool) -> Any:
    """``ClientSession.call_tool``: the request on the wire. ``injects_context``: the
    SDK does not put the trace context in ``params._meta`` itself (1.x), so otelmw
    does (the server's spans join the client's trace)."""

    async def call_tool(wrapped: Any, instance: Any, args: tuple[Any, ...],
                        kwargs: dict[str, Any]) -> Any:
        return await _call_tool(wrapped, instance, args, kwargs, True, injects_context)

    return call_tool


async def client_call_tool(wrapped: Any, instance: Any, args: tuple[Any, ...],
                           kwargs: dict[str, Any]) -> Any:
    """``mcp.Client.call_tool`` (2.x): one tool call over its session's rounds."""
    return await _call_tool(wrapped, instance, args, kwargs, False, False)


async def _call_tool(wrapped: Any, instance: Any, args: tuple[Any, ...],
                     kwargs: dict[str, Any], on_wire: bool, injects_context: bool) -> Any:
    try:
        name, arguments, rest_args, rest_kwargs = _split(args, kwargs)
        attrs = client_attributes(instance)
        outer = current_tool_call()
    except Exception as exc:
        failed("call_tool", exc)
        return await wrapped(*args, **kwargs)

    # whether this process's contract ran on the call sent here: the pipeline runs it
    # below, or the tool call in flight is this very one (same tool: a framework's MCP
    # tool, ``Client.call_tool`` above its session's), not a tool that calls another
    contract_ran = outer is None or outer.call.tool_name == name

    async def send(tool_args: Any) -> Any:
        if not on_wire:
            return await wrapped(name, tool_args, *rest_args, **rest_kwargs)
        extra = dict(rest_kwargs)
        if injects_context:
            extra["meta"] = _with_trace_context(extra.get("meta"))
        if contract_ran:
            extra = _with_contract_word(name, tool_args, extra)
        return await _timed(wrapped, name, tool_args, rest_args, extra, attrs)

    if outer is not None:  # a tool call is in flight: enrich it, send as asked
        try:
            enrich_tool_call(outer, attrs)
        except Exception as exc:
            failed("call_tool", exc)
        return await send(arguments)

    outcome = ChainOutcome()

    async def execute(tool_args: Any) -> Any:
        outcome.sent = True
        try:  # the request goes out now: the MCP attributes go on this call's span
            running = current_tool_call()
            if running is not None:
                enrich_tool_call(running, attrs)
        except Exception as exc:
            failed("call_tool", exc)
        outcome.raw = await send(tool_args)
        return outcome.raw

    token = chain_outcome.set(outcome)
    try:
        out = await get_pipeline().arun_tool(name, arguments, execute, runtime_id=RUNTIME_ID,
                                             raise_errors=True)
    finally:
        chain_outcome.reset(token)
    answer, is_error = answer_of(out, outcome)
    if answer is outcome.raw and (outcome.sent or outcome.normalized is not None):
        return _as_result(answer)
    return error_result(answer, is_error)


def _as_result(value: Any) -> Any:
    """A wrapper's own answer as the host expects it: a ``CallToolResult``."""
    if type(value).__name__ == "CallToolResult":
        return value
    if isinstance(value, dict):
        from mcp.types import CallToolResult

        try:
            return CallToolResult.model_validate(value)
        except Exception:
            pass
    return error_result(value, False)


def _with_contract_word(name: str, tool_args: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with the signed word on the plugins this process ran on the call in
    ``meta`` (``contract_word``); as they are without a key or a plugin."""
    try:
        word = word_for(name, tool_args, tool_plugins())
        if word is not None:
            return {**kwargs, "meta": with_word(kwargs.get("meta"), word)}
    except Exception as exc:
        failed("contract_word", exc)
    return kwargs


def _with_trace_context(meta: Any) -> Any:
    """``meta`` with the current trace context (``traceparent``, ...) added; the
    caller's own keys win."""
    carrier: dict[str, Any] = {}
    try:
        propagate.inject(carrier)
    except Exception as exc:
        failed("inject", exc)
        return meta
    if not carrier:
        return meta
    if meta is None:
        return carrier
    if isinstance(meta, dict):
        return {**carrier, **meta}
    return meta


async def _timed(wrapped: Any, name: str, tool_args: Any, rest_args: tuple[Any, ...],
                 rest_kwargs: dict[str, Any], attrs: dict[str, Any]) -> Any:
    """One request on the wire, its ``mcp.client.operation.duration`` point recorded."""
    start = time.perf_counter()
    error: str | None = None
    try:
        result = await wrapped(name, tool_args, *rest_args, **rest_kwargs)
    except BaseException as exc:
        error = type(exc).__qualname__
        raise
    else:
        if result_is_error(result):
            error = "tool_error"
        return result
    finally:
        point = {**attrs, attributes.GEN_AI_TOOL_NAME: name,
                 attributes.GEN_AI_OPERATION_NAME: "execute_tool"}
        if error is not None:
            point[attributes.ERROR_TYPE] = error
        record_protocol_operation("mcp", "client", time.perf_counter() - start, point)

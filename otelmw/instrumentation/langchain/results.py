"""LangChain tool results: the ``langchain`` normalizer (a ``ToolMessage``'s ``status``,
``content`` and ``artifact``; a ``Command``; a tool's plain return), and what LangChain
gets back from otelmw's tool pipeline (its own object whenever nothing replaced it),
and ``ToolCallRun``, one tool call through that pipeline."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from ...core import MiddlewareContext, NormalizedToolResult, get_pipeline
from .fail_open import host_outcome

RUNTIME_ID = "langchain"


class ToolRun:
    """One tool call through the pipeline: what the host's handler returned, what the
    execution chain handed to the normalizer, and what it made of it."""

    __slots__ = ("chain_result", "executed", "normalized", "raw")

    def __init__(self) -> None:
        self.executed = False
        self.raw: Any = None
        self.chain_result: Any = None
        self.normalized: NormalizedToolResult | None = None


# The tool call this context runs (the normalizer records into it).
tool_run: ContextVar[ToolRun | None] = ContextVar("otelmw_langchain_tool_run", default=None)
# The tool otelmw runs in this context (its ``BaseTool.run`` is that call: no second one).
tool_in_flight: ContextVar[str | None] = ContextVar("otelmw_langchain_tool", default=None)


class ToolCallRun:
    """One LangChain tool call through the pipeline (from otelmw's middleware or a
    ``BaseTool.run`` seam), for a synchronous host (``result``) or an asynchronous one
    (``aresult``): all but their two await points is written here once.

    ``invoke(host_request)`` is the host's call; ``host_request(effective)`` makes its
    argument of the arguments the execution chain hands on (outside the host's call:
    a failure there is otelmw's); ``where`` names this call site in failure counts."""

    __slots__ = ("call", "call_id", "host_request", "invoke", "name", "out", "run",
                 "tool_args", "where")

    def __init__(self, name: str, tool_args: Any, call_id: str | None,
                 call: dict[str, Any] | None, invoke: Callable[[Any], Any],
                 host_request: Callable[[Any], Any], where: str) -> None:
        self.name, self.tool_args, self.call_id, self.call = name, tool_args, call_id, call
        self.invoke, self.host_request, self.where = invoke, host_request, where
        self.out, self.run = host_outcome(), ToolRun()

    def _host(self, request: Any) -> Any:
        token = tool_in_flight.set(self.name)
        try:
            self.run.raw = self.invoke(request)
            return self.run.raw
        finally:
            tool_in_flight.reset(token)

    async def _ahost(self, request: Any) -> Any:
        token = tool_in_flight.set(self.name)
        try:
            self.run.raw = await self.invoke(request)
            return self.run.raw
        finally:
            tool_in_flight.reset(token)

    def _execute(self, effective: Any) -> Any:
        self.run.executed = True
        return self.out.call(self._host, self.host_request(effective))

    def _aexecute(self, effective: Any) -> Any:
        self.run.executed = True
        return self.out.acall(self._ahost, self.host_request(effective))

    def result(self, fallback: Callable[[], Any]) -> Any:
        """What the host's caller gets; ``fallback()``: the host's call without the
        pipeline, when otelmw failed before it ran."""
        token = tool_run.set(self.run)
        try:
            answer = get_pipeline().run_tool(
                self.name, self.tool_args, self._execute, tool_call_id=self.call_id,
                runtime_id=RUNTIME_ID, raise_errors=True)
            return host_result(answer, self.run, self.call)
        except BaseException as exc:
            if self.out.recover(exc, self.where):
                return fallback()
            return self.out.result
        finally:
            tool_run.reset(token)

    async def aresult(self, fallback: Callable[[], Any]) -> Any:
        """``result`` of an asynchronous host."""
        token = tool_run.set(self.run)
        try:
            answer = await get_pipeline().arun_tool(
                self.name, self.tool_args, self._aexecute, tool_call_id=self.call_id,
                runtime_id=RUNTIME_ID, raise_errors=True)
            return host_result(answer, self.run, self.call)
        except BaseException as exc:
            if self.out.recover(exc, self.where):
                return await fallback()
            return self.out.result
        finally:
            tool_run.reset(token)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    try:
        return json.dumps(content, default=str)
    except (TypeError, ValueError):
        return str(content)


def normalized(result: Any, execution_time_ms: float = 0.0) -> NormalizedToolResult:
    from langchain_core.messages import ToolMessage

    if isinstance(result, ToolMessage):
        failed = result.status == "error"
        meta: dict[str, Any] = {"langchain.status": result.status}
        if result.artifact is not None:
            meta["langchain.artifact_type"] = type(result.artifact).__name__
        return NormalizedToolResult(content=result.content, success=not failed,
                                    error_message=_text(result.content) if failed else None,
                                    metadata=meta, execution_time_ms=execution_time_ms,
                                    raw_result=result)
    if isinstance(result, list):  # a tool that answered several messages
        failed_parts = [r for r in result if isinstance(r, ToolMessage) and r.status == "error"]
        return NormalizedToolResult(
            content=[getattr(r, "content", r) for r in result], success=not failed_parts,
            error_message=_text(failed_parts[0].content) if failed_parts else None,
            execution_time_ms=execution_time_ms, raw_result=result)
    if type(result).__name__ == "Command":  # a state update: no content of its own
        return NormalizedToolResult(content=None, metadata={"langchain.command": True},
                                    execution_time_ms=execution_time_ms, raw_result=result)
    return NormalizedToolResult(content=result, execution_time_ms=execution_time_ms,
                                raw_result=result)


class LangChainResultNormalizer:
    """Runtime ``langchain``: failures are ``ToolMessage(status="error")``."""

    runtime_id = RUNTIME_ID

    def normalize(self, result: Any, name: str, ctx: MiddlewareContext) -> NormalizedToolResult:
        out = normalized(result, ctx.execution_time_ms)
        run = tool_run.get()
        if run is not None:
            run.chain_result, run.normalized = result, out
        return out


NORMALIZER = LangChainResultNormalizer()


def _is_host_result(value: Any) -> bool:
    # what BaseTool returns as it is for a tool call (its _format_output): a
    # ToolOutputMixin (ToolMessage, LangGraph's Command, a tool's own output class)
    from langchain_core.messages.tool import ToolOutputMixin

    return isinstance(value, ToolOutputMixin | list)


def host_result(answer: Any, run: ToolRun, tool_call: dict[str, Any] | None) -> Any:
    """What LangChain gets for the pipeline's ``answer`` (``Pipeline.run_tool``'s return:
    the normalized content, ``"Tool Error: …"``, a ``transform_tool_result`` string or a
    block message): the object the execution chain produced when the answer is just
    its normalized form, that object with the new text when a hook replaced it;
    for a tool call (``tool_call``: its ``id`` and ``name``) anything else becomes a
    ``ToolMessage`` (``status="error"`` for a blocked call)."""
    from langchain_core.messages import ToolMessage

    norm = run.normalized
    value = answer
    if norm is not None or run.executed:
        chain = run.chain_result if norm is not None else run.raw
        if norm is None or answer is norm.content or answer == norm.model_text():
            value = chain
        elif isinstance(chain, ToolMessage):  # transform_tool_result replaced the text
            return chain.model_copy(update={"content": answer})
    if tool_call is None or _is_host_result(value):
        return value
    failed = (norm is None and not run.executed) or (norm is not None and not norm.success)
    return ToolMessage(content=value if isinstance(value, str) else _text(value),
                       tool_call_id=tool_call.get("id") or "", name=tool_call.get("name"),
                       status="error" if failed else "success")

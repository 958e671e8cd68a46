"""``litellm.run_tool_loop`` / ``arun_tool_loop``: the loop is an agent turn
(``invoke_agent run_tool_loop``, unless a turn is already open) and every tool call it
makes runs through ``Pipeline.run_tool`` around the caller's ``execute_tool``: a
``tool_request`` rewrite changes the arguments the executor gets (a copy of LiteLLM's
tool call with the new JSON), a ``pre_tool_call`` block answers the model with a tool
message without running it, the result is normalized by the ``litellm`` normalizer
(the tool message's ``content``). The executor's own exceptions propagate as without
otelmw; a tool message otelmw did not change is handed back as the executor made it."""

from __future__ import annotations

import json
from typing import Any

from ...core import (
    MiddlewareContext,
    NormalizedToolResult,
    current_runtime_context,
    get_pipeline,
    instrumentation_failed,
)
from .._base import Wrapper, prepared_wrapper

RUNTIME_ID = "litellm"
AGENT_NAME = "run_tool_loop"


def _content(message: Any) -> Any:
    return message.get("content") if isinstance(message, dict) else getattr(
        message, "content", message)


class LiteLLMToolResultNormalizer:
    """Runtime ``litellm``: the tool message's ``content`` is the result (a tool message
    has no failure flag: the executor raises for a failure)."""

    runtime_id = RUNTIME_ID

    def normalize(self, result: Any, name: str, ctx: MiddlewareContext) -> NormalizedToolResult:
        return NormalizedToolResult(content=_content(result), raw_result=result,
                                    execution_time_ms=ctx.execution_time_ms)


NORMALIZER = LiteLLMToolResultNormalizer()


class _ToolCall:
    """One requested tool call, as the pipeline sees it."""

    __slots__ = ("arguments", "message", "name", "raw")

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.name: str = raw.function.name
        parsed = json.loads(raw.function.arguments or "{}")
        if not isinstance(parsed, dict):
            raise TypeError("tool arguments are not a JSON object")
        self.arguments: dict[str, Any] = parsed
        self.message: Any = None  # what the executor answered

    def with_arguments(self, args: Any) -> Any:
        """LiteLLM's tool call, or a copy of it carrying rewritten arguments."""
        if args is self.arguments:
            return self.raw
        function = self.raw.function.model_copy(update={"arguments": json.dumps(args)})
        return self.raw.model_copy(update={"function": function})

    def answer(self, result: Any) -> Any:
        """The tool message for what the pipeline answered: the executor's own when it
        is its content, else a tool message carrying the pipeline's text (a block, a
        ``transform_tool_result``)."""
        message = self.message
        if message is not None and result is _content(message):
            return message
        if isinstance(message, dict):
            return {**message, "content": result}
        return {"role": "tool", "tool_call_id": self.raw.id, "content": result}


def _tool_call(raw: Any) -> _ToolCall | None:
    try:
        return _ToolCall(raw)
    except Exception:  # not a function call with JSON-object arguments: LiteLLM's own
        return None


def traced_executor(execute_tool: Any, is_async: bool) -> Any:
    """The caller's ``execute_tool`` with each call run through the pipeline."""

    def execute(tool_call: Any) -> Any:
        found = _tool_call(tool_call)
        if found is None:
            return execute_tool(tool_call)

        def base(args: Any) -> Any:
            found.message = execute_tool(found.with_arguments(args))
            return found.message

        return found.answer(get_pipeline().run_tool(
            found.name, found.arguments, base, tool_call_id=tool_call.id,
            runtime_id=RUNTIME_ID, raise_errors=True))

    async def aexecute(tool_call: Any) -> Any:
        found = _tool_call(tool_call)
        if found is None:
            return await execute_tool(tool_call)

        async def base(args: Any) -> Any:
            found.message = await execute_tool(found.with_arguments(args))
            return found.message

        return found.answer(await get_pipeline().arun_tool(
            found.name, found.arguments, base, tool_call_id=tool_call.id,
            runtime_id=RUNTIME_ID, raise_errors=True))

    return aexecute if is_async else execute


def _traced_kwargs(kwargs: dict[str, Any], is_async: bool) -> dict[str, Any] | None:
    execute_tool = kwargs.get("execute_tool")
    if not callable(execute_tool):
        return None
    return {**kwargs, "execute_tool": traced_executor(execute_tool, is_async)}


def loop_wrapper(*, is_async: bool) -> Wrapper:
    """Wrapper of ``run_tool_loop`` (``arun_tool_loop``): a turn over the loop."""

    def prepared(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            traced = None if args else _traced_kwargs(kwargs, is_async)
            if traced is None:
                return None
            in_turn = current_runtime_context().turn is not None
            return traced, None if in_turn else get_pipeline().turn(
                AGENT_NAME, runtime_id=RUNTIME_ID)
        except Exception as exc:
            instrumentation_failed("litellm", "run_tool_loop", exc)
            return None

    def run(wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any], found: Any) -> Any:
        request, turn = found
        if turn is None:
            return wrapped(**request)
        with turn:
            return wrapped(**request)

    async def arun(wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                   found: Any) -> Any:
        request, turn = found
        if turn is None:
            return await wrapped(**request)
        async with turn:
            return await wrapped(**request)

    return prepared_wrapper(prepared, run, arun, is_async=is_async)

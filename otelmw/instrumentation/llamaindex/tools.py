"""Tool calls: each dispatch of a tool by a LlamaIndex agent is one ``execute_tool``
call through ``Pipeline.arun_tool`` (``run_tool`` for the synchronous helper).

* ``BaseWorkflowAgent._call_tool`` and ``AgentWorkflow._call_tool`` (FunctionAgent,
  ReActAgent, CodeActAgent and multi-agent workflows, the handoff tool included): the
  agent's own dispatch, with the arguments the model gave; the call's id is the one of
  the ``ToolCall`` event its ``call_tool`` step is handling (``call_tool_step`` notes
  it for the step);
* ``tools.calling.call_tool``/``acall_tool`` (what a program's own loop over
  ``llm.chat_with_tools`` calls, directly or through ``call_tool_with_selection``,
  whose ``ToolSelection`` gives the id).

``tool_request`` rewrites the arguments the tool gets; a ``pre_tool_call`` block or a
wrapper's own answer becomes the ``ToolOutput`` the agent records; the ``llamaindex``
normalizer reads the ``ToolOutput`` (``is_error``: LlamaIndex catches a tool's
exception into one). A call inside another one otelmw runs (``call_tool`` reached from
``acall_tool``) is not a second one.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from ...core import get_pipeline
from .handoffs import current_stretch, in_stretch
from .results import (
    RUNTIME_ID,
    ToolRun,
    host_outcome,
    host_result,
    instrumentation_failed,
    tool_run,
)

# The id of the tool call this context handles (a ``call_tool`` step's ``ToolCall``
# event, a ``ToolSelection``), by tool name.
_selected: ContextVar[tuple[str, str] | None] = ContextVar("otelmw_llamaindex_tool_call_id",
                                                           default=None)
# A tool call otelmw runs in this context (its inner dispatch is that call).
_in_flight: ContextVar[bool] = ContextVar("otelmw_llamaindex_tool_in_flight", default=False)


def run_started() -> None:
    """A workflow run starts in this context (a copy of its own): its tool calls are its
    own, even when it runs inside another run's tool call (an agent called from a tool)."""
    _in_flight.set(False)
    _selected.set(None)


def _note_selected(name: Any, call_id: Any) -> Any:
    if isinstance(name, str) and isinstance(call_id, str) and call_id:
        return _selected.set((name, call_id))
    return None


def _call_id(name: str) -> str | None:
    selected = _selected.get()
    return selected[1] if selected is not None and selected[0] == name else None


async def call_tool_step(wrapped: Any, instance: Any, args: tuple[Any, ...],
                         kwargs: dict[str, Any]) -> Any:
    """A ``call_tool`` step: the id of its ``ToolCall`` event, for its dispatch; in an
    ``AgentWorkflow``, in the stretch of the agent whose tool it is."""
    token = None
    try:
        event = args[1] if len(args) > 1 else kwargs.get("ev")
        token = _note_selected(getattr(event, "tool_name", None),
                               getattr(event, "tool_id", None))
    except Exception as exc:
        instrumentation_failed("call_tool_step", exc)
    try:
        return await in_stretch(current_stretch(), lambda: wrapped(*args, **kwargs))
    finally:
        if token is not None:
            _selected.reset(token)


def with_selection(wrapped: Any, instance: Any, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Any:
    """``call_tool_with_selection``: the id of its ``ToolSelection``."""
    selection = args[0] if args else kwargs.get("tool_call")
    token = _note_selected(getattr(selection, "tool_name", None),
                           getattr(selection, "tool_id", None))
    try:
        return wrapped(*args, **kwargs)
    finally:
        if token is not None:
            _selected.reset(token)


async def awith_selection(wrapped: Any, instance: Any, args: tuple[Any, ...],
                          kwargs: dict[str, Any]) -> Any:
    """``acall_tool_with_selection``: as ``with_selection``."""
    selection = args[0] if args else kwargs.get("tool_call")
    token = _note_selected(getattr(selection, "tool_name", None),
                           getattr(selection, "tool_id", None))
    try:
        return await wrapped(*args, **kwargs)
    finally:
        if token is not None:
            _selected.reset(token)


class ToolCallRun:
    """One tool dispatch through the pipeline: ``invoke(arguments)`` is the host's
    call with the arguments the execution chain hands on."""

    __slots__ = ("args", "call_id", "invoke", "name", "out", "run", "tool", "where")

    def __init__(self, tool: Any, args: dict[str, Any], invoke: Callable[[Any], Any],
                 where: str) -> None:
        self.tool, self.args, self.invoke, self.where = tool, args, invoke, where
        self.name: str = tool.metadata.get_name()
        self.call_id = _call_id(self.name)
        self.out, self.run = host_outcome(), ToolRun()

    def _host(self, effective: Any) -> Any:
        token = _in_flight.set(True)
        try:
            self.run.output = self.invoke(effective)
            return self.run.output
        finally:
            _in_flight.reset(token)

    async def _ahost(self, effective: Any) -> Any:
        token = _in_flight.set(True)
        try:
            self.run.output = await self.invoke(effective)
            return self.run.output
        finally:
            _in_flight.reset(token)

    def result(self, fallback: Callable[[], Any]) -> Any:
        token = tool_run.set(self.run)
        try:
            answer = get_pipeline().run_tool(
                self.name, self.args, lambda effective: self.out.call(self._host, effective),
                tool_call_id=self.call_id, runtime_id=RUNTIME_ID, raise_errors=True)
            return host_result(answer, self.run, self.tool, self.args)
        except BaseException as exc:
            if self.out.recover(exc, self.where):
                return fallback()
            return self.out.result
        finally:
            tool_run.reset(token)

    async def aresult(self, fallback: Callable[[], Any]) -> Any:
        token = tool_run.set(self.run)
        try:
            answer = await get_pipeline().arun_tool(
                self.name, self.args, lambda effective: self.out.acall(self._ahost, effective),
                tool_call_id=self.call_id, runtime_id=RUNTIME_ID, raise_errors=True)
            return host_result(answer, self.run, self.tool, self.args)
        except BaseException as exc:
            if self.out.recover(exc, self.where):
                return await fallback()
            return self.out.result
        finally:
            tool_run.reset(token)


def _prepared(tool: Any, tool_input: Any, invoke: Callable[[Any], Any],
              where: str) -> ToolCallRun | None:
    """The run of this dispatch, or None: it runs unobserved (otelmw already runs it,
    arguments that are not a dict, or an error of otelmw's, counted)."""
    if _in_flight.get() or type(tool_input) is not dict:
        return None
    try:
        return ToolCallRun(tool, tool_input, invoke, where)
    except Exception as exc:
        instrumentation_failed(where, exc)
        return None


async def agent_call_tool(wrapped: Any, instance: Any, args: tuple[Any, ...],
                          kwargs: dict[str, Any]) -> Any:
    """``_call_tool(ctx, tool, tool_input)`` of an agent or an ``AgentWorkflow``."""
    if len(args) != 3 or kwargs:
        return await wrapped(*args, **kwargs)
    ctx, tool, tool_input = args
    found = _prepared(tool, tool_input, lambda effective: wrapped(ctx, tool, effective),
                      "agent_call_tool")
    if found is None:
        return await wrapped(*args, **kwargs)
    return await found.aresult(lambda: wrapped(*args, **kwargs))


def call_tool(wrapped: Any, instance: Any, args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> Any:
    """``tools.calling.call_tool(tool, arguments)``."""
    if len(args) != 2 or kwargs:
        return wrapped(*args, **kwargs)
    tool, arguments = args
    found = _prepared(tool, arguments, lambda effective: wrapped(tool, effective), "call_tool")
    if found is None:
        return wrapped(*args, **kwargs)
    return found.result(lambda: wrapped(*args, **kwargs))


async def acall_tool(wrapped: Any, instance: Any, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> Any:
    """``tools.calling.acall_tool(tool, arguments)``."""
    if len(args) != 2 or kwargs:
        return await wrapped(*args, **kwargs)
    tool, arguments = args
    found = _prepared(tool, arguments, lambda effective: wrapped(tool, effective), "acall_tool")
    if found is None:
        return await wrapped(*args, **kwargs)
    return await found.aresult(lambda: wrapped(*args, **kwargs))

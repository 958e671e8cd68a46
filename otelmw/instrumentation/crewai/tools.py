"""Each CrewAI tool call → one ``execute_tool`` call through the pipeline, at the tool
itself (innermost: CrewAI's own ``before_tool_call`` hooks, its cache and usage limits,
its events and ``after_tool_call`` hooks stay around it, as without otelmw):

* ``BaseTool.run``/``arun`` and ``Tool.run``/``arun`` (``@tool`` functions): what a
  native tool call runs (``available_functions[name](**args)``);
* ``CrewStructuredTool.invoke``/``ainvoke``: what a ReAct tool call runs
  (``ToolUsage``).

The model's id of a native tool call (``gen_ai.tool.call.id``) and the name the model
called it by come from CrewAI's native tool-call runners
(``AgentExecutor._execute_single_native_tool_call``,
``agent_utils.execute_single_native_tool_call``), which hold them for the tool run they
start (``PendingToolCall``). A call with positional or non-dict input runs unobserved.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from ...core import get_pipeline
from .results import RUNTIME_ID, ToolRun, current_run, failed, host_answer, host_outcome


class PendingToolCall:
    """The native tool call a CrewAI runner is about to run: its id and name, taken
    by the first tool seam it reaches."""

    __slots__ = ("call_id", "name", "taken")

    def __init__(self, call_id: str | None, name: str | None) -> None:
        self.call_id, self.name, self.taken = call_id, name, False


pending_call: ContextVar[PendingToolCall | None] = ContextVar("otelmw_crewai_pending_tool",
                                                              default=None)
# The tool otelmw runs in this context (a seam of the same tool below it is that call).
tool_in_flight: ContextVar[str | None] = ContextVar("otelmw_crewai_tool", default=None)


def _tool_call_info(tool_call: Any) -> PendingToolCall | None:
    from crewai.utilities.agent_utils import extract_tool_call_info

    info = extract_tool_call_info(tool_call)
    if not info:
        return None
    call_id, name, _args = info
    return PendingToolCall(call_id if isinstance(call_id, str) and call_id else None,
                           name if isinstance(name, str) else None)


def native_tool_call(wrapped: Any, instance: Any, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> Any:
    """A native tool-call runner: the tool it runs gets this call's id."""
    pending = None
    try:
        tool_call = args[0] if args else kwargs.get("tool_call")
        pending = _tool_call_info(tool_call)
    except Exception as exc:
        failed("tool_call_id", exc)
    if pending is None:
        return wrapped(*args, **kwargs)
    token = pending_call.set(pending)
    try:
        return wrapped(*args, **kwargs)
    finally:
        pending_call.reset(token)


class _Seam:
    """One tool run at a seam: its name, arguments and call id, and how to run it
    with other arguments."""

    __slots__ = ("args", "call_id", "invoke", "name")

    def __init__(self, name: str, args: dict[str, Any], call_id: str | None,
                 invoke: Callable[[dict[str, Any]], Any]) -> None:
        self.name, self.args, self.call_id, self.invoke = name, args, call_id, invoke


def _seam(tool: Any, tool_args: Any, invoke: Callable[[dict[str, Any]], Any],
          where: str) -> _Seam | None:
    """This tool run as a pipeline call, or None: it runs unobserved."""
    try:
        name = getattr(tool, "name", None)
        if not isinstance(name, str) or not name or type(tool_args) is not dict:
            return None
        if tool_in_flight.get() == name:
            return None  # otelmw already runs this tool call (a seam above this one)
        call_id = None
        pending = pending_call.get()
        if pending is not None and not pending.taken:
            pending.taken = True
            call_id = pending.call_id
            name = pending.name or name
        return _Seam(name, tool_args, call_id, invoke)
    except Exception as exc:
        failed(where, exc)
        return None


def _run(seam: _Seam, fallback: Callable[[], Any], where: str) -> Any:
    out, run = host_outcome(), ToolRun()

    def host(effective: Any) -> Any:
        token = tool_in_flight.set(seam.name)
        try:
            return seam.invoke(effective)
        finally:
            tool_in_flight.reset(token)

    token = current_run.set(run)
    try:
        answer = get_pipeline().run_tool(
            seam.name, seam.args, lambda effective: out.call(host, effective),
            tool_call_id=seam.call_id, runtime_id=RUNTIME_ID, raise_errors=True)
        return host_answer(answer, run, out)
    except BaseException as exc:
        if out.recover(exc, where):
            return fallback()
        return out.result
    finally:
        current_run.reset(token)


async def _arun(seam: _Seam, fallback: Callable[[], Any], where: str) -> Any:
    out, run = host_outcome(), ToolRun()

    async def host(effective: Any) -> Any:
        token = tool_in_flight.set(seam.name)
        try:
            return await seam.invoke(effective)
        finally:
            tool_in_flight.reset(token)

    token = current_run.set(run)
    try:
        answer = await get_pipeline().arun_tool(
            seam.name, seam.args, lambda effective: out.acall(host, effective),
            tool_call_id=seam.call_id, runtime_id=RUNTIME_ID, raise_errors=True)
        return host_answer(answer, run, out)
    except BaseException as exc:
        if out.recover(exc, where):
            return await fallback()
        return out.result
    finally:
        current_run.reset(token)


def tool_run(wrapped: Any, instance: Any, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Any:
    """``BaseTool.run(**kwargs)`` / ``Tool.run(**kwargs)``."""
    seam = None if args else _seam(instance, kwargs, lambda a: wrapped(**a), "tool_run")
    if seam is None:
        return wrapped(*args, **kwargs)
    return _run(seam, lambda: wrapped(**kwargs), "tool_run")


async def tool_arun(wrapped: Any, instance: Any, args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> Any:
    """``BaseTool.arun(**kwargs)`` / ``Tool.arun(**kwargs)``."""
    seam = None if args else _seam(instance, kwargs, lambda a: wrapped(**a), "tool_arun")
    if seam is None:
        return await wrapped(*args, **kwargs)
    return await _arun(seam, lambda: wrapped(**kwargs), "tool_arun")


def _invoke_input(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Callable[
        [tuple[Any, ...], dict[str, Any], Any], tuple[tuple[Any, ...], dict[str, Any]]]]:
    """``invoke(input, config=None, **kwargs)``'s input and how to put another in."""
    if args:
        return args[0], lambda a, k, new: ((new, *a[1:]), k)
    return kwargs.get("input"), lambda a, k, new: (a, {**k, "input": new})


def _structured_seam(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                     wrapped: Any, where: str) -> _Seam | None:
    """The seam of one ``CrewStructuredTool.invoke``/``ainvoke`` (``None``: none, or
    otelmw failed to make it: counted at ``where``)."""
    try:
        tool_input, put = _invoke_input(args, kwargs)

        def invoke(new: dict[str, Any]) -> Any:
            a, k = put(args, kwargs, new)
            return wrapped(*a, **k)

        return _seam(instance, tool_input, invoke, where)
    except Exception as exc:
        failed(where, exc)
        return None


def structured_invoke(wrapped: Any, instance: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
    """``CrewStructuredTool.invoke(input, …)`` (a ReAct tool call)."""
    seam = _structured_seam(instance, args, kwargs, wrapped, "tool_invoke")
    if seam is None:
        return wrapped(*args, **kwargs)
    return _run(seam, lambda: wrapped(*args, **kwargs), "tool_invoke")


async def structured_ainvoke(wrapped: Any, instance: Any, args: tuple[Any, ...],
                             kwargs: dict[str, Any]) -> Any:
    """``CrewStructuredTool.ainvoke(input, …)``."""
    seam = _structured_seam(instance, args, kwargs, wrapped, "tool_ainvoke")
    if seam is None:
        return await wrapped(*args, **kwargs)
    return await _arun(seam, lambda: wrapped(*args, **kwargs), "tool_ainvoke")

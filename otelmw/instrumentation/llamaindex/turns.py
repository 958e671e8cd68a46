"""Workflow runs as turns: ``Workflow.run`` (``agent.run(...)`` of a FunctionAgent,
ReActAgent or CodeActAgent, an ``AgentWorkflow`` run, any workflow's run) → one
``invoke_agent {name}``: the agent's ``name``, else the workflow's class name
(``AgentWorkflow``, whose agents are sub-agents under it: ``handoffs.py``). A run
started inside another run's step (an agent called from a tool) is a sub-agent turn
under it.

``Workflow.run`` returns a handler at once and runs the workflow in tasks it creates
there: the turn is started in a copy of the caller's context that the run's tasks
inherit (so every step is in the turn's trace and the caller's own context is left as
it was), and ends when the run's result is settled (its result, error or cancel),
before the caller's ``await handler`` resumes. A ``run(ctx=...)`` that continues a
running workflow is not a turn of its own.
"""

from __future__ import annotations

import asyncio
from contextvars import copy_context
from functools import partial
from typing import Any

from ...core import Turn, get_pipeline
from .handoffs import AgentRun, agent_run, is_multi_agent
from .results import RUNTIME_ID, instrumentation_failed
from .tools import run_started

# The turn watchers of handlers without a result task of their own, while they run.
_watchers: set[asyncio.Future[None]] = set()


def _name(workflow: Any) -> str:
    name = getattr(workflow, "name", None)
    if isinstance(name, str) and name and not is_multi_agent(workflow):
        return name
    return type(workflow).__name__


def _continues_a_run(kwargs: dict[str, Any], args: tuple[Any, ...]) -> bool:
    ctx = kwargs.get("ctx")
    if ctx is None and args and type(args[0]).__name__ == "Context":
        ctx = args[0]
    return bool(getattr(ctx, "is_running", False))


def _open(workflow: Any) -> Turn | None:
    try:
        turn = get_pipeline().turn(_name(workflow), runtime_id=RUNTIME_ID)
        turn.start()
        return turn
    except Exception as exc:
        instrumentation_failed("turn_start", exc)
        return None


def _finish(turn: Turn, error: BaseException | None) -> None:
    try:
        turn.finish(error)
    except Exception as exc:
        instrumentation_failed("turn_finish", exc)


def _end(turn: Turn, agents: AgentRun | None, error: BaseException | None) -> None:
    if agents is not None:
        agents.close(error)
    _finish(turn, error)


def _settled(turn: Turn, agents: AgentRun | None, task: Any) -> None:
    """The run's result task is done: the turn ends with its outcome."""
    try:
        if task.cancelled():
            error: BaseException | None = asyncio.CancelledError()
        else:
            error = task.exception()
    except BaseException as exc:  # never raise in the loop's callback
        error = exc
    _end(turn, agents, error)


async def _watch(turn: Turn, agents: AgentRun | None, handler: Any) -> None:
    """A handler without a result task of its own: the turn ends with its result."""
    try:
        await handler.stop_event_result()
    except BaseException as exc:
        _end(turn, agents, exc)
        return
    _end(turn, agents, None)


def _run_as_turn(wrapped: Any, workflow: Any, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Any:
    turn = _open(workflow)
    agents = AgentRun() if turn is not None and is_multi_agent(workflow) else None
    agent_run.set(agents)  # this run's own (a run inside another's step: not the outer's)
    run_started()
    try:
        handler = wrapped(*args, **kwargs)
    except BaseException as exc:
        if turn is not None:
            _end(turn, agents, exc)
        raise
    if turn is not None:
        try:
            task = getattr(handler, "_result_task", None)
            if task is not None and hasattr(task, "add_done_callback"):
                task.add_done_callback(partial(_settled, turn, agents))
            else:
                watcher = asyncio.ensure_future(_watch(turn, agents, handler))
                _watchers.add(watcher)  # the loop keeps only a weak reference
                watcher.add_done_callback(_watchers.discard)
        except Exception as exc:
            instrumentation_failed("turn_watch", exc)
            _end(turn, agents, None)
    return handler


def workflow_run(wrapped: Any, instance: Any, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Any:
    if _continues_a_run(kwargs, args):
        return wrapped(*args, **kwargs)
    return copy_context().run(_run_as_turn, wrapped, instance, args, kwargs)

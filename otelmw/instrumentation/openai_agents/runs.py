"""Agents SDK runs: ``AgentRunner.run`` (``Runner.run`` and ``Runner.run_sync``) and
``AgentRunner.run_streamed``, one ``invoke_agent {starting agent}`` turn each, and the
agents a handoff passes the run to, each a child ``invoke_agent {agent}`` turn from its
first SDK turn (``run_single_turn``/``run_single_turn_streamed``) to the next handoff or
the run's end. A streamed run's turn lives in a context copy its background task
inherits, and ends when that task does."""

from __future__ import annotations

import asyncio
from contextvars import ContextVar, copy_context
from typing import Any

from ...core import Turn, get_pipeline
from ...core import instrumentation_failed as host_instrumentation_failed

HOST = "openai_agents"
RUNTIME_ID = "openai-agents"  # otelmw.runtime.id of every call of an Agents SDK run


def instrumentation_failed(where: str, exc: BaseException) -> None:
    """Count (and warn once about) an error of this adapter (never raises)."""
    host_instrumentation_failed(HOST, where, exc)


class RunInFlight:
    """One Agents SDK run: its turn, and the turn of the agent a handoff passed it to."""

    __slots__ = ("agent", "root", "segment", "token", "turn")

    def __init__(self, turn: Turn, agent: Any) -> None:
        self.turn, self.root = turn, agent
        self.agent = agent  # whose SDK turns run now
        self.segment: Turn | None = None  # a handed-off agent's turn, while it runs
        self.token: Any = None


_run: ContextVar[RunInFlight | None] = ContextVar("otelmw_openai_agents_run", default=None)


def agent_name(agent: Any) -> str:
    name = getattr(agent, "name", None)
    return name if isinstance(name, str) and name else type(agent).__name__


def _open(agent: Any) -> RunInFlight | None:
    try:
        turn = get_pipeline().turn(agent_name(agent), runtime_id=RUNTIME_ID)
        turn.start()
        run = RunInFlight(turn, agent)
        run.token = _run.set(run)
        return run
    except Exception as exc:
        instrumentation_failed("run_start", exc)
        return None


def _end_segment(run: RunInFlight, error: BaseException | None) -> None:
    segment, run.segment = run.segment, None
    if segment is not None:
        segment.finish(error)


def _close(run: RunInFlight | None, error: BaseException | None) -> None:
    if run is None:
        return
    try:
        _end_segment(run, error)
        try:
            _run.reset(run.token)
        except ValueError:  # ended from another context (a streamed run's task)
            pass
        run.turn.finish(error)
    except Exception as exc:
        instrumentation_failed("run_finish", exc)


def _starting_agent(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return args[0] if args else kwargs.get("starting_agent")


async def run_async(wrapped: Any, instance: Any, args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> Any:
    """``AgentRunner.run`` (``run_sync`` runs it on its own loop): one turn."""
    run = _open(_starting_agent(args, kwargs))
    try:
        result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        _close(run, exc)
        raise
    _close(run, None)
    return result


def run_streamed(wrapped: Any, instance: Any, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Any:
    """``AgentRunner.run_streamed``: it returns at once and runs the agent loop in a
    task; the turn is current in that task only (a context copy it inherits) and ends
    when the task does, with the error the run stored (or its cancellation)."""
    ctx = copy_context()
    run = ctx.run(_open, _starting_agent(args, kwargs))
    try:
        result = ctx.run(wrapped, *args, **kwargs)
    except BaseException as exc:
        ctx.run(_close, run, exc)
        raise
    if run is None:
        return result
    task = getattr(result, "run_loop_task", None)
    if not isinstance(task, asyncio.Future):
        ctx.run(_close, run, None)
        return result

    def task_done(done: asyncio.Future[Any]) -> None:
        error: BaseException | None = (asyncio.CancelledError() if done.cancelled()
                                       else getattr(result, "_stored_exception", None))
        ctx.run(_close, run, error if isinstance(error, BaseException) else None)

    task.add_done_callback(task_done)
    return result


async def agent_turn(wrapped: Any, instance: Any, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> Any:
    """``run_single_turn``/``run_single_turn_streamed``: one SDK turn of the run's
    current agent. When a handoff gave the run to another agent, that agent's turn
    starts here (awaited by the run loop itself, so it stays current there)."""
    run = _run.get()
    if run is not None:
        try:
            bindings = kwargs.get("bindings") or (args[1] if len(args) > 1 else None)
            _enter_agent(run, getattr(bindings, "public_agent", None))
        except Exception as exc:
            instrumentation_failed("agent_turn", exc)
    return await wrapped(*args, **kwargs)


def _enter_agent(run: RunInFlight, agent: Any) -> None:
    if agent is None or agent is run.agent:
        return
    _end_segment(run, None)
    run.agent = agent
    if agent is not run.root:  # back to the starting agent: its turn is the run's
        segment = get_pipeline().turn(agent_name(agent), runtime_id=RUNTIME_ID)
        segment.start()
        run.segment = segment

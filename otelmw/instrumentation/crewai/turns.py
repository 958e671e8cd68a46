"""CrewAI runs as turns:

* ``Crew.kickoff`` / ``Crew.akickoff`` → ``invoke_agent {crew name}`` (``kickoff_async``
  and ``kickoff_for_each*`` run through them; a streaming crew's run is the inner
  ``kickoff`` it starts, so the stream's consumer sees the same one turn);
* ``Agent.execute_task`` / ``aexecute_task`` (each task an agent of a crew works on) →
  ``invoke_agent {agent role}``, a sub-agent turn inside the crew's;
* ``Agent.kickoff`` / ``kickoff_async`` (an agent on its own; ``akickoff`` runs
  through ``kickoff_async``) → ``invoke_agent {agent role}``.

A run already in a turn of the same crew or agent (CrewAI's own retries of a task, a
``kickoff`` that hands over to ``kickoff_async``) is part of that turn.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from typing import Any

from ...core import Turn, get_pipeline
from .results import RUNTIME_ID, failed

# The crews and agents (by id) whose run this context is in.
_in_turn: ContextVar[frozenset[int]] = ContextVar("otelmw_crewai_in_turn",
                                                  default=frozenset())


class _Opened:
    __slots__ = ("token", "turn")

    def __init__(self, turn: Turn, token: Any) -> None:
        self.turn, self.token = turn, token


def _crew_name(crew: Any) -> str:
    name = getattr(crew, "name", None)
    return name if isinstance(name, str) and name else "crew"


def _agent_name(agent: Any) -> str:
    role = getattr(agent, "role", None)
    return role.strip() if isinstance(role, str) and role.strip() else "agent"


def _open(owner: Any, name: str, session: Any) -> _Opened | None:
    try:
        running = _in_turn.get()
        if id(owner) in running:
            return None
        turn = get_pipeline().turn(name, session_id=str(session) if session else None,
                                   runtime_id=RUNTIME_ID)
        turn.start()
        return _Opened(turn, _in_turn.set(running | {id(owner)}))
    except Exception as exc:
        failed("turn_start", exc)
        return None


def _close(opened: _Opened | None, error: BaseException | None) -> None:
    if opened is None:
        return
    try:
        try:
            _in_turn.reset(opened.token)
        except ValueError:  # ended in another context
            pass
        opened.turn.finish(error)
    except Exception as exc:
        failed("turn_finish", exc)


def _crew_turn(crew: Any) -> _Opened | None:
    if getattr(crew, "stream", False) is True:
        return None  # the stream's own inner kickoff is the run
    return _open(crew, _crew_name(crew), getattr(crew, "id", None))


def _agent_turn(agent: Any) -> _Opened | None:
    return _open(agent, _agent_name(agent), None)


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _run(opened: _Opened | None, wrapped: Any, args: tuple[Any, ...],
         kwargs: dict[str, Any]) -> Any:
    """CrewAI's own call inside the turn ``opened`` (if any), which ends with it."""
    try:
        result = wrapped(*args, **kwargs)
    except BaseException as exc:
        _close(opened, exc)
        raise
    _close(opened, None)
    return result


async def _arun(opened: _Opened | None, wrapped: Any, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
    """``_run`` for CrewAI's async calls."""
    try:
        result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        _close(opened, exc)
        raise
    _close(opened, None)
    return result


def crew_kickoff(wrapped: Any, instance: Any, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Any:
    return _run(_crew_turn(instance), wrapped, args, kwargs)


async def crew_akickoff(wrapped: Any, instance: Any, args: tuple[Any, ...],
                        kwargs: dict[str, Any]) -> Any:
    return await _arun(_crew_turn(instance), wrapped, args, kwargs)


def agent_run(wrapped: Any, instance: Any, args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> Any:
    """``Agent.execute_task`` and ``Agent.kickoff`` (which, called inside an event
    loop, answers ``kickoff_async``'s coroutine: that is the turn then)."""
    opened = None if _in_event_loop() and wrapped.__name__ == "kickoff" else (
        _agent_turn(instance))
    return _run(opened, wrapped, args, kwargs)


async def agent_arun(wrapped: Any, instance: Any, args: tuple[Any, ...],
                     kwargs: dict[str, Any]) -> Any:
    """``Agent.aexecute_task`` and ``Agent.kickoff_async``."""
    return await _arun(_agent_turn(instance), wrapped, args, kwargs)

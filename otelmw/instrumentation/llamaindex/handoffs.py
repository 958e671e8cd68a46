"""An ``AgentWorkflow``'s agents as sub-agents: each stretch of the run one agent has
(from its first step until a handoff passes the run to another agent, or the run ends)
is one ``invoke_agent {agent name}`` under the workflow's turn, and the agent's model
calls and tool calls (the handoff tool included) are its children.

The workflow runs each step in a task of its own, all in copies of the run's context
(the turn's). ``AgentRun`` (one per run, in that context) holds the current agent's
stretch: its sub-agent turn and the context variables starting it set (otelmw's turn,
OpenTelemetry's current span); ``run_agent_step`` and ``call_tool`` of the run run with
those set in the step's own context (the workflow's and LlamaIndex's own variables of
the step stay the step's).
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from typing import Any

from ...core import Turn, get_pipeline
from .results import RUNTIME_ID, instrumentation_failed

Stretch = dict[contextvars.ContextVar[Any], Any]


class AgentRun:
    """The agents of one ``AgentWorkflow`` run, one stretch open at a time."""

    __slots__ = ("agent", "turn", "variables")

    def __init__(self) -> None:
        self.agent: str | None = None
        self.turn: Turn | None = None
        self.variables: Stretch = {}

    def stretch_of(self, agent: str) -> Stretch:
        """The variables of ``agent``'s stretch (opened now when the run passed to it)."""
        if agent == self.agent and self.turn is not None:
            return self.variables
        self.close()
        before = contextvars.copy_context()  # the step's: under the workflow's turn
        context = before.copy()
        try:
            turn = get_pipeline().turn(agent, runtime_id=RUNTIME_ID)
            context.run(turn.start)
        except Exception as exc:
            instrumentation_failed("agent_start", exc)
            return {}
        self.agent, self.turn = agent, turn
        self.variables = {var: value for var, value in context.items()
                          if var not in before or before[var] is not value}
        return self.variables

    def close(self, error: BaseException | None = None) -> None:
        """End the open stretch (a handoff, or the run's end)."""
        turn, self.turn, self.variables, self.agent = self.turn, None, {}, None
        if turn is not None:
            try:
                turn.finish(error)
            except Exception as exc:
                instrumentation_failed("agent_finish", exc)


# The ``AgentWorkflow`` run this context belongs to.
agent_run: contextvars.ContextVar[AgentRun | None] = contextvars.ContextVar(
    "otelmw_llamaindex_agent_run", default=None)


def is_multi_agent(workflow: Any) -> bool:
    return any(cls.__name__ == "AgentWorkflow" for cls in type(workflow).__mro__)


async def in_stretch(variables: Stretch, step: Callable[[], Awaitable[Any]]) -> Any:
    """``await step()`` with a stretch's variables set in this context."""
    tokens = []
    try:
        for var, value in variables.items():
            tokens.append((var, var.set(value)))
    except Exception as exc:
        instrumentation_failed("agent_enter", exc)
    try:
        return await step()
    finally:
        for var, token in reversed(tokens):
            try:
                var.reset(token)
            except ValueError:  # reset from another context: the task's own, gone
                pass


def _agent_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    event = args[1] if len(args) > 1 else kwargs.get("ev")
    name = getattr(event, "current_agent_name", None)
    return name if isinstance(name, str) and name else None


async def run_agent_step(wrapped: Any, instance: Any, args: tuple[Any, ...],
                         kwargs: dict[str, Any]) -> Any:
    """``AgentWorkflow.run_agent_step``: in the stretch of the event's agent."""
    run = agent_run.get()
    variables: Stretch = {}
    if run is not None:
        try:
            agent = _agent_of(args, kwargs)
            variables = run.stretch_of(agent) if agent is not None else {}
        except Exception as exc:
            instrumentation_failed("run_agent_step", exc)
    return await in_stretch(variables, lambda: wrapped(*args, **kwargs))


def current_stretch() -> Stretch:
    """The open stretch's variables of this run (a tool call is its agent's)."""
    run = agent_run.get()
    return run.variables if run is not None else {}

"""Graph runs as turns: ``Pregel.stream``/``astream`` (``invoke``/``ainvoke`` run
through them) of the root graph → one ``invoke_agent {graph name}``; a graph run
inside it (a subgraph node, an agent called as a tool) belongs to that turn. The
thread id of the run's config is the session id.

A sync run's steps all run in one copy of the caller's context that holds the turn
(LangGraph and LangChain copy it again for the worker threads they run nodes and sync
tools on, so those stay in the turn's trace); the turn ends once: when the stream is
exhausted, raises, is closed or is collected.
"""

from __future__ import annotations

from contextvars import ContextVar, copy_context
from functools import partial
from typing import Any

from ...core import Turn, get_pipeline
from .._turns import TurnGenerator
from .fail_open import instrumentation_failed
from .results import RUNTIME_ID

# A graph run of this context is a turn already.
_in_turn: ContextVar[bool] = ContextVar("otelmw_langchain_in_turn", default=False)


def _session_id(config: Any) -> str | None:
    configurable = config.get("configurable") if isinstance(config, dict) else None
    thread = configurable.get("thread_id") if isinstance(configurable, dict) else None
    return str(thread) if isinstance(thread, str | int) and thread != "" else None


class _Opened:
    __slots__ = ("token", "turn")

    def __init__(self, turn: Turn, token: Any) -> None:
        self.turn, self.token = turn, token


def _open(graph: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Opened | None:
    try:
        name = getattr(graph, "name", None)
        config = args[1] if len(args) > 1 else kwargs.get("config")
        turn = get_pipeline().turn(name if isinstance(name, str) and name else "LangGraph",
                                   session_id=_session_id(config), runtime_id=RUNTIME_ID)
        turn.start()
        return _Opened(turn, _in_turn.set(True))
    except Exception as exc:
        instrumentation_failed("turn_start", exc)
        return None


def _close(opened: _Opened | None, error: BaseException | None) -> None:
    if opened is None:
        return
    try:
        try:
            _in_turn.reset(opened.token)
        except ValueError:  # ended from another context (an abandoned async stream)
            pass
        opened.turn.finish(error)
    except Exception as exc:
        instrumentation_failed("turn_finish", exc)


def graph_stream(wrapped: Any, instance: Any, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Any:
    if _in_turn.get():
        return wrapped(*args, **kwargs)
    return TurnGenerator(wrapped(*args, **kwargs), copy_context(), _close,
                         open_turn=partial(_open, instance, args, kwargs))


def graph_astream(wrapped: Any, instance: Any, args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> Any:
    if _in_turn.get():
        return wrapped(*args, **kwargs)
    return _aturn_stream(wrapped(*args, **kwargs), instance, args, kwargs)


async def _aturn_stream(inner: Any, graph: Any, args: tuple[Any, ...],
                        kwargs: dict[str, Any]) -> Any:
    """The async run in the consuming task's context (LangGraph's tasks copy it)."""
    opened = _open(graph, args, kwargs)
    error: BaseException | None = None
    try:
        async for item in inner:
            yield item
    except BaseException as exc:
        error = None if isinstance(exc, GeneratorExit) else exc
        raise
    finally:
        try:
            await inner.aclose()
        finally:
            _close(opened, error)

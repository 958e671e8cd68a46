"""PraisonAI turns: ``chat``/``achat``/``start``/``run``/``astart``/``arun`` and the
``_start_stream`` generator, one ``invoke_agent {name}`` each (per-agent re-entrancy
guard; a returned stream keeps its turn until exhausted, closed or collected)."""

from __future__ import annotations

import collections.abc
from contextvars import ContextVar, copy_context
from functools import partial
from typing import Any

from ...core import Turn, get_pipeline
from .._base import Wrapper
from .._turns import TurnGenerator
from .fail_open import instrumentation_failed

NATIVE_RUNTIME_ID = "praisonai"

_active: ContextVar[tuple[int, ...]] = ContextVar("otelmw_praisonai_active", default=())
_state: ContextVar[OpenedTurn | None] = ContextVar("otelmw_praisonai_turn", default=None)


def runtime_id_of(agent: Any) -> str:
    """The agent's runtime id as PraisonAI reads it (``_runtime_id``, default native)."""
    rid = getattr(agent, "_runtime_id", None)
    return rid if isinstance(rid, str) and rid else NATIVE_RUNTIME_ID


def current_turn() -> OpenedTurn | None:
    """The PraisonAI turn running in this context, if any."""
    return _state.get()


class OpenedTurn:
    """A turn in flight, and the context-variable tokens its end resets."""

    __slots__ = ("active_token", "llm_error", "state_token", "turn")
    active_token: Any  # of ``_active``: the agent is in a turn
    state_token: Any  # of ``_state``: this turn is the current one
    llm_error: BaseException | None  # the latest model request's error

    def __init__(self, turn: Turn) -> None:
        self.turn, self.llm_error = turn, None


def _open(agent: Any) -> OpenedTurn | None:
    try:
        name, sid = getattr(agent, "name", None), getattr(agent, "_session_id", None)
        turn = get_pipeline().turn(
            name if isinstance(name, str) and name else type(agent).__name__,
            session_id=sid if isinstance(sid, str) and sid else None,
            runtime_id=runtime_id_of(agent))
        turn.start()
        opened = OpenedTurn(turn)
        opened.active_token = _active.set((*_active.get(), id(agent)))
        opened.state_token = _state.set(opened)
        return opened
    except Exception as exc:
        instrumentation_failed("turn_start", exc)
        return None


def _close(opened: OpenedTurn | None, error: BaseException | None, result: Any,
           stream: bool) -> None:
    if opened is None:
        return
    try:
        if error is None and (opened.llm_error is not None if stream else result is None):
            opened.turn.mark_failed()
        try:  # same context as _open: the wrappers guarantee it
            _state.reset(opened.state_token)
            _active.reset(opened.active_token)
        finally:
            opened.turn.finish(error)
    except Exception as exc:
        instrumentation_failed("turn_finish", exc)


def _guarded(agent: Any) -> bool:
    return agent is None or id(agent) in _active.get()


def _call(fn: Any, *args: Any, **kwargs: Any) -> Any:  # ``Context.run`` without a context
    return fn(*args, **kwargs)


def turn_wrapper(isolate: bool) -> Wrapper:
    """``chat``, or ``start``/``run`` (``isolate``: their result may be a stream, so the
    turn lives in a context copy that the stream re-enters on each step)."""

    def turn(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if _guarded(instance):
            return wrapped(*args, **kwargs)
        ctx = copy_context() if isolate else None
        run = ctx.run if ctx is not None else _call
        opened = run(_open, instance)
        try:
            result = run(wrapped, *args, **kwargs)
        except BaseException as exc:
            run(_close, opened, exc, None, False)
            raise
        if ctx is not None and isinstance(result, collections.abc.Generator):
            return TurnGenerator(result, ctx, _close_stream_turn, opened=opened)
        run(_close, opened, None, result, False)
        return result

    return turn


async def turn_async(wrapped: Any, instance: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
    """``achat``/``astart``/``arun``: one turn in the awaiting task's context."""
    if _guarded(instance):
        return await wrapped(*args, **kwargs)
    opened = _open(instance)
    try:
        result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        _close(opened, exc, None, False)
        raise
    _close(opened, None, result, False)
    return result


def turn_stream(wrapped: Any, instance: Any, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Any:
    """``_start_stream`` (generator): the turn opens on its first step."""
    gen = wrapped(*args, **kwargs)
    if _guarded(instance):
        return gen  # inside start()/run(): their turn owns the stream
    return TurnGenerator(gen, copy_context(), _close_stream_turn,
                         open_turn=partial(_open, instance))


def _close_stream_turn(opened: OpenedTurn, error: BaseException | None) -> None:
    """The end of a turn a stream carried (no result to judge: the stream was it)."""
    _close(opened, error, None, True)  # _close never raises

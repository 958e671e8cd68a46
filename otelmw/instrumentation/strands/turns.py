"""``Agent._run_loop`` → the turn: every invocation (``agent(...)``, ``invoke_async``,
``stream_async``, ``structured_output``) runs it inside Strands' own ``invoke_agent``
span.

Strands' tracer records whenever a tracer provider is set (under ``otelmw run`` always:
otelmw sets one). When it records, Strands' ``invoke_agent {name}`` span is the run's:
otelmw's turn runs without a span of its own (a pipeline twin without an observer sets
the turn's ids, which the run's calls carry), so the run has one ``invoke_agent``.
Otherwise otelmw's turn is the ``invoke_agent {name}`` span."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ...core import Pipeline, Turn, get_pipeline
from .results import RUNTIME_ID, failed


def _twin(pipeline: Pipeline) -> Pipeline:
    """The pipeline's registrations without its observer: the turn's ids, no span."""
    twin = Pipeline(pipeline.registry, pipeline.normalizers, pipeline.failures)
    twin.memory_adapters = pipeline.memory_adapters
    return twin


def _agent_span_records(agent: Any) -> bool:
    span = getattr(agent, "trace_span", None)
    is_recording = getattr(span, "is_recording", None)
    return bool(is_recording()) if callable(is_recording) else False


def _start(agent: Any) -> Turn | None:
    try:
        pipeline = get_pipeline()
        if _agent_span_records(agent):
            pipeline = _twin(pipeline)
        name = getattr(agent, "name", None)
        turn = pipeline.turn(name if isinstance(name, str) and name else "agent",
                             runtime_id=RUNTIME_ID)
        turn.start()
        return turn
    except Exception as exc:
        failed("turn_start", exc)
        return None


def _finish(turn: Turn | None, error: BaseException | None) -> None:
    if turn is None:
        return
    try:
        turn.finish(error)
    except Exception as exc:
        failed("turn_finish", exc)


def run_loop(wrapped: Any, instance: Any, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Any:
    """``Agent._run_loop(...)`` (an async generator) as one turn."""
    return _turn_events(wrapped(*args, **kwargs), instance)


async def _turn_events(events: AsyncIterator[Any], agent: Any) -> AsyncIterator[Any]:
    turn = _start(agent)
    try:
        async for event in events:
            yield event
    except GeneratorExit:  # the consumer stopped early (it had what it wanted)
        _finish(turn, None)
        raise
    except BaseException as exc:
        _finish(turn, exc)
        raise
    else:
        _finish(turn, None)
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()

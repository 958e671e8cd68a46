"""ADK agent runs as turns: every run of an agent (``BaseAgent._run_with_lifecycle``,
which ``run_async`` enters for the root agent of a ``Runner`` run and for each sub-agent
a transfer or a workflow runs) is an otelmw turn around the agent's implementation
(``_run_async_impl``), inside ADK's own ``invoke_agent {agent}`` span: the turn's
conversation id is the ADK session's id, and the model and tool calls made in it carry
the turn's ids.

ADK's ``invoke_agent`` span is the turn's span whenever it records (ADK traces with the
global tracer provider, the one ``otelmw run`` / ``configure()`` installs): otelmw opens
no second one (its turn runs on a pipeline twin without an observer: the runtime context
and the plugins, no span). Where ADK's span does not record, the turn is an
``invoke_agent {agent}`` span of otelmw's own. Live runs (``run_live``) are not turns.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from opentelemetry import trace

from ...core import Pipeline, Turn, get_pipeline
from .fail_open import RUNTIME_ID, instrumentation_failed

_ADK_AGENT_SPAN = "invoke_agent"


def _twin(pipeline: Pipeline) -> Pipeline:
    """The pipeline's registrations without its observer: the turn's context, no span."""
    twin = Pipeline(pipeline.registry, pipeline.normalizers, pipeline.failures)
    twin.memory_adapters = pipeline.memory_adapters
    return twin


def _on_adk_span() -> bool:
    """Whether the current span is ADK's own recording ``invoke_agent`` span."""
    span = trace.get_current_span()
    name = getattr(span, "name", None)
    return span.is_recording() and isinstance(name, str) and name.startswith(_ADK_AGENT_SPAN)


def _open(agent: Any, ctx: Any) -> Turn | None:
    try:
        pipeline = get_pipeline()
        session = getattr(getattr(ctx, "session", None), "id", None)
        name = getattr(agent, "name", None)
        turn = (_twin(pipeline) if _on_adk_span() else pipeline).turn(
            name if isinstance(name, str) and name else "agent",
            session_id=session if isinstance(session, str) and session else None,
            runtime_id=RUNTIME_ID, host_measured=True)  # ADK records the run's duration point
        turn.start()
        return turn
    except Exception as exc:
        instrumentation_failed("turn_start", exc)
        return None


def _close(turn: Turn | None, error: BaseException | None) -> None:
    if turn is None:
        return
    try:
        turn.finish(error)
    except Exception as exc:
        instrumentation_failed("turn_finish", exc)


async def _turn(impl: Callable[[Any], Any], agent: Any, ctx: Any) -> AsyncIterator[Any]:
    """``impl(ctx)``'s events, the agent's run a turn (opened on the first pull, in ADK's
    ``invoke_agent`` span; ended once, however the stream ends)."""
    turn = _open(agent, ctx)
    inner = impl(ctx)
    error: BaseException | None = None
    try:
        async for event in inner:
            yield event
    except BaseException as exc:
        error = None if isinstance(exc, GeneratorExit) else exc
        raise
    finally:
        try:
            close = getattr(inner, "aclose", None)
            if close is not None:
                await close()
        finally:
            _close(turn, error)


def run_with_lifecycle(wrapped: Any, instance: Any, args: tuple[Any, ...],
                       kwargs: dict[str, Any]) -> Any:
    """``BaseAgent._run_with_lifecycle(parent_context, impl_fn)``: ``impl_fn`` run as a
    turn (a live run's ``_run_live_impl`` as without otelmw)."""
    try:
        values = {**dict(zip(("parent_context", "impl_fn"), args, strict=False)), **kwargs}
        parent, impl = values["parent_context"], values["impl_fn"]
        if getattr(parent, "live_request_queue", None) is not None or not callable(impl):
            return wrapped(*args, **kwargs)

        def observed(ctx: Any) -> AsyncIterator[Any]:
            return _turn(impl, instance, ctx)

        rest = {k: v for k, v in values.items() if k not in ("parent_context", "impl_fn")}
    except Exception as exc:
        instrumentation_failed("turn", exc)
        return wrapped(*args, **kwargs)
    return wrapped(parent, observed, **rest)

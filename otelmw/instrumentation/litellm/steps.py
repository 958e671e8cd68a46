"""LiteLLM's ``Router``: each call of a router endpoint (``completion``, ``acompletion``,
``embedding``, ``aembedding``, ``aresponses``, ``aanthropic_messages``) is one host step,
the span ``router {model group}`` over the attempts it makes (each a ``chat`` or
``embeddings`` call of its own: retries and fallbacks are visible as siblings under it),
with how many it made (``litellm.router.attempts``)."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from ...core import HostStep, instrumentation_failed, open_step
from .._base import Wrapper

ROUTER_ENDPOINT = "litellm.router.endpoint"
ROUTER_MODEL_GROUP = "litellm.router.model_group"
ROUTER_ATTEMPTS = "litellm.router.attempts"


class RouterCall:
    """The router call in flight in this context (tasks the router starts share it)."""

    __slots__ = ("attempts",)

    def __init__(self) -> None:
        self.attempts = 0


_router_call: ContextVar[RouterCall | None] = ContextVar("otelmw_litellm_router",
                                                         default=None)


def attempt_made() -> None:
    """A LiteLLM entry opened a call: one more attempt of the router call in flight."""
    running = _router_call.get()
    if running is not None:
        running.attempts += 1


def _opened(endpoint: str, args: tuple[Any, ...], kwargs: dict[str, Any]
            ) -> tuple[HostStep, RouterCall] | None:
    if _router_call.get() is not None:  # the router calling itself: one step
        return None
    try:
        model = kwargs.get("model", args[0] if args else None)
        group = model if isinstance(model, str) else None
        step = open_step(f"router {group}" if group else "router",
                         {ROUTER_ENDPOINT: endpoint, **({ROUTER_MODEL_GROUP: group}
                                                        if group else {})})
    except Exception as exc:
        instrumentation_failed("litellm", f"router.{endpoint}", exc)
        return None
    return step, RouterCall()


def _finish(step: HostStep, running: RouterCall, result: Any,
            error: BaseException | None) -> Any:
    try:
        step.describe({ROUTER_ATTEMPTS: running.attempts})
        return step.finish(result, error)
    except Exception as exc:
        instrumentation_failed("litellm", "router", exc)
        return result


def router_wrapper(endpoint: str, *, is_async: bool) -> Wrapper:
    """Wrapper of one router endpoint (a method of LiteLLM's router core)."""

    def traced(wrapped: Any, instance: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
        opened = _opened(endpoint, args, kwargs)
        if opened is None:
            return wrapped(*args, **kwargs)
        step, running = opened
        token = _router_call.set(running)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            _router_call.reset(token)
            _finish(step, running, None, exc)
            raise
        _router_call.reset(token)
        return _finish(step, running, result, None)

    async def atraced(wrapped: Any, instance: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
        opened = _opened(endpoint, args, kwargs)
        if opened is None:
            return await wrapped(*args, **kwargs)
        step, running = opened
        token = _router_call.set(running)
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            _router_call.reset(token)
            _finish(step, running, None, exc)
            raise
        _router_call.reset(token)
        return _finish(step, running, result, None)

    return atraced if is_async else traced

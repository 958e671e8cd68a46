"""LiteLLM's ``Router``: each call of a router endpoint (``completion``, ``acompletion``,
``embedding``, ``aembedding``, ``aresponses``, ``aanthropic_messages``) is one host step,
the span ``router {model group}`` over the attempts it makes (each a ``chat`` or
``embeddings`` call of its own: retries and fallbacks are visible as siblings under it),
with how many it made (``litellm.router.attempts``)."""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Any, NamedTuple

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


class _Opened(NamedTuple):
    step: HostStep
    running: RouterCall
    token: Token[RouterCall | None]  # of ``_router_call``, reset by ``_finish``


def _opened(endpoint: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Opened | None:
    """The router step of this call, its ``RouterCall`` current; None: the call runs
    unobserved."""
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
    running = RouterCall()
    return _Opened(step, running, _router_call.set(running))


def _finish(opened: _Opened, result: Any, error: BaseException | None) -> Any:
    _router_call.reset(opened.token)
    try:
        opened.step.describe({ROUTER_ATTEMPTS: opened.running.attempts})
        return opened.step.finish(result, error)
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
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            _finish(opened, None, exc)
            raise
        return _finish(opened, result, None)

    async def atraced(wrapped: Any, instance: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
        opened = _opened(endpoint, args, kwargs)
        if opened is None:
            return await wrapped(*args, **kwargs)
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            _finish(opened, None, exc)
            raise
        return _finish(opened, result, None)

    return atraced if is_async else traced

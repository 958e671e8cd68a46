"""PraisonAI's model requests: the SDK clients its ``OpenAIClient`` builds get an
instance-level ``create`` (chat completions, responses), one ``chat {model}`` span per SDK
request on every path (``otelmw_openai``, when active, only enriches it). It proxies the
``create`` the resource had at patch time, and every fallback calls that original."""

from __future__ import annotations

import weakref
from typing import Any

import wrapt

from ...core import HostOutcome, current_llm_call, get_pipeline
from .._base import server_of
from .fail_open import afail_open, fail_open, host_outcome, instrumentation_failed
from .turns import current_turn

MARK = "_otelmw_praisonai"  # on the getter of a client property otelmw installed
patched_resources: weakref.WeakSet[Any] = weakref.WeakSet()


def note_llm(out: HostOutcome) -> None:
    if (opened := current_turn()) is not None and out.executed:
        opened.llm_error = out.error


class ResourceCreate(wrapt.FunctionWrapper):  # type: ignore[type-arg]
    """The instance-level ``create`` otelmw gives one PraisonAI SDK resource. It proxies
    the ``create`` the resource had at patch time, so a mock's assertions, a proxy's or a
    ``__getattr__`` resource's attributes still answer through it."""


def _current_create(resource: Any, original: Any) -> Any:
    """What to call for this request: a real SDK resource's class attribute, looked up
    now (a class-level ``otelmw_openai`` wrapper installed later runs inside); for
    anything else (mocks, proxies, ``__getattr__`` resources) the original callable."""
    if getattr(original, "__self__", None) is resource:
        owner: Any = type(resource)
        create = getattr(owner, "create", None)
        if callable(create):
            return create.__get__(resource, owner)
    return original


def _create(resource: Any, original: Any, api_mode: str, is_async: bool) -> Any:
    """Instance-level ``create`` of a PraisonAI SDK resource (async: returns the awaitable).
    Every fallback calls ``original``, never a lookup that may be what failed."""

    def create(wrapped: Any, instance: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
        try:
            method = _current_create(resource, original)
            address, port = server_of(getattr(getattr(resource, "_client", None), "base_url",
                                              None))
            model = m if isinstance(m := kwargs.get("model"), str) else None
            opts: dict[str, Any] = {"provider": "openai", "model": model,
                                    "server_address": address, "server_port": port}
        except Exception as exc:
            instrumentation_failed("chat", exc)
            return original(*args, **kwargs)
        if current_llm_call() is not None:  # an outer layer already has this request
            return method(*args, **kwargs)
        run = get_pipeline().arun_llm if is_async else get_pipeline().run_llm
        return (afail_open if is_async else fail_open)(
            host_outcome(), "chat", lambda request: method(*args, **request),
            lambda ex: run(kwargs, ex, api_mode=api_mode, **opts),
            lambda: method(*args, **kwargs), note_llm)

    return ResourceCreate(original, create)


def patch_client(client: Any) -> Any:
    """Give one of PraisonAI's SDK clients its per-request ``create`` (idempotent). A
    resource whose instance already holds a ``create`` (ours, or one set on it) keeps it."""
    try:
        import openai

        is_async = isinstance(client, openai.AsyncOpenAI)
        for resource, api_mode in ((client.chat.completions, "chat_completions"),
                                   (client.responses, "responses")):
            if "create" in vars(resource):
                continue
            original = resource.create  # kept: every fallback calls it
            if callable(original):
                resource.create = _create(resource, original, api_mode, is_async)
                patched_resources.add(resource)
    except Exception as exc:
        instrumentation_failed("client", exc)
    return client


def client_property(original: property) -> property:
    fget = original.fget

    def get(self: Any) -> Any:
        return patch_client(fget(self))  # type: ignore[misc]

    setattr(get, MARK, True)
    return property(get, original.fset, original.fdel, original.__doc__)

"""Model calls: LlamaIndex's own model seam, the ``chat``/``achat``/``stream_chat``/
``astream_chat`` methods every LLM class implements (``BaseLLM``'s abstract interface,
which agents reach through ``achat_with_tools`` and friends), each call one ``chat``
call through ``Pipeline.run_llm``/``arun_llm``: otelmw's ``llm_request`` stage on the
request as LlamaIndex sends it (``requests.py``), its ``llm_execution`` chain around the
LLM's own method (LlamaIndex's callbacks, dispatcher events and retries inside it, as
without otelmw), one ``chat`` span per call; the provider SDK call under it only
enriches that span. Any provider works: every ``BaseLLM`` subclass that implements the
methods is wrapped, those defined before instrumentation (``wrap_llm_classes``) and
after (``BaseLLM.__pydantic_init_subclass__``: ``llm_class_defined``). A call inside a
call otelmw already runs (``OpenAILike.chat`` → ``OpenAI.chat``) is that call.

A stream's span ends when LlamaIndex is done with the stream; the provider request it
makes on the first iteration enriches that span. An ``llm_execution`` layer that answers
without ``next_call`` must answer what the method returns (a ``ChatResponse``, or a
generator of them for a stream); anything else is counted and LlamaIndex gets the LLM's
own answer (its call made once).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import wrapt

from ...core import HostOutcome, current_llm_call, get_pipeline
from .._base import AsyncCallStream, CallStream, server_of
from .requests import RequestView, applied, request_view
from .results import host_outcome, instrumentation_failed

CHAT_METHODS = ("chat", "achat", "stream_chat", "astream_chat")

# ``llama_index.llms.<package>`` → the conventions' ``gen_ai.provider.name``.
_PROVIDERS = {"openai": "openai", "openai_like": "openai", "azure_openai": "azure.ai.openai",
              "anthropic": "anthropic", "gemini": "gcp.gemini", "google_genai": "gcp.gemini",
              "vertex": "gcp.vertex_ai", "bedrock": "aws.bedrock",
              "bedrock_converse": "aws.bedrock", "mistralai": "mistral_ai", "groq": "groq",
              "deepseek": "deepseek", "cohere": "cohere", "ollama": "ollama"}
_API_MODES = {"OpenAIResponses": "responses"}


def _provider(llm: Any) -> str | None:
    """The provider of the LLM's class or of the LlamaIndex provider class it extends
    (a program's own subclass of ``OpenAI`` is ``openai``)."""
    for cls in type(llm).__mro__:
        module = cls.__module__
        if module.startswith("llama_index.llms."):
            package = module.split(".")[2]
            return _PROVIDERS.get(package, package)
    return None


def _api_mode(llm: Any, provider: str | None) -> str | None:
    for cls in type(llm).__mro__:
        if cls.__name__ in _API_MODES:
            return _API_MODES[cls.__name__]
    return "chat_completions" if provider == "openai" else None


def _options(llm: Any) -> dict[str, Any]:
    provider = _provider(llm)
    base = getattr(llm, "api_base", None) or getattr(llm, "base_url", None)
    address, port = server_of(base) if isinstance(base, str) and base else (None, None)
    return {"provider": provider, "api_mode": _api_mode(llm, provider),
            "server_address": address, "server_port": port}


class _Prepared:
    __slots__ = ("llm", "method", "options", "view")

    def __init__(self, llm: Any, method: str, view: RequestView,
                 options: dict[str, Any]) -> None:
        self.llm, self.method, self.view, self.options = llm, method, view, options

    def host(self, wrapped: Any, payload: Any) -> Any:
        """The LLM's own method for the request the execution chain hands on; a
        rewritten LLM setting is asked of a copy of the LLM (its method, reached
        through otelmw's wrapper, is this call: the call is current)."""
        a = applied(self.view, self.llm, payload)
        if a.llm_update:
            llm = self.llm.model_copy(update=a.llm_update)
            return getattr(llm, self.method)(a.messages, **a.kwargs)
        return wrapped(a.messages, **a.kwargs)


def _prepared(llm: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
              where: str) -> _Prepared | None:
    """The call's request and ``run_llm`` options, or None: it runs unobserved (a call
    otelmw already runs, a call it cannot read, or an error of otelmw's, counted)."""
    if current_llm_call() is not None:
        return None
    try:
        if len(args) == 1 and "messages" not in kwargs:
            messages = args[0]
        elif not args and "messages" in kwargs:
            kwargs = dict(kwargs)
            messages = kwargs.pop("messages")
        else:
            return None
        view = request_view(llm, messages, kwargs)
        options = _options(llm)
        options["model"] = view.request["model"]
        return _Prepared(llm, where, view, options)
    except Exception as exc:
        instrumentation_failed(where, exc)
        return None


_RUN_HOST = object()  # the host's call has not run: run it now, without the pipeline


def _is_response(value: Any) -> bool:
    from llama_index.core.base.llms.types import ChatResponse

    return isinstance(value, ChatResponse)


def _is_stream(value: Any) -> bool:
    return hasattr(type(value), "__next__")


def _is_async_stream(value: Any) -> bool:
    return hasattr(type(value), "__anext__")


def _checked(answer: Any, out: HostOutcome, where: str, fits: Callable[[Any], bool]) -> Any:
    """What LlamaIndex gets for the pipeline's ``answer``: it, when it is what the
    method returns; else (an ``llm_execution`` layer that answered something else
    without ``next_call``: counted) the LLM's own answer, or ``_RUN_HOST``."""
    if fits(answer):
        return answer
    instrumentation_failed(where, TypeError(
        f"an llm_execution layer answered {type(answer).__name__}, not what LlamaIndex's "
        f"{where} returns: LlamaIndex gets the LLM's own answer"))
    if out.executed and out.error is None and fits(out.result):
        return out.result
    return _RUN_HOST


def _through_pipeline(where: str, streamed: bool, fits: Callable[[Any], bool], wrapped: Any,
                      instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A sync chat method (``chat``, ``stream_chat``) as one call through the pipeline;
    a stream is stepped with the call current (``CallStream``)."""
    found = _prepared(instance, args, kwargs, where)
    if found is None:
        return wrapped(*args, **kwargs)
    out = host_outcome()

    def host(payload: Any) -> Any:
        answer = found.host(wrapped, payload)
        return CallStream(answer, current_llm_call()) if streamed else answer

    try:
        answer = get_pipeline().run_llm(found.view.request,
                                        lambda payload: out.call(host, payload), **found.options)
    except BaseException as exc:
        if out.recover(exc, where):
            return wrapped(*args, **kwargs)
        return out.result
    answer = _checked(answer, out, where, fits)
    return wrapped(*args, **kwargs) if answer is _RUN_HOST else answer


async def _athrough_pipeline(where: str, streamed: bool, fits: Callable[[Any], bool],
                             wrapped: Any, instance: Any, args: tuple[Any, ...],
                             kwargs: dict[str, Any]) -> Any:
    """``_through_pipeline`` for the async chat methods (``achat``, ``astream_chat``)."""
    found = _prepared(instance, args, kwargs, where)
    if found is None:
        return await wrapped(*args, **kwargs)
    out = host_outcome()

    async def host(payload: Any) -> Any:
        answer = await found.host(wrapped, payload)
        return AsyncCallStream(answer, current_llm_call()) if streamed else answer

    try:
        answer = await get_pipeline().arun_llm(
            found.view.request, lambda payload: out.acall(host, payload), **found.options)
    except BaseException as exc:
        if out.recover(exc, where):
            return await wrapped(*args, **kwargs)
        return out.result
    answer = _checked(answer, out, where, fits)
    return await wrapped(*args, **kwargs) if answer is _RUN_HOST else answer


def chat(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return _through_pipeline("chat", False, _is_response, wrapped, instance, args, kwargs)


async def achat(wrapped: Any, instance: Any, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
    return await _athrough_pipeline("achat", False, _is_response, wrapped, instance, args,
                                    kwargs)


def stream_chat(wrapped: Any, instance: Any, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
    return _through_pipeline("stream_chat", True, _is_stream, wrapped, instance, args, kwargs)


async def astream_chat(wrapped: Any, instance: Any, args: tuple[Any, ...],
                       kwargs: dict[str, Any]) -> Any:
    return await _athrough_pipeline("astream_chat", True, _is_async_stream, wrapped, instance,
                                    args, kwargs)


WRAPPERS = {"chat": chat, "achat": achat, "stream_chat": stream_chat,
            "astream_chat": astream_chat}


class LLMClasses:
    """The LLM classes whose chat methods otelmw wrapped, to restore them."""

    def __init__(self) -> None:
        self.wrapped: list[tuple[type, str]] = []

    def wrap(self, cls: type) -> None:
        """Wrap the chat methods ``cls`` implements itself (not the abstract ones)."""
        for name in CHAT_METHODS:
            method = cls.__dict__.get(name)
            if method is None or getattr(method, "__isabstractmethod__", False):
                continue
            if is_ours(method):
                continue
            try:
                wrapt.wrap_function_wrapper(cls, name, WRAPPERS[name])
                self.wrapped.append((cls, name))
            except Exception as exc:
                instrumentation_failed("wrap_llm_class", exc)

    def wrap_tree(self, root: type) -> None:
        """``root`` and every subclass of it defined so far."""
        seen: set[type] = set()
        pending = [root]
        while pending:
            cls = pending.pop()
            if cls in seen:
                continue
            seen.add(cls)
            self.wrap(cls)
            pending.extend(cls.__subclasses__())

    def restore(self) -> None:
        for cls, name in reversed(self.wrapped):
            current = cls.__dict__.get(name)
            if isinstance(current, wrapt.FunctionWrapper) and is_ours(current):
                setattr(cls, name, current.__wrapped__)
        self.wrapped = []


def is_ours(method: Any) -> bool:
    """Whether ``method`` (a class's own attribute) is otelmw's wrapper of a chat method."""
    return isinstance(method, wrapt.FunctionWrapper) and \
        getattr(method, "_self_wrapper", None) in WRAPPERS.values()


def llm_class_defined(classes: LLMClasses) -> Any:
    """``BaseLLM.__pydantic_init_subclass__`` (pydantic calls it once a subclass is
    complete): the new LLM class's chat methods are wrapped too."""

    def hook(wrapped: Any, instance: Any, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Any:
        result = wrapped(*args, **kwargs)
        if isinstance(instance, type):
            classes.wrap(instance)
        return result

    return hook

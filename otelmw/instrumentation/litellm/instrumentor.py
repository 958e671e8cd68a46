"""``otelmw_litellm``: which LiteLLM functions are wrapped, by which adapter module.

Module attributes of ``litellm`` (and ``litellm.anthropic_interface.messages``):
``Router`` and ``run_tool_loop`` look them up there at call time, so every path reaches
them; the router's endpoints on its core class (``RustCore``), where the ``Router``
facade serves them from (LiteLLM 1.110 on; before, on the Python ``Router`` itself).
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any

from .._base import OtelmwInstrumentor, Wrapper
from .calls import chat_wrapper, embeddings_wrapper
from .steps import router_wrapper
from .tools import NORMALIZER, loop_wrapper

_MESSAGES = "litellm.anthropic_interface.messages"
_ROUTER_CORE = "litellm.router_rust.core"
# The leading positional parameters of each entry (LiteLLM 1.110).
_CHAT_PARAMS = ("model", "messages")
_RESPONSES_PARAMS = ("input", "model")
_EMBEDDING_PARAMS = ("model", "input")
_MESSAGES_PARAMS = ("max_tokens", "messages", "model")


def _router_targets() -> list[tuple[str, str, Wrapper]]:
    try:
        rust_core = find_spec(_ROUTER_CORE) is not None
    except ModuleNotFoundError:  # no litellm.router_rust package
        rust_core = False
    if not rust_core:
        # LiteLLM before 1.110: the Router is Python (``litellm/router.py``) and its
        # endpoints are its methods; ``aresponses`` and ``aanthropic_messages`` are
        # functions each Router instance makes itself (``factory_function``): their
        # calls are LiteLLM calls of their own, without the router step over them.
        return [("litellm.router", f"Router.{name}", router_wrapper(name, is_async=is_async))
                for name, is_async in (("completion", False), ("acompletion", True),
                                       ("embedding", False), ("aembedding", True))]
    return [
        (_ROUTER_CORE, "RustCore.completion", router_wrapper("completion", is_async=False)),
        (_ROUTER_CORE, "RustCore.acompletion", router_wrapper("acompletion", is_async=True)),
        (_ROUTER_CORE, "RustCore.embedding", router_wrapper("embedding", is_async=False)),
        (_ROUTER_CORE, "RustCore.aembedding", router_wrapper("aembedding", is_async=True)),
        (_ROUTER_CORE, "RustCore.aresponses", router_wrapper("aresponses", is_async=True)),
        (_ROUTER_CORE, "RustCore.aanthropic_messages",
         router_wrapper("aanthropic_messages", is_async=True)),
    ]


class LiteLLMInstrumentor(OtelmwInstrumentor):
    """``otelmw_litellm`` (see the package docstring)."""

    root_module = "litellm"
    dependencies = ("litellm >= 1.106.0, < 2",)

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        return [
            ("litellm", "completion", chat_wrapper("chat_completions", _CHAT_PARAMS,
                                                   is_async=False, async_flag=True)),
            ("litellm", "acompletion", chat_wrapper("chat_completions", _CHAT_PARAMS,
                                                    is_async=True)),
            ("litellm", "responses", chat_wrapper("responses", _RESPONSES_PARAMS,
                                                  is_async=False)),
            ("litellm", "aresponses", chat_wrapper("responses", _RESPONSES_PARAMS,
                                                   is_async=True)),
            ("litellm", "embedding", embeddings_wrapper(_EMBEDDING_PARAMS, is_async=False)),
            ("litellm", "aembedding", embeddings_wrapper(_EMBEDDING_PARAMS, is_async=True)),
            (_MESSAGES, "create", chat_wrapper("anthropic_messages", _MESSAGES_PARAMS,
                                               is_async=False)),
            (_MESSAGES, "acreate", chat_wrapper("anthropic_messages", _MESSAGES_PARAMS,
                                                is_async=True)),
            ("litellm", "run_tool_loop", loop_wrapper(is_async=False)),
            ("litellm", "arun_tool_loop", loop_wrapper(is_async=True)),
            *_router_targets(),
        ]

    def result_normalizer(self) -> Any:
        return NORMALIZER

"""OpenAI SDK: chat completions (sync, async, streaming), the Responses API and
embeddings, on openai 1.26 and later.

Where the releases differ at these call sites: ``Completions`` is defined in the
module ``openai.resources.chat.completions`` on the oldest 1.x releases (1.26) and in
that package's ``completions`` submodule on later ones; ``responses.create`` exists
from openai 1.66 on (before, there is nothing to wrap: logged at INFO, as any target
that is missing). The objects these methods return are read by duck typing
(``otelmw/telemetry/shapes/responses.py``), the same on every release.
"""

from __future__ import annotations

import importlib.util

from ._base import OtelmwInstrumentor, Wrapper, sdk_embeddings_wrapper, sdk_llm_wrapper

_CHAT = "openai.resources.chat.completions.completions"
_CHAT_MODULE_BEFORE_PACKAGE = "openai.resources.chat.completions"
_RESPONSES = "openai.resources.responses.responses"
_EMBEDDINGS = "openai.resources.embeddings"


class OpenAIInstrumentor(OtelmwInstrumentor):
    """``otelmw_openai``: ``chat {model}`` spans and the otelmw pipeline around
    ``chat.completions.create`` and ``responses.create``; ``embeddings {model}``
    spans around ``embeddings.create``."""

    root_module = "openai"
    dependencies = ("openai >= 1.26, < 4",)

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        chat = _CHAT if _has_module(_CHAT) else _CHAT_MODULE_BEFORE_PACKAGE
        return [
            (chat, "Completions.create",
             sdk_llm_wrapper("openai", "chat_completions", is_async=False)),
            (chat, "AsyncCompletions.create",
             sdk_llm_wrapper("openai", "chat_completions", is_async=True)),
            (_RESPONSES, "Responses.create",
             sdk_llm_wrapper("openai", "responses", is_async=False)),
            (_RESPONSES, "AsyncResponses.create",
             sdk_llm_wrapper("openai", "responses", is_async=True)),
            (_EMBEDDINGS, "Embeddings.create",
             sdk_embeddings_wrapper("openai", is_async=False)),
            (_EMBEDDINGS, "AsyncEmbeddings.create",
             sdk_embeddings_wrapper("openai", is_async=True)),
        ]


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # a parent is a module, not a package
        return False

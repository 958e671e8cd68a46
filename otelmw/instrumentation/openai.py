"""OpenAI SDK: chat completions (sync, async, streaming), the Responses API and
embeddings."""

from __future__ import annotations

from ._base import OtelmwInstrumentor, Wrapper, sdk_embeddings_wrapper, sdk_llm_wrapper

_CHAT = "openai.resources.chat.completions.completions"
_RESPONSES = "openai.resources.responses.responses"
_EMBEDDINGS = "openai.resources.embeddings"


class OpenAIInstrumentor(OtelmwInstrumentor):
    """``otelmw_openai``: ``chat {model}`` spans and the otelmw pipeline around
    ``chat.completions.create`` and ``responses.create``; ``embeddings {model}``
    spans around ``embeddings.create``."""

    root_module = "openai"
    dependencies = ("openai >= 2.24, < 4",)
    entry_point = "otelmw_openai"

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        return [
            (_CHAT, "Completions.create",
             sdk_llm_wrapper("openai", "chat_completions", is_async=False)),
            (_CHAT, "AsyncCompletions.create",
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

"""Anthropic SDK: messages.create (sync, async, ``stream=True``).

``messages.stream()`` (the helper returning a ``MessageStreamManager``) does not
go through ``create``; it is not instrumented in this version.
"""

from __future__ import annotations

from ._base import OtelmwInstrumentor, Wrapper, sdk_llm_wrapper

_MESSAGES = "anthropic.resources.messages.messages"


class AnthropicInstrumentor(OtelmwInstrumentor):
    """``otelmw_anthropic``: ``chat {model}`` spans around ``messages.create``."""

    root_module = "anthropic"
    dependencies = ("anthropic >= 2.15, < 3",)
    entry_point = "otelmw_anthropic"

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        return [
            (_MESSAGES, "Messages.create",
             sdk_llm_wrapper("anthropic", "anthropic_messages", is_async=False)),
            (_MESSAGES, "AsyncMessages.create",
             sdk_llm_wrapper("anthropic", "anthropic_messages", is_async=True)),
        ]

"""``otelmw_praisonai``: which PraisonAI functions are wrapped, by which adapter module."""

from __future__ import annotations

from typing import Any

from .._base import OtelmwInstrumentor, Wrapper
from .hooks import hooks_observed, hooks_observed_sync
from .model_requests import MARK, ResourceCreate, client_property, patched_resources
from .tools import async_attempt, praison_lookup, tool_async, tool_sync
from .turns import turn_async, turn_stream, turn_wrapper

_CHAT = "praisonaiagents.agent.chat_mixin"
_EXEC = "praisonaiagents.agent.execution_mixin"
_TOOLS = "praisonaiagents.agent.tool_execution"


class PraisonAIInstrumentor(OtelmwInstrumentor):
    """``otelmw_praisonai`` (see the package docstring)."""

    root_module = "praisonaiagents"
    dependencies = ("praisonaiagents >= 1.7.17, < 2",)

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        return [
            (_CHAT, "ChatMixin.chat", turn_wrapper(False)),
            (_CHAT, "ChatMixin.achat", turn_async),
            (_CHAT, "ChatMixin._start_stream", turn_stream),
            (_EXEC, "ExecutionMixin.start", turn_wrapper(True)),
            (_EXEC, "ExecutionMixin.run", turn_wrapper(True)),
            (_EXEC, "ExecutionMixin.astart", turn_async),
            (_EXEC, "ExecutionMixin.arun", turn_async),
            (_TOOLS, "ToolExecutionMixin.execute_tool", tool_sync),
            (_EXEC, "ExecutionMixin.execute_tool_async", tool_async),
            (_EXEC, "ExecutionMixin._execute_tool_async_impl", async_attempt),
            ("praisonaiagents.hooks.runner", "HookRunner.execute", hooks_observed),
            ("praisonaiagents.hooks.runner", "HookRunner.execute_sync", hooks_observed_sync),
            ("praisonaiagents.runtime.middleware_registry",
             "MiddlewareRegistry.get_middleware", praison_lookup),
        ]

    def _after_instrument(self, **kwargs: Any) -> None:
        from praisonaiagents.llm.openai_client import OpenAIClient

        self._properties: list[tuple[Any, str, property]] = []
        for name in ("sync_client", "async_client"):
            original = OpenAIClient.__dict__.get(name)
            if isinstance(original, property) and not getattr(original.fget, MARK, False):
                setattr(OpenAIClient, name, client_property(original))
                self._properties.append((OpenAIClient, name, original))

    def _after_uninstrument(self, **kwargs: Any) -> None:
        for owner, name, original in reversed(getattr(self, "_properties", [])):
            setattr(owner, name, original)
        self._properties = []
        for resource in list(patched_resources):  # SDK clients built meanwhile
            attrs = vars(resource)
            if isinstance(attrs.get("create"), ResourceCreate):
                del attrs["create"]  # not ``delattr``: a mock would remember the deletion
        patched_resources.clear()

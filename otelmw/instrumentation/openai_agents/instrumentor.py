"""``otelmw_openai_agents``: which Agents SDK functions are wrapped, by which module."""

from __future__ import annotations

from .._base import OtelmwInstrumentor, Wrapper
from .models import get_response, stream_response
from .runs import agent_turn, run_async, run_streamed
from .tools import failure_noted, invoke_tool

_RESPONSES = "agents.models.openai_responses"
_CHAT = "agents.models.openai_chatcompletions"


class OpenAIAgentsInstrumentor(OtelmwInstrumentor):
    """``otelmw_openai_agents`` (see the package docstring)."""

    root_module = "agents"
    dependencies = ("openai-agents >= 0.20.0, < 0.26",)

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        return [
            ("agents.run", "AgentRunner.run", run_async),
            ("agents.run", "AgentRunner.run_streamed", run_streamed),
            ("agents.run", "run_single_turn", agent_turn),
            ("agents.run_internal.run_loop", "run_single_turn_streamed", agent_turn),
            (_RESPONSES, "OpenAIResponsesModel.get_response", get_response("responses")),
            (_RESPONSES, "OpenAIResponsesModel.stream_response", stream_response("responses")),
            (_CHAT, "OpenAIChatCompletionsModel.get_response", get_response("chat_completions")),
            (_CHAT, "OpenAIChatCompletionsModel.stream_response",
             stream_response("chat_completions")),
            ("agents.run_internal.tool_execution", "_invoke_function_tool_with_metadata",
             invoke_tool),
            ("agents.tool", "maybe_invoke_function_tool_failure_error_function", failure_noted),
        ]

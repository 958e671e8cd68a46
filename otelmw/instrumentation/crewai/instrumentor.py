"""``otelmw_crewai``: the targets (turns, the native OpenAI provider's requests, the
tool seams and the native tool-call runners that know each call's id) and the
``crewai`` normalizer."""

from __future__ import annotations

from typing import Any

from .._base import OtelmwInstrumentor, Wrapper
from .models import REQUEST_METHODS, model_request
from .results import NORMALIZER
from .tools import (
    native_tool_call,
    structured_ainvoke,
    structured_invoke,
    tool_arun,
    tool_run,
)
from .turns import agent_arun, agent_run, crew_akickoff, crew_kickoff

_OPENAI = "crewai.llms.providers.openai.completion"
_BASE_TOOL = "crewai.tools.base_tool"


class CrewAIInstrumentor(OtelmwInstrumentor):
    """``otelmw_crewai`` (see the package docstring)."""

    root_module = "crewai"
    dependencies = ("crewai >= 1.15.30, < 2",)

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        return [
            ("crewai.crew", "Crew.kickoff", crew_kickoff),
            ("crewai.crew", "Crew.akickoff", crew_akickoff),
            ("crewai.agent.core", "Agent.execute_task", agent_run),
            ("crewai.agent.core", "Agent.aexecute_task", agent_arun),
            ("crewai.agent.core", "Agent.kickoff", agent_run),
            ("crewai.agent.core", "Agent.kickoff_async", agent_arun),
            *((_OPENAI, f"OpenAICompletion.{method}", model_request(api, is_async=is_async))
              for method, api, is_async in REQUEST_METHODS),
            (_BASE_TOOL, "BaseTool.run", tool_run),
            (_BASE_TOOL, "BaseTool.arun", tool_arun),
            (_BASE_TOOL, "Tool.run", tool_run),
            (_BASE_TOOL, "Tool.arun", tool_arun),
            ("crewai.tools.structured_tool", "CrewStructuredTool.invoke", structured_invoke),
            ("crewai.tools.structured_tool", "CrewStructuredTool.ainvoke",
             structured_ainvoke),
            ("crewai.agents.agent_executor", "AgentExecutor._execute_single_native_tool_call",
             native_tool_call),
            ("crewai.utilities.agent_utils", "execute_single_native_tool_call",
             native_tool_call),
            ("crewai.agents.step_executor", "execute_single_native_tool_call",
             native_tool_call),
        ]

    def result_normalizer(self) -> Any:
        return NORMALIZER

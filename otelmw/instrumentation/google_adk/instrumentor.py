"""``otelmw_google_adk``: the Google Agent Development Kit's agent runs, model requests
and tool calls through otelmw (see the package's docstring)."""

from __future__ import annotations

from typing import Any

from .._base import OtelmwInstrumentor, Wrapper
from .models import run_and_handle_error
from .tools import NORMALIZER, call_tool
from .turns import run_with_lifecycle

_AGENT = "google.adk.agents.base_agent"
_FLOW = "google.adk.flows.llm_flows.base_llm_flow"
_CALLER = "google.adk.flows.llm_flows.tools._caller"


class GoogleADKInstrumentor(OtelmwInstrumentor):
    """Agent runs as turns (in ADK's own ``invoke_agent`` span), each model request a
    ``chat`` call and each tool call an ``execute_tool`` call (recorded on ADK's own
    ``execute_tool`` span) through the pipeline."""

    root_module = "google.adk"
    # The floor is the release tested (scripts/envs/google-adk.txt): the seams are
    # private functions of ADK's flows, which moved within 2.x.
    dependencies = ("google-adk >= 2.13.0, < 3",)

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        return [
            (_AGENT, "BaseAgent._run_with_lifecycle", run_with_lifecycle),
            (_FLOW, "BaseLlmFlow._run_and_handle_error", run_and_handle_error()),
            (_CALLER, "_call_tool_async", call_tool),
        ]

    def result_normalizer(self) -> Any:
        return NORMALIZER

"""the OpenAI Agents SDK on the otelmw pipeline (``otelmw_openai_agents``).

Being written (issue 25): the entry point and the supported range are declared so the
host matrix installs the host; no function of it is wrapped yet.
"""

from __future__ import annotations

from .._base import OtelmwInstrumentor, Wrapper


class OpenAIAgentsInstrumentor(OtelmwInstrumentor):
    """``otelmw_openai_agents`` (see the package docstring)."""

    root_module = "agents"
    dependencies = ("openai-agents >= 0.24.0, < 0.25",)
    entry_point = "otelmw_openai_agents"

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        return []


__all__ = ["OpenAIAgentsInstrumentor"]

"""``otelmw_langchain``: which LangChain and LangGraph functions are wrapped, by which
adapter module. The host is ``langchain-core`` (the chat model and tool seams); each
target is wrapped when its own module is imported, so a LangGraph program that never
imports ``langchain`` (``pip install langgraph langchain-openai``) gets the graph turns
and the seams all the same. The parts of other packages are wrapped only when that
package is installed in the range the suite runs (``PART_REQUIREMENTS``)."""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry.instrumentation.dependencies import get_dependency_conflicts

from .._base import OtelmwInstrumentor, Wrapper
from .middleware import create_agent
from .results import NORMALIZER
from .seams import agenerate_with_cache, generate_with_cache, tool_arun_seam, tool_run_seam
from .turns import graph_astream, graph_stream

logger = logging.getLogger("otelmw")

_CHAT = "langchain_core.language_models.chat_models"
_PREGEL = "langgraph.pregel.main"

# Parts of the host from packages a program may not have: the package's range (what the
# suite runs, tests/test_host_matrix.py) and the targets in it.
AGENT_REQUIREMENT = "langchain >= 1.3.0, < 2"  # create_agent and its AgentMiddleware
GRAPH_REQUIREMENT = "langgraph >= 1.2.0, < 2"  # a graph run as the turn
PART_REQUIREMENTS: dict[str, tuple[str, ...]] = {
    AGENT_REQUIREMENT: ("langchain.agents.factory", "langchain.agents"),
    GRAPH_REQUIREMENT: (_PREGEL,),
}


def _part_usable(requirement: str) -> bool:
    """Whether the package of ``requirement`` is installed in its range; one WARNING
    when it is installed outside it (missing: the program does not use that part)."""
    conflict = get_dependency_conflicts([requirement])
    if conflict is None:
        return True
    if conflict.found:
        logger.warning("otelmw: otelmw_langchain: %s not instrumented: %s is installed, "
                       "outside the supported range %s (see README, Host instrumentors)",
                       " and ".join(PART_REQUIREMENTS[requirement]), conflict.found,
                       requirement)
    return False


class LangChainInstrumentor(OtelmwInstrumentor):
    """``otelmw_langchain`` (see the package docstring)."""

    dependencies = ("langchain-core >= 1.4.0, < 2",)
    wrap_each_on_import = True

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        every: list[tuple[str, str, Wrapper]] = [
            ("langchain.agents.factory", "create_agent", create_agent),
            ("langchain.agents", "create_agent", create_agent),
            (_PREGEL, "Pregel.stream", graph_stream),
            (_PREGEL, "Pregel.astream", graph_astream),
            (_CHAT, "BaseChatModel._generate_with_cache", generate_with_cache),
            (_CHAT, "BaseChatModel._agenerate_with_cache", agenerate_with_cache),
            ("langchain_core.tools.base", "BaseTool.run", tool_run_seam),
            ("langchain_core.tools.base", "BaseTool.arun", tool_arun_seam),
        ]
        unusable = {module for requirement, modules in PART_REQUIREMENTS.items()
                    if not _part_usable(requirement) for module in modules}
        return [target for target in every if target[0] not in unusable]

    def result_normalizer(self) -> Any:
        return NORMALIZER

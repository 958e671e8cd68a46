"""``otelmw_langchain``: which LangChain and LangGraph functions are wrapped, by which
adapter module. The host is ``langchain-core`` (the chat model and tool seams); each
target is wrapped when its own module is imported, so a LangGraph program that never
imports ``langchain`` (``pip install langgraph langchain-openai``) gets the graph turns
and the seams all the same. The parts of other packages are wrapped only when that
package is installed in the range the suite runs (``PART_REQUIREMENTS``)."""

from __future__ import annotations

import logging
import threading
from typing import Any, NamedTuple

from opentelemetry.instrumentation.dependencies import get_dependency_conflicts

from .._base import OtelmwInstrumentor, Wrapper
from .middleware import create_agent, tool_node_init
from .results import NORMALIZER
from .seams import agenerate_with_cache, generate_with_cache, tool_arun_seam, tool_run_seam
from .turns import graph_astream, graph_stream

logger = logging.getLogger("otelmw")

_CHAT = "langchain_core.language_models.chat_models"
_PREGEL = "langgraph.pregel.main"
_TOOL_NODE = "langgraph.prebuilt.tool_node"  # create_agent's tool node (otelmw's wrapper)


class Part(NamedTuple):
    """A part of the host from a package a program may not have."""

    what: str  # as the warning names it
    modules: tuple[str, ...]  # the modules of its targets


# Each part's package range (what the suite runs, tests/test_host_matrix.py).
AGENT_REQUIREMENT = "langchain >= 1.3.0, < 2"
GRAPH_REQUIREMENT = "langgraph >= 1.2.0, < 2"
PART_REQUIREMENTS: dict[str, Part] = {
    AGENT_REQUIREMENT: Part("create_agent", ("langchain.agents.factory", "langchain.agents",
                                             _TOOL_NODE)),
    GRAPH_REQUIREMENT: Part("graph runs (turns)", (_PREGEL,)),
}
_warned: set[str] = set()
_warned_lock = threading.Lock()


def _part_usable(requirement: str) -> bool:
    """Whether the package of ``requirement`` is installed in its range; one WARNING per
    process when it is installed outside it (missing: the program does not use it)."""
    conflict = get_dependency_conflicts([requirement])
    if conflict is None:
        return True
    if conflict.found:
        with _warned_lock:
            first = requirement not in _warned
            _warned.add(requirement)
        if first:
            logger.warning("otelmw: otelmw_langchain: %s not instrumented: %s is installed, "
                           "outside the supported range %s (see README, Host instrumentors)",
                           PART_REQUIREMENTS[requirement].what, conflict.found, requirement)
    return False


class LangChainInstrumentor(OtelmwInstrumentor):
    """``otelmw_langchain`` (see the package docstring)."""

    dependencies = ("langchain-core >= 1.4.0, < 2",)
    wrap_each_on_import = True

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        every: list[tuple[str, str, Wrapper]] = [
            ("langchain.agents.factory", "create_agent", create_agent),
            ("langchain.agents", "create_agent", create_agent),
            (_TOOL_NODE, "ToolNode.__init__", tool_node_init),
            (_PREGEL, "Pregel.stream", graph_stream),
            (_PREGEL, "Pregel.astream", graph_astream),
            (_CHAT, "BaseChatModel._generate_with_cache", generate_with_cache),
            (_CHAT, "BaseChatModel._agenerate_with_cache", agenerate_with_cache),
            ("langchain_core.tools.base", "BaseTool.run", tool_run_seam),
            ("langchain_core.tools.base", "BaseTool.arun", tool_arun_seam),
        ]
        unusable = {module for requirement, part in PART_REQUIREMENTS.items()
                    if not _part_usable(requirement) for module in part.modules}
        return [target for target in every if target[0] not in unusable]

    def result_normalizer(self) -> Any:
        return NORMALIZER

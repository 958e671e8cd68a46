"""``otelmw_langchain``: which LangChain and LangGraph functions are wrapped, by which
adapter module. Each target is wrapped when its own module is imported: a LangGraph
program that never imports ``langchain`` (only ``langchain_core`` and ``langgraph``)
gets the graph turns and the fallback seams all the same."""

from __future__ import annotations

from typing import Any

from .._base import OtelmwInstrumentor, Wrapper
from .middleware import create_agent
from .results import NORMALIZER
from .seams import agenerate_with_cache, generate_with_cache, tool_arun_seam, tool_run_seam
from .turns import graph_astream, graph_stream

_CHAT = "langchain_core.language_models.chat_models"
_PREGEL = "langgraph.pregel.main"


class LangChainInstrumentor(OtelmwInstrumentor):
    """``otelmw_langchain`` (see the package docstring)."""

    dependencies = ("langchain >= 1.3.0, < 2",)
    wrap_each_on_import = True

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        return [
            ("langchain.agents.factory", "create_agent", create_agent),
            ("langchain.agents", "create_agent", create_agent),
            (_PREGEL, "Pregel.stream", graph_stream),
            (_PREGEL, "Pregel.astream", graph_astream),
            (_CHAT, "BaseChatModel._generate_with_cache", generate_with_cache),
            (_CHAT, "BaseChatModel._agenerate_with_cache", agenerate_with_cache),
            ("langchain_core.tools.base", "BaseTool.run", tool_run_seam),
            ("langchain_core.tools.base", "BaseTool.arun", tool_arun_seam),
        ]

    def result_normalizer(self) -> Any:
        return NORMALIZER

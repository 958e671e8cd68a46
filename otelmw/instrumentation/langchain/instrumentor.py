"""``otelmw_langchain``: which LangChain and LangGraph functions are wrapped, by which
adapter module. Each target is wrapped when its own module is imported: a LangGraph
program that never imports ``langchain`` (only ``langchain_core`` and ``langgraph``)
gets the graph turns and the fallback seams all the same."""

from __future__ import annotations

import functools
import logging
from typing import Any

import wrapt

from ...core import get_pipeline
from .._base import OtelmwInstrumentor, Wrapper, ensure_observer
from .middleware import create_agent
from .results import NORMALIZER, RUNTIME_ID
from .seams import agenerate_with_cache, generate_with_cache, tool_arun_seam, tool_run_seam
from .turns import graph_astream, graph_stream

_CHAT = "langchain_core.language_models.chat_models"
_PREGEL = "langgraph.pregel.main"


class LangChainInstrumentor(OtelmwInstrumentor):
    """``otelmw_langchain`` (see the package docstring)."""

    dependencies = ("langchain >= 1.3.0, < 2",)
    entry_point = "otelmw_langchain"

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

    def _instrument(self, **kwargs: Any) -> None:
        ensure_observer()
        self._wrapped: list[tuple[str, str]] = []
        self._generation = getattr(self, "_generation", 0) + 1
        for module, name, wrapper in self.targets():
            wrapt.register_post_import_hook(functools.partial(
                self._wrap_module, self._generation, module, name, wrapper), module)
        if not get_pipeline().normalizers.has_middleware(RUNTIME_ID):
            get_pipeline().normalizers.register(RUNTIME_ID, NORMALIZER)

    def _wrap_module(self, generation: int, name: str, attr: str, wrapper: Any,
                     module: Any) -> None:
        if generation != self._generation:  # a hook of an earlier instrument() round
            return
        try:
            owner, _, method = attr.rpartition(".")
            target = getattr(module, owner) if owner else module
            if not isinstance(getattr(target, method, None), wrapt.FunctionWrapper):
                wrapt.wrap_function_wrapper(module, attr, wrapper)
            # (else the re-export of a function wrapped in its own module: restored too)
            self._wrapped.append((name, attr))
        except (ImportError, AttributeError) as exc:
            logging.getLogger("otelmw").info("otelmw: langchain: %s.%s not instrumented (%s)",
                                             name, attr, exc)

    def _after_uninstrument(self, **kwargs: Any) -> None:
        if get_pipeline().normalizers.lookup(RUNTIME_ID) is NORMALIZER:
            get_pipeline().normalizers.unregister(RUNTIME_ID)

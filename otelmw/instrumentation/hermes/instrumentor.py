"""``otelmw_hermes``: which Hermes functions are wrapped, by which adapter module."""

from __future__ import annotations

import functools
import logging
from typing import Any

import wrapt

from ...config import settings as cfg
from ...core import LLM_REQUEST, TOOL_REQUEST, get_pipeline
from ...telemetry import context as tctx
from .._base import OtelmwInstrumentor, Wrapper, ensure_observer
from .calls import RUNTIME_ID
from .hooks import invoke_hook
from .middleware import apply_request, invoke_middleware, run_execution_chain
from .provider_calls import run_llm_execution
from .results import NORMALIZER
from .tools import post_tool_call_emitted, run_tool_execution
from .turns import run_conversation

_MW, _PL = "hermes_cli.middleware", "hermes_cli.plugins"


class HermesInstrumentor(OtelmwInstrumentor):
    """``otelmw_hermes``; targets are wrapped when their modules get imported."""

    dependencies = ("hermes-agent >= 0.19, < 0.20",)
    entry_point = "otelmw_hermes"

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        return [
            ("run_agent", "AIAgent.run_conversation", run_conversation),
            (_MW, "apply_llm_request_middleware", apply_request(LLM_REQUEST)),
            (_MW, "run_llm_execution_middleware", run_llm_execution),
            (_MW, "apply_tool_request_middleware", apply_request(TOOL_REQUEST)),
            (_MW, "run_tool_execution_middleware", run_tool_execution),
            (_MW, "_run_execution_chain", run_execution_chain),
            (_PL, "PluginManager.invoke_hook", invoke_hook),
            (_PL, "PluginManager.invoke_middleware", invoke_middleware),
            ("model_tools", "_emit_post_tool_call_hook", post_tool_call_emitted),
        ]

    def _instrument(self, **kwargs: Any) -> None:
        ensure_observer()
        self._wrapped: list[tuple[str, str]] = []
        self._generation = getattr(self, "_generation", 0) + 1  # (base _uninstrument bumps it)
        for module, name, wrapper in self.targets():  # importing Hermes eagerly is costly
            wrapt.register_post_import_hook(functools.partial(
                self._wrap_module, self._generation, module, name, wrapper), module)
        # Hermes' provider call runs on a bare Thread
        self._threads = not tctx.threads_instrumented() and not \
            cfg.load(strict=False)[cfg.NO_THREAD_PROPAGATION]
        if self._threads:
            tctx.instrument_threads()
        if not get_pipeline().normalizers.has_middleware(RUNTIME_ID):
            get_pipeline().normalizers.register(RUNTIME_ID, NORMALIZER)

    def _wrap_module(self, gen: int, name: str, attr: str, wrapper: Any, module: Any) -> None:
        if gen != self._generation:  # a hook of an earlier instrument() round
            return
        try:
            wrapt.wrap_function_wrapper(module, attr, wrapper)
            self._wrapped.append((name, attr))
        except (ImportError, AttributeError) as exc:
            logging.getLogger("otelmw").info("otelmw: hermes: %s.%s not instrumented (%s)",
                                             name, attr, exc)

    def _after_uninstrument(self, **kwargs: Any) -> None:
        if getattr(self, "_threads", False):
            tctx.uninstrument_threads()
            self._threads = False
        if get_pipeline().normalizers.lookup(RUNTIME_ID) is NORMALIZER:
            get_pipeline().normalizers.unregister(RUNTIME_ID)

"""``otelmw_hermes``: which Hermes functions are wrapped, by which adapter module."""

from __future__ import annotations

from typing import Any

from ...config import settings as cfg
from ...core import LLM_REQUEST, TOOL_REQUEST
from ...telemetry.setup import context as tctx
from .._base import OtelmwInstrumentor, Wrapper
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
    wrap_each_on_import = True  # importing Hermes eagerly is costly

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

    def result_normalizer(self) -> Any:
        return NORMALIZER

    def _after_instrument(self, **kwargs: Any) -> None:
        # Hermes' provider call runs on a bare Thread
        self._threads = not tctx.threads_instrumented() and not \
            cfg.load(strict=False)[cfg.NO_THREAD_PROPAGATION]
        if self._threads:
            tctx.instrument_threads()

    def _after_uninstrument(self, **kwargs: Any) -> None:
        if getattr(self, "_threads", False):
            tctx.uninstrument_threads()
            self._threads = False

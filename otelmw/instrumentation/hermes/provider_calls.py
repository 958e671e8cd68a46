"""A Hermes provider attempt (``run_llm_execution_middleware``) as one ``chat`` call:
``Pipeline.run_llm`` (otelmw's own plugins, outermost) around Hermes' own
``run_llm_execution_middleware`` (Hermes' ``llm_execution`` chain, run by Hermes)
around Hermes' provider call. Only inside that provider call is the call current (a
model call a Hermes callback makes is a call of its own). Hermes' streaming call runs
on a worker thread (``instrument_threads`` carries the context there):
``otelmw_openai``, when active, only enriches the span."""

from __future__ import annotations

from typing import Any

from ...core import get_pipeline, llm_call_current
from . import calls
from .middleware import ChainRun, chain_call, llm_execution_stage


def run_llm_execution(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    try:
        stage = llm_execution_stage(*args, **kwargs)
        api_request_id = calls.text(stage.context.get("api_request_id"))
        running = calls.start_execution(
            calls.LLM_KEY, stage.payload, lambda: calls.llm_call(stage.payload, stage.context),
            api_request_id)
    except Exception as exc:
        calls.instrumentation_failed("run_llm_execution_middleware", exc)
        return wrapped(*args, **kwargs)
    hermes = ChainRun()

    def provider_call(request: Any) -> Any:
        with llm_call_current(running.call):
            return stage.base_call(request)

    def execute(request: Any) -> Any:
        hermes.started = True
        token = chain_call.set(running.opened)
        try:
            with llm_call_current(None):
                return wrapped(request, provider_call, **stage.context)
        finally:
            chain_call.reset(token)

    with calls.executing(running, calls.ended_llm_key(api_request_id)):
        try:
            return get_pipeline().run_llm(stage.payload, execute, call=running.call)
        except Exception as exc:
            if hermes.started:
                raise
            calls.instrumentation_failed("run_llm_execution", exc)
            return wrapped(*args, **kwargs)

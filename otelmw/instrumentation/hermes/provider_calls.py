"""A Hermes provider attempt (``run_llm_execution_middleware``) as one ``chat`` call:
``Pipeline.run_llm`` (otelmw's own plugins, outermost) around Hermes' ``llm_execution``
chain around Hermes' provider call. Hermes' streaming call runs on a worker thread
(``instrument_threads`` carries the context there): ``otelmw_openai``, when active, only
enriches the span."""

from __future__ import annotations

from typing import Any

from ...core import contract as c
from ...core.pipeline import get_pipeline
from . import calls
from .middleware import ChainRun, llm_execution_stage, run_execution_chain


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
    host = ChainRun()

    def execute(request: Any) -> Any:
        host.started = True
        return run_execution_chain(c.LLM_EXECUTION, running.call, stage, request)

    with calls.executing(running, calls.ended_llm_key(api_request_id)):
        try:
            return get_pipeline().run_llm(stage.payload, execute, call=running.call)
        except Exception as exc:
            if host.started:
                raise
            calls.instrumentation_failed("run_llm_execution", exc)
            return wrapped(*args, **kwargs)

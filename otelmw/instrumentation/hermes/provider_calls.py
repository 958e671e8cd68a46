"""A Hermes provider attempt (``run_llm_execution_middleware``) as one ``chat`` call:
``Pipeline.run_llm`` (otelmw's own plugins, outermost) around Hermes' ``llm_execution``
chain around Hermes' provider call. Hermes' streaming call runs on a worker thread
(``instrument_threads`` carries the context there): ``otelmw_openai``, when active, only
enriches the span."""

from __future__ import annotations

from typing import Any

from ...core import contract as c
from ...core.pipeline import get_pipeline
from ...telemetry.context import safe_detach
from . import calls
from .middleware import ChainRun, llm_execution_stage, run_execution_chain


def run_llm_execution(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    try:
        stage = llm_execution_stage(*args, **kwargs)
        api_request_id = calls.text(stage.context.get("api_request_id"))
        turn = calls.turn_calls()
        opened = turn.claim(calls.LLM_KEY, api_request_id) if turn is not None else None
        call = opened.call if opened else calls.llm_call(stage.payload, stage.context)
        span_ctx = opened.context if opened else calls.open_call(call, stage.payload,
                                                                 park=False)
    except Exception as exc:
        calls.instrumentation_failed("run_llm_execution_middleware", exc)
        return wrapped(*args, **kwargs)
    host = ChainRun()

    def execute(request: Any) -> Any:
        host.started = True
        return run_execution_chain(c.LLM_EXECUTION, call, stage, request)

    token = calls.attach(span_ctx) if opened else None
    try:
        return get_pipeline().run_llm(stage.payload, execute, call=call)
    except Exception as exc:
        if host.started:
            raise
        calls.instrumentation_failed("run_llm_execution", exc)
        return wrapped(*args, **kwargs)
    finally:
        safe_detach(token)
        if turn is not None and span_ctx is not None:  # for the hooks Hermes fires next
            turn.record_ended(calls.ended_llm_key(api_request_id),
                              calls.OpenedCall(call, span_ctx))

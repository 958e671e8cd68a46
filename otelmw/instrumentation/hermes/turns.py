"""A Hermes turn (``AIAgent.run_conversation``) as one ``invoke_agent hermes`` span; a
result ``{"failed": true}`` marks it failed, and calls it opened that never ran end
with it."""

from __future__ import annotations

from typing import Any

from ...core import get_pipeline
from . import calls


def run_conversation(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    try:
        turn = get_pipeline().turn(calls.AGENT_NAME, runtime_id=calls.RUNTIME_ID,
                                   session_id=calls.text(getattr(instance, "session_id", None)))
        turn.start()
    except Exception as exc:
        calls.instrumentation_failed("run_conversation", exc)
        return wrapped(*args, **kwargs)
    turn_calls, error = calls.TurnCalls(), None
    token = calls.enter_turn(turn_calls)
    try:
        result = wrapped(*args, **kwargs)
        if isinstance(result, dict) and result.get("failed"):
            turn.mark_failed()
        return result
    except BaseException as exc:
        error = exc
        raise
    finally:
        try:
            for opened in turn_calls.open_calls():
                calls.finish_unrun(opened)
            turn.finish(error)
        except Exception as exc:
            calls.instrumentation_failed("run_conversation.end", exc)
        calls.leave_turn(token)

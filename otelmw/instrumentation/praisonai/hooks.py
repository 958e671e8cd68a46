"""PraisonAI hooks: ``HookRunner.execute``/``execute_sync`` are observed, never changed:
every firing PraisonAI makes is an ``otelmw.hook.<event>`` log record. otelmw
registers no PraisonAI hook and leaves ``has_hooks`` alone: a hook point PraisonAI does
not fire (no hook registered for it) is not recorded."""

from __future__ import annotations

from typing import Any

from ...core import CallInfo, current_runtime_context, hook_firings_recorded, unopened_call
from .fail_open import instrumentation_failed


def _emit_hooks(args: tuple[Any, ...], kwargs: dict[str, Any], results: Any) -> None:
    if not hook_firings_recorded():
        return
    results = results if isinstance(results, list) else []
    event = args[0] if args else kwargs.get("event")
    data = args[1] if len(args) > 1 else kwargs.get("input_data")
    name, rc = str(getattr(event, "value", event)), current_runtime_context()
    tool, model, agent = (getattr(data, k, None) for k in ("tool_name", "model", "agent_name"))
    tool = tool if isinstance(tool, str) and tool else None
    model = model if isinstance(model, str) else None
    op = "execute_tool" if tool else "chat" if "llm" in name or model else "invoke_agent"
    call = CallInfo(operation=op, session_id=rc.session_id, task_id=rc.task_id,
                      turn_id=rc.turn_id, model=model, tool_name=tool,
                      runtime_id=rc.runtime_id,
                      agent_name=agent if isinstance(agent, str) else rc.agent_name)
    payload: dict[str, Any] = {}
    content = getattr(data, "tool_input" if tool else "messages", None)
    if content is not None and op != "invoke_agent":
        payload["args" if tool else "request"] = content
    failures = sum(1 for r in results if not getattr(r, "success", True))
    blocked = any(getattr(r, "output", None) is not None and r.output.is_denied()
                  for r in results)
    payload["status"] = "blocked" if blocked else ("error" if failures else "ok")
    if blocked:
        payload["error_type"] = "plugin_block"
    unopened_call(call).report_hook_firing(name, payload, failures)


def _record_firing(args: tuple[Any, ...], kwargs: dict[str, Any], results: Any) -> Any:
    try:
        _emit_hooks(args, kwargs, results)
    except Exception as exc:
        instrumentation_failed("hook", exc)
    return results


async def hooks_observed(wrapped: Any, instance: Any, args: tuple[Any, ...],
                          kwargs: dict[str, Any]) -> Any:
    return _record_firing(args, kwargs, await wrapped(*args, **kwargs))


def hooks_observed_sync(wrapped: Any, instance: Any, args: tuple[Any, ...],
                         kwargs: dict[str, Any]) -> Any:
    """``execute_sync``: with hooks to run it calls ``execute`` (observed there);
    with none it returns ``[]`` at once, and that firing is recorded here."""
    results = wrapped(*args, **kwargs)
    return results if results else _record_firing(args, kwargs, results)

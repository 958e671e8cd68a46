"""Shared helpers of the core test suites (constants, the host payload, invoking a
call on either path)."""

from __future__ import annotations

import asyncio
from typing import Any

from otelmw import Pipeline

MODES = ["sync", "async"]
KINDS = ["llm", "tool"]
KEY = {"llm": "request", "tool": "args"}
ORIG = {"llm": "original_request", "tool": "original_args"}
REQ_KIND = {"llm": "llm_request", "tool": "tool_request"}
EXEC_KIND = {"llm": "llm_execution", "tool": "tool_execution"}
PRE_HOOK = {"llm": "pre_api_request", "tool": "pre_tool_call"}
PLUGIN = "plug"


def host_payload() -> dict[str, Any]:
    return {"model": "gpt-host", "path": [], "messages": [{"role": "user", "content": "hi"}]}


def invoke(p: Pipeline, mode: str, kind: str, payload: Any, execute: Any) -> Any:
    """Run one LLM or tool call on the sync or async path."""
    if kind == "llm":
        kw = {"provider": "prov", "model": "gpt-host", "api_mode": "chat"}
        if mode == "sync":
            return p.run_llm(payload, execute, **kw)
        return asyncio.run(p.arun_llm(payload, execute, **kw))
    if mode == "sync":
        return p.run_tool("tool_x", payload, execute, tool_call_id="call-1", raise_errors=True)
    return asyncio.run(
        p.arun_tool("tool_x", payload, execute, tool_call_id="call-1", raise_errors=True)
    )


def named(fn: Any, name: str) -> Any:
    fn.__name__ = fn.__qualname__ = name
    return fn

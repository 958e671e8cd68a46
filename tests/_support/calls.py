"""The words every pipeline test speaks: the two operations and their kinds, the
sync and async modes, running one call in a mode, building a callback for a mode,
and a fake base call.

A test parametrized over ``OPS`` and ``MODES`` reads the operation's tables
(``PAYLOAD_KEY[op]``, ``REQUEST_KIND[op]`` ...) and runs the call with
``run_call(pipeline, mode, op, payload, execute)``; its middleware and hooks come
from ``callback(mode, name, fn)``, so the sync path gets plain functions and the
async path ``async def`` ones.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from otelmw import Pipeline

SYNC = "sync"
ASYNC = "async"
MODES = [SYNC, ASYNC]

LLM = "llm"
TOOL_CALL = "tool"
OPS = [LLM, TOOL_CALL]
# Per operation: the keyword its payload travels under, the untouched copy's keyword,
# its request-rewrite and execution middleware kinds, and the hook run before it.
PAYLOAD_KEY = {LLM: "request", TOOL_CALL: "args"}
ORIGINAL_KEY = {LLM: "original_request", TOOL_CALL: "original_args"}
REQUEST_KIND = {LLM: "llm_request", TOOL_CALL: "tool_request"}
EXEC_KIND = {LLM: "llm_execution", TOOL_CALL: "tool_execution"}
PRE_HOOK = {LLM: "pre_api_request", TOOL_CALL: "pre_tool_call"}
LLM_HOOKS = ["pre_api_request", "post_api_request", "api_request_error"]
TOOL_HOOKS = ["pre_tool_call", "post_tool_call", "transform_tool_result"]
ALL_HOOKS = LLM_HOOKS + TOOL_HOOKS
OP_HOOKS = {LLM: LLM_HOOKS, TOOL_CALL: TOOL_HOOKS}


def each_mode_and_op(op_argname: str = "op") -> pytest.MarkDecorator:
    """Parametrizes a test over every mode and operation, as ``mode`` and ``op_argname``
    (ids ``sync-llm``, ``async-llm``, ``sync-tool``, ``async-tool``)."""
    return pytest.mark.parametrize(("mode", op_argname), [(m, o) for o in OPS for m in MODES])

PLUGIN = "x"  # the plugin every test registration is made under
MODEL = "gpt-test"
TOOL = "lookup"
TOOL_CALL_ID = "call-1"


def host_payload() -> dict[str, Any]:
    """A host request whose ``path`` middleware can append to."""
    return {"model": MODEL, "path": [], "messages": [{"role": "user", "content": "hi"}]}


def minimal_payload(op: str) -> dict[str, Any]:
    """The smallest payload of an ``op`` call: a model and no messages, or one argument."""
    return {"model": MODEL, "messages": []} if op == LLM else {"q": 1}


def named(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``fn`` under ``name`` (the middleware name otelmw reports is the qualname)."""
    fn.__name__ = fn.__qualname__ = name
    return fn


def run_call(p: Pipeline, mode: str, op: str, payload: Any, execute: Callable[[Any], Any], *,
             tool: str = TOOL, raise_errors: bool = False,
             loop: asyncio.AbstractEventLoop | None = None, **options: Any) -> Any:
    """One LLM or tool call through the sync or async pipeline entry point; ``options``
    go to ``run_llm``/``run_tool`` (defaults: provider ``openai``, ``MODEL``,
    ``TOOL_CALL_ID``). ``tool``: the tool's name. ``raise_errors``: a failing tool
    raises instead of returning ``"Tool Error: ..."`` (a failing LLM call always raises).
    ``loop``: the event loop an async call runs on (default: a new one, ``asyncio.run``)."""
    run = asyncio.run if loop is None else loop.run_until_complete
    if op == LLM:
        options.setdefault("provider", "openai")
        options.setdefault("model", MODEL)
        if mode == SYNC:
            return p.run_llm(payload, execute, **options)
        return run(p.arun_llm(payload, execute, **options))
    options.setdefault("tool_call_id", TOOL_CALL_ID)
    options["raise_errors"] = raise_errors
    if mode == SYNC:
        return p.run_tool(tool, payload, execute, **options)
    return run(p.arun_tool(tool, payload, execute, **options))


def callback(mode: str, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A middleware or hook named ``name`` that returns ``fn(**kw)``: a plain function
    in ``SYNC`` mode, an ``async def`` that first yields to the loop in ``ASYNC``."""
    if mode == SYNC:

        def cb(**kw: Any) -> Any:
            return fn(**kw)

    else:

        async def cb(**kw: Any) -> Any:
            await asyncio.sleep(0)
            return fn(**kw)

    return named(cb, name)


class AsyncItems:
    """An async iterator over ``items`` that yields to the event loop before each one,
    as a stream read from the network does (the fake streams subclass it)."""

    def __init__(self, items: Iterable[Any]) -> None:
        self._items = iter(items)

    def __aiter__(self) -> AsyncItems:
        return self

    async def __anext__(self) -> Any:
        await asyncio.sleep(0)
        try:
            return next(self._items)
        except StopIteration:
            raise StopAsyncIteration from None


class BaseCall:
    """The host's base call: keeps a deep copy of each payload it gets (``calls``),
    appends ``"base"`` to ``log``, opens a span ``"base"`` on ``tracer``, raises
    ``error``, else returns ``result``. ``in_mode(mode)`` is the callable for
    ``run_call``: itself, or an ``async def`` around it."""

    def __init__(self, result: Any = "base-result", *, error: BaseException | None = None,
                 log: list[str] | None = None, tracer: Any = None) -> None:
        self.calls: list[Any] = []
        self.result, self.error, self.log, self.tracer = result, error, log, tracer

    def __call__(self, payload: Any) -> Any:
        self.calls.append(copy.deepcopy(payload))
        if self.log is not None:
            self.log.append("base")
        if self.tracer is not None:
            with self.tracer.start_as_current_span("base"):
                pass
        if self.error is not None:
            raise self.error
        return self.result

    def in_mode(self, mode: str) -> Callable[[Any], Any]:
        if mode == SYNC:
            return self

        async def run(payload: Any) -> Any:
            await asyncio.sleep(0)
            return self(payload)

        return run


def add_rewrite(p: Pipeline, op: str, mode: str, name: str, fn: Callable[..., Any]) -> None:
    """Register ``callback(mode, name, fn)`` as ``op``'s request middleware of ``PLUGIN``."""
    p.registry.add_middleware(REQUEST_KIND[op], callback(mode, name, fn), plugin=PLUGIN)


def pass_through(mode: str, name: str, op: str, observe: Callable[..., Any]) -> Callable[..., Any]:
    """An execution middleware named ``name`` that calls ``observe(**kw)``, then passes
    its payload on to ``next_call`` (awaited in ``ASYNC`` mode)."""
    key = PAYLOAD_KEY[op]
    if mode == SYNC:

        def cb(**kw: Any) -> Any:
            observe(**kw)
            return kw["next_call"](kw[key])

    else:

        async def cb(**kw: Any) -> Any:
            observe(**kw)
            return await kw["next_call"](kw[key])

    return named(cb, name)

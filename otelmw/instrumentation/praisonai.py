"""PraisonAI agents (``praisonaiagents`` 1.7): turns, model requests, tools, hooks.

* Turns: ``chat``/``achat``/``start``/``run``/``astart``/``arun`` and the ``_start_stream``
  generator: one ``invoke_agent {name}`` each (per-agent re-entrancy guard: ``start`` →
  ``chat`` is one turn; a returned stream keeps its turn until exhausted, closed or
  collected). ``chat`` returning ``None`` (PraisonAI's report of a failed model call),
  or a stream whose last model request failed, marks the turn failed.
* Model requests: the SDK clients PraisonAI's ``OpenAIClient`` builds get an instance-level
  ``create`` (chat completions, responses): one ``chat {model}`` span per SDK request on
  every path; ``otelmw_openai``, when active, only enriches it. It is a proxy of the
  ``create`` the resource had at patch time (mocks keep their assertions, ``__getattr__``
  resources and proxies their target), and every fallback calls that original.
* Tools: ``execute_tool``/``execute_tool_async`` through ``run_tool``/``arun_tool``
  (``raise_errors``: PraisonAI's error handling is unchanged), runtime id
  ``agent._runtime_id`` (missing/``"praisonai"``: native bypass). otelmw's normalizer for
  it applies on both paths; PraisonAI's own registry answers pass-through for that id
  during the call, so nothing is normalized twice.
* Hooks: ``HookRunner.execute``/``execute_sync`` are observed, never changed: every firing,
  with or without hooks, is an ``otelmw.hook.<event>`` log record (``has_hooks`` answers true
  for the agent/LLM/tool lifecycle points so PraisonAI fires them); otelmw registers no
  PraisonAI hook.
* Every wrapper fails open (its errors are counted under failures ``instrumentation``).
"""

from __future__ import annotations

import collections.abc
import weakref
from contextvars import Context, ContextVar, copy_context
from typing import Any, NamedTuple

import wrapt

from ..core import contract as c
from ..core.failures import INSTRUMENTATION, describe
from ..core.pipeline import Turn, current_llm_call, get_pipeline
from ._base import OtelmwInstrumentor, Wrapper, host_hook_points_recorded, server_of

_CHAT = "praisonaiagents.agent.chat_mixin"
_EXEC = "praisonaiagents.agent.execution_mixin"
_TOOLS = "praisonaiagents.agent.tool_execution"
_NATIVE = "praisonai"
_MARK = "_otelmw_praisonai"
_MISSING = object()

_active: ContextVar[tuple[int, ...]] = ContextVar("otelmw_praisonai_active", default=())
_state: ContextVar[_Opened | None] = ContextVar("otelmw_praisonai_turn", default=None)


class _AttemptError:
    """Async tool calls: the error text of the latest attempt, when the tool raised
    (PraisonAI hands back an error dict instead)."""

    __slots__ = ("text",)

    def __init__(self) -> None:
        self.text: Any = None


class _ToolInFlight(NamedTuple):
    normalized_id: str | None  # the runtime id otelmw normalizes for this call
    attempt: _AttemptError | None  # async only


_NO_TOOL = _ToolInFlight(None, None)
_tool: ContextVar[_ToolInFlight] = ContextVar("otelmw_praisonai_tool", default=_NO_TOOL)
_patched_resources: weakref.WeakSet[Any] = weakref.WeakSet()


def _fail(where: str, exc: BaseException) -> None:  # FailureLog.record never raises
    get_pipeline().failures.record(INSTRUMENTATION, "praisonai", where,
                                   f"instrumentation error: {describe(exc)}", exc)


def runtime_id_of(agent: Any) -> str:
    """The agent's runtime id as PraisonAI reads it (``_runtime_id``, default native)."""
    rid = getattr(agent, "_runtime_id", None)
    return rid if isinstance(rid, str) and rid else _NATIVE


# ------------------------------------------------------------------------- turns
class _Opened:
    __slots__ = ("llm_error", "tokens", "turn")
    tokens: tuple[Any, ...]
    llm_error: BaseException | None  # the latest model request's error

    def __init__(self, turn: Turn) -> None:
        self.turn, self.tokens, self.llm_error = turn, (), None


def _open(agent: Any) -> _Opened | None:
    try:
        name, sid = getattr(agent, "name", None), getattr(agent, "_session_id", None)
        turn = get_pipeline().turn(
            name if isinstance(name, str) and name else type(agent).__name__,
            session_id=sid if isinstance(sid, str) and sid else None,
            runtime_id=runtime_id_of(agent))
        turn.start()
        opened = _Opened(turn)
        opened.tokens = (_active.set((*_active.get(), id(agent))), _state.set(opened))
        return opened
    except Exception as exc:
        _fail("turn_start", exc)
        return None


def _close(opened: _Opened | None, error: BaseException | None, result: Any,
           stream: bool) -> None:
    if opened is None:
        return
    try:
        if error is None and (opened.llm_error is not None if stream else result is None):
            opened.turn.mark_failed()
        try:  # same context as _open: the wrappers guarantee it
            _state.reset(opened.tokens[1])
            _active.reset(opened.tokens[0])
        finally:
            opened.turn.finish(error)
    except Exception as exc:
        _fail("turn_finish", exc)


def _guarded(agent: Any) -> bool:
    return agent is None or id(agent) in _active.get()


def _call(fn: Any, *args: Any, **kwargs: Any) -> Any:  # ``Context.run`` without a context
    return fn(*args, **kwargs)


def _turn(isolate: bool) -> Wrapper:
    """``chat``, or ``start``/``run`` (``isolate``: their result may be a stream, so the
    turn lives in a context copy that the stream re-enters on each step)."""

    def turn(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if _guarded(instance):
            return wrapped(*args, **kwargs)
        ctx = copy_context() if isolate else None
        run = ctx.run if ctx is not None else _call
        opened = run(_open, instance)
        try:
            result = run(wrapped, *args, **kwargs)
        except BaseException as exc:
            run(_close, opened, exc, None, False)
            raise
        if ctx is not None and isinstance(result, collections.abc.Generator):
            return _TurnStream(result, ctx, None, opened)
        run(_close, opened, None, result, False)
        return result

    return turn


async def _turn_async(wrapped: Any, instance: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
    """``achat``/``astart``/``arun``: one turn in the awaiting task's context."""
    if _guarded(instance):
        return await wrapped(*args, **kwargs)
    opened = _open(instance)
    try:
        result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        _close(opened, exc, None, False)
        raise
    _close(opened, None, result, False)
    return result


def _turn_stream(wrapped: Any, instance: Any, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Any:
    """``_start_stream`` (generator): the turn opens on its first step."""
    gen = wrapped(*args, **kwargs)
    if _guarded(instance):
        return gen  # inside start()/run(): their turn owns the stream
    return _TurnStream(gen, copy_context(), instance, None)


class _TurnStream(collections.abc.Generator):  # type: ignore[type-arg]
    """Generator proxy whose steps run inside the turn's context; the turn ends
    exactly once: exhausted, raised, closed or garbage-collected."""

    def __init__(self, inner: Any, ctx: Context, agent: Any,
                 opened: _Opened | None) -> None:
        self._inner, self._ctx, self._agent, self._opened, self._done = (
            inner, ctx, agent, opened, False)

    def _end(self, error: BaseException | None) -> None:
        self._done = True
        opened, self._opened = self._opened, None
        if opened is not None:
            self._ctx.run(_close, opened, error, None, True)  # _close never raises

    def _step(self, method: Any, *args: Any) -> Any:
        agent, self._agent = self._agent, None
        if agent is not None and not self._done:
            self._opened = self._ctx.run(_open, agent)
        try:
            return self._ctx.run(method, *args)
        except (StopIteration, GeneratorExit):
            self._end(None)
            raise
        except BaseException as exc:
            self._end(exc)
            raise

    def send(self, value: Any) -> Any:
        return self._step(self._inner.send, value)

    def throw(self, *args: Any) -> Any:
        return self._step(self._inner.throw, *args)

    def close(self) -> None:
        if self._done:
            return
        try:
            self._ctx.run(self._inner.close)
        finally:
            self._end(None)

    def __del__(self) -> None:  # abandoned: end the turn (and the inner generator)
        if not self._done and self._opened is not None:
            self.close()


# ---------------------------------------------------------------- shared plumbing
class _Outcome:
    """What the host call did inside the pipeline: fail open without re-running it."""

    __slots__ = ("error", "executed", "result", "swallowed")

    def __init__(self) -> None:
        self.executed = self.swallowed = False  # swallowed: ``error`` stands for ``result``
        self.error: BaseException | None = None
        self.result: Any = None

    def recover(self, exc: BaseException, where: str) -> Any:
        """The host's own exception is re-raised (a swallowed one: its result returned);
        otelmw's is counted, the host's outcome stands (``_MISSING``: not run yet)."""
        if exc is not self.error:
            _fail(where, exc)
        elif not self.swallowed:
            raise exc
        if not self.executed:
            return _MISSING
        if self.error is not None and not self.swallowed:
            raise self.error
        return self.result


def _fail_open(out: _Outcome, where: str, host: Any, run: Any, again: Any,
               done: Any = None) -> Any:
    """``run(execute)``: the pipeline around ``execute(x) = host(x)``."""
    def execute(x: Any) -> Any:
        out.executed = True
        try:
            out.result = host(x)
        except BaseException as exc:
            out.error = exc
            raise
        return out.result

    try:
        return run(execute)
    except BaseException as exc:
        result = out.recover(exc, where)
        return again() if result is _MISSING else result
    finally:
        if done is not None:
            done(out)


async def _afail_open(out: _Outcome, where: str, host: Any, run: Any, again: Any,
                      done: Any = None) -> Any:
    """Async twin of ``_fail_open`` (``host``, ``run``, ``again`` return awaitables)."""
    async def execute(x: Any) -> Any:
        out.executed = True
        try:
            out.result = await host(x)
        except BaseException as exc:
            out.error = exc
            raise
        return out.result

    try:
        return await run(execute)
    except BaseException as exc:
        result = out.recover(exc, where)
        return (await again()) if result is _MISSING else result
    finally:
        if done is not None:
            done(out)


# ------------------------------------------------------------------ model requests
def _note_llm(out: _Outcome) -> None:
    if (opened := _state.get()) is not None and out.executed:
        opened.llm_error = out.error


class _ResourceCreate(wrapt.FunctionWrapper):  # type: ignore[type-arg]
    """The instance-level ``create`` otelmw gives one PraisonAI SDK resource. It proxies
    the ``create`` the resource had at patch time, so a mock's assertions, a proxy's or a
    ``__getattr__`` resource's attributes still answer through it."""


def _current_create(resource: Any, original: Any) -> Any:
    """What to call for this request: a real SDK resource's class attribute, looked up
    now (a class-level ``otelmw_openai`` wrapper installed later runs inside); for
    anything else (mocks, proxies, ``__getattr__`` resources) the original callable."""
    if getattr(original, "__self__", None) is resource:
        owner: Any = type(resource)
        create = getattr(owner, "create", None)
        if callable(create):
            return create.__get__(resource, owner)
    return original


def _create(resource: Any, original: Any, api_mode: str, is_async: bool) -> Any:
    """Instance-level ``create`` of a PraisonAI SDK resource (async: returns the awaitable).
    Every fallback calls ``original``, never a lookup that may be what failed."""

    def create(wrapped: Any, instance: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
        try:
            method = _current_create(resource, original)
            address, port = server_of(getattr(getattr(resource, "_client", None), "base_url",
                                              None))
            model = m if isinstance(m := kwargs.get("model"), str) else None
            opts: dict[str, Any] = {"provider": "openai", "model": model,
                                    "server_address": address, "server_port": port}
        except Exception as exc:
            _fail("chat", exc)
            return original(*args, **kwargs)
        if current_llm_call() is not None:  # an outer layer already has this request
            return method(*args, **kwargs)
        run = get_pipeline().arun_llm if is_async else get_pipeline().run_llm
        return (_afail_open if is_async else _fail_open)(
            _Outcome(), "chat", lambda request: method(*args, **request),
            lambda ex: run(kwargs, ex, api_mode=api_mode, **opts),
            lambda: method(*args, **kwargs), _note_llm)

    return _ResourceCreate(original, create)


def patch_client(client: Any) -> Any:
    """Give one of PraisonAI's SDK clients its per-request ``create`` (idempotent). A
    resource whose instance already holds a ``create`` (ours, or one set on it) keeps it."""
    try:
        import openai

        is_async = isinstance(client, openai.AsyncOpenAI)
        for resource, api_mode in ((client.chat.completions, "chat_completions"),
                                   (client.responses, "responses")):
            if "create" in vars(resource):
                continue
            original = resource.create  # kept: every fallback calls it
            if callable(original):
                resource.create = _create(resource, original, api_mode, is_async)
                _patched_resources.add(resource)
    except Exception as exc:
        _fail("client", exc)
    return client


def _client_property(original: property) -> property:
    fget = original.fget

    def get(self: Any) -> Any:
        return patch_client(fget(self))  # type: ignore[misc]

    setattr(get, _MARK, True)
    return property(get, original.fset, original.fdel, original.__doc__)


# -------------------------------------------------------------------------- tools
_TOOL_PARAMS = ("function_name", "arguments", "tool_call_id", "tools_override")


class _ToolCall(NamedTuple):
    params: dict[str, Any]  # the host call's arguments by name
    runtime_id: str
    normalized_id: str | None  # ``runtime_id`` when otelmw normalizes it, else None


def _tool_call(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
               ) -> _ToolCall | None:
    """The tool call of ``execute_tool(...)``; None leaves the call to PraisonAI."""
    try:
        if instance is None or len(args) > len(_TOOL_PARAMS):
            return None
        params = {**kwargs, **dict(zip(_TOOL_PARAMS, args, strict=False))}
        if not isinstance(params.get("function_name"), str) or type(
                params.get("arguments")) is not dict:
            return None
        rid = runtime_id_of(instance)
        own = rid if rid != _NATIVE and get_pipeline().normalizers.has_middleware(rid) else None
        return _ToolCall(params, rid, own)
    except Exception as exc:
        _fail("execute_tool", exc)
        return None


def _tool_sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    found = _tool_call(instance, args, kwargs)
    if found is None:
        return wrapped(*args, **kwargs)
    params = found.params

    def call(effective: Any) -> Any:
        token = _tool.set(_ToolInFlight(found.normalized_id, None))
        try:
            return wrapped(**{**params, "arguments": effective})
        finally:
            _tool.reset(token)

    return _fail_open(_Outcome(), "execute_tool", call, lambda ex: get_pipeline().run_tool(
        params["function_name"], params["arguments"], ex, tool_call_id=params.get(
            "tool_call_id"), runtime_id=found.runtime_id, raise_errors=True),
        lambda: wrapped(*args, **kwargs))


async def _tool_async(wrapped: Any, instance: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
    found = _tool_call(instance, args, kwargs)
    if found is None:
        return await wrapped(*args, **kwargs)
    params = found.params
    out = _Outcome()

    async def call(effective: Any) -> Any:
        attempt = _AttemptError()
        token = _tool.set(_ToolInFlight(found.normalized_id, attempt))
        try:
            result = await wrapped(**{**params, "arguments": effective})
        finally:
            _tool.reset(token)
        if attempt.text is not None:  # PraisonAI turned a raising tool into an error dict
            from praisonaiagents.errors import ToolExecutionError

            out.result, out.swallowed = result, True
            raise ToolExecutionError(str(attempt.text), tool_name=params["function_name"],
                                     agent_id=str(getattr(instance, "name", "unknown")))
        return result

    return await _afail_open(out, "execute_tool", call, lambda ex: get_pipeline().arun_tool(
        params["function_name"], params["arguments"], ex, tool_call_id=params.get(
            "tool_call_id"), runtime_id=found.runtime_id, raise_errors=True),
        lambda: wrapped(*args, **kwargs))


async def _async_attempt(wrapped: Any, instance: Any, args: tuple[Any, ...],
                         kwargs: dict[str, Any]) -> Any:
    """``_execute_tool_async_impl``: did the tool raise? (PraisonAI tags the error
    dict it makes of the exception with its private ``_praison_retryable``)."""
    result = await wrapped(*args, **kwargs)
    attempt = _tool.get().attempt
    if attempt is not None:
        raised = isinstance(result, dict) and "_praison_retryable" in result
        attempt.text = (result.get("error") or "tool raised") if raised else None
    return result


def _praison_lookup(wrapped: Any, instance: Any, args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> Any:
    """PraisonAI's normalizer lookup: pass-through while otelmw normalizes that id."""
    own = _tool.get().normalized_id
    if own is not None and (args[0] if args else kwargs.get("runtime_id")) == own:
        from praisonaiagents.runtime.middleware import PassThroughMiddleware

        return PassThroughMiddleware()  # runtime_id "praisonai": PraisonAI skips it
    return wrapped(*args, **kwargs)


# -------------------------------------------------------------------------- hooks
# PraisonAI builds a hook input and fires only when a hook is registered
# (``registry.has_hooks``); for these lifecycle points otelmw makes it fire anyway.
_LIFECYCLE = frozenset({"before_agent", "after_agent", "before_llm", "after_llm",
                        "before_tool", "after_tool"})


def _emit_hooks(args: tuple[Any, ...], kwargs: dict[str, Any], results: Any) -> None:
    obs = get_pipeline().observer
    if obs is None or not host_hook_points_recorded(obs):
        return
    results = results if isinstance(results, list) else []
    event = args[0] if args else kwargs.get("event")
    data = args[1] if len(args) > 1 else kwargs.get("input_data")
    name, rc = str(getattr(event, "value", event)), c.current_runtime_context()
    tool, model, agent = (getattr(data, k, None) for k in ("tool_name", "model", "agent_name"))
    tool = tool if isinstance(tool, str) and tool else None
    model = model if isinstance(model, str) else None
    op = "execute_tool" if tool else "chat" if "llm" in name or model else "invoke_agent"
    call = c.CallInfo(op, rc.session_id, rc.task_id, rc.turn_id, model=model, tool_name=tool,
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
    obs.hook_fired(call, name, payload, failures)


def _record_firing(args: tuple[Any, ...], kwargs: dict[str, Any], results: Any) -> Any:
    try:
        _emit_hooks(args, kwargs, results)
    except Exception as exc:
        _fail("hook", exc)
    return results


async def _hooks_observed(wrapped: Any, instance: Any, args: tuple[Any, ...],
                          kwargs: dict[str, Any]) -> Any:
    return _record_firing(args, kwargs, await wrapped(*args, **kwargs))


def _hooks_observed_sync(wrapped: Any, instance: Any, args: tuple[Any, ...],
                         kwargs: dict[str, Any]) -> Any:
    """``execute_sync``: with hooks to run it calls ``execute`` (observed there);
    with none it returns ``[]`` at once, and that firing is recorded here."""
    results = wrapped(*args, **kwargs)
    return results if results else _record_firing(args, kwargs, results)


def _has_hooks(wrapped: Any, instance: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
    """``HookRegistry.has_hooks``: true for the lifecycle points while they are
    recorded (a registry whose hooks are disabled stays silent)."""
    found = wrapped(*args, **kwargs)
    if found or not getattr(instance, "_enabled", False):
        return found
    event = args[0] if args else kwargs.get("event")
    return (str(getattr(event, "value", event)) in _LIFECYCLE
            and host_hook_points_recorded(get_pipeline().observer))


# ------------------------------------------------------------------- instrumentor
class PraisonAIInstrumentor(OtelmwInstrumentor):
    """``otelmw_praisonai`` (see the module docstring)."""

    root_module = "praisonaiagents"
    dependencies = ("praisonaiagents >= 1.7.17, < 2",)
    entry_point = "otelmw_praisonai"

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        return [
            (_CHAT, "ChatMixin.chat", _turn(False)),
            (_CHAT, "ChatMixin.achat", _turn_async),
            (_CHAT, "ChatMixin._start_stream", _turn_stream),
            (_EXEC, "ExecutionMixin.start", _turn(True)),
            (_EXEC, "ExecutionMixin.run", _turn(True)),
            (_EXEC, "ExecutionMixin.astart", _turn_async),
            (_EXEC, "ExecutionMixin.arun", _turn_async),
            (_TOOLS, "ToolExecutionMixin.execute_tool", _tool_sync),
            (_EXEC, "ExecutionMixin.execute_tool_async", _tool_async),
            (_EXEC, "ExecutionMixin._execute_tool_async_impl", _async_attempt),
            ("praisonaiagents.hooks.runner", "HookRunner.execute", _hooks_observed),
            ("praisonaiagents.hooks.runner", "HookRunner.execute_sync", _hooks_observed_sync),
            ("praisonaiagents.hooks.registry", "HookRegistry.has_hooks", _has_hooks),
            ("praisonaiagents.runtime.middleware_registry",
             "MiddlewareRegistry.get_middleware", _praison_lookup),
        ]

    def _after_instrument(self, **kwargs: Any) -> None:
        from praisonaiagents.llm.openai_client import OpenAIClient

        self._properties: list[tuple[Any, str, property]] = []
        for name in ("sync_client", "async_client"):
            original = OpenAIClient.__dict__.get(name)
            if isinstance(original, property) and not getattr(original.fget, _MARK, False):
                setattr(OpenAIClient, name, _client_property(original))
                self._properties.append((OpenAIClient, name, original))

    def _after_uninstrument(self, **kwargs: Any) -> None:
        for owner, name, original in reversed(getattr(self, "_properties", [])):
            setattr(owner, name, original)
        self._properties = []
        for resource in list(_patched_resources):  # SDK clients built meanwhile
            attrs = vars(resource)
            if isinstance(attrs.get("create"), _ResourceCreate):
                del attrs["create"]  # not ``delattr``: a mock would remember the deletion
        _patched_resources.clear()

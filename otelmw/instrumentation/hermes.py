"""Hermes Agent (``hermes-agent`` 0.19-0.20) on the otelmw pipeline: ``run_conversation`` →
``invoke_agent``; a provider attempt → ``chat``, opened at Hermes' ``llm_request`` stage, run by
``run_llm`` around Hermes' ``llm_execution`` chain (``instrument_threads`` carries it into Hermes'
worker thread: ``otelmw_openai`` only enriches); a tool call → ``execute_tool``, opened at the
``tool_request`` stage, run by ``run_tool`` around the outermost ``tool_execution`` chain (the
nested second chain of parallel calls is deduplicated by tool_call_id); Hermes' middleware
callbacks → spans with otelmw's outcomes; every hook firing (with or without callbacks) →
an ``otelmw.hook.<name>`` record. Calls
opened early are "parked": their context is attached only around code that belongs to them
(parallel tool calls opened on one thread must not nest). Wrappers fail open."""

from __future__ import annotations

import functools
import json
import logging
import threading
from contextvars import ContextVar
from typing import Any, NamedTuple

import wrapt
from opentelemetry import context as otel_context

from ..core import contract as c
from ..core import seam as o
from ..core import settings as cfg
from ..core.callstate import reset_current_llm_call, set_current_llm_call
from ..core.failures import HOOK, INSTRUMENTATION, MIDDLEWARE, describe, safe_str
from ..core.payloads import changed_keys
from ..core.pipeline import current_llm_call, get_pipeline
from ..core.registry import Layer, make_layer
from ..core.results import TOOL_ERROR_PREFIX, MiddlewareContext, NormalizedToolResult
from ..core.tool_calls import BLOCKED_KEY
from ..telemetry import context as tctx
from ..telemetry.context import safe_detach, uninstrument_threads
from ._base import OtelmwInstrumentor, Wrapper, ensure_observer, server_of

RUNTIME_ID = AGENT_NAME = "hermes"
HERMES_OBSERVER_SCHEMA, HERMES_MIDDLEWARE_SCHEMA = "hermes.observer.v1", "hermes.middleware.v1"
_MW, _PL = "hermes_cli.middleware", "hermes_cli.plugins"
_LLM_HOOKS = frozenset({"pre_api_request", "post_api_request", "api_request_error"})
_TOOL_HOOKS = frozenset({"pre_tool_call", "post_tool_call", "transform_tool_result"})
_GATED = _LLM_HOOKS | {"post_tool_call", "transform_tool_result"}  # Hermes' has_hook gates
# gen_ai.provider.name when Hermes' ``provider`` is "" (a custom base_url)
_PROVIDER_BY_MODE = {"chat_completions": "openai", "codex_responses": "openai",
                     "anthropic_messages": "anthropic", "bedrock_converse": "aws.bedrock"}

def _s(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None

def _fail(where: str, exc: BaseException) -> None:
    get_pipeline().failures.record(INSTRUMENTATION, "hermes", where,
                                   f"hermes instrumentation error: {describe(exc)}", exc)

def _bind(args: Any, kwargs: dict[str, Any], names: tuple[str, ...]) -> Any:
    vals, rest = list(args[: len(names)]), dict(kwargs)
    return vals + [rest.pop(n, None) for n in names[len(vals):]], rest

def _classify(result: Any) -> str | None:
    """Error of a Hermes result (``{"error": ...}``/``{"success": false}``, dict or JSON)."""
    parsed, text = result, result.lstrip() if isinstance(result, str) else ""
    if text.startswith("{") and ('"error"' in text or '"success"' in text):
        try:
            parsed = json.loads(text)
        except ValueError:
            return None
    if not isinstance(parsed, dict) or not (parsed.get("error") or parsed.get("success") is False):
        return None
    err = parsed.get("error") or _s(parsed.get("message")) or "tool reported success: false"
    return err if isinstance(err, str) else json.dumps(err, default=str)

def _normalized(result: Any, ms: float = 0.0) -> NormalizedToolResult:
    error = _classify(result)
    return NormalizedToolResult(content=result, success=error is None, error_message=error,
                                execution_time_ms=ms, raw_result=result)

class HermesResultNormalizer:
    """Runtime "hermes": failures per ``_classify``; ``content`` stays the raw result."""
    runtime_id = RUNTIME_ID
    def normalize(self, result: Any, name: str, ctx: MiddlewareContext) -> NormalizedToolResult:
        return _normalized(result, ctx.execution_time_ms)

NORMALIZER = HermesResultNormalizer()

class _Open(NamedTuple):  # a call opened ahead of its execution, and its span context
    call: c.CallInfo
    ctx: Any

class _TurnState:  # per turn: opened calls ("llm", "tool:<id>"), ended calls ("llm:<rid>", …)
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open: dict[str, _Open] = {}
        self.done: dict[str, _Open] = {}

    def get(self, key: str, rid: Any = None, pop: bool = False) -> _Open | None:
        with self.lock:
            p = self.open.get(key)
            if p is None or (rid is not None and p.call.api_request_id != rid):
                return None
            return self.open.pop(key) if pop else p

_state: ContextVar[_TurnState | None] = ContextVar("otelmw_hermes_turn", default=None)
_active_tool: ContextVar[c.CallInfo | None] = ContextVar("otelmw_hermes_tool", default=None)

def _llm_call(request: Any, kw: dict[str, Any]) -> c.CallInfo:
    rc = c.current_runtime_context()
    model = request.get("model") if isinstance(request, dict) else None
    host, port = server_of(_s(kw.get("base_url")))
    return c.CallInfo(
        "chat", rc.session_id or _s(kw.get("session_id")), _s(kw.get("task_id")) or rc.task_id,
        rc.turn_id, _s(kw.get("api_request_id")) or c.new_request_id(rc.turn_id),
        _s(kw.get("provider")) or _PROVIDER_BY_MODE.get(str(kw.get("api_mode")), "unknown"),
        model if isinstance(model, str) else _s(kw.get("model")), _s(kw.get("api_mode")),
        runtime_id=rc.runtime_id or RUNTIME_ID, agent_name=rc.agent_name,
        server_address=host, server_port=port)

def _tool_call(tool_name: Any, kw: dict[str, Any]) -> c.CallInfo:
    rc = c.current_runtime_context()
    return c.CallInfo(
        "execute_tool", rc.session_id or _s(kw.get("session_id")),
        _s(kw.get("task_id")) or rc.task_id, rc.turn_id, _s(kw.get("api_request_id")),
        tool_name=_s(tool_name) or "unknown", tool_call_id=_s(kw.get("tool_call_id")),
        runtime_id=RUNTIME_ID, agent_name=rc.agent_name)

def _open(call: c.CallInfo, payload: Any, park: bool) -> Any:
    """Report ``call_started``; return its span context (``park``: not left current)."""
    obs, before = get_pipeline().observer, otel_context.get_current()
    if obs is None:
        return None
    obs.call_started(call, payload)
    ctx = otel_context.get_current()
    if park:
        otel_context.attach(before)
    return ctx

def _attach(ctx: Any) -> Any:
    return otel_context.attach(ctx) if ctx is not None else None

def _finish_unrun(opened: Any, status: Any = None, result: Any = None, message: Any = None) -> None:
    obs = get_pipeline().observer  # ends a call Hermes blocked, cancelled or abandoned
    if opened is None or obs is None:
        return
    if opened.call.operation == "execute_tool" and status is not None:
        obs.tool_result(opened.call, NormalizedToolResult(
            content=result, success=False, raw_result=result,
            error_message=_s(message) or f"tool call {status}",
            metadata={BLOCKED_KEY: True} if status == "blocked" else {}),
            "blocked" if status == "blocked" else "error")
    obs.call_finished(opened.call, result, None)

def _layer(kind: str, cb: Any) -> Layer:
    parts = str(getattr(cb, "__module__", None) or "hermes").split(".")
    # a directory plugin is imported as hermes_plugins.<slug>
    return make_layer(kind, cb, parts[1] if parts[0] == "hermes_plugins" else parts[0])

def _record_mw(layer: Layer, phase: str, exc: BaseException | None, msg: str) -> None:
    get_pipeline().failures.record(
        MIDDLEWARE, layer.kind, layer.name, f"{msg}: {describe(exc)}" if exc else msg, exc,
        signature=(phase, type(exc).__name__ if exc else msg, safe_str(exc)[:200]))

def _exec_outcome(exc: BaseException, st: list[Any]) -> tuple[str, BaseException]:
    # as hermes_cli.middleware._run_execution_chain; Hermes unwraps _DownstreamExecutionError
    if exc is st[2] and hasattr(exc, "original"):
        return o.ERROR, exc.original
    if not isinstance(exc, Exception) or (st[0] and not st[1]):
        return o.ERROR, exc  # Hermes re-raises
    return (o.FAILED_AFTER_NEXT if st[1] else o.FAILED_BEFORE_NEXT), exc

def _rewrite_end(obs: Any, call: Any, token: Any, layer: Layer, kw: Any, ret: Any) -> None:
    key = c.PAYLOAD_KEY[layer.kind]
    new = ret.get(key) if isinstance(ret, dict) else None  # Hermes: {key: dict} or ignored
    if isinstance(new, dict):
        obs.rewrite_finished(call, token, o.REWRITTEN, changed_keys(kw.get(key), new),
                             _s(ret.get("source")), _s(ret.get("reason")), None)
        return
    if ret is not None:
        _record_mw(layer, "shape", None, f"ignored return value ({type(ret).__name__})")
    obs.rewrite_finished(call, token, o.FAILED if ret is not None else o.UNCHANGED, [], None,
                         None, None)

def _named_like(run: Any, cb: Any) -> Any:
    functools.update_wrapper(run, cb, updated=())  # Hermes logs getattr(cb, "__name__")
    if not isinstance(getattr(cb, "__name__", None), str):
        run.__name__ = repr(cb)
    return run

def _instrumented(cb: Any, kind: str, pos: int, call: c.CallInfo, obs: Any) -> Any:
    """``cb`` reporting one span per invocation, under Hermes' own semantics."""
    layer, rewrite = _layer(kind, cb), kind in c.REQUEST_KINDS
    # An LLM wrapper's own model calls (a judge) are calls of their own: ``call`` is
    # the current LLM call only inside its next_call (see llm_terminal_for).
    outside = kind == c.LLM_EXECUTION

    def run(**kw: Any) -> Any:
        st: list[Any] = [False, False, None]  # next_call called, returned, raised
        nxt = kw.get("next_call")
        if not rewrite and callable(nxt):
            def next_call(next_payload: Any = None) -> Any:
                st[0] = True
                inside = set_current_llm_call(call) if outside else None
                try:
                    r = nxt(next_payload)
                except BaseException as e:
                    st[2] = e
                    raise
                finally:
                    if inside is not None:
                        reset_current_llm_call(inside)
                st[1] = True
                return r
            kw["next_call"] = next_call
        token = (obs.rewrite_started if rewrite else obs.wrapper_started)(call, layer, pos)
        away = set_current_llm_call(None) if outside else None
        try:
            result = cb(**kw)
        except BaseException as exc:
            outcome, err = (o.FAILED, exc) if rewrite else _exec_outcome(exc, st)
            if outcome != o.ERROR and isinstance(exc, Exception):
                _record_mw(layer, outcome, err, f"{kind} middleware raised ({outcome})")
            if rewrite:
                obs.rewrite_finished(call, token, o.FAILED, [], None, None, exc)
            else:
                obs.wrapper_finished(call, token, outcome, err)
            raise
        finally:
            if away is not None:
                reset_current_llm_call(away)
        try:
            if rewrite:
                _rewrite_end(obs, call, token, layer, kw, result)
            else:
                obs.wrapper_finished(call, token, o.PASSED if st[0] else o.SHORT_CIRCUIT, None)
        except Exception as exc:
            _fail("middleware_callback", exc)
        return result

    return _named_like(run, cb)

def _counting_hook(cb: Any, hook_name: str, failed: list[int]) -> Any:
    def run(**kw: Any) -> Any:
        try:
            return cb(**kw)
        except Exception as exc:
            failed[0] += 1
            get_pipeline().failures.record(HOOK, hook_name, _layer(hook_name, cb).name,
                                           f"hook raised: {describe(exc)}", exc)
            raise
    return _named_like(run, cb)

class _ManagerView:  # Hermes' PluginManager as its own invoke_* code sees it, instrumented
    def __init__(self, manager: Any, **lists: Any) -> None:
        self.__dict__.update(lists, _manager=manager)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_manager"], name)

def _run_conversation(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    try:
        turn = get_pipeline().turn(AGENT_NAME, runtime_id=RUNTIME_ID,
                                   session_id=_s(getattr(instance, "session_id", None)))
        turn.start()
    except Exception as exc:
        _fail("run_conversation", exc)
        return wrapped(*args, **kwargs)
    state, error = _TurnState(), None
    token = _state.set(state)
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
            for opened in list(state.open.values()):
                _finish_unrun(opened)
            turn.finish(error)
        except Exception as exc:
            _fail("run_conversation.end", exc)
        _state.reset(token)

def _apply_request(kind: str) -> Wrapper:
    """``apply_{llm,tool}_request_middleware``: open the call (parked) before Hermes' own."""
    llm = kind == c.LLM_REQUEST

    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        state, tcid = _state.get(), _s(kwargs.get("tool_call_id"))
        obs = get_pipeline().observer
        if state is None or obs is None or not (llm or tcid):
            return wrapped(*args, **kwargs)
        call = None
        try:
            vals, _ = _bind(args, kwargs, ("request",) if llm else ("tool_name", "args"))
            key = "llm" if llm else f"tool:{tcid}"
            call = _llm_call(vals[0], kwargs) if llm else _tool_call(vals[0], kwargs)
            with state.lock:  # llm: an earlier attempt or a tool batch that never ran
                stale = [state.open.pop(k) for k in list(state.open) if llm or k == key]
            for opened in stale:
                _finish_unrun(opened)
            opened = _Open(call, _open(call, vals[-1], park=True))
            with state.lock:
                state.open[key] = opened
        except Exception as exc:
            _fail(f"apply_{kind}_middleware", exc)
        result = wrapped(*args, **kwargs)
        # Hermes' RequestMiddlewareResult: the span (and the pre_api_request record
        # Hermes fires next) describe the rewritten request from here on.
        if llm and call is not None and getattr(result, "changed", False) is True:
            obs.request_rewritten(call, getattr(result, "payload", None))
        return result

    return wrapper

def _run_call(kind: str, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    llm, active, tcid = kind == c.LLM_EXECUTION, _active_tool.get(), _s(kwargs.get("tool_call_id"))
    if not llm and tcid and active is not None and active.tool_call_id == tcid:
        return wrapped(*args, **kwargs)  # Hermes' nested second chain (parallel tool calls)
    try:
        vals, ctx_kw = _bind(args, kwargs, ("request", "next_call") if llm else (
            "tool_name", "args", "next_call"))
        rid, payload, state = _s(ctx_kw.get("api_request_id")), vals[-2], _state.get()
        key = "llm" if llm else f"tool:{tcid}"
        opened = state.get(key, rid if llm else None, pop=True) if state is not None else None
        call = opened.call if opened else _llm_call(payload, ctx_kw) if llm else _tool_call(
            vals[0], ctx_kw)
        span_ctx = opened.ctx if opened else _open(call, payload, park=False)
    except Exception as exc:
        _fail(f"run_{kind}_middleware", exc)
        return wrapped(*args, **kwargs)
    raw: list[Any] = []  # Hermes' results (non-empty: Hermes ran)

    def execute(p: Any) -> Any:
        tok = None if llm else _active_tool.set(call)
        raw.append(None)
        try:
            raw[-1] = wrapped(*vals[:-2], p, vals[-1], **ctx_kw)
            return raw[-1]
        finally:
            if tok is not None:
                _active_tool.reset(tok)

    token = _attach(span_ctx) if opened else None
    try:
        if llm:
            return get_pipeline().run_llm(payload, execute, call=call)
        result = get_pipeline().run_tool(vals[0], payload, execute, tool_call_id=tcid,
                                         runtime_id=RUNTIME_ID, raise_errors=True, call=call)
    except Exception as exc:
        if raw:
            raise
        _fail(f"run_{kind}", exc)
        return wrapped(*args, **kwargs)
    finally:
        safe_detach(token)
        if state is not None and span_ctx is not None:
            state.done[f"llm:{rid}" if llm else key] = _Open(call, span_ctx)  # for later hooks
    err = _classify(raw[-1]) if raw else None  # run_tool made it "Tool Error: …"; Hermes' own
    return raw[-1] if err is not None and result == f"{TOOL_ERROR_PREFIX}{err}" else result

def _get_callbacks(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    callbacks = wrapped(*args, **kwargs)
    try:
        obs, kind = get_pipeline().observer, _bind(args, kwargs, ("kind",))[0][0]
        call = (current_llm_call() if kind == c.LLM_EXECUTION else
                _active_tool.get() if kind == c.TOOL_EXECUTION else None)
        if obs is None or call is None or not callbacks:
            return callbacks
        return [_instrumented(cb, kind, i, call, obs) for i, cb in enumerate(callbacks)]
    except Exception as exc:
        _fail("_get_middleware_callbacks", exc)
        return callbacks

def _target(name: str, kw: dict[str, Any]) -> tuple[c.CallInfo, Any]:
    """The call a hook firing (or request-middleware run) belongs to, and its context."""
    state, rc = _state.get(), c.current_runtime_context()
    if name in _LLM_HOOKS or name == c.LLM_REQUEST:
        rid = _s(kw.get("api_request_id"))
        p = state.get("llm", rid) or state.done.get(f"llm:{rid}") if state is not None else None
        return p if p is not None else (_llm_call(kw.get("request"), kw), None)
    if name in _TOOL_HOOKS or name == c.TOOL_REQUEST:
        tcid = _s(kw.get("tool_call_id"))
        p = state.get(f"tool:{tcid}") or state.done.get(f"tool:{tcid}") if (
            state is not None and tcid) else None
        return p if p is not None else (_tool_call(kw.get("tool_name"), kw), None)
    return c.CallInfo("invoke_agent", rc.session_id or _s(kw.get("session_id")),
                      _s(kw.get("task_id")) or rc.task_id, rc.turn_id, runtime_id=rc.runtime_id,
                      agent_name=rc.agent_name), None

def _invoke_middleware(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    obs, func = get_pipeline().observer, getattr(wrapped, "__func__", None)
    kind = args[0] if args else kwargs.get("kind")
    if obs is None or func is None or instance is None or kind not in c.REQUEST_KINDS:
        return wrapped(*args, **kwargs)
    try:
        call, ctx = _target(kind, kwargs)
        view = _ManagerView(instance, _middleware={kind: [
            _instrumented(cb, kind, i, call, obs)
            for i, cb in enumerate(list(instance._middleware.get(kind, [])))]})
    except Exception as exc:
        _fail("invoke_middleware", exc)
        return wrapped(*args, **kwargs)
    token = _attach(ctx)
    try:
        return func(view, *args, **kwargs)
    finally:
        safe_detach(token)

def _emit_hook(obs: Any, hook_name: str, kw: dict[str, Any], failures: int) -> None:
    call, ctx = _target(hook_name, kw)
    payload: dict[str, Any] = {"middleware_schema_version": HERMES_MIDDLEWARE_SCHEMA,
        "telemetry_schema_version": kw.get("telemetry_schema_version", HERMES_OBSERVER_SCHEMA)}
    payload.update((k, kw[k]) for k in ("middleware_trace", "request", "args", "status") if k in kw)
    err = kw.get("error")
    etype = err.get("type") if isinstance(err, dict) else kw.get("error_type")
    if isinstance(etype, str):
        payload["error_type"] = etype
    if hook_name in ("post_tool_call", "transform_tool_result") and "result" in kw:
        payload["normalized"] = _normalized(kw["result"])
    token = _attach(ctx)
    try:
        obs.hook_fired(call, hook_name, payload, failures)
    finally:
        safe_detach(token)

def _host_hook_events(obs: Any) -> bool:
    """Every firing of Hermes' own hook points becomes a record unless hook events
    are off (``registered`` covers them: Hermes' lifecycle exists without a callback)."""
    return obs is not None and obs.hook_events in ("registered", "all")


def _invoke_hook(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """Hermes runs its hooks (failures counted); the firing becomes a log record."""
    obs, func, failed = get_pipeline().observer, getattr(wrapped, "__func__", None), [0]
    name = args[0] if args else kwargs.get("hook_name")
    if not _host_hook_events(obs) or not isinstance(name, str):
        return wrapped(*args, **kwargs)
    try:
        cbs = list(instance._hooks.get(name, []))
        view = _ManagerView(instance, _hooks={name: [_counting_hook(cb, name, failed)
                                                     for cb in cbs]})
    except Exception as exc:
        _fail("invoke_hook", exc)
        return wrapped(*args, **kwargs)
    results = func(view, *args, **kwargs) if func and cbs else wrapped(*args, **kwargs)
    try:
        _emit_hook(obs, name, kwargs, failed[0])
    except Exception as exc:
        _fail("invoke_hook.emit", exc)
    return results

def _has_hook(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    name = args[0] if args else kwargs.get("hook_name")
    if name in _GATED and _host_hook_events(get_pipeline().observer):
        return True  # Hermes fires its gated hook points too (they become records)
    return wrapped(*args, **kwargs)

def _post_tool_emitted(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    try:
        return wrapped(*args, **kwargs)
    finally:
        state = _state.get()
        if state is not None:
            try:
                _finish_unrun(state.get(f"tool:{_s(kwargs.get('tool_call_id'))}", pop=True),
                              kwargs.get("status") or "not_run", kwargs.get("result"),
                              kwargs.get("error_message"))
            except Exception as exc:
                _fail("post_tool_call", exc)

class HermesInstrumentor(OtelmwInstrumentor):
    """``otelmw_hermes``; targets are wrapped when their modules get imported."""

    dependencies = ("hermes-agent >= 0.19, < 0.20",)
    entry_point = "otelmw_hermes"

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        return [
            ("run_agent", "AIAgent.run_conversation", _run_conversation),
            (_MW, "apply_llm_request_middleware", _apply_request(c.LLM_REQUEST)),
            (_MW, "run_llm_execution_middleware", functools.partial(_run_call, c.LLM_EXECUTION)),
            (_MW, "apply_tool_request_middleware", _apply_request(c.TOOL_REQUEST)),
            (_MW, "run_tool_execution_middleware",
             functools.partial(_run_call, c.TOOL_EXECUTION)),
            (_MW, "_get_middleware_callbacks", _get_callbacks),
            (_PL, "PluginManager.invoke_middleware", _invoke_middleware),
            (_PL, "PluginManager.invoke_hook", _invoke_hook),
            (_PL, "PluginManager.has_hook", _has_hook),
            ("model_tools", "_emit_post_tool_call_hook", _post_tool_emitted),
        ]

    def _instrument(self, **kwargs: Any) -> None:
        ensure_observer()
        self._wrapped: list[tuple[str, str]] = []
        self._generation = getattr(self, "_generation", 0) + 1  # (base _uninstrument bumps it)
        for module, name, wrapper in self.targets():  # importing Hermes eagerly is costly
            wrapt.register_post_import_hook(functools.partial(
                self._wrap_module, self._generation, module, name, wrapper), module)
        self._threads = not getattr(tctx, "_installed", True) and not \
            cfg.NO_THREAD_PROPAGATION.read(strict=False)
        if self._threads:
            tctx.instrument_threads()  # Hermes' provider call runs on a bare Thread
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
            uninstrument_threads()
            self._threads = False
        if get_pipeline().normalizers.lookup(RUNTIME_ID) is NORMALIZER:
            get_pipeline().normalizers.unregister(RUNTIME_ID)

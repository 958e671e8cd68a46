"""wrapt decorators that put the otelmw pipeline around host code.

* ``llm_adapter``: a provider adapter ``fn(*args, **request_kwargs) -> response``
  (e.g. ``client.chat.completions.create``). The keyword arguments are the
  provider request that ``llm_request`` middleware rewrites.
* ``tool_dispatcher``: ``fn(tool_name, args, [tool_call_id]) -> result``; the
  argument names are configurable.
* ``agent_turn``: one agent turn (``invoke_agent`` span, fresh ``turn_id``).

Each works on plain functions, methods (descriptor-correct, via wrapt),
``async def`` and functions returning iterators/async iterators (streams pass
through unconsumed; the ``chat`` span ends when the stream does).
``wrap_llm_adapter`` / ``wrap_tool_dispatcher`` apply the same wrappers to
third-party code by module path and return an ``unwrap`` callable.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import wrapt

from .core import Pipeline, get_pipeline

# wrapt ≥ 2 splits the C proxy base (BaseObjectProxy) from ObjectProxy.
_PROXY_BASE = getattr(wrapt, "BaseObjectProxy", wrapt.ObjectProxy)

Wrapper = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]


def _pipe(pipeline: Pipeline | None) -> Pipeline:
    return pipeline if pipeline is not None else get_pipeline()


def _is_async(fn: Any) -> bool:
    # Async generator functions return their stream synchronously: sync path.
    target = inspect.unwrap(fn) if callable(fn) else fn
    return inspect.iscoroutinefunction(target) and not inspect.isasyncgenfunction(target)


def llm_wrapper(*, provider: str | None = None, api_mode: str | None = None,
                server_address: str | None = None, server_port: int | None = None,
                pipeline: Pipeline | None = None, is_async: bool = False) -> Wrapper:
    """The ``(wrapped, instance, args, kwargs)`` wrapper behind ``llm_adapter``."""

    def traced_llm(wrapped: Any, instance: Any, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Any:
        return _pipe(pipeline).run_llm(
            kwargs, lambda request: wrapped(*args, **request), provider=provider,
            api_mode=api_mode, server_address=server_address, server_port=server_port)

    async def atraced_llm(wrapped: Any, instance: Any, args: tuple[Any, ...],
                          kwargs: dict[str, Any]) -> Any:
        return await _pipe(pipeline).arun_llm(
            kwargs, lambda request: wrapped(*args, **request), provider=provider,
            api_mode=api_mode, server_address=server_address, server_port=server_port)

    return atraced_llm if is_async else traced_llm


def llm_adapter(fn: Any = None, *, provider: str | None = None, api_mode: str | None = None,
                server_address: str | None = None, server_port: int | None = None,
                pipeline: Pipeline | None = None) -> Any:
    """Decorate a provider adapter: ``@llm_adapter(provider="openai")``."""
    if fn is None:
        return lambda f: llm_adapter(f, provider=provider, api_mode=api_mode,
                                     server_address=server_address, server_port=server_port,
                                     pipeline=pipeline)
    wrapper = llm_wrapper(provider=provider, api_mode=api_mode, server_address=server_address,
                          server_port=server_port, pipeline=pipeline, is_async=_is_async(fn))
    return wrapt.FunctionWrapper(fn, wrapper)


class _ToolArgs:
    """Where the tool name, arguments and call id sit in the dispatcher's signature."""

    __slots__ = ("args_name", "args_pos", "id_name", "id_pos", "name_name", "name_pos")

    def __init__(self, fn: Any, name_arg: str, args_arg: str, call_id_arg: str | None) -> None:
        try:
            params = [p for p in inspect.signature(fn).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            params = []
        names = [p.name for p in params]
        if names and names[0] in ("self", "cls"):
            names = names[1:]  # wrapt passes the instance separately
        self.name_name, self.args_name, self.id_name = name_arg, args_arg, call_id_arg
        if name_arg not in names or args_arg not in names:
            raise ValueError(
                f"tool dispatcher {getattr(fn, '__qualname__', fn)!r} has no parameters "
                f"{name_arg!r} and {args_arg!r}; pass name_arg=/args_arg= to name them")
        self.name_pos = names.index(name_arg)
        self.args_pos = names.index(args_arg)
        self.id_pos = names.index(call_id_arg) if call_id_arg in names else -1

    def pick(self, args: tuple[Any, ...], kwargs: dict[str, Any], name: str, pos: int) -> Any:
        if name in kwargs:
            return kwargs[name]
        return args[pos] if 0 <= pos < len(args) else None

    def replace_args(self, args: tuple[Any, ...], kwargs: dict[str, Any], value: Any
                     ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if self.args_name in kwargs or self.args_pos >= len(args):
            return args, {**kwargs, self.args_name: value}
        new = list(args)
        new[self.args_pos] = value
        return tuple(new), kwargs


def tool_wrapper(fn: Any, *, name_arg: str = "tool_name", args_arg: str = "args",
                 call_id_arg: str | None = "tool_call_id", runtime_id: str | None = None,
                 raise_errors: bool = False, pipeline: Pipeline | None = None,
                 is_async: bool = False) -> Wrapper:
    """The ``(wrapped, instance, args, kwargs)`` wrapper behind ``tool_dispatcher``."""
    where = _ToolArgs(fn, name_arg, args_arg, call_id_arg)

    def _parts(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, Any]:
        return (where.pick(args, kwargs, where.name_name, where.name_pos),
                where.pick(args, kwargs, where.args_name, where.args_pos),
                where.pick(args, kwargs, where.id_name or "", where.id_pos)
                if where.id_name else None)

    def traced_tool(wrapped: Any, instance: Any, args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> Any:
        name, tool_args, call_id = _parts(args, kwargs)

        def execute(effective: Any) -> Any:
            a, k = where.replace_args(args, kwargs, effective)
            return wrapped(*a, **k)

        return _pipe(pipeline).run_tool(str(name), tool_args, execute, tool_call_id=call_id,
                                        runtime_id=runtime_id, raise_errors=raise_errors)

    async def atraced_tool(wrapped: Any, instance: Any, args: tuple[Any, ...],
                           kwargs: dict[str, Any]) -> Any:
        name, tool_args, call_id = _parts(args, kwargs)

        def execute(effective: Any) -> Any:
            a, k = where.replace_args(args, kwargs, effective)
            return wrapped(*a, **k)

        return await _pipe(pipeline).arun_tool(str(name), tool_args, execute,
                                               tool_call_id=call_id, runtime_id=runtime_id,
                                               raise_errors=raise_errors)

    return atraced_tool if is_async else traced_tool


def tool_dispatcher(fn: Any = None, *, name_arg: str = "tool_name", args_arg: str = "args",
                    call_id_arg: str | None = "tool_call_id", runtime_id: str | None = None,
                    raise_errors: bool = False, pipeline: Pipeline | None = None) -> Any:
    """Decorate a tool dispatcher: ``@tool_dispatcher(runtime_id="my_harness")``.

    A tool that raises is normalized into a failure and the caller gets
    ``"Tool Error: <message>"``; ``raise_errors=True`` re-raises it instead
    (for hosts that handle tool exceptions themselves).
    """
    if fn is None:
        return lambda f: tool_dispatcher(f, name_arg=name_arg, args_arg=args_arg,
                                         call_id_arg=call_id_arg, runtime_id=runtime_id,
                                         raise_errors=raise_errors, pipeline=pipeline)
    wrapper = tool_wrapper(fn, name_arg=name_arg, args_arg=args_arg, call_id_arg=call_id_arg,
                           runtime_id=runtime_id, raise_errors=raise_errors, pipeline=pipeline,
                           is_async=_is_async(fn))
    return wrapt.FunctionWrapper(fn, wrapper)


def agent_turn(fn: Any = None, *, name: str | None = None, runtime_id: str | None = None,
               pipeline: Pipeline | None = None) -> Any:
    """Decorate an agent entry point: each call is one turn (``invoke_agent``)."""
    if fn is None:
        return lambda f: agent_turn(f, name=name, runtime_id=runtime_id, pipeline=pipeline)
    agent = name or getattr(fn, "__name__", "agent")

    def turn(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        with _pipe(pipeline).turn(getattr(instance, "name", None) or agent,
                                  runtime_id=runtime_id):
            return wrapped(*args, **kwargs)

    async def aturn(wrapped: Any, instance: Any, args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> Any:
        async with _pipe(pipeline).turn(getattr(instance, "name", None) or agent,
                                        runtime_id=runtime_id):
            return await wrapped(*args, **kwargs)

    return wrapt.FunctionWrapper(fn, aturn if _is_async(fn) else turn)


def _resolve(module: str, name: str) -> Any:
    import importlib

    obj: Any = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def wrap_llm_adapter(module: str, name: str, **options: Any) -> Callable[[], None]:
    """``wrapt.wrap_function_wrapper`` an LLM adapter by path; returns ``unwrap``."""
    target = _resolve(module, name)
    wrapper = llm_wrapper(is_async=_is_async(target), **options)
    wrapt.wrap_function_wrapper(module, name, wrapper)
    return lambda: unwrap(module, name)


def wrap_tool_dispatcher(module: str, name: str, **options: Any) -> Callable[[], None]:
    """``wrapt.wrap_function_wrapper`` a tool dispatcher by path; returns ``unwrap``."""
    target = _resolve(module, name)
    wrapper = tool_wrapper(target, is_async=_is_async(target), **options)
    wrapt.wrap_function_wrapper(module, name, wrapper)
    return lambda: unwrap(module, name)


def unwrap(module: str, name: str) -> None:
    """Restore the original of a ``wrap_*`` call (no-op when not wrapped)."""
    import importlib

    parent: Any = importlib.import_module(module)
    *path, attr = name.split(".")
    for part in path:
        parent = getattr(parent, part)
    current = inspect.getattr_static(parent, attr)
    original = getattr(current, "__wrapped__", None)
    if isinstance(current, _PROXY_BASE) and original is not None:
        setattr(parent, attr, original)

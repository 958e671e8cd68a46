"""Registered middleware layers and observer hooks, copy-on-write.

Calls read one immutable tuple per kind, so registration and plugin reload
from other threads never disturb a call in flight.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from .contract import HOOK_NAMES, MIDDLEWARE_KINDS


@dataclass(frozen=True, slots=True)
class Layer:
    """One registered middleware callback or hook callback."""

    kind: str  # middleware kind, or hook name for hooks
    callback: Callable[..., Any]
    plugin: str
    name: str  # "<plugin>.<callback name>", used in span names and metrics


def callback_name(callback: Callable[..., Any]) -> str:
    """``Class.method`` / ``function``; closures use their plain ``__name__``."""
    qual = getattr(callback, "__qualname__", None)
    if isinstance(qual, str) and "<locals>" not in qual:
        return qual
    name = getattr(callback, "__name__", None)
    return name if isinstance(name, str) else type(callback).__name__


def make_layer(kind: str, callback: Callable[..., Any], plugin: str) -> Layer:
    return Layer(kind=kind, callback=callback, plugin=plugin,
                 name=f"{plugin}.{callback_name(callback)}")


def validate_middleware(plugin: str, kind: Any, callback: Any) -> None:
    """Raise a ``ValueError`` naming the plugin for a registration that cannot work."""
    _validate(plugin, "middleware kind", kind, MIDDLEWARE_KINDS, "middleware", callback)


def validate_hook(plugin: str, hook_name: Any, callback: Any) -> None:
    """``validate_middleware`` for a hook callback."""
    _validate(plugin, "hook name", hook_name, HOOK_NAMES, "hook", callback)


def _validate(plugin: str, label: str, value: Any, allowed: frozenset[str], role: str,
              callback: Any) -> None:
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(
            f"plugin {plugin!r}: unknown {label} {value!r}; expected one of {sorted(allowed)}")
    if not callable(callback):
        raise ValueError(
            f"plugin {plugin!r}: {role} callback for {value!r} is not callable "
            f"(got {type(callback).__name__})"
        )


class LayerRegistry:
    """Middleware layers per kind and hook callbacks per hook name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._middleware: dict[str, tuple[Layer, ...]] = {k: () for k in MIDDLEWARE_KINDS}
        self._hooks: dict[str, tuple[Layer, ...]] = {h: () for h in HOOK_NAMES}
        self._tables = (self._middleware, self._hooks)
        # Cached "anything registered?" per call type: the no-middleware fast path
        # reads one attribute instead of scanning (and allocating bound methods).
        self.llm_active = False
        self.tool_active = False

    def _refresh(self) -> None:
        m, h = self._middleware, self._hooks
        self._tables = (m, h)  # one attribute store: readers never see a torn pair
        self.llm_active = bool(m["llm_request"] or m["llm_execution"] or h["pre_api_request"]
                               or h["post_api_request"] or h["api_request_error"])
        self.tool_active = bool(m["tool_request"] or m["tool_execution"] or h["pre_tool_call"]
                                or h["post_tool_call"] or h["transform_tool_result"])

    def tables(self) -> tuple[dict[str, tuple[Layer, ...]], dict[str, tuple[Layer, ...]]]:
        """(middleware by kind, hooks by name): one consistent snapshot for a whole
        call, however plugins are reloaded meanwhile. Read-only by convention."""
        return self._tables

    def tables_without(self, plugins: Collection[str]
                       ) -> tuple[dict[str, tuple[Layer, ...]], dict[str, tuple[Layer, ...]]]:
        """``tables()`` without the layers of ``plugins`` (a call another process has
        already run those plugins on)."""
        middleware, hooks = self._tables
        if not plugins:
            return middleware, hooks
        return ({k: tuple(x for x in v if x.plugin not in plugins) for k, v in middleware.items()},
                {k: tuple(x for x in v if x.plugin not in plugins) for k, v in hooks.items()})

    def middleware(self, kind: str) -> tuple[Layer, ...]:
        return self._middleware[kind]

    def hooks(self, hook_name: str) -> tuple[Layer, ...]:
        return self._hooks[hook_name]

    def add_middleware(self, kind: str, callback: Callable[..., Any], plugin: str) -> Layer:
        validate_middleware(plugin, kind, callback)
        layer = make_layer(kind, callback, plugin)
        self.commit([layer], [])
        return layer

    def add_hook(self, hook_name: str, callback: Callable[..., Any], plugin: str) -> Layer:
        validate_hook(plugin, hook_name, callback)
        layer = make_layer(hook_name, callback, plugin)
        self.commit([], [layer])
        return layer

    def commit(self, middleware: Iterable[Layer], hooks: Iterable[Layer]) -> None:
        """Append validated layers atomically (one plugin's registrations at once)."""
        with self._lock:
            mw = dict(self._middleware)
            for layer in middleware:
                mw[layer.kind] = (*mw[layer.kind], layer)
            hk = dict(self._hooks)
            for layer in hooks:
                hk[layer.kind] = (*hk[layer.kind], layer)
            self._middleware, self._hooks = mw, hk
            self._refresh()

    def replace_all(self, middleware: Iterable[Layer], hooks: Iterable[Layer]) -> None:
        """Swap in a complete new set of registrations (plugin reload)."""
        mw: dict[str, tuple[Layer, ...]] = {k: () for k in MIDDLEWARE_KINDS}
        for layer in middleware:
            mw[layer.kind] = (*mw[layer.kind], layer)
        hk: dict[str, tuple[Layer, ...]] = {h: () for h in HOOK_NAMES}
        for layer in hooks:
            hk[layer.kind] = (*hk[layer.kind], layer)
        with self._lock:
            self._middleware, self._hooks = mw, hk
            self._refresh()

    def remove_plugin(self, plugin: str) -> None:
        with self._lock:
            self._middleware = {
                k: tuple(x for x in v if x.plugin != plugin) for k, v in self._middleware.items()
            }
            self._hooks = {
                k: tuple(x for x in v if x.plugin != plugin) for k, v in self._hooks.items()
            }
            self._refresh()

    def clear(self) -> None:
        self.replace_all((), ())

    def all_layers(self) -> list[Layer]:
        out: list[Layer] = []
        for v in self._middleware.values():
            out.extend(v)
        for v in self._hooks.values():
            out.extend(v)
        return out

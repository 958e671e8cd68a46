"""Plugins: ``register(ctx)`` callables, discovery, enablement, reload.

Sources:

* entry points in the group ``otelmw.plugins`` (the object is a ``register``
  callable or a module with ``register``). They load only when enabled in
  ``$OTELMW_HOME/config.json`` (``otelmw plugins enable NAME``).
* programmatic: ``PluginManager.add_plugin(name, register)``. Code that adds a
  plugin has opted in, so it loads unless the name is in the disabled list.

A plugin that fails to import or whose ``register`` raises is disabled with a
clear message while the others load; its partial registrations are discarded.
Registration validates eagerly: an unknown middleware kind or a callback that is
not callable raises ``ValueError`` naming the plugin. An unknown hook name (hooks
only observe) rejects that one registration with a warning naming the plugin, the
name, a close match and the valid names; the plugin's other registrations load.
"""

from __future__ import annotations

import difflib
import functools
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from ..config import settings as cfg
from .contract import HOOK_NAMES
from .pipeline import Pipeline, get_pipeline
from .registry import Layer, make_layer, validate_hook, validate_middleware

logger = logging.getLogger("otelmw")

ENTRY_POINT_GROUP = "otelmw.plugins"
RegisterFn = Callable[["PluginContext"], Any]


def otelmw_home() -> Path:
    """``OTELMW_HOME`` (default ``~/.otelmw``), for a ``PluginManager`` given no ``home``:
    the environment's, loaded here (a bad ``OTELMW_HOME`` raises ``ValueError``)."""
    return cfg.load(strict=[cfg.HOME])[cfg.HOME] or Path.home() / ".otelmw"


class PluginConfig:
    """The enable/disable lists in ``$OTELMW_HOME/config.json``."""

    def __init__(self, home: Path | None = None) -> None:
        self.home = home if home is not None else otelmw_home()
        self.path = self.home / "config.json"

    def read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise ValueError(f"otelmw config {self.path} is unreadable: {exc}") from None
        if not isinstance(data, dict):
            raise ValueError(f"otelmw config {self.path} must hold a JSON object")
        return data

    def _lists(self) -> tuple[dict[str, Any], list[str], list[str]]:
        data = self.read()
        raw = data.get("plugins")
        plugins: dict[str, Any] = raw if isinstance(raw, dict) else {}
        enabled = [str(x) for x in plugins.get("enabled", []) if isinstance(x, str)]
        disabled = [str(x) for x in plugins.get("disabled", []) if isinstance(x, str)]
        return data, enabled, disabled

    def enabled(self) -> set[str]:
        return set(self._lists()[1])

    def disabled(self) -> set[str]:
        return set(self._lists()[2])

    def set_enabled(self, name: str, on: bool) -> None:
        if not name or not isinstance(name, str):
            raise ValueError("plugin name must be a non-empty string")
        data, enabled, disabled = self._lists()
        enabled = [x for x in enabled if x != name]
        disabled = [x for x in disabled if x != name]
        (enabled if on else disabled).append(name)
        data["plugins"] = {"enabled": sorted(enabled), "disabled": sorted(disabled)}
        self.home.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(self.path)


class PluginContext:
    """What ``register(ctx)`` receives. Registrations are staged and committed
    only when ``register`` returns normally."""

    def __init__(self, plugin_name: str) -> None:
        self.plugin_name = plugin_name
        self.middleware: list[Layer] = []
        self.hooks: list[Layer] = []
        self.rejected: list[str] = []  # warnings for registrations that were ignored

    def register_middleware(self, kind: str, callback: Callable[..., Any]) -> None:
        validate_middleware(self.plugin_name, kind, callback)
        self.middleware.append(make_layer(kind, callback, self.plugin_name))

    def register_hook(self, hook_name: str, callback: Callable[..., Any]) -> None:
        """An unknown hook name rejects this registration only (warned, kept in
        ``rejected``), as Hermes does; the plugin's other registrations stand."""
        if not isinstance(hook_name, str) or hook_name not in HOOK_NAMES:
            message = unknown_hook_message(self.plugin_name, hook_name)
            logger.warning("%s", message)
            self.rejected.append(message)
            return
        validate_hook(self.plugin_name, hook_name, callback)
        self.hooks.append(make_layer(hook_name, callback, self.plugin_name))


def unknown_hook_message(plugin: str, hook_name: Any) -> str:
    close = (difflib.get_close_matches(hook_name.lower(), sorted(HOOK_NAMES), n=1)
             if isinstance(hook_name, str) and hook_name else [])
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return (f"otelmw: plugin {plugin!r}: unknown hook name {hook_name!r}{hint}; this "
            f"registration is ignored, the plugin's others are kept. Valid hook names: "
            f"{', '.join(sorted(HOOK_NAMES))}")


@dataclass
class PluginStatus:
    name: str
    source: str  # "entry_point" | "programmatic"
    enabled: bool
    loaded: bool = False
    error: str | None = None
    middleware: list[str] = field(default_factory=list)
    hooks: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)  # registrations ignored, with why


def _resolve_register(obj: Any, name: str) -> RegisterFn:
    fn = obj if callable(obj) and not hasattr(obj, "__path__") else getattr(obj, "register", None)
    if not callable(fn):
        raise ValueError(f"plugin {name!r}: entry point has no register(ctx) callable")
    return fn  # type: ignore[no-any-return]


def _load_entry_point(ep: metadata.EntryPoint, name: str) -> RegisterFn:
    return _resolve_register(ep.load(), name)


def _identity(register: RegisterFn) -> RegisterFn:
    return register


class PluginManager:
    """Loads plugins into a pipeline's registry; ``reload()`` re-reads everything."""

    def __init__(self, pipeline: Pipeline | None = None, home: Path | None = None) -> None:
        self.pipeline = pipeline if pipeline is not None else get_pipeline()
        self.config = PluginConfig(home)
        self._lock = threading.RLock()
        self._programmatic: dict[str, RegisterFn] = {}
        self.status: dict[str, PluginStatus] = {}

    @staticmethod
    def entry_points() -> dict[str, metadata.EntryPoint]:
        return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}

    def add_plugin(self, name: str, register: RegisterFn) -> PluginStatus:
        """Load a plugin from code. Raises ``ValueError`` for a bad registration."""
        if not isinstance(name, str) or not name:
            raise ValueError("plugin name must be a non-empty string")
        if not callable(register):
            raise ValueError(f"plugin {name!r}: register must be callable")
        with self._lock:
            if name in self.config.disabled():
                self._programmatic[name] = register
                st = PluginStatus(name, "programmatic", enabled=False)
                self.status[name] = st
                return st
            ctx = PluginContext(name)
            register(ctx)  # a ValueError here reaches the caller: it is their mistake
            self._programmatic[name] = register
            self.pipeline.registry.remove_plugin(name)
            self.pipeline.registry.commit(ctx.middleware, ctx.hooks)
            st = self._loaded(name, "programmatic", ctx)
            self.status[name] = st
            return st

    def remove_plugin(self, name: str) -> None:
        with self._lock:
            self._programmatic.pop(name, None)
            self.status.pop(name, None)
            self.pipeline.registry.remove_plugin(name)

    @staticmethod
    def _loaded(name: str, source: str, ctx: PluginContext) -> PluginStatus:
        return PluginStatus(name, source, enabled=True, loaded=True,
                            middleware=[f"{x.kind}:{x.name}" for x in ctx.middleware],
                            hooks=[f"{x.kind}:{x.name}" for x in ctx.hooks],
                            rejected=list(ctx.rejected))

    def _try_load(self, name: str, source: str, get_register: Callable[[], RegisterFn],
                  mw: list[Layer], hooks: list[Layer]) -> PluginStatus:
        try:
            register = get_register()
            ctx = PluginContext(name)
            register(ctx)
        except Exception as exc:
            msg = f"{type(exc).__name__}: {exc}"
            logger.warning("otelmw: plugin %r disabled: %s", name, msg)
            return PluginStatus(name, source, enabled=True, error=msg)
        mw.extend(ctx.middleware)
        hooks.extend(ctx.hooks)
        return self._loaded(name, source, ctx)

    def reload(self) -> dict[str, PluginStatus]:
        """Re-read config and entry points, re-run every ``register``, swap atomically,
        and reset the warn-once memory."""
        with self._lock:
            enabled, disabled = self.config.enabled(), self.config.disabled()
            mw: list[Layer] = []
            hooks: list[Layer] = []
            status: dict[str, PluginStatus] = {}
            for name, ep in sorted(self.entry_points().items()):
                if name not in enabled or name in disabled:
                    status[name] = PluginStatus(name, "entry_point", enabled=False)
                    continue
                status[name] = self._try_load(name, "entry_point",
                                              functools.partial(_load_entry_point, ep, name),
                                              mw, hooks)
            for name, register in self._programmatic.items():
                if name in disabled:
                    status[name] = PluginStatus(name, "programmatic", enabled=False)
                    continue
                status[name] = self._try_load(name, "programmatic",
                                              functools.partial(_identity, register), mw, hooks)
            for name in enabled - set(status):
                status[name] = PluginStatus(name, "entry_point", enabled=True,
                                            error="enabled but not installed")
            self.pipeline.registry.replace_all(mw, hooks)
            self.pipeline.failures.reset()
            self.status = status
            return status

    def set_enabled(self, name: str, on: bool) -> None:
        self.config.set_enabled(name, on)


_manager: PluginManager | None = None
_manager_lock = threading.Lock()


def get_plugin_manager(home: Path | None = None) -> PluginManager:
    """The default pipeline's plugin manager; ``home``: where the first call makes it
    read its config (default ``otelmw_home()``)."""
    global _manager
    with _manager_lock:
        if _manager is None:
            _manager = PluginManager(home=home)
        return _manager


def load_plugins(home: Path | None = None) -> dict[str, PluginStatus]:
    """Discover and load enabled plugins into the default pipeline (``home``: see
    ``get_plugin_manager``)."""
    return get_plugin_manager(home).reload()

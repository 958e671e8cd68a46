"""Zero-code instrumentation: what ``otelmw run`` does inside the program.

1. ``configure()`` from the ``OTEL_*`` / ``OTELMW_*`` environment;
2. load enabled otelmw plugins;
3. instrument every installed ``otelmw_*`` instrumentor (entry-point group
   ``opentelemetry_instrumentor``) not listed in
   ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS``;
4. wrap the targets listed in ``OTELMW_WRAP`` when their module is imported:
   ``module:Qual.name=llm`` or ``module:Qual.name=tool`` (comma-separated), e.g.
   ``OTELMW_WRAP="my_agent:call_model=llm,my_agent:dispatch=tool"``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import wrapt
from opentelemetry.instrumentation.dependencies import get_dependency_conflicts

from . import settings as cfg
from .settings import WrapTarget

logger = logging.getLogger("otelmw")


def parse_wrap_spec(spec: str) -> list[WrapTarget]:
    """Parse ``OTELMW_WRAP``; raise ``ValueError`` naming the bad entry."""
    if not spec.strip():
        return []
    try:
        return list(cfg.WRAP.parse(spec))
    except ValueError:
        raise ValueError(cfg.WRAP.problem(spec)) from None


_OPTIONS_WITH_VALUE = ("-X", "-W", "--check-hash-based-pycs")


def program_name(argv: Sequence[str] | None = None) -> str | None:
    """The running program's name from the interpreter's command line
    (``sys.orig_argv``): the script's stem (its directory's name for a
    ``__main__.py``), the module of ``-m``; ``None`` for ``-c`` or stdin."""
    args = list(sys.orig_argv if argv is None else argv)[1:]
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in _OPTIONS_WITH_VALUE:
            i += 2
            continue
        if arg == "-":
            return None
        if not arg.startswith("-"):
            path = Path(arg)
            return (path.parent.name or None) if path.stem == "__main__" else path.stem
        if not arg.startswith("--"):
            for j, flag in enumerate(arg[1:], 1):  # combined flags: -uB, -um mod
                if flag == "c":
                    return None
                if flag == "m":
                    return arg[j + 1:] or (args[i + 1] if i + 1 < len(args) else None)
                if flag in "XW":  # -Xdev, -Wignore: the rest is the option's value
                    break
        i += 1
    return None


def _wrap_when_imported(module: str, name: str, kind: str) -> None:
    from .decorators import _is_async, llm_wrapper, tool_wrapper

    def hook(mod: Any) -> None:
        try:
            obj: Any = mod
            for part in name.split("."):
                obj = getattr(obj, part)
            if kind == "llm":
                wrapper = llm_wrapper(is_async=_is_async(obj))
            else:
                wrapper = tool_wrapper(obj, is_async=_is_async(obj), raise_errors=True)
            wrapt.wrap_function_wrapper(mod, name, wrapper)
        except Exception as exc:
            logger.warning("otelmw: could not wrap %s:%s (%s)", module, name, exc)

    wrapt.register_post_import_hook(hook, module)


def instrument_all(settings: cfg.Settings | None = None) -> list[str]:
    """Instrument every available otelmw_* instrumentor; returns their names."""
    s = settings if settings is not None else cfg.load(strict=False)
    disabled: tuple[str, ...] = s[cfg.DISABLED_INSTRUMENTATIONS]
    done = []
    for ep in metadata.entry_points(group="opentelemetry_instrumentor"):
        if not ep.name.startswith("otelmw_") or ep.name in disabled:
            continue
        try:
            instrumentor = ep.load()()
            conflict = get_dependency_conflicts(instrumentor.instrumentation_dependencies())
            if conflict is not None:
                logger.info("otelmw: %s skipped: %s", ep.name, conflict)
                continue
            if not instrumentor.is_instrumented_by_opentelemetry:
                instrumentor.instrument(skip_dep_check=True)
            done.append(ep.name)
        except Exception as exc:
            logger.warning("otelmw: instrumentor %s skipped: %s", ep.name, exc)
    return done


def _configure_and_load_plugins() -> cfg.Settings:
    """Inside a running program: one warning per bad setting, which keeps its
    default; everything else is configured as asked."""
    from .plugins import load_plugins
    from .telemetry.setup import configure

    settings = cfg.load(strict=False)
    # service.name defaults to the program's name (OTel's convention when unknown)
    configure(program_name() or f"unknown_service:{Path(sys.executable).name}",
              settings=settings)
    try:
        load_plugins()
    except ValueError as exc:
        logger.warning("otelmw: plugins not loaded: %s", exc)
    return settings


def initialize() -> None:
    settings = _configure_and_load_plugins()
    instrument_all(settings)
    for target in settings[cfg.WRAP]:
        _wrap_when_imported(target.module, target.qualname, target.kind)


def _configurator_base() -> type:
    from opentelemetry.sdk._configuration import _BaseConfigurator

    return _BaseConfigurator


class OtelmwConfigurator(_configurator_base()):  # type: ignore[misc]
    """``opentelemetry-instrument`` configurator (entry point ``otelmw`` in the
    ``opentelemetry_configurator`` group; select it with
    ``OTEL_PYTHON_CONFIGURATOR=otelmw`` when another distro is installed):
    configures the SDK like ``otelmw run`` and loads enabled plugins. The
    ``otelmw_*`` instrumentors are then installed by ``opentelemetry-instrument``."""

    def _configure(self, **kwargs: Any) -> None:
        _configure_and_load_plugins()

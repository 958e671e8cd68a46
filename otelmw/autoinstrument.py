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
import os
from importlib import metadata
from typing import Any

import wrapt
from opentelemetry.instrumentation.dependencies import get_dependency_conflicts

logger = logging.getLogger("otelmw")


def parse_wrap_spec(spec: str) -> list[tuple[str, str, str]]:
    """Parse ``OTELMW_WRAP``; raise ``ValueError`` naming the bad entry."""
    out: list[tuple[str, str, str]] = []
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            continue
        target, _, kind = item.partition("=")
        module, _, name = target.partition(":")
        kind = kind.strip() or "llm"
        if not module or not name or kind not in ("llm", "tool"):
            raise ValueError(f"OTELMW_WRAP entry {item!r}: expected module:Qual.name=llm|tool")
        out.append((module.strip(), name.strip(), kind))
    return out


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


def instrument_all() -> list[str]:
    """Instrument every available otelmw_* instrumentor; returns their names."""
    disabled = {x.strip() for x in os.environ.get(
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", "").split(",") if x.strip()}
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


def initialize() -> None:
    from .plugins import load_plugins
    from .telemetry.setup import configure

    configure()
    try:
        load_plugins()
    except ValueError as exc:
        logger.warning("otelmw: plugins not loaded: %s", exc)
    instrument_all()
    for module, name, kind in parse_wrap_spec(os.environ.get("OTELMW_WRAP", "")):
        _wrap_when_imported(module, name, kind)


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
        from .plugins import load_plugins
        from .telemetry.setup import configure

        configure()
        try:
            load_plugins()
        except ValueError as exc:
            logger.warning("otelmw: plugins not loaded: %s", exc)

"""Zero-code instrumentation: what ``otelmw run`` does inside the program.

1. ``configure()`` from the ``OTEL_*`` / ``OTELMW_*`` environment;
2. load enabled otelmw plugins;
3. instrument every installed ``otelmw_*`` instrumentor (entry-point group
   ``opentelemetry_instrumentor``) not listed in
   ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS``;
4. wrap the targets listed in ``OTELMW_WRAP`` when their module is imported:
   ``module:Qual.name=llm`` or ``module:Qual.name=tool`` (comma-separated), e.g.
   ``OTELMW_WRAP="my_agent:call_model=llm,my_agent:dispatch=tool"`` (targets in the
   script being run are wrapped as it defines them: ``otelmw.main_script``);
5. report one line at start (instrumentors active and skipped) and one at exit
   (telemetry written, where, dropped, targets left unwrapped): ``run_notice``.

Under ``opentelemetry-instrument`` the ``otelmw`` configurator does 1 and 2, then says
which other instrumentations of the same libraries it is about to start too
(``announce_peers``); ``opentelemetry-instrument`` itself does 3.
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, NamedTuple

import wrapt

from .config import settings as cfg
from .config.settings import WrapTarget
from .run_notice import InstrumentationReport, SkippedInstrumentor

logger = logging.getLogger("otelmw")


_OPTIONS_WITH_VALUE = ("-X", "-W", "--check-hash-based-pycs")


class InterpreterMain(NamedTuple):
    """What a Python command line runs: a ``script`` or a ``module`` (``-m``)."""

    kind: str  # "script" | "module"
    value: str  # the script's path as given, or the module name
    position: int  # of the script in the arguments (after the interpreter)


def interpreter_main(args: Sequence[str]) -> InterpreterMain | None:
    """Parse the interpreter's arguments (without the interpreter itself);
    ``None`` for ``-c`` or stdin."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in _OPTIONS_WITH_VALUE:
            i += 2
            continue
        if arg == "-":
            return None
        if not arg.startswith("-"):
            return InterpreterMain("script", arg, i)
        if not arg.startswith("--"):
            for j, flag in enumerate(arg[1:], 1):  # combined flags: -uB, -um mod
                if flag == "c":
                    return None
                if flag == "m":
                    module = arg[j + 1:] or (args[i + 1] if i + 1 < len(args) else None)
                    return InterpreterMain("module", module, i) if module else None
                if flag in "XW":  # -Xdev, -Wignore: the rest is the option's value
                    break
        i += 1
    return None


def program_name(argv: Sequence[str] | None = None) -> str | None:
    """The running program's name from the interpreter's command line
    (``sys.orig_argv``): the script's stem (its directory's name for a
    ``__main__.py``), the module of ``-m``; ``None`` for ``-c`` or stdin."""
    args = list(sys.orig_argv if argv is None else argv)[1:]
    main = interpreter_main(args)
    if main is not None and main.value == "otelmw.main_script":  # otelmw run's stand-in
        script = args[main.position + (1 if args[main.position] == "-m" else 0) + 1:][:1]
        main = InterpreterMain("script", script[0], 0) if script else None
    if main is None or main.kind == "module":
        return main.value if main is not None else None
    path = Path(main.value)
    return (path.parent.name or None) if path.stem == "__main__" else path.stem


# Process-wide runtime state: OTELMW_WRAP targets not wrapped (yet), with why;
# ``unwrapped_targets()`` at exit.
_unwrapped: dict[WrapTarget, str] = {}
_unwrapped_lock = threading.Lock()


def mark_unwrapped(target: WrapTarget, reason: str) -> None:
    with _unwrapped_lock:
        _unwrapped[target] = reason


def unwrapped_targets() -> dict[WrapTarget, str]:
    with _unwrapped_lock:
        return dict(_unwrapped)


def wrap_target(module: Any, target: WrapTarget) -> bool:
    """Wrap ``target.qualname`` in ``module`` (a module object) as its kind says;
    a failure is logged and remembered for the exit line, never raised."""
    from .decorators import _is_async, llm_wrapper, tool_wrapper

    try:
        obj: Any = module
        for part in target.qualname.split("."):
            obj = getattr(obj, part)
        if target.kind == "llm":
            wrapper = llm_wrapper(is_async=_is_async(obj))
        else:
            wrapper = tool_wrapper(obj, is_async=_is_async(obj), raise_errors=True)
        wrapt.wrap_function_wrapper(module, target.qualname, wrapper)
    except Exception as exc:
        logger.warning("otelmw: could not wrap %s:%s (%s)", target.module, target.qualname,
                       exc)
        mark_unwrapped(target, f"could not wrap: {exc}")
        return False
    with _unwrapped_lock:
        _unwrapped.pop(target, None)
    return True


def _wrap_when_imported(target: WrapTarget) -> None:
    mark_unwrapped(target, f"module {target.module} was never imported")
    wrapt.register_post_import_hook(lambda mod: wrap_target(mod, target), target.module)


def instrument_all(settings: cfg.Settings | None = None) -> InstrumentationReport:
    """Instrument every available otelmw_* instrumentor."""
    from .instrumentation._base import host_unsupported

    s = settings if settings is not None else cfg.load(strict=False)
    disabled: tuple[str, ...] = s[cfg.DISABLED_INSTRUMENTATIONS]
    active: list[str] = []
    skipped: list[SkippedInstrumentor] = []
    for ep in metadata.entry_points(group="opentelemetry_instrumentor"):
        if not ep.name.startswith("otelmw_"):
            continue
        if ep.name in disabled:
            skipped.append(SkippedInstrumentor(
                ep.name, "disabled by OTEL_PYTHON_DISABLED_INSTRUMENTATIONS"))
            continue
        try:
            instrumentor = ep.load()()
            reason = host_unsupported(ep.name, instrumentor.instrumentation_dependencies())
            if reason is not None:
                skipped.append(SkippedInstrumentor(ep.name, reason))
                continue
            if not instrumentor.is_instrumented_by_opentelemetry:
                instrumentor.instrument(skip_dep_check=True)
            active.append(ep.name)
        except Exception as exc:
            logger.warning("otelmw: instrumentor %s skipped: %s", ep.name, exc)
            skipped.append(SkippedInstrumentor(ep.name, f"failed: {exc}"))
    return InstrumentationReport(tuple(active), tuple(skipped))


def _configure_and_load_plugins() -> cfg.Settings:
    """Inside a running program: one warning per bad setting, which keeps its
    default; everything else is configured as asked."""
    from .core.plugins import load_plugins
    from .telemetry.setup.configuration import configure

    settings = cfg.load(strict=False)
    # service.name defaults to the program's name (OTel's convention when unknown)
    configure(program_name() or f"unknown_service:{Path(sys.executable).name}",
              settings=settings)
    try:
        load_plugins(settings[cfg.HOME])
    except ValueError as exc:
        logger.warning("otelmw: plugins not loaded: %s", exc)
    return settings


def initialize() -> None:
    from . import run_notice
    from .telemetry.setup.configuration import current

    settings = _configure_and_load_plugins()
    report = instrument_all(settings)
    for target in settings[cfg.WRAP]:
        if target.module == "__main__":  # the script itself: otelmw.main_script wraps it
            mark_unwrapped(target, "__main__ targets are wrapped in `otelmw run -- python "
                                   "SCRIPT` only")
        else:
            _wrap_when_imported(target)
    telemetry = current()
    if settings[cfg.QUIET] or telemetry is None:
        return
    run_notice.notify(run_notice.start_line(report, telemetry))

    def at_exit() -> None:
        flushed = telemetry.shutdown()  # first (a no-op when done already): final counts
        run_notice.notify(run_notice.exit_line(telemetry, unwrapped_targets(),
                                               flushed=flushed))

    # Registered after configure()'s own shutdown, so it runs before it (LIFO).
    atexit.register(at_exit)


def _configurator() -> type:
    """``OtelmwConfigurator``, built on first access (``__getattr__``): the SDK's
    ``_configuration`` module it extends is not needed under ``otelmw run``."""
    from opentelemetry.sdk._configuration import _BaseConfigurator

    class OtelmwConfigurator(_BaseConfigurator):  # type: ignore[misc]
        """``opentelemetry-instrument`` configurator (entry point ``otelmw`` in the
        ``opentelemetry_configurator`` group; select it with
        ``OTEL_PYTHON_CONFIGURATOR=otelmw`` when another distro is installed):
        configures the SDK like ``otelmw run`` and loads enabled plugins. The
        ``otelmw_*`` instrumentors are then installed by ``opentelemetry-instrument``."""

        __module__ = __name__
        __qualname__ = "OtelmwConfigurator"

        def _configure(self, **kwargs: Any) -> None:
            settings = _configure_and_load_plugins()
            announce_peers(settings)

    return OtelmwConfigurator


def __getattr__(name: str) -> Any:
    if name == "OtelmwConfigurator":
        configurator = _configurator()
        globals()[name] = configurator  # once: later lookups find the class itself
        return configurator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def announce_peers(settings: cfg.Settings) -> None:
    """Under ``opentelemetry-instrument``, which starts every installed instrumentor
    next: one line per library another instrumentation doubles (``run_notice.peer_lines``),
    a WARNING where it is not a terminal (a second span per call, prompts recorded by
    default). ``otelmw run`` starts only otelmw's instrumentors: nothing to announce."""
    from . import run_notice
    from .peers import active_peers
    from .telemetry.setup.configuration import current

    telemetry = current()
    if settings[cfg.QUIET] or telemetry is None or telemetry.disabled:
        return
    disabled: tuple[str, ...] = settings[cfg.DISABLED_INSTRUMENTATIONS]
    try:
        lines = run_notice.peer_lines(active_peers(disabled), disabled)
    except Exception as exc:  # never break the program for a notice
        logger.debug("otelmw: other instrumentations not checked: %s", exc)
        return
    for line in lines:
        run_notice.notify(line, logging.WARNING)

"""Run a Python script as ``__main__`` with the ``OTELMW_WRAP`` targets that name it
wrapped the moment the script defines them.

``otelmw run -- python my_agent.py`` runs the script as ``__main__``, so a target
``my_agent:call_model=llm`` would never see its module imported, and wrapping after
the script ran would be too late: the script defines ``call_model`` and calls it in one
go. ``otelmw run`` therefore starts ``python -m otelmw.main_script my_agent.py ARGS``
instead (same interpreter, same options), which executes the script as Python would —
``sys.argv``, ``sys.path[0]``, ``__main__`` in ``sys.modules`` — with a namespace that
wraps each target as its top-level name is bound (``def``, ``class``, assignment or
import). Targets naming the module ``__main__`` are matched too.
"""

from __future__ import annotations

import builtins
import io
import os
import re
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any

from .autoinstrument import interpreter_main, mark_unwrapped, wrap_target
from .config import settings as cfg
from .config.settings import WrapTarget

_PYTHON = re.compile(r"python[0-9.]*(\.exe)?")


def script_module_names(script: str) -> tuple[str, str]:
    """The module names a target may use for ``script``: its stem and ``__main__``."""
    return os.path.splitext(os.path.basename(script))[0], "__main__"


def command_for(command: list[str], targets: Sequence[WrapTarget]) -> list[str]:
    """``command`` (``otelmw run``'s), run through this module when it is
    ``python [options] SCRIPT ...`` and a target names the script; else unchanged."""
    if not targets or not _PYTHON.fullmatch(os.path.basename(command[0])):
        return command
    main = interpreter_main(command[1:])
    if main is None or main.kind != "script":
        return command
    names = script_module_names(main.value)
    if not any(t.module in names for t in targets):
        return command
    at = main.position + 1
    return [*command[:at], "-m", "otelmw.main_script", *command[at:]]


class _WrappingNamespace(dict[str, Any]):
    """The script's top-level namespace (``exec`` locals): every binding is written
    through to the module's globals, then ``on_bind`` may replace it with a wrapper.
    Functions the script defines look names up in the globals, so they call the
    wrapped objects; module-level code reads this namespace first, then the globals."""

    def __init__(self, module: types.ModuleType, on_bind: Callable[[str], None]) -> None:
        super().__init__()
        self._globals = module.__dict__
        self._on_bind = on_bind

    def __setitem__(self, key: str, value: Any) -> None:
        self._globals[key] = value
        self._on_bind(key)
        super().__setitem__(key, self._globals[key])

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._globals.pop(key, None)


def run(script: str, args: list[str]) -> None:
    names = script_module_names(script)
    # Inside the program now: a bad setting warns and keeps its default (``otelmw run``
    # refused it before the program started).
    targets = [t for t in cfg.load(strict=False)[cfg.WRAP] if t.module in names]
    module = types.ModuleType("__main__")
    module.__file__ = script
    module.__builtins__ = builtins  # type: ignore[attr-defined]
    module.__spec__ = None
    module.__loader__ = None
    module.__cached__ = None  # type: ignore[attr-defined]
    for target in targets:
        mark_unwrapped(target, f"{script} never defined {target.qualname.split('.')[0]}")
    by_first: dict[str, list[WrapTarget]] = {}
    for target in targets:
        by_first.setdefault(target.qualname.split(".")[0], []).append(target)

    def on_bind(key: str) -> None:
        for target in by_first.get(key, ()):
            wrap_target(module, target)

    with io.open_code(script) as f:
        source = f.read()
    code = compile(source, script, "exec", dont_inherit=True)
    sys.argv[:] = [script, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    sys.modules["__main__"] = module
    exec(code, module.__dict__, _WrappingNamespace(module, on_bind))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.stderr.write("usage: python -m otelmw.main_script SCRIPT [ARGS...]\n")
        raise SystemExit(2)
    run(sys.argv[1], sys.argv[2:])

"""Tests that need a component (a host package, a binary) fail under CI when it is
missing and skip elsewhere: one rule, one reading of ``CI``."""

from __future__ import annotations

import importlib
import importlib.util
import os
from types import ModuleType
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """``CI`` set to anything but an explicit false value (``CI=true``, ``CI=1``...)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(what: str, *, module_level: bool = False) -> NoReturn:
    """Fail (under CI) or skip because ``what`` is missing."""
    message = f"{what} is not available"
    if in_ci():
        pytest.fail(f"{message} (required when CI is set)", pytrace=False)
    pytest.skip(message, allow_module_level=module_level)


def require_modules(*names: str) -> None:
    """At module level: every named top-level module must be importable."""
    for name in names:
        if importlib.util.find_spec(name) is None:
            unavailable(f"module {name!r}", module_level=True)


def require_module(name: str) -> ModuleType:
    """``importorskip`` with the CI rule."""
    require_modules(name)
    return importlib.import_module(name)


def clean_env(tmp_path: os.PathLike[str] | str, **extra: str) -> dict[str, str]:
    """The environment for a child process under test: this one's without any
    ``OTEL_*``/``OTELMW_*`` setting, a private ``OTELMW_HOME``, unbuffered output,
    then ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OTELMW_"))}
    env["OTELMW_HOME"] = os.path.join(tmp_path, "otelmw-home")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env

"""Tests that need a component (a host package, a binary) fail under CI when it is
missing and skip elsewhere: one rule, one reading of ``CI``."""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path
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


# Host packages the suite drives, by the name its ``host`` marker uses: the top-level
# modules that must import for the host's tests to run.
HOST_MODULES: dict[str, tuple[str, ...]] = {
    "openai": ("openai",),
    "anthropic": ("anthropic",),
    "hermes": ("run_agent", "hermes_cli"),  # hermes-agent
    "praisonai": ("praisonaiagents",),
    "litellm": ("litellm",),
    "langchain": ("langchain", "langchain_openai", "langgraph"),
    # LangGraph without langchain (its docs' `pip install langgraph langchain-openai`)
    "langgraph": ("langchain_core", "langchain_openai", "langgraph"),
    "mcp": ("mcp",),
    "pydantic-ai": ("pydantic_ai",),
    "openai-agents": ("agents",),
    "google-genai": ("google.genai",),
    "strands": ("strands",),
    "crewai": ("crewai",),
    "google-adk": ("google.adk",),
    "llamaindex": ("llama_index.core", "llama_index.llms.openai"),
}


def env_hosts(variable: str) -> frozenset[str] | None:
    """The host names in a space-separated setting of ``scripts/test-all.sh``
    (``OTELMW_TEST_HOSTS``, ``OTELMW_TEST_ONLY``); ``None`` when it is unset or empty."""
    names = frozenset(os.environ.get(variable, "").split())
    return names or None


def require_host(host: str) -> None:
    """The host's modules must import. Missing: a failure in the matrix environment
    that declares the host (a broken environment) and under CI, a skip elsewhere."""
    missing = [m for m in HOST_MODULES[host] if importlib.util.find_spec(m) is None]
    if not missing:
        return
    what = f"host {host!r} (module {', '.join(map(repr, missing))})"
    provided = env_hosts("OTELMW_TEST_HOSTS")
    if provided is not None and host in provided:
        env = os.environ.get("OTELMW_TEST_ENV", "?")
        pytest.fail(f"{what} is not available, but matrix environment {env!r} provides it",
                    pytrace=False)
    unavailable(what)


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


# Components the tests start themselves, built by scripts/test-all.sh outside the matrix
# environments (scripts/components/*.txt) and handed over by the interpreter's path.
REPO = Path(__file__).resolve().parents[2]
PHOENIX_PYTHON = "OTELMW_PHOENIX_PYTHON"


def phoenix_python() -> str:
    """The interpreter of a virtual environment with Arize Phoenix
    (scripts/components/phoenix.txt): ``OTELMW_PHOENIX_PYTHON`` as scripts/test-all.sh
    exports it, else the newest venv that script completed under
    ``.cache/venvs/phoenix-*`` (a plain ``pytest`` after one ``test-all.sh``).
    Missing: a failure under CI, a skip elsewhere."""
    named = os.environ.get(PHOENIX_PYTHON, "").strip()
    if named:
        if not os.access(named, os.X_OK):
            pytest.fail(f"{PHOENIX_PYTHON}={named} is not an executable", pytrace=False)
        return named
    built = sorted((d for d in (REPO / ".cache" / "venvs").glob("phoenix-*")
                    if (d / ".complete").exists() and (d / "bin" / "python").exists()),
                   key=lambda d: (d / ".complete").stat().st_mtime)
    if built:
        return str(built[-1] / "bin" / "python")
    unavailable(f"Arize Phoenix ({PHOENIX_PYTHON}, or a venv built by scripts/test-all.sh)")

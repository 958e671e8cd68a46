"""Names users and dashboards depend on survive moves inside the package.

The modules' homes before ``otelmw/core/`` (``otelmw.results``, ``otelmw.pipeline``, …)
are the same module objects as their new homes, and so is ``otelmw.telemetry.digests``
(now ``otelmw.telemetry.content.digests``); otelmw's own exceptions keep the
``error.type`` they were exported under, and still pickle (a worker pool sends them
between processes).
"""

from __future__ import annotations

import importlib
import pickle

import pytest

import otelmw
import otelmw.telemetry
from otelmw.core import calls, failures, pipeline
from otelmw.core.failures import error_type


@pytest.mark.parametrize(("old", "new"), sorted(otelmw.STABLE_MODULES.items()))
def test_an_old_module_path_is_the_new_module(old: str, new: str) -> None:
    assert importlib.import_module(f"otelmw.{old}") is importlib.import_module(
        f"otelmw.{new}")
    assert getattr(otelmw, old) is importlib.import_module(f"otelmw.{new}")


@pytest.mark.parametrize(("old", "new"), sorted(otelmw.telemetry.STABLE_MODULES.items()))
def test_an_old_telemetry_module_path_is_the_new_module(old: str, new: str) -> None:
    """A telemetry module the docs name for users (``otelmw.telemetry.digests``)
    stays importable under that path after it moved into a package."""
    assert importlib.import_module(f"otelmw.telemetry.{old}") is importlib.import_module(
        f"otelmw.telemetry.{new}")
    assert getattr(otelmw.telemetry, old) is importlib.import_module(f"otelmw.telemetry.{new}")


EXPORTED_ERROR_TYPES = [
    (pipeline.ToolArgumentsError("bad"), "otelmw.tool_calls.ToolArgumentsError"),
    (calls.NextCallReusedError("twice"), "otelmw.chain.NextCallReusedError"),
    (failures.AsyncMiddlewareInSyncCallError("async"),
     "otelmw.chain.AsyncMiddlewareInSyncCallError"),
]


@pytest.mark.parametrize(("exc", "exported"), EXPORTED_ERROR_TYPES,
                         ids=[e for _, e in EXPORTED_ERROR_TYPES])
def test_otelmw_exceptions_keep_their_exported_error_type(exc: Exception,
                                                          exported: str) -> None:
    assert error_type(exc) == exported
    # the class says where it is defined (debuggers, tracebacks, pickle by reference)
    assert type(exc).__module__ == f"otelmw.core.{type(exc).__module__.rsplit('.', 1)[-1]}"
    assert importlib.import_module(type(exc).__module__).__dict__[type(exc).__name__] is type(exc)
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc) and back.args == exc.args


def test_public_exceptions_are_the_package_level_names() -> None:
    assert otelmw.ToolArgumentsError is pipeline.ToolArgumentsError
    assert otelmw.NextCallReusedError is calls.NextCallReusedError

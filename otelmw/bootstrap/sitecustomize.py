"""Loaded by ``otelmw run`` through PYTHONPATH: instrument the program, then hand
over to any ``sitecustomize`` the environment already had."""

import importlib
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
try:
    from otelmw.autoinstrument import initialize

    initialize()
except Exception as exc:  # never break the user's program
    sys.stderr.write(f"otelmw: instrumentation disabled: {type(exc).__name__}: {exc}\n")
finally:
    # Chain to the sitecustomize that ours shadowed, if any.
    if _here in sys.path:
        sys.path.remove(_here)
    _mine = sys.modules.pop("sitecustomize", None)
    try:
        importlib.import_module("sitecustomize")
    except ImportError:
        if _mine is not None:
            sys.modules["sitecustomize"] = _mine

"""What an otelmw instrumentor's targets are right now, for the tests that check
``uninstrument()`` puts every original back (in the test's process or a driver's)."""

from __future__ import annotations

import importlib
from typing import Any


def current_targets(instrumentor: Any) -> dict[str, Any]:
    """Each of ``instrumentor.targets()`` (``module:dotted.name``) to the object its owner
    holds under that name now: the original, or otelmw's wrapper while instrumented."""
    out: dict[str, Any] = {}
    for module, name, _ in instrumentor.targets():
        owner: Any = importlib.import_module(module)
        *path, attr = name.split(".")
        for part in path:
            owner = getattr(owner, part)
        out[f"{module}:{name}"] = vars(owner)[attr]
    return out

"""Counting the cyclic garbage a piece of code leaves behind."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any


def cyclic_garbage(call: Callable[[], Any], calls: int, warmup: int = 5) -> int:
    """How many objects ``calls`` runs of ``call`` leave that only the cyclic
    collector can free (reference counting alone would free everything else).
    The collector is off while they run, so none of it is freed early; caches
    fill during ``warmup`` runs first."""
    for _ in range(warmup):
        call()
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for _ in range(calls):
            call()
        return gc.collect()
    finally:
        if enabled:
            gc.enable()

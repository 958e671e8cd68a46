"""``otelmw_pydantic_ai``: ``Agent.iter`` (``run``, ``run_sync``, ``run_stream`` and
``run_stream_events`` all enter it), which adds otelmw's capability to the run's
``capabilities``; the dispatch of each capability hook point
(``CombinedCapability.<hook point>``, observed: ``hooks.py``); and the ``pydantic-ai``
normalizer."""

from __future__ import annotations

from typing import Any

from .._base import OtelmwInstrumentor, Wrapper
from .hooks import HOOK_POINTS, observed
from .results import NORMALIZER, failed


def add_to_run(wrapped: Any, instance: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> Any:
    """``Agent.iter(...)`` with otelmw's capability appended to the run's own (once:
    a run that already has one keeps it)."""
    try:
        from .capability import OtelmwCapability  # imported with pydantic_ai, never before

        given = list(kwargs.get("capabilities") or ())
        if not any(isinstance(c, OtelmwCapability) for c in given):
            kwargs = {**kwargs, "capabilities": [*given, OtelmwCapability()]}
    except Exception as exc:
        failed("run", exc)
    return wrapped(*args, **kwargs)


class PydanticAIInstrumentor(OtelmwInstrumentor):
    """``otelmw_pydantic_ai`` (see the package docstring)."""

    root_module = "pydantic_ai"
    dependencies = ("pydantic-ai-slim >= 2.62.0, < 3",)

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        return [("pydantic_ai.agent", "Agent.iter", add_to_run),
                *(("pydantic_ai.capabilities.combined", f"CombinedCapability.{hook}",
                   observed(hook)) for hook in HOOK_POINTS)]

    def result_normalizer(self) -> Any:
        return NORMALIZER

"""pydantic-ai on the otelmw pipeline (``otelmw_pydantic_ai``).

Being written (issue 25): the entry point and the supported range are declared so the
host matrix installs the host; no function of it is wrapped yet.
"""

from __future__ import annotations

from .._base import OtelmwInstrumentor, Wrapper


class PydanticAIInstrumentor(OtelmwInstrumentor):
    """``otelmw_pydantic_ai`` (see the package docstring)."""

    root_module = "pydantic_ai"
    dependencies = ("pydantic-ai-slim >= 2.68.0, < 3",)
    entry_point = "otelmw_pydantic_ai"

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        return []


__all__ = ["PydanticAIInstrumentor"]

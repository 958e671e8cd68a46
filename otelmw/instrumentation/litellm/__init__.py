"""LiteLLM on the otelmw pipeline (``otelmw_litellm``).

Being written (issue 26): the entry point and the supported range are declared so the
host matrix installs the host; no function of it is wrapped yet.
"""

from __future__ import annotations

from .._base import OtelmwInstrumentor, Wrapper


class LiteLLMInstrumentor(OtelmwInstrumentor):
    """``otelmw_litellm`` (see the package docstring)."""

    root_module = "litellm"
    dependencies = ("litellm >= 1.110.2, < 2",)
    entry_point = "otelmw_litellm"

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        return []


__all__ = ["LiteLLMInstrumentor"]

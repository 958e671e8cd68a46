"""MCP (client and server) on the otelmw pipeline (``otelmw_mcp``).

Being written (issue 25): the entry point and the supported range are declared so the
host matrix installs the host; no function of it is wrapped yet.
"""

from __future__ import annotations

from .._base import OtelmwInstrumentor, Wrapper


class MCPInstrumentor(OtelmwInstrumentor):
    """``otelmw_mcp`` (see the package docstring)."""

    root_module = "mcp"
    dependencies = ("mcp >= 2.3.0, < 3",)
    entry_point = "otelmw_mcp"

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        return []


__all__ = ["MCPInstrumentor"]

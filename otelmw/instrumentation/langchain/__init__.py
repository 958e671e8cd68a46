"""LangChain and LangGraph on the otelmw pipeline (``otelmw_langchain``).

Being written (issue 26): the entry point and the supported range are declared so the
host matrix installs the host; no function of it is wrapped yet.
"""

from __future__ import annotations

from .._base import OtelmwInstrumentor, Wrapper


class LangChainInstrumentor(OtelmwInstrumentor):
    """``otelmw_langchain`` (see the package docstring)."""

    root_module = "langchain"
    dependencies = ("langchain >= 1.5.2, < 2",)
    entry_point = "otelmw_langchain"

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        return []


__all__ = ["LangChainInstrumentor"]

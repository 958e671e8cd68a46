"""MCP (Model Context Protocol), client and server, on the otelmw pipeline
(``otelmw_mcp``), for both major lines of the Python SDK (``mcp`` 1.x and 2.x).

* client (``client.py``): each ``tools/call`` is a tool call through the pipeline
  (``tool_request`` rewrites the arguments sent, ``tool_execution`` wraps the round
  trip, a ``pre_tool_call`` block answers an error ``CallToolResult`` without
  sending); inside a tool call already in flight it only enriches that call;
* server (``server.py``): each inbound ``tools/call`` is a tool call in the server
  process, parented on the client's trace context from ``params._meta``;
* results (``results.py``): the ``mcp`` normalizer of ``CallToolResult``;
* the contract once (``contract_word.py``): the client's signed word on the plugins it
  ran on a call, so a server under otelmw does not run them a second time.

docs/telemetry.md (``otelmw_mcp``) says what each side emits and which span of the
SDK's own is enriched rather than doubled.
"""

from __future__ import annotations

from typing import Any

from .._base import OtelmwInstrumentor, Wrapper
from .client import client_call_tool, session_call_tool
from .contract_word import use_key
from .results import MCPResultNormalizer
from .server import compose_server_middleware, tool_manager_call_tool


def _major() -> int:
    from importlib.metadata import version

    try:
        return int(version("mcp").split(".", 1)[0])
    except Exception:
        return 2


class MCPInstrumentor(OtelmwInstrumentor):
    """``otelmw_mcp`` (see the package docstring)."""

    root_module = "mcp"
    dependencies = ("mcp >= 1.30.0, < 3",)

    def targets(self) -> list[tuple[str, str, Wrapper]]:
        if _major() < 2:  # 1.x: no tracing, no context in _meta, no server middleware
            return [
                ("mcp.client.session", "ClientSession.call_tool", session_call_tool(True)),
                ("mcp.server.fastmcp.tools.tool_manager", "ToolManager.call_tool",
                 tool_manager_call_tool),
            ]
        return [
            ("mcp.client.session", "ClientSession.call_tool", session_call_tool(False)),
            ("mcp.client.client", "Client.call_tool", client_call_tool),
            ("mcp.server.runner", "ServerRunner._compose_server_middleware",
             compose_server_middleware),
        ]

    def _instrument(self, **kwargs: Any) -> None:
        """``contract_key``: the key of the client's signed word on the plugins it ran
        for a ``tools/call`` (``contract_word``; default ``OTELMW_MCP_CONTRACT_KEY``,
        else none: every side runs its plugins)."""
        key = kwargs.get("contract_key")
        if key is None:
            from ...config import settings as cfg

            key = cfg.load(strict=False)[cfg.MCP_CONTRACT_KEY]
        elif not isinstance(key, str) or len(key.strip()) < 16:
            raise ValueError("otelmw_mcp: contract_key must be a string of at least "
                             "16 characters (e.g. the output of `openssl rand -hex 32`)")
        use_key(key.strip() or None)
        super()._instrument(**kwargs)

    def _uninstrument(self, **kwargs: Any) -> None:
        use_key(None)
        super()._uninstrument(**kwargs)

    def result_normalizer(self) -> Any:
        return MCPResultNormalizer()


__all__ = ["MCPInstrumentor"]

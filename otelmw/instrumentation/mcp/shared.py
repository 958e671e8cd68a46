"""What the client and server sides share."""

from __future__ import annotations

from typing import Any

from ...core import TOOL_ERROR_PREFIX, instrumentation_failed

TOOLS_CALL = "tools/call"
HOST = "mcp"


def failed(where: str, exc: BaseException) -> None:
    instrumentation_failed(HOST, where, exc)


def transport_of(server: Any) -> str | None:
    """``network.transport`` of an ``mcp.Client``'s server: ``pipe`` for a stdio
    subprocess, ``tcp`` for a URL (streamable HTTP); ``None`` in process."""
    if server is None:
        return None
    if type(server).__name__ == "StdioServerParameters":
        return "pipe"
    if isinstance(server, str) and server.startswith(("http://", "https://")):
        return "tcp"
    return None


def error_result(text: Any, is_error: bool) -> Any:
    """A ``CallToolResult`` carrying ``text`` (a block message, a transformed result);
    the ``Tool Error: `` prefix otelmw shows a model is not part of it."""
    from mcp.types import CallToolResult

    message = text if isinstance(text, str) else str(text)
    if is_error and message.startswith(TOOL_ERROR_PREFIX):
        message = message[len(TOOL_ERROR_PREFIX):]
    # by the wire names: 1.x and 2.x name the fields differently in Python
    return CallToolResult.model_validate(
        {"content": [{"type": "text", "text": message}], "isError": is_error})

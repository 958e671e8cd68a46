"""The MCP server (stdio) of the Agents SDK MCP test: one tool, ``get_weather``."""

from mcp.server import MCPServer

server = MCPServer("weather")


@server.tool()
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city} (from MCP) CANARY-RESULT-7f3a"


if __name__ == "__main__":
    server.run("stdio")

"""An MCP server that knows nothing about otelmw (started by ``plain_program.py``)."""

try:
    from mcp.server.mcpserver import MCPServer  # 2.x
except ImportError:
    from mcp.server.fastmcp import FastMCP as MCPServer  # 1.x

server = MCPServer("plain-weather")


@server.tool()
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


if __name__ == "__main__":
    server.run()

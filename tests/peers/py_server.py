"""A minimal stdio MCP server on the official Python SDK (mcp 2.x MCPServer),
used by tests/peers/doctor.sh as the "Python mcp server" of the fixture."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("py-peer")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if __name__ == "__main__":
    server.run()

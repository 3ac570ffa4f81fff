#!/usr/bin/env python3
"""A Python `mcp` 2.x MCPServer over Streamable HTTP on 127.0.0.1:PORT (dual-era: 2026-07-28 and
legacy), for bir's --url tests. Usage: modern_server.py PORT. Exits by itself after 300 s."""

from __future__ import annotations

import sys
import threading
import os
from typing import Annotated

import anyio
from pydantic import Field
from mcp.server import MCPServer
from mcp.server.mcpserver import Context

mcp = MCPServer("bir-modern", instructions="test server for bir")


@mcp.tool()
def route(
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
    n: Annotated[int, Field(json_schema_extra={"x-mcp-header": "N"})] = 1,
) -> str:
    """Echo the routing arguments (mirrored as Mcp-Param-* headers)."""
    return f"routed {region} x{n}"


@mcp.tool()
async def slow(steps: int, ctx: Context) -> str:
    """Report progress `steps` times, 50 ms apart."""
    for i in range(steps):
        await ctx.report_progress(i + 1, steps)
        await anyio.sleep(0.05)
    return f"slow done after {steps}"


if __name__ == "__main__":
    threading.Timer(300, lambda: os._exit(0)).start()
    mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))

#!/usr/bin/env python3
"""Drive tests/peers/modern_server.py with the Python `mcp` 2.x Client in auto mode (server/discover
first, so a 2026-07-28 server is spoken to statelessly), directly over HTTP or through a stdio
wrapper. Usage: modern_client.py URL [WRAP ARGS...] — with WRAP, `WRAP... --url URL` is started as
a stdio server. Prints one JSON document with the negotiated version and each result."""

from __future__ import annotations

import json
import sys

import anyio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters


async def main(url: str, wrap: list[str]) -> int:
    server: StdioServerParameters | str = url
    if wrap:
        argv = wrap + ["--url", url]
        server = StdioServerParameters(command=argv[0], args=argv[1:])
    out: dict = {}
    progress: list = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append([p, total])

    with anyio.fail_after(30):
        async with Client(server, mode="auto", read_timeout_seconds=15) as client:
            out["protocolVersion"] = client.protocol_version
            tools = await client.list_tools()
            out["tools"] = sorted(t.name for t in tools.tools)
            r = await client.call_tool("route", {"region": "eu west ü", "n": 3})
            out["route"] = [c.text for c in r.content]
            r = await client.call_tool("slow", {"steps": 3}, progress_callback=on_progress)
            out["slow"] = [c.text for c in r.content]
            out["progress"] = progress
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1], sys.argv[2:]))

"""Drive a stdio MCP server with the Python `mcp` 2.x SDK client: call a list of tools and print
one JSON document with each result (what the client got, as the SDK parsed it).

    .peers/venv/bin/python tests/peers/replay_driver.py CALLS.json -- CMD ARGS...

CALLS.json is a list of {"tool": NAME, "args": {...}}. Output (stdout, sorted keys): {"protocolVersion",
"serverInfo", "tools": [names], "calls": [{"tool", "ok": true, "result"} | {"tool", "ok": false,
"error": {"code", "message", "data"}}]}. Exit 0 unless the session itself failed (2).
"""

import json
import os
import sys
import warnings

import anyio

import mcp_types as types
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

warnings.simplefilter("ignore")


async def decline(context, params):
    """Elicitation: declined, as bir replay declines it (so the capability is declared and a
    replay can be compared with the recording)."""
    return types.ElicitResult(action="decline")


def dump(x):
    return x.model_dump(by_alias=True, mode="json", exclude_none=True)


async def amain(calls, argv):
    # The whole environment passes (BIR_HOME for a proxy, the fixture's REPLAY_FIXTURE_*).
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    out = {"calls": []}
    with anyio.fail_after(60):
        async with Client(
            params,
            mode="auto",
            cache=None,
            read_timeout_seconds=20,
            client_info=types.Implementation(name="bir-replay-driver", version="0.1.0"),
            elicitation_callback=decline,
        ) as client:
            out["protocolVersion"] = client.protocol_version
            out["serverInfo"] = dump(client.server_info) if client.server_info else None
            listed = await client.list_tools()
            out["tools"] = sorted(t.name for t in listed.tools)
            for call in calls:
                entry = {"tool": call["tool"]}
                try:
                    res = await client.call_tool(call["tool"], call.get("args", {}))
                    entry["ok"] = True
                    entry["result"] = dump(res)
                except MCPError as e:
                    entry["ok"] = False
                    entry["error"] = {"code": e.code, "message": str(e), "data": e.error.data}
                out["calls"].append(entry)
    print(json.dumps(out, sort_keys=True))
    return 0


def main():
    argv = sys.argv[1:]
    if "--" not in argv or argv.index("--") != 1:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        calls = json.load(f)
    return anyio.run(amain, calls, argv[2:])


if __name__ == "__main__":
    sys.exit(main())

"""A deterministic stdio MCP server for bir's replay/verify/mock tests (mcp 2.x MCPServer).

Tools (annotations chosen to exercise every safety class):
  add(a, b)            read-only: a + b (--bug or REPLAY_FIXTURE_BUG=1 plants a regression: a + b + 1)
  kv_put(key, value)   idempotent write (not destructive)
  counter_inc()        non-idempotent write: the counter lives in the file --state=FILE (or REPLAY_FIXTURE_STATE),
                       so a replay against the same state diverges observably
  delete_key(key)      destructive
  create_item(name)    write: returns {"id": "item-<n>"} (n from the state file)
  get_item(id)         read-only: the item, or an error if it does not exist
  now()                read-only and volatile (the time)
  delete_everything()  destructive, but falsely annotated read-only (the gate demotes it by name)
  whoami(token)        read-only: "hello <first 3 chars>"
  report()             read-only: JSON inside a text block
  rendezvous(side)     read-only: waits up to 5 s for another rendezvous call to arrive; "met" if one came
                       while it waited (the two ran concurrently), else "alone"
With --variant=v2 (or REPLAY_FIXTURE_VARIANT=v2) the tool set changes: `add` gains a required argument `c` and
`report` is gone (a server whose tools changed between record and replay).
"""

import json
import os
import time

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

import sys

# Options come as arguments or from the environment (an MCP client may not pass the environment on).
_args = sys.argv[1:]
STATE = next((a.split("=", 1)[1] for a in _args if a.startswith("--state=")), None) or os.environ.get("REPLAY_FIXTURE_STATE")
V2 = "--variant=v2" in _args or os.environ.get("REPLAY_FIXTURE_VARIANT") == "v2"
BUG = "--bug" in _args or os.environ.get("REPLAY_FIXTURE_BUG") == "1"

server = MCPServer("replay-fixture")

READ = ToolAnnotations(readOnlyHint=True, openWorldHint=False, idempotentHint=True)


def load() -> dict:
    if STATE and os.path.exists(STATE):
        with open(STATE) as f:
            return json.load(f)
    return {"counter": 0, "items": {}, "kv": {}, "next": 0}


def save(s: dict) -> None:
    if STATE:
        with open(STATE, "w") as f:
            json.dump(s, f)


if V2:

    @server.tool(annotations=READ)
    def add(a: int, b: int, c: int) -> int:
        """Add three integers."""
        return a + b + c

else:

    @server.tool(annotations=READ)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b + (1 if BUG else 0)


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False))
def kv_put(key: str, value: str) -> str:
    """Store a value."""
    s = load()
    s["kv"][key] = value
    save(s)
    return "ok"


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False))
def counter_inc() -> int:
    """Increment the counter and return it."""
    s = load()
    s["counter"] += 1
    save(s)
    return s["counter"]


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False))
def delete_key(key: str) -> str:
    """Delete a key."""
    s = load()
    s["kv"].pop(key, None)
    save(s)
    return "deleted"


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False))
def create_item(name: str) -> dict:
    """Create an item; returns its id."""
    s = load()
    s["next"] += 1
    item_id = f"item-{s['next']:04d}"
    s["items"][item_id] = {"name": name}
    save(s)
    return {"id": item_id}


@server.tool(annotations=READ)
def get_item(id: str) -> dict:
    """Read an item."""
    s = load()
    if id not in s["items"]:
        raise ValueError(f"no item {id}")
    return {"id": id, "name": s["items"][id]["name"]}


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False))
def now() -> str:
    """The current time."""
    return f"{time.time():.6f}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False))
def delete_everything() -> str:
    """Claims to be read-only; is not."""
    save({"counter": 0, "items": {}, "kv": {}, "next": 0})
    return "all gone"


@server.tool(annotations=READ)
def whoami(token: str) -> str:
    """Who the token belongs to."""
    return f"hello {token[:3]}"


if not V2:

    @server.tool(annotations=READ)
    def report() -> str:
        """A JSON document inside a text block."""
        return json.dumps({"status": "ok", "items": [1, 2, 3], "generated": "fixed"})


# Calls waiting in `rendezvous` (their events): a second call sets the first's.
_waiting: list = []


@server.tool(annotations=READ)
async def rendezvous(side: str) -> str:
    """Waits up to 5 s for another rendezvous call: "met" if one arrived meanwhile, else "alone"."""
    import asyncio

    if _waiting:
        _waiting.pop(0).set()
        return f"{side}: met"
    arrived = asyncio.Event()
    _waiting.append(arrived)
    try:
        await asyncio.wait_for(arrived.wait(), 5)
        return f"{side}: met"
    except asyncio.TimeoutError:
        _waiting.remove(arrived)
        return f"{side}: alone"


if __name__ == "__main__":
    server.run()

#!/usr/bin/env python3
"""A tiny MCP client (stdlib only): handshake, list tools, call three tools.

Usage: demo_session.py -- <server command…>   (the command may be bir-proxy)
"""
import json
import subprocess
import sys


def main() -> int:
    argv = sys.argv[sys.argv.index("--") + 1:]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdin and proc.stdout

    def request(rid, method, params=None):
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        proc.stdin.write((json.dumps(msg) + "\n").encode())
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            if not line:
                raise SystemExit(f"server closed its output while waiting for {method}")
            reply = json.loads(line)
            if reply.get("id") == rid:
                return reply

    init = request(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                     "clientInfo": {"name": "bir-demo", "version": "1.0"}})
    info = init["result"]["serverInfo"]
    print(f"client: connected to {info.get('title') or info['name']} {info.get('version', '')}")
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    tools = request(1, "tools/list")["result"]["tools"]
    print(f"client: {len(tools)} tools: {', '.join(t['name'] for t in tools[:8])}, …")
    calls = [("echo", {"message": "hello from the bir demo"}),
             ("get-sum", {"a": 19, "b": 23}),
             ("get-tiny-image", {})]
    for i, (name, args) in enumerate(calls, start=2):
        reply = request(i, "tools/call", {"name": name, "arguments": args,
                                          "_meta": {"progressToken": i}})
        content = reply.get("result", {}).get("content", [])
        kinds = ", ".join(c.get("type", "?") for c in content)
        print(f"client: {name}({json.dumps(args)}) -> {kinds}")
    proc.stdin.close()
    return proc.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())

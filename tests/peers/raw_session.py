#!/usr/bin/env python3
"""Raw JSON-RPC stdio session against an MCP server, byte for byte (no SDK).

Usage:
    python3 tests/peers/raw_session.py [--shutdown sigint|eof] -- CMD ARGS...

CMD ARGS start the stdio server (normally server-everything). When BIR_WRAP is set it is split with
shlex and put in front of CMD, so the same hand-written lines go through the proxy.

The session imitates Claude Code 2.1.332 (as observed): a
`server/discover` probe first, then `initialize` (2025-11-25), `notifications/initialized`,
tools/list + prompts/list + resources/list pipelined in ONE write, a `tools/call` carrying
`_meta: {"claudecode/toolUseId", "progressToken": 4}`, answering the server's `roots/list`; then
odd-but-valid traffic: a 2^64+1 integer id, unusual number spellings, unknown fields, extra
whitespace, \\u escapes and raw UTF-8, a string id that looks like a number, a negative id, an
unknown method, an unknown notification, sampling and elicitation round trips answered with
the server's own id token, a CRLF-terminated ping and a plain ping. Shutdown like Claude Code:
SIGINT to the top process (default) or stdin EOF (--shutdown eof).

Stdout: one JSON document (sorted keys) with every line the server wrote, exactly as received
(decoded UTF-8; a trailing \\r is kept): responses keyed by their raw id token, notifications and
server requests as sorted lists (their interleaving is not deterministic), plus the shutdown
outcome. Nothing is normalised: the document of a direct run must equal that of a proxied run.
Exit 1 if an expected response never came or the server wrote something that is not JSON.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from typing import Any

PHASE_TIMEOUT = 5.0
CC_CLIENT_INFO = (
    '{"name":"claude-code","title":"Claude Code","version":"2.1.332",'
    '"description":"Anthropic\'s agentic coding tool","websiteUrl":"https://claude.com/claude-code"}'
)

# ------------------------------------------------------------------------------------------- lines


def _classify(raw: str) -> tuple[str, str | None, dict[str, Any] | None]:
    """Return (kind, id_key, parsed): kind in response|request|notification|invalid."""
    try:
        msg = json.loads(raw, parse_int=lambda s: ("int", s), parse_float=lambda s: ("float", s))
    except ValueError:
        return "invalid", None, None
    if not isinstance(msg, dict):
        return "invalid", None, None
    rid = msg.get("id", "<absent>")
    if isinstance(rid, tuple):
        key = f"{rid[0]}:{rid[1]}"
    elif isinstance(rid, str):
        key = "str:" + rid if rid != "<absent>" else None
    elif rid is None:
        key = "null"
    else:
        key = "other:" + json.dumps(rid)
    if "method" in msg:
        return ("request" if key is not None else "notification"), key, msg
    if "result" in msg or "error" in msg:
        return "response", key, msg
    return "invalid", key, msg


_ID_TOKEN = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*)')


class Session:
    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # own process group, so cleanup reaches a proxy's child too
        )
        self.pgid = self.proc.pid
        self.lock = threading.Condition()
        self.lines: list[bytes] = []
        self.eof = False
        self.stderr_tail: list[bytes] = []
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        self.sent: list[str] = []

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        buf = b""
        while True:
            chunk = self.proc.stdout.read1(65536)
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                with self.lock:
                    self.lines.append(line)
                    self.lock.notify_all()
        with self.lock:
            if buf:
                self.lines.append(buf + b"<no-newline-at-eof>")
            self.eof = True
            self.lock.notify_all()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_tail = (self.stderr_tail + [line])[-20:]

    def write(self, *lines: str, crlf: bool = False) -> None:
        """Write the lines in ONE write() call (so a proxy sees several messages in one chunk)."""
        end = "\r\n" if crlf else "\n"
        data = "".join(line + end for line in lines).encode("utf-8")
        self.sent.extend(line + ("<CRLF>" if crlf else "") for line in lines)
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def parsed(self) -> list[tuple[str, str | None, dict[str, Any] | None, bytes]]:
        with self.lock:
            lines = list(self.lines)
        out = []
        for line in lines:
            text = line.decode("utf-8", "replace")
            kind, key, msg = _classify(text.rstrip("\r"))
            out.append((kind, key, msg, line))
        return out

    def wait(self, pred, what: str, timeout: float = PHASE_TIMEOUT) -> bool:
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                if pred():
                    return True
                if self.eof:
                    return pred()
                left = deadline - time.monotonic()
                if left <= 0:
                    print(f"raw_session: timed out waiting for {what}", file=sys.stderr)
                    return False
                self.lock.wait(left)

    # helpers over the received lines (callers hold no lock; parsed() copies)
    def responses(self) -> dict[str, bytes]:
        return {key: line for kind, key, _, line in self.parsed() if kind == "response" and key is not None}

    def requests(self, method: str) -> list[tuple[dict[str, Any], bytes]]:
        return [(msg, line) for kind, _, msg, line in self.parsed() if kind == "request" and msg and msg.get("method") == method]

    def wait_response(self, key: str, timeout: float = PHASE_TIMEOUT) -> bool:
        return self.wait(lambda: key in self._resp_keys(), f"response {key}", timeout)

    def _resp_keys(self) -> set[str]:
        # called with the lock held (from wait): parse without re-locking
        keys = set()
        for line in self.lines:
            kind, key, _ = _classify(line.decode("utf-8", "replace").rstrip("\r"))
            if kind == "response" and key is not None:
                keys.add(key)
        return keys

    def _count(self, kind_wanted: str, method: str | None = None) -> int:
        n = 0
        for line in self.lines:
            kind, _, msg = _classify(line.decode("utf-8", "replace").rstrip("\r"))
            if kind == kind_wanted and (method is None or (msg and msg.get("method") == method)):
                n += 1
        return n


def raw_id(line: bytes) -> str:
    m = _ID_TOKEN.search(line)
    if not m:
        raise ValueError(f"no id in {line!r}")
    return m.group(1).decode()


def meta(extra: str = "") -> str:
    return (
        '{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
        f'"io.modelcontextprotocol/clientInfo":{CC_CLIENT_INFO},'
        '"io.modelcontextprotocol/clientCapabilities":{"roots":{},"elicitation":{"form":{},"url":{}}}' + extra + "}"
    )


# ------------------------------------------------------------------------------------------- script


def run(argv: list[str], shutdown: str) -> dict[str, Any]:
    s = Session(argv)
    missing: list[str] = []

    def expect(key: str, timeout: float = PHASE_TIMEOUT) -> None:
        if not s.wait_response(key, timeout):
            missing.append(key)

    t0 = time.monotonic()
    # 1. server/discover probe exactly as Claude Code sends it
    s.write('{"jsonrpc":"2.0","id":"server-discover-probe-1","method":"server/discover","params":{"_meta":' + meta() + "}}")
    expect("str:server-discover-probe-1")

    # 2. initialize (legacy handshake) as Claude Code does after the probe fails; plus sampling for step 8
    s.write(
        '{"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":'
        '{"roots":{"listChanged":true},"elicitation":{"form":{},"url":{}},"sampling":{}},'
        f'"clientInfo":{CC_CLIENT_INFO}}},"jsonrpc":"2.0","id":0}}'
    )
    expect("int:0")

    # 3. initialized + three listings pipelined in ONE write, without waiting
    s.write(
        '{"method":"notifications/initialized","jsonrpc":"2.0"}',
        '{"method":"tools/list","jsonrpc":"2.0","id":1}',
        '{"method":"prompts/list","jsonrpc":"2.0","id":2}',
        '{"method":"resources/list","jsonrpc":"2.0","id":3}',
    )
    for k in ("int:1", "int:2", "int:3"):
        expect(k)

    # 4. the server asks roots/list ~350 ms after initialized: answer it with its own id token
    if s.wait(lambda: s._count("request", "roots/list") >= 1, "roots/list from the server"):
        _, line = s.requests("roots/list")[0]
        s.write(
            '{"jsonrpc":"2.0","id":' + raw_id(line) + ',"result":{"roots":[{"uri":"file:///tmp/bir-raw-root","name":"bir raw root"}]}}'
        )
        s.wait(lambda: s._count("notification", "notifications/message") >= 1, "the 'Roots updated' log")
    else:
        missing.append("request:roots/list")

    # 5. tools/call with Claude Code's _meta (progress token 4 -> progress notifications carry 4)
    s.write(
        '{"method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":0.4,"steps":2},'
        '"_meta":{"claudecode/toolUseId":"toolu_x","progressToken":4}},"jsonrpc":"2.0","id":4}'
    )
    expect("int:4")

    # 6. odd but valid lines, in one write. server-everything (TS SDK 1.x) silently drops the first
    #    (id beyond 2^53: not a safe integer) and the ping with an unknown top-level field (strict
    #    schema): a transparent proxy must not answer them either. The final ping 13 is a sentinel:
    #    the server parses lines in order, so once 13 is answered no earlier line can still be.
    s.write(
        '{"jsonrpc":"2.0","id":18446744073709551617,"method":"ping"}',
        # largest safe integer id, number spellings, unknown fields inside params
        '{"jsonrpc":"2.0","id":9007199254740991,"method":"tools/call","params":{"name":"get-sum",'
        '"arguments":{"a":1.50E+1,"b":-0.0e0},"x-unknown-param":{"nested":[1,2.0,3e0,null,true]}}}',
        '{"jsonrpc":"2.0","id":12,"method":"ping","x-unknown-top":"keep me"}',
        '{"jsonrpc":"2.0","id":1E2,"method":"ping"}',
        # extra whitespace everywhere, key order shuffled, \\u escapes (incl. a surrogate pair) and raw UTF-8
        '  { "params" : { "arguments" : { "message" : "caf\\u00e9 \\ud83d\\ude00 na\u00efve \u4e16\u754c \\"q\\" \\\\ \\/" } ,'
        ' "name" : "echo" } , "id" : 5 , "method" : "tools/call" , "jsonrpc" : "2.0" }  ',
        '{"jsonrpc":"2.0","id":"7","method":"tools/call","params":{"name":"get-sum","arguments":{"a":0.1,"b":0.2}}}',
        '{"jsonrpc":"2.0","id":-1,"method":"ping"}',
        '{"jsonrpc":"2.0","id":"x-unknown-method","method":"bir/no-such-method","params":{}}',
        '{"jsonrpc":"2.0","method":"notifications/bir/unknown","params":{"n":1}}',
        '{"jsonrpc":"2.0","id":6,"method":"resources/read","params":{"uri":"demo://resource/static/document/instructions.md"}}',
        '{"jsonrpc":"2.0","id":13,"method":"ping"}',
    )
    expect("int:13")
    for k in ("int:9007199254740991", "int:100", "int:5", "str:7", "int:-1", "str:x-unknown-method", "int:6"):
        expect(k, 1.0)

    # 7. sampling round trip: the server's request id is echoed back with its exact token
    s.write(
        '{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"trigger-sampling-request",'
        '"arguments":{"prompt":"raw \\u2603","maxTokens":2.0e1}}}'
    )
    if s.wait(lambda: s._count("request", "sampling/createMessage") >= 1, "sampling/createMessage"):
        _, line = s.requests("sampling/createMessage")[0]
        s.write(
            '{"jsonrpc":"2.0","id":' + raw_id(line) + ',"result":{"model":"raw-canned","stopReason":"endTurn",'
            '"role":"assistant","content":{"type":"text","text":"canned \\u00e9"},"x-extra":1.0}}'
        )
    else:
        missing.append("request:sampling/createMessage")
    expect("int:8")

    # 8. elicitation round trip (form mode)
    s.write('{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"trigger-elicitation-request","arguments":{}}}')
    if s.wait(lambda: s._count("request", "elicitation/create") >= 1, "elicitation/create"):
        _, line = s.requests("elicitation/create")[0]
        s.write(
            '{"jsonrpc":"2.0","id":' + raw_id(line) + ',"result":{"action":"accept","content":'
            '{"name":"Raw Session","check":false,"integer":1E1,"number":-2.50}}}'
        )
    else:
        missing.append("request:elicitation/create")
    expect("int:9")

    # 9. pings: one CRLF-terminated, one plain
    s.write('{"jsonrpc":"2.0","id":10,"method":"ping"}', crlf=True)
    s.write('{"jsonrpc":"2.0","id":11,"method":"ping"}')
    expect("int:10")
    expect("int:11")
    elapsed_session = time.monotonic() - t0

    # 10. shutdown
    shut = shutdown_proc(s, shutdown)

    parsed = s.parsed()
    doc: dict[str, Any] = {
        "driver": "raw_session",
        "sent": s.sent,
        "responses": {},
        "notifications": [],
        "serverRequests": [],
        "invalidLines": [],
        "missing": missing,
        "shutdown": shut,
    }
    for kind, key, _, line in parsed:
        text = line.decode("utf-8", "replace")
        if kind == "response":
            if key in doc["responses"]:
                doc["responses"][key + "#dup"] = text
            else:
                doc["responses"][key] = text
        elif kind == "notification":
            doc["notifications"].append(text)
        elif kind == "request":
            doc["serverRequests"].append(text)
        else:
            doc["invalidLines"].append(text)
    sent_ids = []
    for line in s.sent:
        kind, key, _ = _classify(line.removesuffix("<CRLF>").strip())
        if kind == "request" and key is not None:
            sent_ids.append(key)
    # requests the server never answered (a JS server re-spells some ids, e.g. 1E2 -> 100)
    doc["unanswered"] = sorted(k for k in sent_ids if k not in doc["responses"] and k != "float:1E2")
    doc["notifications"].sort()
    doc["serverRequests"].sort()
    print(
        f"raw_session: {len(parsed)} lines received, session {elapsed_session:.2f}s, "
        f"shutdown {shut}",
        file=sys.stderr,
    )
    if missing or doc["invalidLines"]:
        tail = b"".join(s.stderr_tail).decode("utf-8", "replace")
        print(f"raw_session: server stderr tail:\n{tail}", file=sys.stderr)
    return doc


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def shutdown_proc(s: Session, how: str) -> dict[str, Any]:
    """Claude Code's way (SIGINT to the top process only) or stdin EOF; then make sure all is gone."""
    if how == "sigint":
        s.proc.send_signal(signal.SIGINT)
    else:
        assert s.proc.stdin is not None
        s.proc.stdin.close()
    try:
        rc: int | None = s.proc.wait(timeout=3.0)
        exited = True
    except subprocess.TimeoutExpired:
        rc, exited = None, False
    # after the top process is gone, its children (same process group) should follow soon
    deadline = time.monotonic() + 2.0
    while _group_alive(s.pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    leftovers = _group_alive(s.pgid)
    # cleanup whatever is left, always
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _group_alive(s.pgid):
            break
        try:
            os.killpg(s.pgid, sig)
        except ProcessLookupError:
            break
        time.sleep(0.3)
    try:
        s.proc.wait(timeout=2.0)
    except subprocess.TimeoutExpired:
        pass
    s.wait(lambda: s.eof, "stdout EOF", 2.0)
    return {"how": how, "exitedWithin3s": exited, "returncode": rc, "processGroupLeftoversAfter2s": leftovers}


def main() -> int:
    argv = sys.argv[1:]
    if "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    i = argv.index("--")
    opts, server_cmd = argv[:i], argv[i + 1 :]
    shutdown = "sigint"
    if opts[:1] == ["--shutdown"] and len(opts) == 2 and opts[1] in ("sigint", "eof"):
        shutdown = opts[1]
    elif opts:
        print(f"raw_session: unknown options {opts}", file=sys.stderr)
        return 2
    if not server_cmd:
        print("raw_session: no server command after --", file=sys.stderr)
        return 2
    wrap = shlex.split(os.environ.get("BIR_WRAP", ""))
    doc = run(wrap + server_cmd, shutdown)
    print(json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=False))
    return 1 if (doc["missing"] or doc["invalidLines"]) else 0


if __name__ == "__main__":
    sys.exit(main())

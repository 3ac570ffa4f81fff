#!/usr/bin/env python3
"""Copy one offline host session's logs into tests/fixtures/hosts/<host>/.

    capture.py HOST OUT DEST

Copies logs/{hooks,mcp,requests}.jsonl, stdout.txt and the host's transcripts
(Codex: $CODEX_HOME/sessions/**/rollout-*.jsonl; Gemini:
~/.gemini/tmp/*/chats/**.jsonl) as transcript.jsonl and
subagent-transcript-N.jsonl with every string longer than 400 characters
cut to its first 300 plus "[... N chars]" (system prompts), a request's
tools list as tool names, the
session's directory written as /tmp/hosts-e2e and this repository as /repo,
so the files name no machine. Keys, ids, order and short values are kept.
"""
import glob
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


def cut(v, subst):
    if isinstance(v, str):
        v = subst(v)
        return v[:300] + f"[... {len(v)} chars]" if len(v) > 400 else v
    if isinstance(v, list):
        return [cut(x, subst) for x in v]
    if isinstance(v, dict):
        return {subst(k): cut(x, subst) for k, x in v.items()}
    return v


def main():
    host, out, dest = sys.argv[1], os.path.realpath(sys.argv[2]), sys.argv[3]
    os.makedirs(dest, exist_ok=True)

    def subst(s: str) -> str:
        s = s.replace(out, "/tmp/hosts-e2e").replace(REPO, "/repo")
        return re.sub(r"/work/main/\.peers|/[^\s\"']*/\.peers", "/repo/.peers", s)

    def tool_names(tools):
        """A request's tools list as names only (namespaces as name: [members])."""
        out = []
        for t in tools or []:
            if not isinstance(t, dict):
                continue
            if t.get("functionDeclarations"):
                out.extend(d.get("name") for d in t["functionDeclarations"])
            elif t.get("tools"):
                out.append({t.get("name"): [x.get("name") for x in t["tools"]]})
            else:
                out.append(t.get("name") or t.get("type"))
        return out

    def slim(rec, name):
        body = rec.get("body") if name == "requests.jsonl" and isinstance(rec, dict) else None
        if isinstance(body, dict) and "tools" in body:
            body["tools"] = tool_names(body["tools"])
        return rec

    def jsonl(src, name):
        with open(src, encoding="utf-8", errors="replace") as f, \
                open(os.path.join(dest, name), "w", encoding="utf-8") as g:
            for line in f:
                if not line.strip():
                    continue
                try:
                    g.write(json.dumps(cut(slim(json.loads(line), name), subst), ensure_ascii=False) + "\n")
                except ValueError:
                    g.write(subst(line)[:400].rstrip("\n") + "\n")

    for name in ("hooks.jsonl", "mcp.jsonl", "requests.jsonl"):
        p = os.path.join(out, "logs", name)
        if os.path.exists(p):
            jsonl(p, name)
    p = os.path.join(out, "logs", "stdout.txt")
    if os.path.exists(p):
        with open(p, encoding="utf-8", errors="replace") as f, \
                open(os.path.join(dest, "stdout.txt"), "w", encoding="utf-8") as g:
            g.write(subst(f.read()))
    if host == "codex":
        found = sorted(glob.glob(os.path.join(out, "codex", "sessions", "**", "rollout-*.jsonl"), recursive=True))
    else:
        found = sorted(glob.glob(os.path.join(out, "home", ".gemini", "tmp", "*", "chats", "**", "*.json*"), recursive=True))
    subagents = 0
    for t in found:
        if is_subagent(host, t):
            subagents += 1
            jsonl(t, f"subagent-transcript-{subagents}.jsonl")
        else:
            jsonl(t, "transcript.jsonl")


def is_subagent(host: str, path: str) -> bool:
    """A subagent's transcript: Codex's rollout whose session_meta says
    thread_source "subagent"; Gemini's file in a chats/<session-id>/ folder."""
    if host == "gemini":
        return os.path.basename(os.path.dirname(path)) != "chats"
    with open(path, encoding="utf-8", errors="replace") as f:
        try:
            first = json.loads(f.readline())
        except ValueError:
            return False
    return (first.get("payload") or {}).get("thread_source") == "subagent"

if __name__ == "__main__":
    main()

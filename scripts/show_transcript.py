#!/usr/bin/env python3
"""Print a bir-proxy --transcript file as a readable timeline."""
import json
import sys

ARROWS = {"host_to_server": "host → server", "server_to_host": "server → host",
          "proxy_to_host": "bir → host", "proxy_to_server": "bir → server"}


def short(value, width=70):
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    text = "".join(c if c.isprintable() else "·" for c in text)
    return text if len(text) <= width else text[: width - 1] + "…"


def main(path):
    messages, steps = 0, []
    print(f"what bir saw ({path}):")
    for line in open(path, encoding="utf-8", errors="replace"):
        rec = json.loads(line)
        if rec["type"] == "message":
            messages += 1
            msg = rec.get("message", rec.get("raw"))
            what = msg.get("method") if isinstance(msg, dict) else None
            if what is None and isinstance(msg, dict):
                what = "error" if "error" in msg else "result"
            ident = f" #{msg['id']}" if isinstance(msg, dict) and "id" in msg else ""
            print(f"  {rec['at'][11:23]}  {ARROWS.get(rec['dir'], rec['dir']):14} {what}{ident}")
        elif rec["type"] == "step":
            steps.append(rec)
        elif rec["type"] == "event":
            print(f"  {rec['at'][11:23]}  {'(event)':14} {rec['event']}")
    print(f"\n{len(steps)} tool calls recorded ({messages} messages relayed):")
    for i, s in enumerate(steps, 1):
        status = "error" if s["isError"] else "ok"
        result = (s.get("result") or {}).get("content") or []
        preview = ", ".join(
            short(c.get("text", ""), 40) if c.get("type") == "text" else f"[{c.get('type')}]"
            for c in result)
        print(f"  {i}. {s['qualifiedName']:32} {s['durationMs']:7.1f} ms  {status:5}  "
              f"args {short(s.get('arguments'), 40)}")
        print(f"     → {preview}")


if __name__ == "__main__":
    main(sys.argv[1])

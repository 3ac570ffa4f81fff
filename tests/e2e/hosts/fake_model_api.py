#!/usr/bin/env python3
"""Scripted fakes of the Codex CLI's and the Gemini CLI's model APIs, for
driving the real CLIs offline. Stdlib only, 127.0.0.1 only.

    fake_model_api.py --api codex|gemini --script S.json --log requests.jsonl \
        [--port 0] [--port-file FILE]

codex:  POST .../responses            -> Responses-API SSE (response.created,
        response.output_item.added/done, response.output_text.delta,
        response.function_call_arguments.delta/done, response.completed)
gemini: POST .../models/M:streamGenerateContent?alt=sse -> SSE of
        GenerateContentResponse chunks; POST ...:generateContent -> JSON
        (side requests asking for JSON by responseJsonSchema get an object
        filled from the schema); POST ...:countTokens -> {"totalTokens": N}

Script (both APIs):
    {
      "turns": [                          # the main conversation, in order
        {"text": "First the shell.",      # the model's words (optional)
         "call": {"name": "shell", "arguments": {...}},   # optional tool call
         "usage": {"input": 1200, "output": 40, "cached": 0}},
        {"text": "The answer."}
      ],
      "conversations": [                  # tried first: other conversations
        {"name": "subagent", "match": {"first_user_contains": "SUBTASK"},
         "turns": [...], "final_text": "..."}
      ],
      "final_text": "done",               # a conversation past its last turn
      "side_reply": "ok"                  # requests offering no tools
    }
A Codex call may carry "namespace" (an MCP server's tool block, as the
request's tools list names it); a Gemini call's "arguments" are its "args".
A Codex call with "custom": true is a freeform tool call (`custom_tool_call`,
its text in "input"), as Codex's code-mode `exec` takes.
A string argument "@@PREV:key@@" becomes the value of `key` in the previous
tool result (parsed as JSON), e.g. the id a spawn_agent call returned.
Which turn answers a request is read from the REQUEST (the number of tool
results it already carries), never from a counter, so retries and side
requests cannot shift the script. Every request is logged with its body
(secret headers dropped) and the turn chosen.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET_HEADERS = {"authorization", "x-goog-api-key", "cookie", "proxy-authorization", "openai-api-key"}
_seq = itertools.count(1)
_lock = threading.Lock()


class State:
    api = ""
    prev_output = None
    script: dict = {}
    log_path = ""


def log(rec: dict) -> None:
    with _lock, open(State.log_path, "a", encoding="utf-8") as f:
        f.write(json.dumps(rec, ensure_ascii=False) + "\n")


# ------------------------------------------------------------------ choosing a turn
def pick(texts_first: str, texts_all: list[str], rounds: int, has_tools: bool):
    """(conversation name, turn or None, final text) for one request."""
    for conv in State.script.get("conversations", []):
        m = conv.get("match", {})
        if "first_user_contains" in m and m["first_user_contains"] not in texts_first:
            continue
        if "any_user_contains" in m and not any(m["any_user_contains"] in t for t in texts_all):
            continue
        turns = conv.get("turns", [])
        final = conv.get("final_text", State.script.get("final_text", "done"))
        return conv.get("name", "conversation"), (turns[rounds] if rounds < len(turns) else None), final
    if not has_tools:
        return "side", None, State.script.get("side_reply", "ok")
    turns = State.script.get("turns", [])
    return "main", (turns[rounds] if rounds < len(turns) else None), State.script.get("final_text", "done")


def fill_prev(value):
    """`value` with "@@PREV:key@@" strings replaced from the previous tool result."""
    if isinstance(value, dict):
        return {k: fill_prev(v) for k, v in value.items()}
    if isinstance(value, list):
        return [fill_prev(v) for v in value]
    if isinstance(value, str) and value.startswith("@@PREV:") and value.endswith("@@"):
        key = value[len("@@PREV:"):-2]
        prev = State.prev_output
        if isinstance(prev, list):  # content items
            prev = " ".join(p.get("text", "") for p in prev if isinstance(p, dict))
        try:
            obj = json.loads(prev) if isinstance(prev, str) else prev
        except ValueError:
            return value
        if isinstance(obj, dict) and key in obj:
            return obj[key]
    return value


def usage_of(turn) -> dict:
    u = (turn or {}).get("usage") or {}
    return {"input": int(u.get("input", 1000)), "output": int(u.get("output", 20)),
            "cached": int(u.get("cached", 0))}


# ------------------------------------------------------------------ Codex: Responses API
def codex_texts(body: dict) -> tuple[str, list[str], int]:
    """(first user text, every user text, tool results after the last user text)."""
    users, rounds = [], 0
    State.prev_output = None
    for item in body.get("input") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type", "message") == "message" and item.get("role") == "user":
            txt = " ".join(c.get("text", "") for c in item.get("content") or [] if isinstance(c, dict))
            # Codex sends its environment context and instructions as user
            # messages too; those are not prompts and do not reset the rounds.
            if not txt.lstrip().startswith("<"):
                users.append(txt)
                rounds = 0
        elif item.get("type") in ("function_call_output", "custom_tool_call_output"):
            rounds += 1
            State.prev_output = item.get("output")
    return (users[0] if users else ""), users, rounds


def codex_events(turn, final: str, seq: int):
    rid = f"resp_fake_{seq}"
    created = {"id": rid, "object": "response", "status": "in_progress", "output": []}
    yield "response.created", {"type": "response.created", "response": created}
    out = []
    idx = 0
    text = final if turn is None else turn.get("text")
    if text:
        mid = f"msg_fake_{seq}"
        item = {"type": "message", "id": mid, "role": "assistant", "status": "in_progress", "content": []}
        yield "response.output_item.added", {"type": "response.output_item.added", "output_index": idx, "item": item}
        for piece in split_words(text):
            yield "response.output_text.delta", {"type": "response.output_text.delta", "item_id": mid,
                                                 "output_index": idx, "content_index": 0, "delta": piece}
        done = dict(item, status="completed", content=[{"type": "output_text", "text": text, "annotations": []}])
        yield "response.output_item.done", {"type": "response.output_item.done", "output_index": idx, "item": done}
        out.append(done)
        idx += 1
    call = (turn or {}).get("call")
    if call and call.get("custom"):
        # A freeform tool (Codex's code-mode `exec`): the input is text.
        cid = f"call_fake_{seq}"
        item = {"type": "custom_tool_call", "id": f"ctc_fake_{seq}", "call_id": cid, "name": call["name"],
                "input": "", "status": "in_progress"}
        if call.get("namespace"):
            item["namespace"] = call["namespace"]
        yield "response.output_item.added", {"type": "response.output_item.added", "output_index": idx, "item": item}
        done = dict(item, input=call.get("input", ""), status="completed")
        yield "response.output_item.done", {"type": "response.output_item.done", "output_index": idx, "item": done}
        out.append(done)
    elif call:
        cid = f"call_fake_{seq}"
        args = json.dumps(fill_prev(call.get("arguments", {})), ensure_ascii=False)
        item = {"type": "function_call", "id": f"fc_fake_{seq}", "call_id": cid, "name": call["name"],
                "arguments": "", "status": "in_progress"}
        if call.get("namespace"):
            item["namespace"] = call["namespace"]
        yield "response.output_item.added", {"type": "response.output_item.added", "output_index": idx, "item": item}
        yield "response.function_call_arguments.delta", {"type": "response.function_call_arguments.delta",
                                                         "item_id": item["id"], "output_index": idx, "delta": args}
        yield "response.function_call_arguments.done", {"type": "response.function_call_arguments.done",
                                                        "item_id": item["id"], "output_index": idx, "arguments": args}
        done = dict(item, arguments=args, status="completed")
        yield "response.output_item.done", {"type": "response.output_item.done", "output_index": idx, "item": done}
        out.append(done)
    u = usage_of(turn)
    usage = {"input_tokens": u["input"], "input_tokens_details": {"cached_tokens": u["cached"]},
             "output_tokens": u["output"], "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": u["input"] + u["output"]}
    completed = dict(created, status="completed", output=out, usage=usage)
    yield "response.completed", {"type": "response.completed", "response": completed}


# ------------------------------------------------------------------ Gemini API
def gemini_texts(body: dict) -> tuple[str, list[str], int]:
    users, rounds = [], 0
    for c in body.get("contents") or []:
        if not isinstance(c, dict) or c.get("role") != "user":
            continue
        parts = c.get("parts") or []
        if any(isinstance(p, dict) and "functionResponse" in p for p in parts):
            rounds += 1
            continue
        txt = " ".join(p.get("text", "") for p in parts if isinstance(p, dict))
        if txt.strip():
            users.append(txt)
            rounds = 0
    return (users[0] if users else ""), users, rounds


def gemini_has_tools(body: dict) -> bool:
    return any((t or {}).get("functionDeclarations") for t in body.get("tools") or [])


def gemini_chunks(turn, final: str, model: str):
    u = usage_of(turn)
    text = final if turn is None else turn.get("text")
    chunks = []
    if text:
        for piece in split_words(text):
            chunks.append([{"text": piece}])
    call = (turn or {}).get("call")
    if call:
        chunks.append([{"functionCall": {"name": call["name"], "args": call.get("arguments", {})}}])
    if not chunks:
        chunks.append([{"text": ""}])
    for i, parts in enumerate(chunks):
        last = i == len(chunks) - 1
        cand = {"content": {"role": "model", "parts": parts}, "index": 0}
        if last:
            cand["finishReason"] = "STOP"
        resp = {"candidates": [cand], "modelVersion": model, "responseId": f"fake-{os.getpid()}"}
        if last:
            resp["usageMetadata"] = {"promptTokenCount": u["input"], "candidatesTokenCount": u["output"],
                                     "cachedContentTokenCount": u["cached"],
                                     "totalTokenCount": u["input"] + u["output"]}
        yield resp


def fill_schema(schema):
    """A value of `schema` (JSON Schema) for side requests that ask for JSON."""
    if not isinstance(schema, dict):
        return "ok"
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "string")
    if "enum" in schema:
        vals = schema["enum"]
        for pref in ("user", "flash"):
            if pref in vals:
                return pref
        return vals[0]
    if t == "object" or "properties" in schema:
        return {k: fill_schema(v) for k, v in (schema.get("properties") or {}).items()}
    if t == "array":
        return []
    if t in ("number", "integer"):
        return 0
    if t == "boolean":
        return False
    return "ok"


def split_words(text: str) -> list[str]:
    """Text in two or three streamed pieces (the CLIs must join deltas)."""
    words = text.split(" ")
    if len(words) < 3:
        return [text]
    cut = len(words) // 2
    return [" ".join(words[:cut]) + " ", " ".join(words[cut:])]


# ------------------------------------------------------------------ HTTP
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet
        pass

    def _body(self):
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b""
        if self.headers.get("content-encoding") == "zstd" or raw[:4] == b"\x28\xb5\x2f\xfd":
            return raw, None
        try:
            return raw, json.loads(raw or b"{}")
        except ValueError:
            return raw, None

    def _json(self, code: int, obj) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        for name, data in events:
            line = (f"event: {name}\n" if name else "") + "data: " + json.dumps(data, ensure_ascii=False) + "\n\n"
            self.wfile.write(line.encode())
            self.wfile.flush()
        self.close_connection = True

    def do_GET(self):
        seq = next(_seq)
        log({"seq": seq, "t": time.time(), "method": "GET", "path": self.path})
        if self.path.rstrip("/").endswith("/models"):
            self._json(200, {"data": [], "models": []})
        else:
            self._json(404, {"error": {"message": "not faked", "code": 404}})

    def do_POST(self):
        seq = next(_seq)
        raw, body = self._body()
        headers = {k.lower(): v for k, v in self.headers.items() if k.lower() not in SECRET_HEADERS}
        rec = {"seq": seq, "t": time.time(), "method": "POST", "path": self.path, "headers": headers,
               "body": body if body is not None else raw.decode("utf-8", "replace")[:2000]}
        try:
            if State.api == "codex" and self.path.split("?")[0].endswith("/responses") and isinstance(body, dict):
                first, users, rounds = codex_texts(body)
                # Models Codex knows get their tools in an `additional_tools` input item.
                has_tools = bool(body.get("tools")) or any(
                    isinstance(i, dict) and i.get("type") == "additional_tools" for i in body.get("input") or [])
                name, turn, final = pick(first, users, rounds, has_tools)
                rec.update(conversation=name, turn_index=rounds, turn=turn)
                log(rec)
                self._sse(codex_events(turn, final, seq))
            elif State.api == "gemini" and ":streamGenerateContent" in self.path and isinstance(body, dict):
                first, users, rounds = gemini_texts(body)
                name, turn, final = pick(first, users, rounds, gemini_has_tools(body))
                model = self.path.split("/models/")[-1].split(":")[0]
                rec.update(conversation=name, turn_index=rounds, turn=turn)
                log(rec)
                self._sse((None, c) for c in gemini_chunks(turn, final, model))
            elif State.api == "gemini" and ":generateContent" in self.path and isinstance(body, dict):
                cfg = body.get("generationConfig") or body.get("config") or {}
                schema = cfg.get("responseJsonSchema") or cfg.get("responseSchema")
                model = self.path.split("/models/")[-1].split(":")[0]
                if schema:
                    text = json.dumps(fill_schema(schema))
                    rec.update(conversation="side-json")
                    resp = next(gemini_chunks({"text": text}, "", model))
                    # one chunk with the whole text
                    resp["candidates"][0]["content"]["parts"] = [{"text": text}]
                else:
                    first, users, rounds = gemini_texts(body)
                    name, turn, final = pick(first, users, rounds, gemini_has_tools(body))
                    rec.update(conversation=name, turn_index=rounds, turn=turn)
                    chunks = list(gemini_chunks(turn, final, model))
                    resp = chunks[-1]
                    resp["candidates"][0]["content"]["parts"] = [
                        p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
                log(rec)
                self._json(200, resp)
            elif State.api == "gemini" and ":countTokens" in self.path:
                log(rec)
                self._json(200, {"totalTokens": 10})
            else:
                rec["unhandled"] = True
                log(rec)
                self._json(404, {"error": {"message": "not faked: " + self.path, "code": 404}})
        except (BrokenPipeError, ConnectionResetError):
            pass


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--api", choices=["codex", "gemini"], required=True)
    ap.add_argument("--script", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    a = ap.parse_args()
    State.api = a.api
    with open(a.script, encoding="utf-8") as f:
        State.script = json.load(f)
    State.log_path = a.log
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.daemon_threads = True
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(srv.server_address[1]))
        os.replace(tmp, a.port_file)
    print(f"fake {a.api} API on 127.0.0.1:{srv.server_address[1]}", file=sys.stderr, flush=True)
    srv.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())

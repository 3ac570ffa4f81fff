#!/usr/bin/env python3
"""Checks of a Codex CLI or Gemini CLI session recorded by bir (hosts/e2e.sh).

    hosts_check.py session|bound|off --host codex|gemini --version V --name N --out RUN_DIR
        --script S --prompt P [--baseline DIR --runs RUNS.jsonl --exports DIR]

Reads what the harness logged (the fake API's requests, the relay's MCP wire
log, the CLI's headless output) and what bir recorded (`bir runs --json`,
`bir runs export ID` as EXPORTS/<name>.export.<id>.json, `bir runs show ID`
as EXPORTS/<name>.show.<id>.txt); prints one "PASS|FAIL <name>: <check>:
<detail>" line per check. Exit status 0.

What the run must say is derived from the script (the model's words, calls,
answer and token counts), the relay's log (what the server got and
answered) and the CLI's own output (its session id), never written twice.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from checks import jsonl, read  # noqa: E402  (the e2e checks' file readers)
from bound_check import calls_of, outcome  # noqa: E402  (the bound tier's run readers)


# Checks bir is known to fail for a host (bir-side gaps, tests/e2e/README.md
# says why). Strict: such a check that fails prints "KNOWN GAP" and does not
# fail the run; one that passes FAILS, so that this list stays honest.
KNOWN_GAPS = {
    "codex": set(),
    "gemini": set(),
}


class Report:
    def __init__(self, name, host=None):
        self.name = name
        self.known = KNOWN_GAPS.get(host, set()) if name == "bound" else set()

    def run(self, label, fn):
        """fn() returns a detail string, or raises AssertionError(why)."""
        ok, detail = outcome(fn)
        if label in self.known:
            if ok:
                print(f"FAIL {self.name}: {label}: listed as a KNOWN GAP but passes (take it off KNOWN_GAPS): {detail}")
                return False
            print(f"KNOWN GAP: {self.name}: {label}: {detail}")
            return False
        print(f"{'PASS' if ok else 'FAIL'} {self.name}: {label}: {detail}")
        return ok


# --- what the session did, from the harness's logs --------------------------------------------

def cli_result(host, out):
    """(exit code, the CLI's session id, the answer it printed)."""
    rc = read(os.path.join(out, "logs/exit.txt")).strip()
    stdout = read(os.path.join(out, "logs/stdout.txt"))
    sid, answer = None, None
    if host == "codex":
        for line in stdout.splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("type") == "thread.started":
                sid = ev.get("thread_id")
            item = ev.get("item") or {}
            if ev.get("type") == "item.completed" and item.get("type") == "agent_message":
                answer = item.get("text")
    else:
        try:
            doc = json.loads(stdout[stdout.index("{"):])
            sid, answer = doc.get("session_id"), doc.get("response")
        except ValueError:
            pass
    return (int(rc) if rc.lstrip("-").isdigit() else None), sid, answer


def mcp_wire(out):
    """tools/call as the server got them: [(request, answer)] in order (ids
    are per connection: one relay process each)."""
    answers, calls = {}, []
    for rec in jsonl(os.path.join(out, "logs/mcp.jsonl")):
        msg = rec.get("msg")
        if not isinstance(msg, dict):
            continue
        if rec.get("dir") == "c2s" and msg.get("method") == "tools/call":
            calls.append((rec.get("pid"), msg))
        elif rec.get("dir") == "s2c" and "id" in msg and "method" not in msg:
            answers[(rec.get("pid"), json.dumps(msg["id"]))] = msg.get("result", msg.get("error"))
    return [(c, answers.get((pid, json.dumps(c.get("id"))))) for pid, c in calls]


def normalized(value, out):
    s = json.dumps(value, ensure_ascii=False, sort_keys=True)
    for path in {os.path.realpath(out), out}:
        s = s.replace(path, "<OUT>")
    s = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<UUID>", s)
    s = re.sub(r"Chunk ID: [0-9a-f]+", "Chunk ID: <ID>", s)  # Codex's exec output chunks
    s = re.sub(r'(\\?"nickname\\?": ?\\?")[A-Za-z]+', r"\1<NAME>", s)  # Codex's random subagent names
    return re.sub(r"[0-9]+", "0", s)


def model_view(host, out):
    """What the model was sent, comparable across runs: the first main request's
    conversation (Codex: input; Gemini: contents + systemInstruction), and the
    user-side items of every request."""
    first, items = None, set()
    for r in jsonl(os.path.join(out, "logs/requests.jsonl")):
        body = r.get("body")
        if not isinstance(body, dict) or r.get("conversation") not in ("main", "subagent"):
            continue
        if host == "codex":
            conv = [i for i in body.get("input") or [] if i.get("type") != "additional_tools"]
            mine = [i for i in conv if i.get("role") != "assistant" and i.get("type") not in ("function_call", "reasoning")]
        else:
            conv = {"contents": body.get("contents"), "system": body.get("systemInstruction")}
            mine = [c for c in body.get("contents") or [] if c.get("role") == "user"]
        if r.get("conversation") == "main" and r.get("turn_index") == 0 and first is None:
            first = normalized(conv, out)
        for i in mine:
            items.add(normalized(i, out))
    return first, items


# --- what the model said, from the script --------------------------------------------------------

def scripted_calls(script):
    """[{conversation, call, words, index}] for every tool call of the script."""
    out = []
    convs = [("main", script.get("turns") or [])]
    convs += [(c.get("name", "conversation"), c.get("turns") or []) for c in script.get("conversations") or []]
    for conv, turns in convs:
        for t in turns:
            if t.get("call"):
                out.append({"conversation": conv, "call": t["call"], "words": t.get("text", "")})
    return out


def final_text(script):
    last = (script.get("turns") or [{}])[-1]
    return last.get("text") if not last.get("call") else script.get("final_text")


def expected_step(host, call):
    """(names the host may give the step, the input it must carry (a subset), kind or None)."""
    name, args, ns = call["name"], call.get("arguments") or {}, call.get("namespace") or ""
    if host == "codex":
        if name == "exec_command":
            return {"Bash", "exec_command", "shell"}, {"command": args.get("cmd")}, "builtin"
        if ns.startswith("mcp__"):
            server = ns[len("mcp__"):]
            return {f"mcp__{server}__{name}", f"mcp__{server}__{name.replace('_', '-')}"}, args, "mcp"
        return {name, ns + name, f"{ns}__{name}"}, args, None
    if name.startswith("mcp_everything_"):
        # Gemini's own name, or the shared mcp__server__tool form.
        return {name, "mcp__everything__" + name[len("mcp_everything_"):]}, args, "mcp"
    return {name}, args, None


def subset(want, got):
    """`got` holds `want` (a string "@@PREV:…@@" — filled in by the fake API
    from an earlier result — matches anything)."""
    if isinstance(want, str) and want.startswith("@@PREV:"):
        return True
    if isinstance(want, list):
        return isinstance(got, list) and len(want) == len(got) and all(subset(w, g) for w, g in zip(want, got))
    if isinstance(want, dict):
        return isinstance(got, dict) and all(subset(v, got.get(k)) for k, v in want.items())
    return want == got


def squash(s):
    return " ".join((s or "").split())


# --- what bir recorded ------------------------------------------------------------------------------

def token_pairs(value, found=None):
    """Every (input, output) token pair anywhere in the export: a dict with an
    input-token key and an output-token key (any naming: inputTokens,
    input_tokens, gen_ai.usage.input_tokens, input/output under a tokens key)."""
    found = [] if found is None else found
    if isinstance(value, dict):
        keys = {k.lower().replace("_", "").replace(".", ""): v for k, v in value.items()}
        i = next((v for k, v in keys.items() if k.endswith("inputtokens") and isinstance(v, int)), None)
        o = next((v for k, v in keys.items() if k.endswith("outputtokens") and isinstance(v, int)), None)
        if i is not None and o is not None:
            found.append((i, o))
        for k, v in value.items():
            if k.lower() in ("tokens", "usage") and isinstance(v, dict) and isinstance(v.get("input"), int) \
                    and isinstance(v.get("output"), int):
                found.append((v["input"], v["output"]))
            token_pairs(v, found)
    elif isinstance(value, list):
        for v in value:
            token_pairs(v, found)
    return found


# --- the checks ---------------------------------------------------------------------------------------

def check_session(rep, a, script):
    rc, sid, answer = cli_result(a.host, a.out)
    want = final_text(script)

    def ok():
        assert rc == 0, f"{a.host} exited {rc}: {read(os.path.join(a.out, 'logs/stderr.txt'))[-400:]}"
        assert sid, "no session id in the CLI's output"
        assert answer == want, f"answer {answer!r}, scripted {want!r}"
        n = sum(1 for r in jsonl(os.path.join(a.out, "logs/requests.jsonl")) if r.get("conversation") in ("main", "subagent"))
        wire = mcp_wire(a.out)
        assert len(wire) == sum(1 for c in scripted_calls(script) if expected_step(a.host, c["call"])[2] == "mcp"), \
            f"{len(wire)} tools/call reached the server"
        return f"exit 0 in {read(os.path.join(a.out, 'logs/wall.txt')).strip()} s, {n} model requests, {len(wire)} MCP calls, answer {answer!r}"
    return rep.run("session", ok)


def check_bound(rep, a, script):
    if not check_session(rep, a, script):
        return
    _, sid, answer = cli_result(a.host, a.out)
    runs = [r for r in jsonl(a.runs) if r.get("tier") == "bound"] if a.runs else []

    def one_run():
        assert len(runs) == 1, f"{len(runs)} bound runs ({[r.get('id') for r in runs]}); hooks seen by bir: " \
            f"{'none' if not runs else 'yes'}"
        assert runs[0].get("state") == "finished", f"state {runs[0].get('state')}"
        return f"run {runs[0]['id'][:16]} ({runs[0].get('toolCalls')} calls)"
    if not rep.run("exactly one bound run", one_run):
        return
    rid = runs[0]["id"]
    doc = json.load(open(os.path.join(a.exports, f"{a.name}.export.{rid}.json"), encoding="utf-8"))
    show = read(os.path.join(a.exports, f"{a.name}.show.{rid}.txt"))
    meta = doc["run"]["metadata"]
    prompt = read(a.prompt).strip()
    calls, problems = calls_of(doc)
    expected = scripted_calls(script)

    def header():
        host = meta.get("host") or {}
        assert meta.get("tier") == "bound", meta.get("tier")
        assert a.host in str(host.get("app", "")).lower(), f"host {host}"
        assert host.get("version") == a.version, f"host version {host.get('version')!r}, the CLI is {a.version}"
        assert meta.get("sessionId") == sid, f"sessionId {meta.get('sessionId')} != the CLI's {sid}"
        assert not meta.get("lossy") and not (doc.get("finish") or {}).get("lossy"), "lossy"
        assert (doc.get("finish") or {}).get("reason") == "session_end", f"finish {doc.get('finish')}"
        turns = doc.get("turns") or []
        assert turns and squash(turns[0].get("prompt")) == squash(prompt), f"turn 1 prompt {turns[:1]}"
        # One prompt, one turn: a subagent's own prompt is its start, not a turn.
        assert len(turns) == 1, f"{len(turns)} turns: {[squash(t.get('prompt'))[:60] for t in turns]}"
        return f"{host.get('app')} {host.get('version')}, session {sid[:8]}, {len(turns)} turn(s), ended at session_end"
    rep.run("run header: host, version, session, prompt", header)

    matched = {}  # index in expected -> call record

    def every_step():
        assert not problems, "; ".join(problems)
        unpaired = [t for t, c in calls.items() if set(c) != {"selected", "response"}]
        assert not unpaired, f"calls without both records: {unpaired}"
        free = dict(calls)
        missing = []
        for i, e in enumerate(expected):
            names, want_input, kind = expected_step(a.host, e["call"])
            hit = next((t for t, c in sorted(free.items(), key=lambda kv: kv[1]["selected"]["stepIndex"])
                        if c["selected"].get("qualifiedName") in names
                        and subset(want_input, c["selected"].get("input"))
                        and (kind is None or c["selected"].get("kind") == kind)), None)
            if hit is None:
                missing.append(f"{sorted(names)[0]} {json.dumps(want_input)[:80]}")
            else:
                matched[i] = free.pop(hit)
        assert not missing, f"not recorded: {missing}; recorded: " + \
            ", ".join(f"{c['selected'].get('qualifiedName')}/{c['selected'].get('kind')}" for c in calls.values())
        return f"{len(expected)} scripted calls recorded, each one tool_selected + one tool_response" + \
            (f"; {len(free)} more: {[c['selected'].get('qualifiedName') for c in free.values()]}" if free else "")
    if not rep.run("every step recorded", every_step):
        return

    def order():
        main = [(i, matched[i]) for i, e in enumerate(expected) if e["conversation"] == "main"]
        idx = [c["selected"]["stepIndex"] for _, c in main]
        assert idx == sorted(idx), f"main-thread steps out of order: {[(c['selected']['qualifiedName'], c['selected']['stepIndex']) for _, c in main]}"
        for (_, x), (_, y) in zip(main, main[1:]):
            assert x["response"]["stepIndex"] < y["selected"]["stepIndex"], \
                f"{x['selected']['qualifiedName']} answered after {y['selected']['qualifiedName']} was chosen"
        return " → ".join(c["selected"]["qualifiedName"] for _, c in main)
    rep.run("steps in true order", order)

    def subagent():
        sub = [i for i, e in enumerate(expected) if e["conversation"] != "main"]
        agent = [c for i, c in matched.items() if expected[i]["conversation"] == "main"
                 and expected[i]["call"]["name"] in ("spawn_agent", "invoke_agent")]
        assert len(agent) == 1, f"{len(agent)} subagent-starting steps"
        parent = agent[0]["selected"]
        wrong = []
        for i in sub:
            c = matched[i]
            for rec in (c["selected"], c["response"]):
                if not rec.get("agentId"):
                    wrong.append(f"{rec.get('qualifiedName')}: no agentId")
                if rec.get("parentToolUseId") != parent["toolUseId"]:
                    wrong.append(f"{rec.get('qualifiedName')}: parentToolUseId {rec.get('parentToolUseId')} != {parent['toolUseId']}")
            if c["selected"]["stepIndex"] < parent["stepIndex"]:
                wrong.append(f"{c['selected']['qualifiedName']} before the step that started its agent")
        assert not wrong, "; ".join(wrong)
        return f"{len(sub)} step(s) nested under {parent['qualifiedName']} ({parent['toolUseId'][:16]})"
    rep.run("subagent steps nested under the step that started them", subagent)

    def mcp_joined():
        wire = mcp_wire(a.out)
        mcp = [(i, matched[i]) for i, e in enumerate(expected) if expected_step(a.host, e["call"])[2] == "mcp"]
        joins = []
        for i, c in mcp:
            sel, resp = c["selected"], c["response"]
            if a.host == "codex":
                # Codex puts the call id in the request: the join must be exact.
                req = [(r, ans) for r, ans in wire if ((r.get("params") or {}).get("_meta") or {}).get("callId") == sel["toolUseId"]]
                assert len(req) == 1, f"{sel['qualifiedName']}: {len(req)} tools/call with _meta.callId {sel['toolUseId']}"
            else:
                req = [(r, ans) for r, ans in wire
                       if (r.get("params") or {}).get("name") == sel.get("toolName")
                       and (r.get("params") or {}).get("arguments") == sel.get("input")]
                assert req, f"{sel['qualifiedName']}: no tools/call with its name and arguments reached the server"
            r, ans = req[0]
            assert sel.get("serverName") == "everything", f"serverName {sel.get('serverName')}"
            assert sel.get("toolName") == r["params"]["name"], f"toolName {sel.get('toolName')} vs wire {r['params']['name']}"
            assert sel.get("input") == r["params"].get("arguments"), f"input {sel.get('input')} vs wire {r['params'].get('arguments')}"
            assert resp.get("output") == ans, f"output {json.dumps(resp.get('output'))[:160]} vs the server's {json.dumps(ans)[:160]}"
            # Joined live: the response carries the wire's JSON-RPC id (only the
            # session's bound proxy knows it; the hooks' view has none).
            assert resp.get("requestId") is not None, f"{sel['qualifiedName']}: no requestId: not joined to the wire live"
            how = sel.get("correlation") or resp.get("correlation") or ("callId" if a.host == "codex" else "?")
            if a.host == "codex":
                assert how != "fingerprint", f"{sel['qualifiedName']}: joined by fingerprint although _meta.callId was there"
            joins.append(f"{sel.get('toolName')} ({how})")
        return f"{len(mcp)} MCP calls with the server's own arguments and result: " + ", ".join(joins)
    rep.run("MCP calls joined to the wire", mcp_joined)

    def builtins():
        wire_outputs = []
        for i, c in matched.items():
            call = expected[i]["call"]
            out = json.dumps(c["response"].get("output"), ensure_ascii=False)
            if call["name"] in ("exec_command", "run_shell_command"):
                cmd = call["arguments"].get("cmd") or call["arguments"].get("command")
                if cmd.startswith("echo "):
                    assert cmd[5:] in out, f"{cmd!r}: output {out[:200]}"
                if cmd.startswith("cat "):
                    assert "hosts-e2e-notes" in out, f"{cmd!r}: output {out[:200]}"
                wire_outputs.append(c["selected"]["qualifiedName"])
            if call["name"] == "read_file":
                assert "hosts-e2e-notes" in out, f"read_file output {out[:200]}"
                wire_outputs.append("read_file")
        assert wire_outputs, "no shell or read step"
        return f"{len(wire_outputs)} shell/read steps with their output: {wire_outputs}"
    rep.run("shell and file read with their output", builtins)

    def contexts():
        wrong = []
        for i, c in matched.items():
            ctx = c["selected"].get("context") or c["response"].get("context")
            if squash(ctx) != squash(expected[i]["words"]):
                wrong.append(f"{c['selected']['qualifiedName']}: context {ctx!r}, the model said {expected[i]['words']!r}")
        assert not wrong, "; ".join(wrong)
        return f"{len(matched)} steps carry the model's words before them"
    rep.run("the model's words before each step", contexts)

    def final():
        steps = sorted((s for s in doc.get("steps") or [] if s.get("type") == "final_answer"), key=lambda s: s["stepIndex"])
        want = final_text(script)
        assert steps, "no final_answer step"
        assert squash(steps[-1].get("output")) == squash(want), f"last answer {steps[-1].get('output')!r}, the model said {want!r}"
        return f"{want!r}"
    rep.run("the answer", final)

    def tokens():
        u = [t.get("usage") for t in script.get("turns") or [] if t.get("usage")]
        # The subagent's model calls the host made (a subagent may end before
        # its last scripted turn: Gemini's complete_task ends it).
        asked = sum(1 for r in jsonl(os.path.join(a.out, "logs/requests.jsonl")) if r.get("conversation") == "subagent")
        sub = [t.get("usage") for c in script.get("conversations") or [] for t in (c.get("turns") or [])[:asked]
               if t.get("usage")]
        per_call = {(x["input"], x["output"]) for x in u}
        total = (sum(x["input"] for x in u), sum(x["output"] for x in u))
        # The run's total may count its subagents' model calls too (their steps are in the run).
        with_sub = (total[0] + sum(x["input"] for x in sub), total[1] + sum(x["output"] for x in sub))
        found = token_pairs(doc)
        assert found, f"no token counts in the export (the host reported {total[0]} input / {total[1]} output tokens)"
        got = set(found)
        assert total in got or with_sub in got or per_call <= got, \
            f"token counts {sorted(got)[:8]} match neither the session's total {total} (with the subagent's " \
            f"{with_sub}) nor each model call {sorted(per_call)}"
        which = "total " + str(total) if total in got else \
            "total with the subagent's " + str(with_sub) if with_sub in got else "per model call"
        return f"{which}, as the host reported"
    rep.run("tokens", tokens)

    def shown():
        want = [prompt[:40], want_answer := final_text(script), a.version]
        want += [c["selected"].get("toolName") or c["selected"]["qualifiedName"] for c in matched.values()]
        missing = [w for w in want if w and w not in show]
        assert not missing, f"`bir runs show` lacks {missing}: {show[:300]!r}"
        return f"prompt, {a.host} {a.version}, {len(matched)} steps and {want_answer!r} in `bir runs show`"
    rep.run("bir runs show tells the session", shown)

    if a.baseline:
        rep.run("the model saw the same as without bir", lambda: same_model(a))
        rep.run("the server saw the same as without bir", lambda: same_server(a))


def same_model(a):
    (f1, i1), (f0, i0) = model_view(a.host, a.out), model_view(a.host, a.baseline)
    assert f1 and f1 == f0, "the first model request differs from the session without bir"
    assert i1 == i0, f"items only with bir: {sorted(i1 - i0)[:2]}; only without: {sorted(i0 - i1)[:2]}"
    return f"first request identical; the same {len(i1)} user-side items (paths, ids, numbers normalised)"


def same_server(a):
    def view(out):
        return sorted(json.dumps([(r.get("params") or {}).get("name"), (r.get("params") or {}).get("arguments"), ans],
                                 sort_keys=True) for r, ans in mcp_wire(out))
    v1, v0 = view(a.out), view(a.baseline)
    assert v1 and v1 == v0, f"{v1} vs {v0}"
    return f"{len(v1)} tools/call with the same arguments and answers"


def check_off(rep, a, script):
    """`bir off`: the session as without bir, nothing recorded."""
    check_session(rep, a, script)

    def nothing():
        runs = jsonl(a.runs) if a.runs else []
        assert not runs, f"{len(runs)} run(s) recorded while off: {[r.get('id') for r in runs]}"
        return "no run in BIR_HOME"
    rep.run("nothing recorded while off", nothing)
    rep.run("the model saw the same as without bir", lambda: same_model(a))
    rep.run("the server saw the same as without bir", lambda: same_server(a))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["session", "bound", "off"])
    ap.add_argument("--host", required=True, choices=["codex", "gemini"])
    ap.add_argument("--version", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--baseline")
    ap.add_argument("--script", required=True)
    ap.add_argument("--prompt", required=True)
    ap.add_argument("--runs")
    ap.add_argument("--exports")
    a = ap.parse_args()
    script = json.load(open(a.script, encoding="utf-8"))
    rep = Report(a.name, a.host)
    {"session": check_session, "bound": check_bound, "off": check_off}[a.mode](rep, a, script)


if __name__ == "__main__":
    main()

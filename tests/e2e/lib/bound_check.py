#!/usr/bin/env python3
"""Checks of the bound tier's end-to-end sessions (run-bound.sh).

    bound_check.py session|bound|off|kill|two|inject|whole --name N --out RUN_DIR [...]

Reads what the harness logged for a session (the fake API's requests and
replies, the MCP relay's traffic between bir-proxy and the server, Claude
Code's stream-json) and what bir recorded (`bir runs --json`, `bir runs
export ID` as RUNS_DIR/<name>.export.<id>.json), and prints one
"PASS|FAIL <name>: <check>: <detail>" line per check. Exit status 0.

What a recorded run must say is derived from the scenario's script.json
(what the fake model said: thinking, text, tool calls, answers) and from the
relay's log (what the server answered), never written down twice.
"""
import argparse
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import jsonl  # noqa: E402  (the harness checks' JSONL reader)


def outcome(fn):
    """(ok, detail) of one check: fn() returns a detail string, or raises
    AssertionError(why). Any other exception (a malformed export) is a
    failure too, not a crash."""
    try:
        return True, fn()
    except AssertionError as e:
        return False, str(e) or "assertion failed"
    except Exception as e:
        return False, f"{type(e).__name__}: {e}"


class Report:
    def __init__(self, name):
        self.name = name

    def check(self, label, ok, detail):
        print(f"{'PASS' if ok else 'FAIL'} {self.name}: {label}: {detail}")
        return ok

    def run(self, label, fn, known_gap=None):
        """fn() returns a detail string, or raises AssertionError(why).

        known_gap: why this check is expected to fail for now. Strict: a
        known gap that fails prints "KNOWN GAP" and does not count; one that
        passes is a failure, so the gap is taken off the list."""
        ok, detail = outcome(fn)
        if known_gap and not ok:
            print(f"KNOWN GAP: {self.name}: {label}: {known_gap}: {detail}")
            return True
        if known_gap and ok:
            return self.check(label, False, f"listed as a known gap but passes (take it off): {detail}")
        return self.check(label, ok, detail)


# --- what the session did, from the harness's logs --------------------------------------

def stream_result(out):
    for m in jsonl(os.path.join(out, "logs/stdout.jsonl")):
        if m.get("type") == "result":
            return m
    return None


def summary(out):
    try:
        return json.load(open(os.path.join(out, "logs/summary.json")))
    except (OSError, ValueError):
        return {}


def requests(out):
    return [r for r in jsonl(os.path.join(out, "logs/requests.jsonl"))
            if r.get("kind") in ("main", "subagent")]


def normalized(value, out):
    """A request's messages with what differs between any two runs of the
    same session (paths, ids, numbers) replaced."""
    s = json.dumps(value, ensure_ascii=False, sort_keys=True)
    # Claude Code names per-project directories after the path, dashed.
    for path in {os.path.realpath(out), out}:
        s = s.replace(re.sub(r"[^A-Za-z0-9]", "-", os.path.join(path, "project")), "<PROJECT>")
    s = s.replace(os.path.realpath(out), "<OUT>").replace(out, "<OUT>")
    s = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<UUID>", s)
    s = re.sub(r"toolu_fake_[0-9]+_[0-9]+", "<TOOLU>", s)
    s = re.sub(r"\ba[0-9a-f]{12,}\b", "<AGENT>", s)
    s = re.sub(r"/tmp/bir-e2e-bound\.[A-Za-z0-9]+/[A-Za-z0-9/_.-]*", "<PATH>", s)
    s = re.sub(r"[0-9]+", "0", s)
    return s


def model_view(out):
    """What the model was sent, comparable across runs of one session:
    (the first request's messages, the set of every content block sent).

    The first request comes before anything asynchronous happens, so it is
    compared whole. After it, a background subagent's notification lands in
    whichever request is next when it finishes, so later requests are
    compared as the input blocks they carry (without `cache_control`, which moves
    with the last block, and without the notification itself, whose framing
    depends on that timing): anything a hook added to the model's context
    would be a block the run without bir never sent."""
    first, blocks = None, set()
    for r in requests(out):
        msgs = r["body"].get("messages") or []
        if r["kind"] == "main" and r.get("turn_index") == 0:
            first = normalized(msgs, out)
        for m in msgs:
            if m.get("role") == "assistant":
                continue  # the model's own words, echoed back (when depends on timing)
            content = m.get("content")
            for b in content if isinstance(content, list) else [content]:
                if isinstance(b, dict):
                    b = {k: v for k, v in b.items() if k != "cache_control"}
                text = json.dumps(b, ensure_ascii=False)
                if "<task-notification>" in text:
                    continue
                blocks.add((m.get("role"), normalized(b, out)))
    return first, blocks
def mcp_calls(out):
    """tools/call as the server got them, with the server's answers:
    toolUseId -> (name, arguments, result)."""
    answers, calls = {}, []
    for rec in jsonl(os.path.join(out, "logs/mcp.jsonl")):
        msg = rec.get("msg")
        if not isinstance(msg, dict):
            continue
        if rec.get("dir") == "c2s" and msg.get("method") == "tools/call":
            calls.append(msg)
        elif rec.get("dir") == "s2c" and "id" in msg and "method" not in msg:
            answers[json.dumps(msg["id"])] = msg.get("result", msg.get("error"))
    out_map = {}
    for c in calls:
        p = c.get("params") or {}
        tid = (p.get("_meta") or {}).get("claudecode/toolUseId")
        out_map[tid] = (p.get("name"), p.get("arguments"), answers.get(json.dumps(c.get("id"))))
    return out_map


def server_view(out):
    """The server's side, comparable across runs: sorted (name, arguments,
    answer) of every tools/call."""
    return sorted(json.dumps([n, a, r], sort_keys=True, ensure_ascii=False)
                  for n, a, r in mcp_calls(out).values())


# --- what the model said, from the script ------------------------------------------------

def scripted_calls(script):
    """Every tool_use the script makes, with the words before it:
    [{name, input, context, conversation}]."""
    out = []
    convs = [("main", script.get("turns") or [])]
    convs += [(c.get("name", "conv"), c.get("turns") or []) for c in script.get("conversations") or []]
    for conv, turns in convs:
        for turn in turns:
            words = []
            for b in turn.get("content", []):
                if b.get("type") == "thinking":
                    words.append(b.get("thinking", ""))
                elif b.get("type") == "text":
                    words.append(b.get("text", ""))
                elif b.get("type") == "tool_use":
                    out.append({"name": b["name"], "input": b.get("input", {}),
                                "words": list(words), "conversation": conv})
    return out


def scripted_answers(script):
    """Texts the main conversation ends its turns with."""
    out = [t["content"][0]["text"] for t in script.get("turns") or []
           if all(b.get("type") == "text" for b in t.get("content", []))]
    if script.get("final_text"):
        out.append(script["final_text"])
    return out


def squash(s):
    return " ".join((s or "").replace("[thinking]", " ").split())


# --- what bir recorded ---------------------------------------------------------------------

def bound_runs(runs_file):
    return [r for r in jsonl(runs_file) if r.get("tier") == "bound"]


def load_export(exports, prefix, run_id):
    path = os.path.join(exports, f"{prefix}.export.{run_id}.json")
    return json.load(open(path))


def calls_of(doc):
    """toolUseId -> {selected, response} (records of one call), and the
    problems found pairing them."""
    calls, problems = {}, []
    for s in doc.get("steps") or []:
        if s.get("type") not in ("tool_selected", "tool_response"):
            continue
        tid = s.get("toolUseId")
        if not tid:
            problems.append(f"step {s.get('stepIndex')} {s.get('qualifiedName')} has no toolUseId")
            continue
        c = calls.setdefault(tid, {})
        key = "selected" if s["type"] == "tool_selected" else "response"
        if key in c:
            problems.append(f"{tid}: two {s['type']} records (steps {c[key]['stepIndex']} and {s['stepIndex']})")
        c[key] = s
    return calls, problems


def answers_of(doc):
    steps = sorted((s for s in doc.get("steps") or [] if s.get("type") == "final_answer"),
                   key=lambda s: s["stepIndex"])
    return [s.get("output") for s in steps]


# --- the checks ------------------------------------------------------------------------------

def check_session(rep, a, script):
    """The session itself went as scripted (with or without bir)."""
    s, res = summary(a.out), stream_result(a.out)

    def ok():
        assert s.get("exit_code") == 0, f"claude exited {s.get('exit_code')}: {open(os.path.join(a.out, 'logs/stderr.txt')).read()[-300:]}"
        assert res and not res.get("is_error"), f"result {res}"
        assert res.get("result") in scripted_answers(script), f"result text {res.get('result')!r}"
        return f"exit 0, {res.get('num_turns')} turns, result {res.get('result')!r}"
    return rep.run("session", ok)


def check_bound(rep, a, script):
    if not check_session(rep, a, script):
        return
    res = stream_result(a.out) or {}
    session_id = res.get("session_id")
    runs = bound_runs(a.runs)
    mine = [r for r in runs]

    def one_run():
        assert len(mine) == 1, f"{len(mine)} bound runs: {[r.get('id') for r in mine]}"
        assert mine[0].get("state") == "finished", f"state {mine[0].get('state')}"
        return f"run {mine[0]['id'][:16]} ({mine[0].get('toolCalls')} calls, {mine[0].get('errors')} errors)"
    if not rep.run("exactly one bound run", one_run):
        return
    doc = load_export(a.exports, a.exports_prefix or a.name, mine[0]["id"])
    check_run(rep, a, script, doc, session_id, a.out)
    if a.mod_link:
        rep.run("recording path", lambda: mod_link(doc, a.mod_link == "yes"))
    if a.baseline:
        rep.run("the model saw the same as without bir", lambda: same_model_view(a.out, a.baseline))
        if a.mode == "inject":
            rep.run("the server got the model's arguments plus only the call id",
                    lambda: injected_server_view(a.out, a.baseline))
        else:
            rep.run("the server saw the same as without bir", lambda: same_server_view(a.out, a.baseline))
    if a.mode == "inject":
        rep.run("call ids injected and joined on, none stored", lambda: injected_ids(a.out, doc))


CALL_ID = "__bir_call_id__"


def without_call_id(args):
    return {k: v for k, v in args.items() if k != CALL_ID} if isinstance(args, dict) else args


def injected_server_view(out, baseline):
    """With `--correlate inject` the server gets one more argument (the
    relay is byte for byte): the same calls and answers once it is taken out."""
    got = sorted(json.dumps([n, without_call_id(a), r], sort_keys=True, ensure_ascii=False)
                 for n, a, r in mcp_calls(out).values())
    want = server_view(baseline)
    assert got == want, f"the server's calls differ: {got} vs {want}"
    return f"{len(got)} tools/call: the same arguments (but the call id) and answers"


def injected_ids(out, doc):
    """Every call id the server got names its own call; the proxy is bound
    by the first MCP call of this script (a Bash step comes first), so every
    call carries one; the run joined each exactly and stores none."""
    relay = mcp_calls(out)
    assert relay, "no tools/call reached the server"
    wrong = [(tid, (a or {}).get(CALL_ID)) for tid, (_, a, _) in relay.items()
             if (a or {}).get(CALL_ID) != f"bir-{tid}"]
    assert not wrong, f"calls without their own id: {wrong}"
    text = json.dumps(doc)
    assert CALL_ID not in text, "the run stores the injected key"
    fp = [s.get("toolUseId") for s in doc.get("steps") or [] if s.get("correlation") == "fingerprint"]
    assert not fp, f"joined by fingerprint: {fp}"
    return f"{len(relay)} call(s), each with bir-<its toolUseId>; the run keeps none"


def check_run(rep, a, script, doc, session_id, out):
    meta = doc["run"]["metadata"]
    calls, problems = calls_of(doc)
    relay = mcp_calls(out)
    expected = scripted_calls(script)
    prompt = open(a.prompt, encoding="utf-8").read().strip()

    def header():
        assert meta.get("tier") == "bound", meta.get("tier")
        assert meta.get("sessionId") == session_id, f"sessionId {meta.get('sessionId')} != {session_id}"
        assert (meta.get("host") or {}).get("app") == "claude-code", meta.get("host")
        assert not meta.get("lossy") and not (doc.get("finish") or {}).get("lossy"), "lossy"
        assert (doc.get("finish") or {}).get("reason") == "session_end", f"finish {doc.get('finish')}"
        turns = doc.get("turns") or []
        assert turns and turns[0]["prompt"].strip() == prompt, f"turn 1 prompt {turns[:1]}"
        assert (doc["run"].get("input") or "").strip() == prompt, f"input {doc['run'].get('input')!r}"
        return f"session {session_id[:8]}, host {meta['host'].get('version')}, {len(turns)} turn(s), ended at session_end"
    rep.run("run header", header)

    def pairs():
        assert not problems, "; ".join(problems)
        unpaired = [t for t, c in calls.items() if set(c) != {"selected", "response"}]
        assert not unpaired, f"calls without both records: {unpaired}"
        assert len(calls) == len(expected), f"{len(calls)} calls recorded, {len(expected)} scripted"
        idx = [s["stepIndex"] for s in doc["steps"]]
        assert len(idx) == len(set(idx)), f"stepIndex repeats: {sorted(idx)}"
        return f"{len(calls)} calls, each one tool_selected + one tool_response"
    rep.run("one merged step per call", pairs)

    def order():
        main = sorted((c for c in calls.values() if not c["selected"].get("agentId")),
                      key=lambda c: c["selected"]["stepIndex"])
        got = [c["selected"]["qualifiedName"] for c in main]
        want = [e["name"] for e in expected if e["conversation"] == "main"]
        assert got == want, f"main-thread order {got}, scripted {want}"
        for c in calls.values():
            assert c["selected"]["stepIndex"] < c["response"]["stepIndex"], f"{c['selected']['toolUseId']}: response before selection"
        # Each main call answered before the next was chosen (the model waits).
        for x, y in zip(main, main[1:]):
            assert x["response"]["stepIndex"] < y["selected"]["stepIndex"], f"{x['selected']['qualifiedName']} answered after {y['selected']['qualifiedName']} was chosen"
        return " → ".join(got)
    rep.run("steps in true order", order)

    def mcp_merged():
        n = 0
        for tid, c in calls.items():
            sel, resp = c["selected"], c["response"]
            if sel.get("kind") != "mcp":
                continue
            n += 1
            assert tid in relay, f"{tid}: the server never got it (relay log)"
            name, args, answer = relay[tid]
            assert sel.get("serverName") == "everything" and sel.get("toolName") == name, f"{tid}: {sel.get('serverName')}/{sel.get('toolName')} vs {name}"
            scripted = [e for e in expected if e["name"] == sel["qualifiedName"] and e["input"] == sel.get("input")]
            assert scripted, f"{tid}: arguments {sel.get('input')} are not the model's"
            if a.mode == "inject":
                args = without_call_id(args)
            assert sel.get("input") == args, f"{tid}: recorded {sel.get('input')} but the server got {args}"
            assert resp.get("output") == answer, f"{tid}: recorded {json.dumps(resp.get('output'))[:200]} but the server answered {json.dumps(answer)[:200]}"
            assert bool(resp.get("isError")) == bool((answer or {}).get("isError")), f"{tid}: isError {resp.get('isError')}"
        mcp_expected = sum(1 for e in expected if e["name"].startswith("mcp__"))
        assert n == mcp_expected, f"{n} MCP calls recorded, {mcp_expected} scripted"
        failed = [c for c in calls.values() if c["selected"].get("kind") == "mcp" and c["response"].get("isError")]
        assert failed, "no failed MCP call recorded"
        return f"{n} MCP calls: model's arguments, server's result; {len(failed)} with isError"
    rep.run("each MCP call joined with the server's result", mcp_merged)

    def builtin():
        bash = [c for c in calls.values() if c["selected"]["qualifiedName"] == "Bash"]
        assert bash, "no Bash step"
        for c in bash:
            assert c["selected"].get("kind") == "builtin", c["selected"].get("kind")
            cmd = (c["selected"].get("input") or {}).get("command", "")
            out = json.dumps(c["response"].get("output"))
            if cmd.startswith("echo "):
                assert cmd[5:] in out, f"{cmd!r}: output {out[:200]}"
        return f"{len(bash)} Bash step(s), kind builtin, with their output"
    rep.run("built-in steps", builtin)

    sub_expected = [e for e in expected if e["conversation"] != "main"]
    if sub_expected:
        def subagent():
            agent = [c for c in calls.values() if c["selected"]["qualifiedName"] == "Agent"]
            assert len(agent) == 1, f"{len(agent)} Agent steps"
            agent_id = agent[0]["selected"]["toolUseId"]
            assert agent[0]["selected"].get("kind") == "agent", agent[0]["selected"].get("kind")
            inside = [c for c in calls.values() if c["selected"].get("agentId")]
            assert len(inside) == len(sub_expected), f"{len(inside)} steps attributed to a subagent, {len(sub_expected)} scripted"
            for c in inside:
                for rec in (c["selected"], c["response"]):
                    assert rec.get("agentType") == "general-purpose", f"agentType {rec.get('agentType')}"
                    assert rec.get("parentToolUseId") == agent_id, f"parentToolUseId {rec.get('parentToolUseId')} != {agent_id}"
                assert c["selected"]["stepIndex"] > agent[0]["selected"]["stepIndex"], "a subagent step before its Agent step"
            started = [e for e in doc.get("events") or [] if e.get("name") == "SubagentStart"]
            assert started, "no SubagentStart event"
            return f"{len(inside)} step(s) with agentId {inside[0]['selected']['agentId'][:10]}…, type general-purpose, under {agent_id}"
        rep.run("subagent steps attributed and nested", subagent)

    def contexts():
        wrong = []
        for c in calls.values():
            sel = c["selected"]
            ctx = c["response"].get("context") or sel.get("context")
            match = [e for e in expected if e["name"] == sel["qualifiedName"] and e["input"] == sel.get("input")]
            if not match:
                wrong.append(f"{sel['qualifiedName']}: no scripted call with input {sel.get('input')}")
                continue
            want = squash(" ".join(match[0]["words"]))
            if squash(ctx) != want:
                wrong.append(f"{sel['qualifiedName']}: context {ctx!r}, the model said {want!r}")
        assert not wrong, "; ".join(wrong)
        return f"{len(calls)} contexts equal to the model's text (and thinking)"
    rep.run("every step's context is what the model said", contexts)

    def final():
        said = [r["reply"] for r in requests(out) if r.get("kind") == "main"]
        last_text = None
        for reply in said:
            texts = [b.get("text") for b in reply.get("content", []) if b.get("type") == "text"]
            if texts and not any(b.get("type") == "tool_use" for b in reply.get("content", [])):
                last_text = texts[-1]
        answers = answers_of(doc)
        assert answers, "no final_answer step"
        assert answers[-1] == last_text, f"last final answer {answers[-1]!r}, the model's last words {last_text!r}"
        fin = (doc.get("finish") or {}).get("output")
        assert fin in (None, last_text), f"finish.output {fin!r}"
        res = (stream_result(out) or {}).get("result")
        assert res in answers, f"Claude Code's result {res!r} is not among the answers {answers}"
        return f"{len(answers)} answer(s); last {answers[-1]!r}"
    rep.run("final answer is what the model said", final)

    def tokens():
        # The fake Messages API's usage per reply (its own formula, from the
        # logged request and reply): every main and subagent model call,
        # each counted once, though Claude Code writes a message's usage on
        # each of its content blocks' transcript lines.
        said = requests(out)
        want_in = sum(max(1, len(json.dumps(r["body"].get("messages", []))) // 4) for r in said)
        want_out = sum(max(1, len(json.dumps(r["reply"].get("content", []))) // 4) for r in said)
        metrics = (doc.get("finish") or {}).get("metrics") or {}
        usage = metrics.get("usage") or {}
        assert usage, f"no tokens in the run's finish: {metrics}"
        got = (usage.get("input"), usage.get("output"))
        assert got == (want_in, want_out), f"run tokens {got}, the model API reported {(want_in, want_out)}"
        rows = metrics.get("turnUsage") or []
        turns = {t["turn"] for t in doc.get("turns") or []}
        assert rows and all(r["turn"] in turns for r in rows), f"turn rows {rows}, turns {sorted(turns)}"
        summed = tuple(sum(r["usage"][k] for r in rows) for k in ("input", "output"))
        assert summed == got, f"turn rows sum to {summed}, the run's total is {got}"
        return f"{got[0]} in, {got[1]} out over {len(said)} model calls, in {len(rows)} turn/model row(s)"
    rep.run("tokens are what the model API reported, once per message", tokens)


def mod_link(doc, expected):
    """Whether the run says the Claude Code mod's link was active (the
    `ModLink` session event the daemon writes at the mod's first report)."""
    links = [e for e in doc.get("events") or [] if e.get("name") == "ModLink"]
    # Live: a `tool_selected` step (written when the call is chosen, before
    # it runs) that already carries the model's words. Without the mod they
    # come with the `tool_response`, from the transcript read after the call.
    selected = [s for s in doc.get("steps") or [] if s.get("type") == "tool_selected"]
    live = sum(1 for s in selected if s.get("context"))
    if expected:
        assert len(links) == 1, f"{len(links)} ModLink events (the mod never reached the daemon?)"
        assert live >= 1, "no tool_selected step carried the model's words when it was written"
        return (f"mod link + hooks: the run says the mod's words arrived live; "
                f"{live} of {len(selected)} calls had them when chosen")
    assert not links, "a ModLink event although the mod was off"
    return f"hooks + transcript only (no ModLink event); {live} of {len(selected)} calls had words when chosen"


def same_model_view(out, baseline):
    (first, blocks), (first0, blocks0) = model_view(out), model_view(baseline)
    assert first, "no first request logged"
    assert first == first0, "the first request differs from the run without bir"
    extra, missing = blocks - blocks0, blocks0 - blocks
    assert not extra and not missing, (
        f"blocks only with bir: {sorted(extra)[:3]}; only without: {sorted(missing)[:3]}")
    return f"first request identical; the same {len(blocks)} distinct blocks sent (paths, ids and numbers normalised)"


def same_server_view(out, baseline):
    a, b = server_view(out), server_view(baseline)
    assert a, "no tools/call reached the server"
    assert a == b, f"the server's calls differ: {a} vs {b}"
    return f"{len(a)} tools/call with the same arguments and answers"


def check_off(rep, a, script):
    check_session(rep, a, script)
    rep.run("nothing recorded while off", lambda: (
        (_ for _ in ()).throw(AssertionError(f"runs: {jsonl(a.runs)}")) if jsonl(a.runs) else "no run in BIR_HOME"))
    if a.baseline:
        rep.run("the model saw the same as without bir", lambda: same_model_view(a.out, a.baseline))
        rep.run("the server saw the same as without bir", lambda: same_server_view(a.out, a.baseline))


def check_kill(rep, a, script):
    if not check_session(rep, a, script):
        return
    session_id = (stream_result(a.out) or {}).get("session_id")
    runs = bound_runs(a.runs)
    docs = []
    for r in runs:
        try:
            docs.append(load_export(a.exports, a.exports_prefix or a.name, r["id"]))
        except (OSError, ValueError):
            pass
    docs = [d for d in docs if d["run"]["metadata"].get("sessionId") == session_id]

    def recorded():
        assert docs, f"no bound run for session {session_id}"
        steps = [s for d in docs for s in d.get("steps") or []]
        after = [s for s in steps if s.get("type") == "tool_selected" and "after-down" in json.dumps(s.get("input"))]
        names = sorted({s["qualifiedName"] for s in after})
        assert names == ["Bash", "mcp__everything__echo"], f"steps after the daemon stopped: {names}"
        return f"{len(docs)} run(s); after the stop: {names}"
    rep.run("later steps recorded after the revive", recorded)

    def lossy():
        # Lossy, a note, or steps marked recovered: what the hooks missed
        # while no daemon ran is told from the transcript, and says so.
        flagged = [d["id"] for d in docs if d["run"]["metadata"].get("lossy") or (d.get("finish") or {}).get("lossy")
                   or d["run"]["metadata"].get("note")
                   or any(s.get("recovered") for s in d.get("steps") or [])]
        assert flagged, "no run says it missed something (lossy, a note, or recovered steps)"
        return f"says so: {flagged}"
    rep.run("the run says what it missed", lossy)


def check_whole(rep, a, script):
    """The daemon was not there for part of the session (killed, stopped,
    never started): one finished run of the session still holds every call
    the model made, each once with both records, in the scripted order, the
    ones the hooks missed marked recovered, and the model's last words."""
    if not check_session(rep, a, script):
        return
    session_id = (stream_result(a.out) or {}).get("session_id")
    docs, of_session = [], []
    for r in bound_runs(a.runs):
        try:
            doc = load_export(a.exports, a.exports_prefix or a.name, r["id"])
        except (OSError, ValueError):
            continue
        if doc["run"]["metadata"].get("sessionId") == session_id:
            of_session.append(doc["id"])
            if doc.get("finish"):
                docs.append(doc)
    expected = [e for e in scripted_calls(script) if e["conversation"] == "main"]

    def whole():
        assert docs, f"no finished bound run for session {session_id}"
        why = []
        for doc in docs:
            calls, problems = calls_of(doc)
            main = sorted(calls.values(), key=lambda c: c.get("selected", {}).get("stepIndex", 0))
            got = [(c["selected"]["qualifiedName"], c["selected"].get("input")) for c in main if "selected" in c]
            # A scripted input with a placeholder (@@BIR@@) was filled in
            # for the session: its name must match, not its input.
            want = [(e["name"], e["input"]) for e in expected]
            got = [(n, w[1] if "@@" in json.dumps(w[1]) else i) for (n, i), w in zip(got, want)] + got[len(want):]
            unpaired = [t for t, c in calls.items() if set(c) != {"selected", "response"}]
            if problems or unpaired or got != want:
                why.append(f"run {doc['id'][:14]}: {len(got)} calls {[g[0] for g in got]}; problems {problems[:2]}; unpaired {unpaired[:2]}")
                continue
            recovered = [c["selected"]["qualifiedName"] for c in main if c["selected"].get("recovered")]
            answers = answers_of(doc)
            res = (stream_result(a.out) or {}).get("result")
            assert res in answers, f"run {doc['id'][:14]}: Claude Code's result {res!r} not among its answers {answers}"
            note = doc["run"]["metadata"].get("note") or ""
            return (f"run {doc['id'][:14]} ({len(docs)} finished run(s) of the session): all {len(got)} calls in order, "
                    f"{len(recovered)} recovered from the transcript; lossy={doc['run']['metadata'].get('lossy')}; note: {note[:90]!r}")
        raise AssertionError("no run holds the whole session: " + "; ".join(why))
    # A daemon started again in the middle of a session takes up the run
    # the stopped (or killed) one left open: one run, the journal continued.
    rep.run("a whole run despite the missing daemon", whole)

    def one():
        assert len(of_session) == 1, f"{len(of_session)} runs of the session: {of_session}"
        return f"one run of the session ({of_session[0][:14]})"
    rep.run("one run for the session", one)


def check_two(rep, a, script):
    ids = []
    for out in (a.out, a.out2):
        sub = argparse.Namespace(**vars(a))
        sub.out = out
        check_session(Report(f"{a.name} {os.path.basename(out)}"), sub, script)
        ids.append((stream_result(out) or {}).get("session_id"))

    def two():
        runs = bound_runs(a.runs)
        by_session = {}
        for r in runs:
            doc = load_export(a.exports, a.exports_prefix or a.name, r["id"])
            by_session.setdefault(doc["run"]["metadata"].get("sessionId"), []).append(doc)
        assert ids[0] and ids[1] and ids[0] != ids[1], f"session ids {ids}"
        for sid in ids:
            docs = by_session.get(sid, [])
            assert len(docs) == 1, f"session {sid}: {len(docs)} runs"
            calls, problems = calls_of(docs[0])
            assert not problems, "; ".join(problems)
            assert len(calls) == len(scripted_calls(script)), f"session {sid[:8]}: {len(calls)} calls"
        assert len(runs) == 2, f"{len(runs)} bound runs"
        return f"2 runs, one per session ({ids[0][:8]}, {ids[1][:8]}), each with all its calls"
    rep.run("two sessions in one directory → two runs", two)
    for out, sid in zip((a.out, a.out2), ids):
        for r in bound_runs(a.runs):
            doc = load_export(a.exports, a.exports_prefix or a.name, r["id"])
            if doc["run"]["metadata"].get("sessionId") == sid:
                check_run(Report(f"{a.name} {os.path.basename(out)}"), a, script, doc, sid, out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["session", "bound", "off", "kill", "two", "inject", "whole"])
    ap.add_argument("--name", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--out2")
    ap.add_argument("--baseline")
    ap.add_argument("--script", required=True)
    ap.add_argument("--prompt", required=True)
    ap.add_argument("--runs")
    ap.add_argument("--exports")
    ap.add_argument("--exports-prefix")
    ap.add_argument("--mod-link", choices=["yes", "no"])
    a = ap.parse_args()
    script = json.load(open(a.script, encoding="utf-8"))
    rep = Report(a.name)
    {"session": check_session, "bound": check_bound, "off": check_off,
     "kill": check_kill, "two": check_two, "inject": check_bound,
     "whole": check_whole}[a.mode](rep, a, script)


if __name__ == "__main__":
    main()

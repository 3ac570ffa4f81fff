#!/usr/bin/env python3
"""Write the config of one offline session of the Codex CLI or the Gemini CLI.

    make_config.py codex|gemini OUT --port PORT [--mcp bare|proxy] [--bir-proxy PATH]
        [--hooks none|log|bir] [--bir-hooks PATH]

codex:  OUT/codex/config.toml (the fake model provider on 127.0.0.1:PORT, the
        project OUT/project trusted, the everything server) and, with hooks,
        OUT/codex/hooks.json
gemini: OUT/home/.gemini/settings.json (API-key auth against the fake API,
        updates/telemetry/IDE off, the everything server, hooks)

--mcp bare: the everything server run directly; proxy: through bir-proxy
(`bir-proxy --server-name everything -- node …`), the entry `bir install`
writes; relay: through mcp_log_relay.py (OUT/logs/mcp.jsonl); proxy-relay:
bir-proxy in front of the relay (what `bir install` makes of a relay entry). --hooks log: tests/e2e/hosts/log_hook.py for every event the host
has; bir: `<bir-hooks> --host <host> <Event>` for every event. --only-hooks:
leave the rest of the config as it is (e.g. as `bir install` left it).
"""
from __future__ import annotations

import argparse
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))

CODEX_EVENTS = ["SessionStart", "SessionEnd", "UserPromptSubmit", "PreToolUse", "PermissionRequest",
                "PostToolUse", "PreCompact", "PostCompact", "SubagentStart", "SubagentStop", "Stop",
                "Interrupt"]
GEMINI_EVENTS = ["SessionStart", "SessionEnd", "BeforeAgent", "AfterAgent", "BeforeModel", "AfterModel",
                 "BeforeToolSelection", "BeforeTool", "AfterTool", "PreCompress", "Notification"]


def toml_str(s: str) -> str:
    return json.dumps(s)  # a TOML basic string is a JSON string for these values


def server_command(a) -> tuple[str, list[str]]:
    everything = os.path.join(REPO, ".peers", "node_modules", "@modelcontextprotocol", "server-everything",
                              "dist", "index.js")
    if a.mcp == "proxy":
        return a.bir_proxy, ["--server-name", "everything", "--", "node", everything, "stdio"]
    log = os.path.join(os.path.abspath(a.out), "logs", "mcp.jsonl")
    relay = [os.path.join(HERE, "mcp_log_relay.py"), log, "--", "node", everything, "stdio"]
    if a.mcp == "relay":
        return "python3", relay
    if a.mcp == "proxy-relay":
        return a.bir_proxy, ["--server-name", "everything", "--", "python3"] + relay
    return "node", [everything, "stdio"]


def hook_command(a, host: str, event: str) -> str:
    if a.hooks == "log":
        return f"python3 {os.path.join(HERE, 'log_hook.py')} {event}"
    return f"{a.bir_hooks} --host {host} {event}"


def codex(a) -> None:
    out = os.path.abspath(a.out)
    os.makedirs(os.path.join(out, "codex"), exist_ok=True)
    if a.only_hooks:
        return codex_hooks(a, out)
    cmd, args = server_command(a)
    lines = [
        'model = "gpt-5-codex"',
        'model_provider = "fake"',
        "",
        "[model_providers.fake]",
        'name = "fake"',
        f'base_url = "http://127.0.0.1:{a.port}/v1"',
        'env_key = "FAKE_OPENAI_KEY"',
        'wire_api = "responses"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
        "",
        f"[projects.{toml_str(os.path.join(out, 'project'))}]",
        'trust_level = "trusted"',
        "",
        "[mcp_servers.everything]",
        f"command = {toml_str(cmd)}",
        "args = [" + ", ".join(toml_str(x) for x in args) + "]",
        "",
    ]
    with open(os.path.join(out, "codex", "config.toml"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    codex_hooks(a, out)


def codex_hooks(a, out: str) -> None:
    if a.hooks != "none":
        hooks = {e: [{"hooks": [{"type": "command", "command": hook_command(a, "codex", e),
                                 "timeout": 3 if e in ("SessionEnd", "Interrupt") else 30}]}]
                 for e in CODEX_EVENTS}
        with open(os.path.join(out, "codex", "hooks.json"), "w", encoding="utf-8") as f:
            json.dump({"hooks": hooks}, f, indent=2)
            f.write("\n")


def gemini(a) -> None:
    out = os.path.abspath(a.out)
    d = os.path.join(out, "home", ".gemini")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "settings.json")
    if a.only_hooks:
        with open(path, encoding="utf-8") as f:
            settings = json.load(f)
        settings["hooks"] = gemini_hooks(a)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(settings, f, indent=2)
            f.write("\n")
        return
    cmd, args = server_command(a)
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "ide": {"enabled": False},
        "mcpServers": {"everything": {"command": cmd, "args": args, "trust": True}},
    }
    if a.hooks != "none":
        settings["hooks"] = gemini_hooks(a)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(settings, f, indent=2)
        f.write("\n")


def gemini_hooks(a) -> dict:
    return {e: [{"matcher": "*", "hooks": [{"type": "command", "command": hook_command(a, "gemini", e),
                                             "timeout": 30000}]}] for e in GEMINI_EVENTS}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("host", choices=["codex", "gemini"])
    ap.add_argument("out")
    ap.add_argument("--port", required=True)
    ap.add_argument("--mcp", choices=["bare", "proxy", "relay", "proxy-relay"], default="bare")
    ap.add_argument("--bir-proxy", default="bir-proxy")
    ap.add_argument("--hooks", choices=["none", "log", "bir"], default="none")
    ap.add_argument("--bir-hooks", default="bir-hooks")
    ap.add_argument("--only-hooks", action="store_true",
                    help="add the hooks to the config as it is (Codex: hooks.json; Gemini: settings.json's hooks)")
    a = ap.parse_args()
    os.makedirs(os.path.join(a.out, "project"), exist_ok=True)
    (codex if a.host == "codex" else gemini)(a)


if __name__ == "__main__":
    main()

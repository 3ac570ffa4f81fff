#!/usr/bin/env python3
"""Exercise every feature of @modelcontextprotocol/server-everything through the Python `mcp` 2.x SDK.

Usage (run with the venv made by scripts/install-peers.sh):

    .peers/venv/bin/python tests/peers/feature_client.py [--mode auto|legacy] -- CMD ARGS...

CMD ARGS start the stdio server (e.g. `node .../server-everything/dist/index.js stdio`); a single
http(s) URL instead connects over Streamable HTTP (directly, or with BIR_WRAP through
`<BIR_WRAP minus a trailing --> --url URL`), and `sse+http(s)://…` over the legacy HTTP+SSE
transport (directly, or through `… --transport sse --url URL`). When the
environment variable BIR_WRAP is set, it is split with shlex and put in front of CMD, e.g.
BIR_WRAP="target/debug/bir proxy --server-name everything --" runs the server behind the proxy.

Prints ONE normalised JSON document (sorted keys) on stdout: one entry per feature with
{"ok": true, "result": ...} or {"ok": false, "error": ...}. Volatile values (times, uuids, task
ids, random log levels, env values, big payloads) are replaced by placeholders or digests so that
a direct run and a proxied run compare equal byte for byte. Exit status 1 if any feature failed,
2 on a usage error. Diagnostics go to stderr.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import shlex
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

try:
    import mcp_types as types
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.shared.exceptions import MCPError
except ImportError as exc:  # pragma: no cover - environment problem
    print(
        f"feature_client: cannot import the mcp SDK ({exc}); run scripts/install-peers.sh and use .peers/venv/bin/python",
        file=sys.stderr,
    )
    sys.exit(2)

warnings.simplefilter("ignore")  # the SDK flags legacy-only calls (ping, subscribe, setLevel) as deprecated

FEATURE_TIMEOUT = 12.0  # seconds per feature; the whole run must stay well under 30 s
DEFAULT_ENV_KEYS = {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}

# ------------------------------------------------------------------------------------------- normalise

_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_ISO = re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
_LOCALTIME = re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:\s?[AP]M)?")
_BIG = 400  # strings longer than this are replaced by a digest


def _digest(s: str | bytes) -> str:
    b = s.encode() if isinstance(s, str) else s
    return f"<sha256:{hashlib.sha256(b).hexdigest()[:16]} len={len(b)}>"


def norm_str(s: str) -> str:
    s = _UUID.sub("<uuid>", s)
    s = _ISO.sub("<iso-time>", s)
    s = _LOCALTIME.sub("<time>", s)
    if len(s) > _BIG:
        return _digest(s)
    return s


def _norm_b64(s: str) -> str:
    try:
        raw = base64.b64decode(s, validate=True)
        text = raw.decode("utf-8")
    except Exception:
        return _digest(s)
    if text.isprintable():
        return "<base64-text:" + norm_str(text) + ">"
    return _digest(s)


def norm(v: Any, key: str | None = None) -> Any:
    """Recursively normalise a JSON-like value (see module doc)."""
    if hasattr(v, "model_dump"):
        v = v.model_dump(by_alias=True, mode="json", exclude_none=True)
    if isinstance(v, dict):
        return {k: norm(x, k) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [norm(x) for x in v]
    if isinstance(v, str):
        if key in ("blob", "data"):
            return _norm_b64(v)
        if key in ("taskId", "elicitationId"):
            return "<id>"
        if key in ("createdAt", "lastUpdatedAt"):
            return "<iso-time>"
        return norm_str(v)
    return v


def describe_exc(e: BaseException) -> dict[str, Any]:
    d: dict[str, Any] = {"type": type(e).__name__, "message": norm_str(str(e))}
    if isinstance(e, MCPError):
        d["code"] = e.code
        if e.error.data is not None:
            d["data"] = norm(e.error.data)
    return d


# ------------------------------------------------------------------------------------------- recorder


class Recorder:
    """Collects what the server pushes at us (notifications and server->client requests)."""

    def __init__(self) -> None:
        self.notifications: list[tuple[str, dict[str, Any]]] = []
        self.sampling_params: list[dict[str, Any]] = []
        self.elicitation_params: list[dict[str, Any]] = []
        self.roots_calls = 0

    async def message_handler(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.notifications.append(("<exception>", {"error": repr(message)}))
            return
        dumped = message.model_dump(by_alias=True, mode="json", exclude_none=True)
        self.notifications.append((dumped.get("method", "?"), dumped.get("params") or {}))

    def methods(self) -> list[str]:
        return [m for m, _ in self.notifications]

    def count(self, method: str, pred: Callable[[dict[str, Any]], bool] = lambda p: True) -> int:
        return sum(1 for m, p in self.notifications if m == method and pred(p))

    async def sampling_callback(self, context: Any, params: types.CreateMessageRequestParams) -> Any:
        self.sampling_params.append(params.model_dump(by_alias=True, mode="json", exclude_none=True))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="canned sampling answer from bir feature_client"),
            model="bir-canned-model",
            stop_reason="endTurn",
        )

    async def elicitation_callback(self, context: Any, params: Any) -> Any:
        dumped = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        self.elicitation_params.append(dumped)
        if dumped.get("mode") == "url":
            return types.ElicitResult(action="accept")
        return types.ElicitResult(
            action="accept",
            content={
                "name": "Ada Lovelace",
                "check": True,
                "email": "ada@example.org",
                "integer": 7,
                "number": 2.5,
                "untitledSingleSelectEnum": "Joey",
            },
        )

    async def list_roots_callback(self, context: Any) -> Any:
        self.roots_calls += 1
        return types.ListRootsResult(roots=[types.Root(uri="file:///tmp/bir-peer-root", name="bir-peer-root")])


async def wait_until(pred: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        await anyio.sleep(0.02)


def _simulated_log(p: dict[str, Any]) -> bool:
    data = p.get("data")
    return isinstance(data, str) and bool(re.match(r"^\w+[- ]level[- ]message", data, re.IGNORECASE))


# ------------------------------------------------------------------------------------------- features


async def run_features(client: Client, rec: Recorder, out: dict[str, Any]) -> None:
    async def feature(name: str, fn: Callable[[], Awaitable[Any]]) -> Any:
        t0 = time.monotonic()
        try:
            with anyio.fail_after(FEATURE_TIMEOUT):
                res = await fn()
            out[name] = {"ok": True, "result": norm(res)}
            return res
        except Exception as e:  # noqa: BLE001 - every failure is recorded, never raised
            out[name] = {"ok": False, "error": describe_exc(e)}
            return None
        finally:
            print(f"feature_client: {name} {time.monotonic() - t0:.2f}s", file=sys.stderr)

    def dump(x: Any) -> Any:
        return x.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def tool(name: str, args: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        return dump(await client.call_tool(name, args or {}, **kw))

    sess = client.session

    # -- connection facts
    async def connect() -> Any:
        return {
            "protocolVersion": client.protocol_version,
            "era": "modern" if sess.discover_result is not None else "legacy",
            "serverInfo": dump(client.server_info) if client.server_info else None,
            "capabilities": dump(client.server_capabilities),
            "instructions": _digest(client.instructions or ""),
        }

    await feature("connect", connect)

    # -- listings
    tools_res = await feature("tools/list", lambda: client.list_tools())
    await feature("prompts/list", lambda: client.list_prompts())
    await feature("resources/list", lambda: client.list_resources())
    await feature("resources/templates/list", lambda: client.list_resource_templates())
    await feature("ping", lambda: client.send_ping())
    tool_names = sorted(t.name for t in tools_res.tools) if tools_res else []

    # -- simple tools
    await feature("tool/echo", lambda: tool("echo", {"message": "hello \u00e9\u4e16\U0001f600 \"quoted\"\nline2"}))
    await feature("tool/get-sum", lambda: tool("get-sum", {"a": 2, "b": 3}))
    await feature("tool/get-sum-float", lambda: tool("get-sum", {"a": 1.5, "b": -0.25}))

    async def get_env() -> Any:
        r = await tool("get-env")
        env = json.loads(r["content"][0]["text"])
        if not isinstance(env, dict) or "PATH" not in env:
            raise AssertionError("get-env did not return an object with PATH")
        # values differ by machine and wrapper: keep only which of the SDK's default keys arrived
        return {"isError": r.get("isError", False), "defaultKeysPresent": sorted(DEFAULT_ENV_KEYS & set(env))}

    await feature("tool/get-env", get_env)
    await feature("tool/get-tiny-image", lambda: tool("get-tiny-image"))
    await feature(
        "tool/get-annotated-message",
        lambda: tool("get-annotated-message", {"messageType": "error", "includeImage": True}),
    )
    await feature("tool/get-resource-links", lambda: tool("get-resource-links", {"count": 4}))
    await feature(
        "tool/get-resource-reference",
        lambda: tool("get-resource-reference", {"resourceType": "Text", "resourceId": 2}),
    )
    await feature(
        "tool/get-resource-reference-blob",
        lambda: tool("get-resource-reference", {"resourceType": "Blob", "resourceId": 3}),
    )
    await feature("tool/get-structured-content", lambda: tool("get-structured-content", {"location": "Chicago"}))

    async def unknown_tool() -> Any:
        try:
            r = await tool("no-such-tool", {})
            return {"result": r}
        except MCPError as e:
            return {"error": describe_exc(e)}

    await feature("tool/unknown-tool", unknown_tool)

    async def bad_args() -> Any:
        try:
            return {"result": await tool("get-sum", {"a": "two", "b": 3})}
        except MCPError as e:
            return {"error": describe_exc(e)}

    await feature("tool/invalid-arguments", bad_args)

    # -- progress
    async def long_running() -> Any:
        seen: list[list[float | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append([progress, total])

        r = await tool("trigger-long-running-operation", {"duration": 1, "steps": 3}, progress_callback=on_progress)
        await wait_until(lambda: len(seen) >= 3, 2.0, "3 progress callbacks")
        return {"result": r, "progress": sorted(seen, key=lambda x: x[0] or 0)}

    await feature("tool/trigger-long-running-operation+progress", long_running)

    # -- cancellation by the caller (SDK sends notifications/cancelled), then the session must still work
    async def cancel() -> Any:
        progress: list[float] = []
        outcome: dict[str, Any] = {}

        async def on_progress(p: float, total: float | None, message: str | None) -> None:
            progress.append(p)

        async def runner() -> None:
            try:
                await client.call_tool(
                    "trigger-long-running-operation", {"duration": 3, "steps": 6}, progress_callback=on_progress
                )
                outcome["outcome"] = "completed"
            except anyio.get_cancelled_exc_class():
                outcome["outcome"] = "cancelled"
                raise
            except Exception as e:  # noqa: BLE001
                outcome["outcome"] = "error"
                outcome["error"] = describe_exc(e)

        async with anyio.create_task_group() as tg:
            tg.start_soon(runner)
            await wait_until(lambda: len(progress) >= 1, 5.0, "first progress before cancelling")
            tg.cancel_scope.cancel()
        if outcome.get("outcome") != "cancelled":
            raise AssertionError(f"call was not cancelled: {outcome}")
        after = await tool("echo", {"message": "after cancel"})
        return {"outcome": outcome["outcome"], "progressBeforeCancel": progress[:1], "echoAfterCancel": after}

    await feature("cancellation", cancel)

    # -- client-side timeout: SDK raises REQUEST_TIMEOUT and sends a courtesy notifications/cancelled
    async def timeout() -> Any:
        try:
            await client.call_tool("trigger-long-running-operation", {"duration": 2, "steps": 2}, read_timeout_seconds=0.3)
        except MCPError as e:
            after = await tool("echo", {"message": "after timeout"})
            return {"error": describe_exc(e), "echoAfterTimeout": after}
        raise AssertionError("call did not time out")

    await feature("cancellation/timeout", timeout)

    # -- logging
    async def logging() -> Any:
        set_res = dump(await client.set_logging_level("debug"))
        before = rec.count("notifications/message", _simulated_log)
        on = await tool("toggle-simulated-logging")
        await wait_until(lambda: rec.count("notifications/message", _simulated_log) > before, 3.0, "a simulated log")
        off = await tool("toggle-simulated-logging")
        msgs = [p for m, p in rec.notifications if m == "notifications/message" and _simulated_log(p)]
        levels = {"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}
        if not all(p.get("level") in levels for p in msgs):
            raise AssertionError(f"bad log levels: {msgs}")
        # the server picks a random level per message: keep only the shape
        return {
            "setLevel": set_res,
            "toggleOn": on,
            "toggleOff": off,
            "simulatedMessageShape": sorted({tuple(sorted(p)) for p in msgs}),
        }

    await feature("logging", logging)

    # -- resource subscriptions
    sub_uri = "demo://resource/static/document/features.md"

    async def subscribe() -> Any:
        s = dump(await client.subscribe_resource(sub_uri))
        on = await tool("toggle-subscriber-updates")
        await wait_until(
            lambda: rec.count("notifications/resources/updated", lambda p: p.get("uri") == sub_uri) >= 1,
            3.0,
            "notifications/resources/updated",
        )
        off = await tool("toggle-subscriber-updates")
        u = dump(await client.unsubscribe_resource(sub_uri))
        updated = sorted({p.get("uri") for m, p in rec.notifications if m == "notifications/resources/updated"})
        return {"subscribe": s, "toggleOn": on, "toggleOff": off, "unsubscribe": u, "updatedUris": updated}

    await feature("resources/subscribe+updated+unsubscribe", subscribe)

    # -- completion
    async def completion() -> Any:
        ref = types.PromptReference(name="completable-prompt")
        a = await client.complete(ref, {"name": "department", "value": "E"})
        b = await client.complete(ref, {"name": "name", "value": ""}, context_arguments={"department": "Engineering"})
        c = await client.complete(types.PromptReference(name="resource-prompt"), {"name": "resourceType", "value": "B"})
        d = await client.complete(
            types.ResourceTemplateReference(uri="demo://resource/dynamic/text/{resourceId}"),
            {"name": "resourceId", "value": "7"},
        )
        return {"department": dump(a), "nameInEngineering": dump(b), "resourceType": dump(c), "templateId": dump(d)}

    await feature("completion/complete", completion)

    # -- prompts/get for every prompt
    prompt_args = {
        "simple-prompt": None,
        "args-prompt": {"city": "Lisbon", "state": "Lisboa"},
        "completable-prompt": {"department": "Engineering", "name": "Alice"},
        "resource-prompt": {"resourceType": "Text", "resourceId": "2"},
    }
    for pname, pargs in prompt_args.items():
        await feature(f"prompts/get/{pname}", lambda pname=pname, pargs=pargs: client.get_prompt(pname, pargs))
    await feature("prompts/get/resource-prompt-blob", lambda: client.get_prompt(
        "resource-prompt", {"resourceType": "Blob", "resourceId": "5"}))

    # -- resources/read: every listed static resource, template instances, an unknown one
    async def read_static() -> Any:
        listed = await client.list_resources()
        uris = sorted(r.uri for r in listed.resources if r.uri.startswith("demo://resource/static/"))
        if not uris:
            raise AssertionError("no static resources listed")
        return {u: dump(await client.read_resource(u)) for u in uris}

    await feature("resources/read/static", read_static)
    await feature("resources/read/template-text", lambda: client.read_resource("demo://resource/dynamic/text/1"))
    await feature("resources/read/template-blob", lambda: client.read_resource("demo://resource/dynamic/blob/2"))

    async def read_bad() -> Any:
        try:
            return {"result": dump(await client.read_resource("demo://resource/does/not/exist"))}
        except MCPError as e:
            return {"error": describe_exc(e)}

    await feature("resources/read/unknown", read_bad)

    # -- session-scoped resource via gzip-file-as-resource fed a data: URI (no network)
    async def gzip_session() -> Any:
        data = "data:text/plain;base64," + base64.b64encode(b"bir peer test payload\n" * 8).decode()
        before = rec.count("notifications/resources/list_changed")
        r = await tool("gzip-file-as-resource", {"name": "bir-peer.txt.gz", "data": data, "outputType": "resourceLink"})
        uri = r["content"][0]["uri"]
        listed = await client.list_resources(cache_mode="bypass")
        if uri not in {x.uri for x in listed.resources}:
            raise AssertionError(f"{uri} not listed after gzip tool")
        read = dump(await client.read_resource(uri))
        await wait_until(
            lambda: rec.count("notifications/resources/list_changed") > before, 2.0, "resources/list_changed"
        )
        return {"tool": r, "read": read}

    await feature("tool/gzip-file-as-resource+session-resource", gzip_session)

    # -- server -> client requests
    async def sampling() -> Any:
        n = len(rec.sampling_params)
        r = await tool("trigger-sampling-request", {"prompt": "Say hi to bir", "maxTokens": 20})
        if len(rec.sampling_params) != n + 1:
            raise AssertionError("sampling callback not called exactly once")
        return {"requestSeen": rec.sampling_params[-1], "result": r}

    await feature("sampling", sampling)

    async def elicitation() -> Any:
        n = len(rec.elicitation_params)
        r = await tool("trigger-elicitation-request")
        if len(rec.elicitation_params) != n + 1:
            raise AssertionError("elicitation callback not called exactly once")
        return {"requestSeen": rec.elicitation_params[-1], "result": r}

    await feature("elicitation/form", elicitation)

    async def url_elicitation() -> Any:
        r = await tool("trigger-url-elicitation", {"url": "https://example.org/bir-consent", "elicitationId": "bir-e-1"})
        return {"requestSeen": rec.elicitation_params[-1], "result": r}

    if "trigger-url-elicitation" in tool_names:
        await feature("elicitation/url", url_elicitation)

    async def url_elicitation_error() -> Any:
        try:
            r = await tool("trigger-url-elicitation", {"url": "https://example.org/bir-err", "errorPath": True})
            return {"result": r}
        except MCPError as e:
            return {"error": describe_exc(e)}

    if "trigger-url-elicitation" in tool_names:
        await feature("elicitation/url-error-32042", url_elicitation_error)

    async def roots() -> Any:
        await wait_until(lambda: rec.roots_calls >= 1, 3.0, "the server's roots/list after init")
        r = await tool("get-roots-list")
        return {"result": r}

    await feature("roots", roots)

    async def roots_changed() -> Any:
        n = rec.roots_calls
        await client.send_roots_list_changed()
        await wait_until(lambda: rec.roots_calls > n, 3.0, "roots/list after notifications/roots/list_changed")
        return {"rootsListRequestedAgain": True}

    await feature("roots/list_changed", roots_changed)

    # -- tasks (2025-11-25 experimental): the SDK has no typed client API for them, so use the raw dispatcher
    disp = sess._dispatcher  # noqa: SLF001

    async def tasks() -> Any:
        created = await disp.send_raw_request(
            "tools/call",
            {"name": "simulate-research-query", "arguments": {"topic": "bir proxy"}, "task": {"ttl": 60000}},
            {"timeout": 5},
        )
        tid = created["task"]["taskId"]
        got = await disp.send_raw_request("tasks/get", {"taskId": tid}, {"timeout": 5})
        if got.get("status") not in ("working", "completed"):
            raise AssertionError(f"unexpected status {got.get('status')}")
        result = await disp.send_raw_request("tasks/result", {"taskId": tid}, {"timeout": 10})
        final = await disp.send_raw_request("tasks/get", {"taskId": tid}, {"timeout": 5})
        created_task = dict(created["task"])
        created_task.pop("statusMessage", None)  # races with the first stage update
        return {
            "created": {**created, "task": created_task},
            "statusWhileRunningIsKnown": True,
            "result": result,
            "finalStatus": final.get("status"),
        }

    await feature("tasks/call+get+result", tasks)

    async def tasks_cancel() -> Any:
        created = await disp.send_raw_request(
            "tools/call",
            {"name": "simulate-research-query", "arguments": {"topic": "to cancel"}, "task": {"ttl": 60000}},
            {"timeout": 5},
        )
        tid = created["task"]["taskId"]
        cancelled = await disp.send_raw_request("tasks/cancel", {"taskId": tid}, {"timeout": 5})
        got = await disp.send_raw_request("tasks/get", {"taskId": tid}, {"timeout": 5})
        listed = await disp.send_raw_request("tasks/list", {}, {"timeout": 5})
        return {
            "cancelStatus": cancelled.get("status"),
            "getStatus": got.get("status"),
            "listStatuses": sorted(t.get("status") for t in listed.get("tasks", [])),
        }

    await feature("tasks/cancel+list", tasks_cancel)

    # -- final: the session still answers, and a summary of what the server pushed
    await feature("ping/final", lambda: client.send_ping())

    async def notifications() -> Any:
        deterministic_logs = sorted(
            {
                p.get("data")
                for m, p in rec.notifications
                if m == "notifications/message" and not _simulated_log(p) and isinstance(p.get("data"), str)
            }
        )
        if "<exception>" in rec.methods():
            raise AssertionError(f"transport exceptions: {[p for m, p in rec.notifications if m == '<exception>']}")
        return {
            "methodsSeen": sorted(set(rec.methods())),
            "nonRandomLogMessages": deterministic_logs,
            "toolsListChangedSeen": "notifications/tools/list_changed" in rec.methods(),
        }

    await feature("notifications/summary", notifications)


async def amain(mode: str, server_cmd: list[str]) -> int:
    wrap = shlex.split(os.environ.get("BIR_WRAP", ""))
    rec = Recorder()
    params: Any
    if len(server_cmd) == 1 and server_cmd[0].startswith(("sse+http://", "sse+https://")):
        # A legacy HTTP+SSE server: direct with the SDK's sse_client, or (with BIR_WRAP)
        # through `bir proxy --transport sse --url`.
        url = server_cmd[0][len("sse+") :]
        if wrap:
            if wrap[-1] == "--":
                wrap = wrap[:-1]
            argv = wrap + ["--transport", "sse", "--url", url]
            params = StdioServerParameters(command=argv[0], args=argv[1:])
        else:
            from mcp.client.sse import sse_client

            params = sse_client(url)
    elif len(server_cmd) == 1 and server_cmd[0].startswith(("http://", "https://")):
        # A remote server: direct over Streamable HTTP, or (with BIR_WRAP)
        # through `bir proxy --url` on stdio.
        if wrap:
            if wrap[-1] == "--":
                wrap = wrap[:-1]
            argv = wrap + ["--url", server_cmd[0]]
            params = StdioServerParameters(command=argv[0], args=argv[1:])
        else:
            params = server_cmd[0]
    else:
        argv = wrap + server_cmd
        params = StdioServerParameters(command=argv[0], args=argv[1:])
    out: dict[str, Any] = {}
    t0 = time.monotonic()
    try:
        with anyio.fail_after(60):
            async with Client(
                params,
                mode=mode,
                cache=None,
                read_timeout_seconds=15,
                client_info=types.Implementation(name="bir-feature-client", version="0.1.0"),
                sampling_callback=rec.sampling_callback,
                elicitation_callback=rec.elicitation_callback,
                list_roots_callback=rec.list_roots_callback,
                message_handler=rec.message_handler,
            ) as client:
                await run_features(client, rec, out)
    except Exception as e:  # noqa: BLE001
        out["session"] = {"ok": False, "error": describe_exc(e)}
    print(f"feature_client: total {time.monotonic() - t0:.2f}s ({len(out)} features)", file=sys.stderr)
    failed = sorted(k for k, v in out.items() if not v.get("ok"))
    doc = {"driver": "feature_client", "mode": mode, "features": out, "failed": failed}
    print(json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=False))
    if failed:
        print(f"feature_client: FAILED features: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    argv = sys.argv[1:]
    if "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    i = argv.index("--")
    ap = argparse.ArgumentParser(description="server-everything feature client")
    ap.add_argument("--mode", choices=["auto", "legacy"], default="auto")
    ns = ap.parse_args(argv[:i])
    server_cmd = argv[i + 1 :]
    if not server_cmd:
        print("feature_client: no server command after --", file=sys.stderr)
        return 2
    return anyio.run(amain, ns.mode, server_cmd)


if __name__ == "__main__":
    sys.exit(main())

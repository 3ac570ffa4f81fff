// bir's Claude Code hooks module ("mod"), installed by `bir install --mod`.
//
// It forwards what the session shows it (the prompt and response rows the
// host appends, turn.complete, session.end)
// to the bir recorder daemon over the daemon's private Unix socket, so a
// bound run gets the model's words before each tool call as they are
// appended, and each turn's exact answer.
//
// Rules it keeps (Claude Code 2.1.332's module rules and bir's own):
// * It never changes an event: every hook returns `next(e)` (or the
//   stream beneath, `yield* next(e)`) untouched; what it sends is a copy.
// * It never holds a turn: a hook only queues a copy and returns; one
//   sender posts the queue in order, one post at a time, never awaited by
//   a hook. The queue is bounded (the oldest copies go, counted).
// * It does nothing without the daemon: no socket answering bir's health
//   marker, no post (it looks again at most once a second).
// * No require calls, no dynamic imports; `$` is passed only to functions declared
//   at the top level of this file. (It hooks no streaming event; one would
//   have to be an `async function*` that `return yield* next(e)`.)
//
// Where the socket is: `<base>/bir/<16 hex>.sock`, the hex two FNV-1a
// passes over $BIR_HOME (default `$HOME/.baseinstrunner`), the base
// $XDG_RUNTIME_DIR, else $CLAUDE_CONFIG_DIR, else `$HOME/.claude` — the
// same rule as the daemon's (src/daemon/uds.rs). The daemon checks those
// directories before it binds; this side cannot (no owner or mode in
// `$.fs`), so it tries them in order and believes only a socket that
// answers `GET /health` with `"link":"bir-daemon"`.

const HEALTH_MARKER = "bir-daemon";
const URL_BASE = "http://bir";
const MAX_PATH_BYTES = 100;
const MAX_QUEUE = 1024;
const MAX_BATCH = 64;
const MAX_BATCH_CHARS = 2 * 1024 * 1024;
const MAX_EVENT_CHARS = 1024 * 1024;
const LOOK_AGAIN_MS = 1000;
const STUCK_MS = 5000;

// This loaded module's id: the daemon lets one instance hold a session.
const instance = "m" + Math.random().toString(36).slice(2, 12) + Date.now().toString(36);

const link = {
  seq: 0,
  queue: [], // JSON texts of {seq, kind, e}
  lost: 0,
  sessionId: undefined,
  socket: undefined, // a path that answered the marker, or undefined
  lookedAt: 0,
  sending: 0, // when the running sender started (0: none)
  generation: 0,
  refused: false, // 409: another instance holds this session
};

function fnv1a32(text, basis) {
  let hash = basis >>> 0;
  for (let i = 0; i < text.length; i += 1) {
    hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193) >>> 0;
  }
  return hash;
}

function trimSlashes(value) {
  let end = value.length;
  while (end > 1 && value[end - 1] === "/") end -= 1;
  return value.slice(0, end);
}

function utf8Length(value) {
  let bytes = 0;
  for (const ch of value) {
    const code = ch.codePointAt(0) || 0;
    bytes += code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4;
  }
  return bytes;
}

// The socket's file name for the daemon of `birHome`.
export function socketName(birHome) {
  const key = trimSlashes(birHome);
  const hex = (n) => n.toString(16).padStart(8, "0");
  return hex(fnv1a32(key, 0x811c9dc5)) + hex(fnv1a32(key, 0xcbf29ce4)) + ".sock";
}

// The socket paths to try, in order, for these variables.
export function socketCandidates(env) {
  const absolute = (v) => (typeof v === "string" && v.startsWith("/") ? trimSlashes(v) : undefined);
  const home = absolute(env.HOME);
  const birHome = env.BIR_HOME ? env.BIR_HOME : home === undefined ? undefined : home + "/.baseinstrunner";
  if (birHome === undefined) return [];
  const bases = [];
  const run = absolute(env.XDG_RUNTIME_DIR);
  if (run !== undefined) bases.push(run);
  const config = absolute(env.CLAUDE_CONFIG_DIR);
  if (config !== undefined) bases.push(config);
  else if (home !== undefined) bases.push(home + "/.claude");
  const name = socketName(birHome);
  return bases.map((b) => b + "/bir/" + name).filter((p) => utf8Length(p) <= MAX_PATH_BYTES);
}

async function readEnv($) {
  return {
    XDG_RUNTIME_DIR: await $.env.get("XDG_RUNTIME_DIR"),
    CLAUDE_CONFIG_DIR: await $.env.get("CLAUDE_CONFIG_DIR"),
    HOME: await $.env.get("HOME"),
    BIR_HOME: await $.env.get("BIR_HOME"),
  };
}

function isMarker(text) {
  try {
    const body = JSON.parse(text);
    return body !== null && typeof body === "object" && body.link === HEALTH_MARKER;
  } catch {
    return false;
  }
}

// The first candidate that answers bir's health marker, or undefined.
async function findSocket($) {
  const candidates = socketCandidates(await readEnv($));
  for (const socketPath of candidates) {
    try {
      const r = await $.http.fetch(URL_BASE + "/health", { socketPath });
      if (r.ok && isMarker(r.text)) return socketPath;
    } catch {
      // Nothing there, or not ours: the next one.
    }
  }
  return undefined;
}

// Queues a copy of one event and makes sure a sender runs. Never awaits.
function forward($, kind, e) {
  if (link.refused) return;
  link.seq += 1;
  let text;
  try {
    text = JSON.stringify({ seq: link.seq, kind, e });
  } catch {
    text = undefined;
  }
  if (text === undefined || text.length > MAX_EVENT_CHARS) {
    // Too large to send whole (a huge tool result): its place in the
    // order, and the ids that join it, without the payload.
    const ids = { uuid: e && e.uuid, door: e && e.door, tool_use_id: e && e.tool_use_id, agentId: e && e.agentId };
    text = JSON.stringify({ seq: link.seq, kind, e: { ...ids, truncated: true } });
  }
  link.queue.push(text);
  while (link.queue.length > MAX_QUEUE) {
    link.queue.shift();
    link.lost += 1;
  }
  const now = Date.now();
  if (link.sending !== 0 && now - link.sending < STUCK_MS) return;
  // None running, or one stuck on a post the host never finished: a new
  // sender takes over (the old one's generation no longer counts).
  link.generation += 1;
  link.sending = now;
  const generation = link.generation;
  send($, generation)
    .catch(() => {})
    .finally(() => {
      if (link.generation === generation) link.sending = 0;
    });
}

// Posts the queue in order, a batch at a time, until it is empty, the
// daemon is absent or refuses this instance.
async function send($, generation) {
  if (link.sessionId === undefined) link.sessionId = await $.session.id();
  while (link.queue.length > 0 && !link.refused && link.generation === generation) {
    if (link.socket === undefined) {
      const now = Date.now();
      if (now - link.lookedAt < LOOK_AGAIN_MS) return;
      link.lookedAt = now;
      link.socket = await findSocket($);
      if (link.socket === undefined) return;
    }
    let count = 0;
    let chars = 0;
    while (count < link.queue.length && count < MAX_BATCH && (count === 0 || chars + link.queue[count].length <= MAX_BATCH_CHARS)) {
      chars += link.queue[count].length;
      count += 1;
    }
    const batch = link.queue.slice(0, count);
    const lost = link.lost;
    const body = '{"sessionId":' + JSON.stringify(link.sessionId) + ',"lost":' + lost + ',"events":[' + batch.join(",") + "]}";
    let r;
    try {
      r = await $.http.fetch(URL_BASE + "/mod/events", {
        method: "POST",
        socketPath: link.socket,
        headers: { "content-type": "application/json", "x-bir-mod": instance },
        body,
      });
    } catch {
      link.socket = undefined; // the daemon went away: look again later
      return;
    }
    if (link.generation !== generation) return;
    if (r.status === 409) {
      // Another mod instance holds this session's link: stop for good.
      link.refused = true;
      link.queue = [];
      return;
    }
    if (r.status >= 500 || r.status === 503) {
      link.socket = undefined;
      return;
    }
    // 200, or a refusal of these events themselves (400/413): either way
    // they are done with.
    link.queue.splice(0, count);
    link.lost -= lost;
  }
}

// What it hooks is what was measured to be worth its cost: every hook of a
// module is a hop into the module's worker on the host's own path (a few
// to tens of milliseconds each), whatever the hook does. On a scripted
// 50-call session (tests/e2e/bench-mod.sh) hooking `turn.step` (its whole
// stream passes through the worker), `tool.call` and every door of
// `session.append` made the session slower than bir's command hooks alone.
// So: the rows that carry the model's words and the prompts that separate
// turns, the turn's answer, and the session's end. Not `session.start`
// either: the host awaits its first dispatch before turn one, so hooking
// it puts the worker's start on the session's start (the hooks' SessionStart
// tells the daemon the same). The daemon needs no more (the hooks tell calls
// and results; the model's name is in the transcript).
export function register(on) {
  // The model's rows (`response`: its text, thinking and tool_use blocks)
  // and the prompts (`prompt`) that start a turn. Not `attachment`,
  // `hook-context`, `compaction` (hidden from a mod a person installs:
  // matching them has the host note a skipped hook where the model reads)
  // nor `queue` (no row of the conversation). Spelled literally: the host
  // reads matchers off the source.
  on("session.append", { door: ["prompt", "response"] }, async ($, e, next) => {
    forward($, "session.append", e);
    return next(e);
  });
  on("turn.complete", async ($, e, next) => {
    const result = await next(e);
    forward($, "turn.complete", { ...e, text: result && result.text });
    return result;
  });
  on("session.end", async ($, e, next) => {
    forward($, "session.end", e);
    return next(e);
  });
}

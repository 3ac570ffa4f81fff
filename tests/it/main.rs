//! The single integration-test binary (one link step, shared support).
//!
//! * `support` — what every test shares: the binary under test, temporary
//!   homes, the scripted host; `support::wait`: waiting on an event with a
//!   deadline, the slowness factor (`BIR_TEST_SLOWNESS`) time bounds scale
//!   with, the lock timed tests hold; `support::http`: the one HTTP stub
//!   server the fakes below are made of.
//! * `bind` — proxies bind to the recorder daemon (a fake on 127.0.0.1),
//!   fall back to standalone runs and rebind; `bir off`/`on`, `BIR_OFF`,
//!   passthrough (exec), the same bytes relayed in every mode.
//! * `bound_runs` — `bir runs` on bound runs written the way the daemon
//!   writes them: the list's tier and prompt, `show`'s turns, `export`.
//! * `container` — the container recipe: the static release binary alone
//!   in an empty root (`chroot`) answers `--version` and records a session.
//! * `contention` — recording on a saturated CPU (two busy loops per
//!   CPU): short sessions and SIGINT+SIGTERM still leave finished runs
//!   (holding `support::serial`, like every test that times something).
//! * `daemon` — the recorder daemon through the real binary: started by a
//!   hook, one per home, stale and tampered discovery files, the control
//!   server's abuse cases, `bir down`, idle exit, silent hooks.
//! * `mod_socket` — the daemon's Unix socket for the Claude Code mod:
//!   private base, stale/live, 409, peer uid, the mod's words in the run.
//! * `damaged` — damaged and odd answers the host gets (lone surrogates,
//!   NULs, invalid UTF-8, odd envelopes, shared ids, stray cancels): relayed
//!   as written, recorded as what happened, their secrets not stored.
//! * `dispatch` — one executable, three names.
//! * `hosts` — other agents' whole sessions (Codex, Gemini CLI, Copilot
//!   CLI, Cursor) through `bir-hooks --host <agent>`, and `bir install
//!   --client <agent>` round trips.
//! * `golden` — direct vs proxied transcripts (the core transparency test).
//! * `install_cli` — `bir wrap`/`install`/`uninstall`/`status`/`doctor` on
//!   fixture homes.
//! * `install_sh` — `install/install.sh` run by `sh`, `dash` and `busybox sh`
//!   against a release served from 127.0.0.1.
//! * `investigate` — `bir investigate` on hand-made runs: failures, slow
//!   steps, loops, a server's changed tools, gaps in the record.
//! * `http` — `bir proxy --url`: the real server-everything over
//!   Streamable HTTP and legacy SSE, and a fault server on 127.0.0.1.
//! * `lazy` — `bir-proxy --lazy`: the same host-visible bytes as eager,
//!   with and without a tool call; changed tools announced.
//! * `layers` — the layer table of `ARCHITECTURE.md`: no import goes up a
//!   layer, no module cycle; the codemap names every file under `src/` and
//!   nothing else, and the table places exactly `lib.rs`'s modules.
//! * `leftovers` — the suite's last check: no process it started is left.
//! * `lifecycle` — signals, end of input, upstream death, restarts, limits.
//! * `listing` — `bir runs` over many runs (`synth`: a generated store):
//!   its filters, the listing index kept fresh and rebuilt when damaged,
//!   the reader's step numbers, `bir runs show --follow` on a live run.
//! * `otlp` — runs exported to OpenTelemetry against a stub receiver on
//!   127.0.0.1: protobuf and JSON, headers, gzip, retries, catch-up,
//!   `bir runs export --otlp`.
//! * `otlp_receivers` — the same export into real receivers (rotel,
//!   otelite, Arize Phoenix), each when `BIR_TEST_OTLP_RECEIVERS` names it.
//! * `record` — recording through the real proxy: the run in the local
//!   store, crash safety of the journal, switching recording off.
//! * `redacted` — only `record::payload` can make the `Redacted` values
//!   records are built of (read from the source: what the compiler keeps,
//!   kept in place).
//! * `relay` — byte-exactness under random read boundaries and large
//!   messages; the protocol's edges: a line that never ends, traffic
//!   before the handshake, empty and huge batches, floods.
//! * `remote` — the recording service (a fake on 127.0.0.1): order,
//!   retries, refresh, cool-down, `bir sync`, and where the token goes.
//! * `replay` — reusing runs against real peers: scenarios derived from
//!   recorded runs, `bir replay`/`verify` exit codes, the mock answering
//!   the Python SDK like the live server.
//! * `report` — `bir report`: the HTML page's structure (read back from
//!   the data it embeds) on standalone, bound, damaged, empty and lossy
//!   runs; `--follow` on a live run; `--open`.
//! * `secrets` — no secret reaches a sink (store, service, `bir runs`,
//!   logs) while the relayed bytes stay exactly what the peers sent.
//! * `setup` — `bir setup` on fixture homes: no client, one, several, a
//!   managed policy, a second run that changes nothing.
//! * `remote_read` — `bir runs --remote`, `show|export --remote`: runs
//!   read back from the fake service, rendered like local ones; 401
//!   refresh; an unreachable service.
//! * `tokens` — a bound run's tokens per turn in `bir runs` (the TOKENS
//!   column, `--json`), `bir runs show` and the report; costs only from
//!   prices the user set.
//! * `store` — the store under a live proxy: two proxies at once,
//!   retention and `bir sync` from others, the store deleted or unwritable.
//! * `synth` — a synthetic run store written as journals, shared with the
//!   `bir runs` benchmark.

mod bind;
mod bound_runs;
mod container;
mod contention;
mod daemon;
mod damaged;
mod dispatch;
mod golden;
mod hosts;
mod http;
mod install_cli;
mod install_sh;
mod investigate;
mod layers;
mod lazy;
mod leftovers;
mod lifecycle;
mod listing;
mod mod_socket;
mod otlp;
mod otlp_receivers;
mod record;
mod redacted;
mod relay;
mod remote;
mod remote_read;
mod replay;
mod report;
mod secrets;
mod setup;
mod store;
mod support;
mod synth;
mod tokens;

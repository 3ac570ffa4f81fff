//! What reading a message costs the relay: the envelope scanner per line.
//!
//! Run with `cargo bench --bench scan` (harness = false; release profile).
//! Prints nanoseconds per line for the two lines of a tiny `tools/call` (the
//! request and its answer, as in the relay benchmark's pipelined phase), for
//! [`LineScanner`] and, for scale, for `serde_json` merely validating the
//! same bytes (`IgnoredAny`: no tree is built).
//!
//! This is the figure behind the pipelined target's arithmetic in
//! bench/README.md: with client, relay and server sharing one CPU, the
//! relay's work per call adds up with everyone else's.
//!
//! Knobs (environment): BENCH_LINES (lines per timed round, default
//! 1 000 000), BENCH_ROUNDS (rounds, default 5; the median is shown).

#![allow(clippy::print_stdout, clippy::unwrap_used)]

mod common;

use std::hint::black_box;
use std::time::Instant;

use bir::jsonrpc::scan::LineScanner;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Nanoseconds per line of `f` over `lines` lines, median of `rounds`.
fn time_per_line(lines: usize, rounds: usize, mut f: impl FnMut() -> usize) -> f64 {
    let mut per_round = Vec::with_capacity(rounds);
    for _ in 0..=rounds {
        let started = Instant::now();
        let mut seen = 0;
        for _ in 0..lines {
            seen += f();
        }
        black_box(seen);
        per_round.push(started.elapsed().as_nanos() as f64 / lines as f64);
    }
    per_round.remove(0); // warm-up
    median(per_round)
}

fn main() {
    let lines = common::env_usize("BENCH_LINES", 1_000_000);
    let rounds = common::env_usize("BENCH_ROUNDS", 5).max(1);
    let request = b"{\"jsonrpc\":\"2.0\",\"id\":123456,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"size\":16}}}\n";
    let answer = b"{\"jsonrpc\":\"2.0\",\"id\":123456,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"abcdefghijklmnop\"}]}}\n";
    println!("scan bench: {lines} lines per round, median of {rounds} rounds\n");
    println!("| line | bytes | LineScanner ns/line | serde_json validate ns/line |");
    println!("| --- | --: | --: | --: |");
    for (name, line) in [("request", &request[..]), ("answer", &answer[..])] {
        let mut scanner = LineScanner::new();
        let scan = time_per_line(lines, rounds, || {
            let end = scanner.scan(black_box(line)).unwrap_or(0);
            black_box(scanner.end_line());
            end
        });
        let body = &line[..line.len() - 1];
        let serde = time_per_line(lines, rounds, || {
            usize::from(serde_json::from_slice::<serde::de::IgnoredAny>(black_box(body)).is_ok())
        });
        println!("| {name} | {} | {scan:.1} | {serde:.1} |", line.len());
    }
}

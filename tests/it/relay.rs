//! Byte-exactness of the relay itself, with `cat` as the upstream: every
//! byte the host writes comes back unchanged, however the writes are cut.

use std::time::Duration;

use crate::support::{Host, TempDir, command};

/// A small deterministic PRNG (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// One random but valid JSON-RPC-ish line (with its terminator).
fn random_line(rng: &mut Rng, i: u64) -> Vec<u8> {
    let pieces = [
        r#""plain""#,
        r#""esc \"q\" \\ \/ \b\f\n\r\t""#,
        r#""\u00e9\ud83d\ude80 \u2028""#,
        "\"h\u{e9}llo \u{1f680}\"",
        "18446744073709551617",
        "-0.0e-0",
        "1.50",
        "[]",
        "{}",
        "[true,false,null]",
        r#"{"nested":{"id":99,"method":"x"}}"#,
    ];
    let mut body = String::new();
    for k in 0..rng.below(6) {
        body.push_str(&format!(
            r#","k{k}":{}"#,
            pieces[rng.below(pieces.len() as u64) as usize]
        ));
    }
    let line = match rng.below(10) {
        0 => String::new(),
        1 => "   \t".to_string(),
        2 => format!(
            r#"[{{"jsonrpc":"2.0","id":{i},"method":"a"}},{{"jsonrpc":"2.0","method":"n"}}]"#
        ),
        3 => format!(r#"{{"jsonrpc":"2.0","method":"notifications/x"{body}}}"#),
        _ => format!(
            r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{"name":"t"{body}}}}}"#
        ),
    };
    let mut bytes = line.into_bytes();
    if rng.below(4) == 0 {
        bytes.push(b'\r');
    }
    bytes.push(b'\n');
    bytes
}

fn through_cat(input: &[u8], rng: &mut Rng, max_chunk: u64) -> Vec<u8> {
    let dir = TempDir::new("cat");
    let mut cmd = command(dir.proxy_link(), &dir);
    cmd.args(["--server-name", "cat", "--", "cat"]);
    let mut host = Host::start(cmd);
    let mut at = 0;
    while at < input.len() {
        let n = (1 + rng.below(max_chunk)) as usize;
        let end = (at + n).min(input.len());
        host.send_raw(&input[at..end]);
        if rng.below(50) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        at = end;
    }
    let seen = host.finish(Duration::from_secs(30));
    assert_eq!(seen.exit(), "code 0", "{}", seen.stderr);
    seen.stdout
}

#[test]
fn random_read_boundaries_are_invisible() {
    for seed in [1u64, 7, 42, 2026] {
        let mut rng = Rng(seed);
        let mut input = Vec::new();
        for i in 0..400 {
            input.extend(random_line(&mut rng, i));
        }
        let out = through_cat(&input, &mut rng, 97);
        assert!(
            out == input,
            "seed {seed}: output differs from input ({} vs {} bytes)",
            out.len(),
            input.len()
        );
    }
}

#[test]
fn a_ten_mib_message_round_trips_exactly() {
    let mut rng = Rng(3);
    let payload = "x".repeat(10 * 1024 * 1024);
    let input = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{{"blob":"{payload}"}}}}}}"#
    ) + "\n";
    let out = through_cat(input.as_bytes(), &mut rng, 1 << 20);
    assert!(
        out == input.as_bytes(),
        "10 MiB message changed ({} bytes out)",
        out.len()
    );
}

#[test]
fn a_last_line_without_newline_is_relayed_at_end_of_input() {
    let mut rng = Rng(5);
    let input = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}";
    assert_eq!(through_cat(input, &mut rng, 5), input.to_vec());
}

#[test]
fn deep_nesting_and_nul_bytes_pass_through() {
    let mut rng = Rng(11);
    let depth = 200_000;
    let mut input = "[".repeat(depth) + &"]".repeat(depth) + "\n";
    input.push_str("{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{\"a\":1}}\n");
    let out = through_cat(input.as_bytes(), &mut rng, 1 << 16);
    assert!(out == input.as_bytes(), "deeply nested line changed");
}

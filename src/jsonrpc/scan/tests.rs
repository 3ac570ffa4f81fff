//! The scanner against generated, damaged and arbitrarily cut input, and
//! against `reference` (the plain scanner it replaced).

use super::*;

fn scan_all(input: &[u8]) -> Vec<LineSummary> {
    let mut s = LineScanner::new();
    let mut out = Vec::new();
    let mut rest = input;
    while let Some(n) = s.scan(rest) {
        out.push(s.end_line());
        rest = &rest[n..];
    }
    if !rest.is_empty() {
        out.push(s.end_line());
    }
    out
}

fn one(input: &str) -> LineSummary {
    let mut v = scan_all(format!("{input}\n").as_bytes());
    assert_eq!(v.len(), 1, "{input}");
    v.remove(0)
}

#[test]
fn request_envelope() {
    let s = one(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","id":9}}"#);
    assert_eq!(s.shape, Shape::Object);
    assert_eq!(s.id.as_deref(), Some(&b"7"[..]));
    assert_eq!(s.method_raw.as_deref(), Some(&br#""tools/call""#[..]));
    assert!(!s.has_result && !s.has_error);
}

#[test]
fn response_with_id_last_and_nested_ids_ignored() {
    let s = one(r#"{"result":{"id":1,"content":[{"id":"x"}]},"jsonrpc":"2.0","id":"abc"}"#);
    assert_eq!(s.id.as_deref(), Some(&br#""abc""#[..]));
    assert!(s.has_result);
    assert_eq!(s.method_raw, None);
}

#[test]
fn binary_block_keys_are_noticed_at_any_depth() {
    let image = r#"{"id":1,"result":{"content":[{"type":"image","data":"iVBORw0","mimeType":"image/png"}]}}"#;
    let blob = r#"{"id":1,"result":{"contents":[{"uri":"a","blob":"AAAA"}]}}"#;
    let text =
        r#"{"id":1,"result":{"content":[{"type":"text","text":"data blob "data""}],"database":1}}"#;
    assert!(one(image).maybe_binary);
    assert!(one(blob).maybe_binary);
    assert!(
        !one(text).maybe_binary,
        "values and longer keys are not binary blocks"
    );
    // Cut at every byte: a key split by a read boundary is still seen.
    for (line, binary) in [(image, true), (blob, true), (text, false)] {
        for cut in 1..line.len() {
            let mut s = LineScanner::new();
            let line = format!("{line}\n");
            let (a, b) = line.as_bytes().split_at(cut);
            assert_eq!(s.scan(a), None);
            assert!(s.scan(b).is_some());
            assert_eq!(s.end_line().maybe_binary, binary, "{line} cut at {cut}");
        }
    }
}

#[test]
fn raw_id_spelling_is_kept() {
    for id in [
        "18446744073709551617",
        "1.0",
        "-0",
        "1e400",
        r#""\u0031""#,
        "[1,2]",
    ] {
        let s = one(&format!(r#"{{"id" : {id} ,"error":{{"code":1}}}}"#));
        assert_eq!(s.id.as_deref(), Some(id.as_bytes()), "{id}");
        assert!(s.has_error);
    }
}

#[test]
fn invalid_lines() {
    for bad in [
        r#"{"jsonrpc":"2.0","#,
        r#"{"a":1}{"b":2}"#,
        r#"{"a":tru}"#,
        r#"{"a":01}"#,
        r#"{"a":"\x"}"#,
        "not json",
        r#"{"a" 1}"#,
        r#"[1,]"#,
        r#"{"a":1,}"#,
        "\u{0}",
        "-",
        "1.",
    ] {
        assert_eq!(one(bad).shape, Shape::Invalid, "{bad}");
    }
}

#[test]
fn valid_shapes() {
    assert_eq!(one("").shape, Shape::Blank);
    assert_eq!(one("  \r").shape, Shape::Blank);
    assert_eq!(one("[]").shape, Shape::Array);
    assert_eq!(one(r#"[{"id":1}]"#).id, None);
    assert_eq!(one("12").shape, Shape::Scalar);
    assert_eq!(one("-0.5e+3").shape, Shape::Scalar);
    assert_eq!(one("null").shape, Shape::Scalar);
    assert_eq!(
        one(r#"{"a":"\ud83d"}"#).shape,
        Shape::Object,
        "lone surrogate is lenient"
    );
    assert_eq!(one("{\"a\":\"\u{e9}\"}\r").shape, Shape::Object);
    assert_eq!(one(r#"{}"#).shape, Shape::Object);
    assert_eq!(
        one(r#"{"a":[[],{},[{"b":[true,false,null]}]]}"#).shape,
        Shape::Object
    );
}

#[test]
fn lengths_and_no_trailing_newline() {
    let v = scan_all(b"{\"id\":1}\r\n\n{\"id\":2}");
    assert_eq!(v.len(), 3);
    assert_eq!(v[0].len, 9);
    assert_eq!(v[1].shape, Shape::Blank);
    assert_eq!(v[2].id.as_deref(), Some(&b"2"[..]));
    assert_eq!(v[2].len, 8);
}

#[test]
fn last_duplicate_id_wins() {
    let s = one(r#"{"id":1,"id":2,"method":"m"}"#);
    assert_eq!(s.id.as_deref(), Some(&b"2"[..]));
}

/// Keys are the text a JSON parser reads, however they are spelled: an
/// envelope spelled with escapes is the same envelope.
#[test]
fn escaped_keys_are_the_keys_a_parser_reads() {
    let s = one(r#"{"jsonrpc":"2.0","\u0069d":7,"m\u0065thod":"tools/call","params":{}}"#);
    assert_eq!(s.id.as_deref(), Some(&b"7"[..]));
    assert_eq!(s.method_raw.as_deref(), Some(&b"\"tools/call\""[..]));
    let s = one(r#"{"\u006D\u0065\u0074\u0068\u006F\u0064":"ping","i\u0064":1}"#);
    assert_eq!(s.method_raw.as_deref(), Some(&b"\"ping\""[..]));
    assert_eq!(s.id.as_deref(), Some(&b"1"[..]));
    let s = one(r#"{"jsonrpc":"2.0","id":3,"r\u0065sult":{"content":[{"d\u0061ta":"AA=="}]}}"#);
    assert!(s.has_result && s.maybe_binary);
    let s = one(r#"{"id":3,"\u0065rror":{"code":1}}"#);
    assert!(s.has_error);
    // Decoded, these are other keys.
    let s = one(r#"{"\u0069\u0064x":1,"i\u00e9":2,"\u0069d\u0000":3,"method":"m"}"#);
    assert_eq!(s.id, None);
    // Also when a chunk boundary cuts the escaped key anywhere.
    let line = br#"{"\u0069\u0064":12,"\u006d\u0065\u0074\u0068\u006f\u0064":"x"}
"#;
    for cut in 1..line.len() {
        let got = new_chunked(line, &[cut]);
        assert_eq!(got[0].id.as_deref(), Some(&b"12"[..]), "cut at {cut}");
        assert_eq!(
            got[0].method_raw.as_deref(),
            Some(&b"\"x\""[..]),
            "cut at {cut}"
        );
    }
}

/// The last duplicate `id` wins even when it is too long to capture: the
/// line then has no id, never the earlier one's.
#[test]
fn last_duplicate_id_wins_even_when_too_long() {
    let long = "x".repeat(VALUE_CAPTURE + 10);
    let s = one(&format!(r#"{{"id":1,"result":{{}},"id":"{long}"}}"#));
    assert_eq!(s.id, None);
    assert!(s.capture_overflow);
    let s = one(&format!(r#"{{"id":"{long}","method":"m","id":2}}"#));
    assert_eq!(s.id.as_deref(), Some(&b"2"[..]));
    assert!(!s.capture_overflow);
}

/// A line held whole is read with no capture limit.
#[test]
fn a_whole_message_keeps_long_ids() {
    let long = format!("\"{}\"", "x".repeat(VALUE_CAPTURE * 3));
    let got = summarize(format!(r#"{{"id":{long},"method":"tools/call"}}"#).as_bytes());
    assert_eq!(got.id.as_deref(), Some(long.as_bytes()));
    assert!(!got.capture_overflow);
}

#[test]
fn oversized_capture_is_flagged() {
    let long = "x".repeat(VALUE_CAPTURE + 10);
    let s = one(&format!(r#"{{"id":"{long}","method":"m"}}"#));
    assert_eq!(s.id, None);
    assert!(s.capture_overflow);
}

/// Splitting a stream at any boundaries gives the same summaries.
#[test]
fn split_anywhere_same_result() {
    let input: &[u8] = b"{\"result\":{\"t\":\"a\\\"b\\u00e9\"},\"jsonrpc\":\"2.0\",\"id\":123}\n{\"method\":\"notifications/x\",\"params\":[1.5e3,true]}\r\n[1,2]\ngarbage\n{\"id\":\"q\\\\\",\"method\":\"m\"}";
    let whole = scan_all(input);
    for step in 1..8 {
        let mut s = LineScanner::new();
        let mut got = Vec::new();
        let mut chunk_start = 0;
        while chunk_start < input.len() {
            let end = (chunk_start + step).min(input.len());
            let mut rest = &input[chunk_start..end];
            while let Some(n) = s.scan(rest) {
                got.push(s.end_line());
                rest = &rest[n..];
            }
            chunk_start = end;
        }
        got.push(s.end_line());
        assert_eq!(got, whole, "step {step}");
    }
}

/// Feeds `input` in chunks cut at `cuts` (sorted offsets) to `scan`
/// and `end` (one of the two scanners), the way the framer does.
fn chunked(
    input: &[u8],
    cuts: &[usize],
    scan: &mut dyn FnMut(&[u8]) -> Option<usize>,
    end: &mut dyn FnMut() -> LineSummary,
) -> Vec<LineSummary> {
    let mut out = Vec::new();
    let mut from = 0;
    let mut pending = false;
    for to in cuts.iter().copied().chain([input.len()]) {
        let mut rest = &input[from..to];
        while let Some(n) = scan(rest) {
            out.push(end());
            pending = false;
            rest = &rest[n..];
        }
        pending |= !rest.is_empty();
        from = to;
    }
    if pending {
        out.push(end());
    }
    out
}

fn new_chunked(input: &[u8], cuts: &[usize]) -> Vec<LineSummary> {
    let s = std::cell::RefCell::new(LineScanner::new());
    chunked(input, cuts, &mut |b| s.borrow_mut().scan(b), &mut || {
        s.borrow_mut().end_line()
    })
}

fn reference_chunked(input: &[u8], cuts: &[usize]) -> Vec<LineSummary> {
    let s = std::cell::RefCell::new(reference::LineScanner::new());
    chunked(input, cuts, &mut |b| s.borrow_mut().scan(b), &mut || {
        s.borrow_mut().end_line()
    })
}

#[test]
fn empty_container_value_is_captured_whole() {
    for (line, id) in [
        (r#"{"id":{},"method":"m"}"#, "{}"),
        (r#"{"id":[]}"#, "[]"),
        (r#"{"id":[ ] }"#, "[ ]"),
        (r#"{"method":{ },"id":[[],{}]}"#, "[[],{}]"),
    ] {
        let line = format!("{line}\n");
        for cut in 0..line.len() {
            let got = new_chunked(line.as_bytes(), &[cut]);
            assert_eq!(got.len(), 1);
            assert_eq!(
                got[0].id.as_deref(),
                Some(id.as_bytes()),
                "{line} cut {cut}"
            );
        }
    }
}

/// A small deterministic generator (xorshift64*), so failures replay.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

fn gen_ws(r: &mut Rng, out: &mut Vec<u8>) {
    if r.one_in(4) {
        for _ in 0..r.below(3) {
            out.push(*b" \t\r".get(r.below(3)).unwrap_or(&b' '));
        }
    }
}

fn gen_string(r: &mut Rng, out: &mut Vec<u8>) {
    out.push(b'"');
    let len = if r.one_in(20) {
        r.below(1200)
    } else {
        r.below(12)
    };
    let bad = r.one_in(30);
    for _ in 0..len {
        match r.below(40) {
            0 => out.extend_from_slice(br#"\""#),
            1 => out.extend_from_slice(br"\\"),
            2 => out.extend_from_slice(
                r.pick(&[r"\/", r"\b", r"\f", r"\n", r"\r", r"\t"])
                    .as_bytes(),
            ),
            3 => out.extend_from_slice(
                r.pick(&[r"\u00e9", r"\uD83D", r"\uABCD", r"\uffFF"])
                    .as_bytes(),
            ),
            4 if bad => {
                out.extend_from_slice(r.pick(&[r"\u12G4", r"\u", r"\x", r"\u0"]).as_bytes())
            }
            5 => out.extend_from_slice("é".as_bytes()),
            6 => out.push(
                *b"\x01\x08\x09\x0b\x0c\x0d\x1f\x7f"
                    .get(r.below(8))
                    .unwrap_or(&1),
            ),
            _ => out.push(b'a' + r.below(26) as u8),
        }
    }
    out.push(b'"');
}

fn gen_number(r: &mut Rng, out: &mut Vec<u8>) {
    if r.one_in(60) {
        let odd = [
            "01", "1.", "-", "1e", "1e+", ".5", "-a", "1.e3", "--1", "+1", "1E-", "0x1",
        ];
        out.extend_from_slice(r.pick(&odd).as_bytes());
        return;
    }
    if r.one_in(3) {
        out.push(b'-');
    }
    if r.one_in(4) {
        out.push(b'0');
    } else {
        out.push(b'1' + r.below(9) as u8);
        for _ in 0..r.below(8) {
            out.push(b'0' + r.below(10) as u8);
        }
    }
    if r.one_in(3) {
        out.push(b'.');
        for _ in 0..1 + r.below(4) {
            out.push(b'0' + r.below(10) as u8);
        }
    }
    if r.one_in(4) {
        out.push(*b"eE".get(r.below(2)).unwrap_or(&b'e'));
        if r.one_in(2) {
            out.push(*b"+-".get(r.below(2)).unwrap_or(&b'+'));
        }
        for _ in 0..1 + r.below(3) {
            out.push(b'0' + r.below(10) as u8);
        }
    }
}

fn gen_key(r: &mut Rng, depth: usize, out: &mut Vec<u8>) {
    if depth == 0 && r.one_in(2) {
        out.push(b'"');
        out.extend_from_slice(
            r.pick(&[
                "id",
                "method",
                "result",
                "error",
                r"\u0069d",
                r"r\u0065sult",
            ])
            .as_bytes(),
        );
        out.push(b'"');
        return;
    }
    let keys = [
        "id",
        "method",
        "result",
        "error",
        "data",
        "blob",
        "jsonrpc",
        "params",
        r"i\u0064",
        r#"d\"ta"#,
        "dat",
        "datas",
        "",
        "idx",
        "abcdefghijklmnop",
        "abcdefghijklmnopq",
        "metho",
        "resultx",
        r"\u0069d",
        r"m\u0065thod",
        r"r\u0065sult",
        r"\u0065rror",
        r"d\u0061ta",
        r"\u0062lob",
        r"\u006D\u0065\u0074\u0068\u006f\u0064",
        r"\u0069\u0064x",
        r"i\/d",
        r"\u00e9d",
        r"\ud83d\ude00",
        "abcdefghijklmnopqrstuvwxyz0123456789",
        "abcdefghijklmnopqrstuvwxyz0123456789a",
    ];
    if r.one_in(8) {
        gen_string(r, out);
    } else {
        out.push(b'"');
        out.extend_from_slice(r.pick(&keys).as_bytes());
        out.push(b'"');
    }
}

fn gen_value(r: &mut Rng, depth: usize, out: &mut Vec<u8>) {
    gen_ws(r, out);
    let containers = if depth < 6 { 4 } else { 0 };
    match r.below(10 + containers) {
        0..=2 => gen_string(r, out),
        3..=5 => gen_number(r, out),
        6 if r.one_in(30) => {
            out.extend_from_slice(r.pick(&["tru", "nul", "fals", "nulll"]).as_bytes())
        }
        6 => out.extend_from_slice(r.pick(&["true", "false", "null"]).as_bytes()),
        7..=9 if r.one_in(3) && depth > 0 => {
            out.extend_from_slice(r.pick(&["{}", "[]", "[ ]", "{ }"]).as_bytes())
        }
        7..=9 => gen_string(r, out),
        10 | 11 => gen_object(r, depth + 1, out),
        _ => {
            out.push(b'[');
            for k in 0..r.below(4) {
                if k > 0 {
                    out.push(b',');
                }
                gen_value(r, depth + 1, out);
            }
            gen_ws(r, out);
            out.push(b']');
        }
    }
    gen_ws(r, out);
}

fn gen_object(r: &mut Rng, depth: usize, out: &mut Vec<u8>) {
    out.push(b'{');
    for k in 0..r.below(6) {
        if k > 0 {
            out.push(b',');
        }
        gen_ws(r, out);
        gen_key(r, depth, out);
        gen_ws(r, out);
        out.push(b':');
        gen_value(r, depth, out);
    }
    gen_ws(r, out);
    out.push(b'}');
}

/// One line: mostly JSON-RPC-like objects, some other values, some
/// damaged.
fn gen_line(r: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    match r.below(10) {
        0 => gen_value(r, 0, &mut out),
        1 if r.one_in(2) => {
            let n = VALUE_CAPTURE - 4 + r.below(8);
            let id = "x".repeat(n);
            out.extend_from_slice(format!(r#"{{"id":"{id}","method":"m"}}"#).as_bytes());
        }
        _ => gen_object(r, 0, &mut out),
    }
    if r.one_in(4) {
        // Damage it.
        let noise = b"\n\"\\{}[],: 0123456789-.eEtrufalsn\r\x80\xff\x00x";
        for _ in 0..1 + r.below(3) {
            let at = r.below(out.len() + 1);
            match r.below(4) {
                0 => out.truncate(at),
                1 if at < out.len() => {
                    out.remove(at);
                }
                2 if !out.is_empty() => {
                    let from = r.below(out.len());
                    let to = (from + r.below(10)).min(out.len());
                    let piece = out[from..to].to_vec();
                    out.splice(at..at, piece);
                }
                _ => out.insert(at, noise[r.below(noise.len())]),
            }
        }
    }
    out
}

/// The scanner agrees with the reference (the plain byte-at-a-time
/// scanner it replaced) on generated and damaged lines, and gives the
/// same summaries however the stream is cut into chunks.
#[test]
fn same_as_reference() {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..20_000 {
        let mut input = Vec::new();
        for _ in 0..1 + r.below(3) {
            input.extend(gen_line(&mut r));
            input.extend_from_slice(r.pick(&["\n", "\n", "\r\n", "\n\n"]).as_bytes());
        }
        if r.one_in(3) {
            input.extend(gen_line(&mut r));
        }
        let want = reference_chunked(&input, &[]);
        assert_eq!(
            new_chunked(&input, &[]),
            want,
            "round {round}: {}",
            String::from_utf8_lossy(&input)
        );
        for _ in 0..4 {
            let mut cuts: Vec<usize> = (0..r.below(8)).map(|_| r.below(input.len() + 1)).collect();
            cuts.sort_unstable();
            assert_eq!(
                new_chunked(&input, &cuts),
                want,
                "round {round} cut at {cuts:?}: {}",
                String::from_utf8_lossy(&input)
            );
        }
    }
}

/// Every single cut and every pair of cuts through lines that exercise
/// each token kind give the same summaries as the unsplit line.
#[test]
fn every_cut_same_result() {
    let lines: [&[u8]; 6] = [
        br#"{"id":-12.5e+3,"method":"a\"b\u00e9","result":{"data":[true,false,null,{}]},"blob":0}"#,
        br#" { "jsonrpc" : "2.0" , "id" : [ 1 , { "x" : "y" } ] , "error" : null } "#,
        br#"{"abcdefghijklmnopq":1,"i\u0064":2,"id":"\\","method":0E0}"#,
        br#"{"id":1}{"#,
        br#"[1,"two",{"data":3}] x"#,
        b"-0.0e-00\r",
    ];
    for line in lines {
        let whole = new_chunked(line, &[]);
        assert_eq!(whole, reference_chunked(line, &[]));
        for a in 0..=line.len() {
            for b in a..=line.len() {
                assert_eq!(
                    new_chunked(line, &[a, b]),
                    whole,
                    "{} cut at {a}, {b}",
                    String::from_utf8_lossy(line)
                );
            }
        }
    }
}

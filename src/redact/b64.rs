//! Base64: the layer that looks inside base64 blobs (the lenient decoder is
//! [`crate::codec::base64_decode`]).
//!
//! A blob is a run of at least [`MIN_RUN`] characters of either alphabet
//! (`A–Z a–z 0–9 + /` or `- _`), with up to two `=`, possibly wrapped over
//! lines (`base64` wraps at 76, PEM at 64). A blob whose start decodes to
//! mostly printable UTF-8 is decoded whole and scanned by the other text
//! layers (shapes, known values, assignments, URLs); if they find anything,
//! or if it decodes to a single `user:password` pair (Docker `auth`, HTTP
//! Basic), the whole blob becomes `[REDACTED:base64]`.
//!
//! Binary payloads (PNG/JPEG images, DER certificates, SSH public keys) and
//! look-alikes (hex digests, UUIDs, long identifiers) do not decode to text
//! and stay as they are; only their first 48 bytes are ever decoded.

use crate::codec::base64_decode as decode;

/// Shortest run worth decoding (18 bytes of text).
pub(crate) const MIN_RUN: usize = 24;
/// How much of a blob is decoded before deciding it is text.
const PROBE_CHARS: usize = 64;

fn is_b64(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'-' | b'_')
}

/// Mostly printable UTF-8: valid (a character cut at the end is fine) and
/// at most one control character in ten.
pub(crate) fn is_texty(d: &[u8], cut_ok: bool) -> bool {
    if d.is_empty() {
        return false;
    }
    let valid = match std::str::from_utf8(d) {
        Ok(_) => true,
        Err(e) => cut_ok && e.error_len().is_none(),
    };
    if !valid {
        return false;
    }
    let bad = d
        .iter()
        .filter(|&&c| (c < 0x20 && !matches!(c, b'\t' | b'\n' | b'\r')) || c == 0x7f)
        .count();
    bad * 10 <= d.len()
}

/// One `user:password` pair and nothing else.
fn is_user_password(d: &str) -> bool {
    let Some((user, pass)) = d.split_once(':') else {
        return false;
    };
    !user.is_empty()
        && user.len() <= 256
        && pass.len() >= 4
        && !pass.contains(':')
        && !user.contains('/')
        && d.bytes().all(|c| c.is_ascii_graphic())
}

/// Finds base64 blobs in `s` and redacts those that hide a secret.
/// `inner` scans decoded text and says whether it found a secret.
pub(crate) fn scan(s: &str, mut inner: impl FnMut(&str) -> bool) -> Option<Vec<(usize, usize)>> {
    let b = s.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !is_b64(b[i]) || (i > 0 && is_b64(b[i - 1])) {
            i += 1;
            continue;
        }
        // A run, possibly continued over line breaks.
        let start = i;
        let mut end = i;
        let mut chars = 0usize;
        loop {
            let run_start = end;
            while end < b.len() && is_b64(b[end]) {
                end += 1;
            }
            let run = end - run_start;
            chars += run;
            // Padding.
            let mut pad = 0;
            while pad < 2 && end < b.len() && b[end] == b'=' {
                end += 1;
                pad += 1;
            }
            // Continue over a line break when the line is a full, wrapped
            // line (a multiple of 4, at least the minimum run).
            let brk = if b[end..].starts_with(b"\r\n") {
                2
            } else if b[end..].starts_with(b"\n") {
                1
            } else {
                0
            };
            if pad == 0
                && brk > 0
                && run >= MIN_RUN
                && run % 4 == 0
                && b.get(end + brk).is_some_and(|&c| is_b64(c))
            {
                end += brk;
                continue;
            }
            break;
        }
        i = end.max(start + 1);
        if chars < MIN_RUN {
            continue;
        }
        // Trim a trailing line break the loop may have eaten (it does not).
        let blob = &b[start..end];
        let probe_len = blob
            .iter()
            .scan(0usize, |n, &c| {
                if is_b64(c) {
                    *n += 1;
                }
                Some(*n)
            })
            .position(|n| n >= PROBE_CHARS)
            .map_or(blob.len(), |p| p + 1);
        let Some(probe) = decode(&blob[..probe_len]) else {
            continue;
        };
        if !is_texty(&probe, true) {
            continue;
        }
        let Some(full) = decode(blob) else { continue };
        if !is_texty(&full, true) {
            continue;
        }
        let text = String::from_utf8_lossy(&full);
        if is_user_password(text.trim_end()) || inner(&text) {
            spans.push((start, end));
        }
    }
    (!spans.is_empty()).then_some(spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for data in [
            &b""[..],
            b"f",
            b"fo",
            b"foo",
            b"foob",
            b"fooba",
            b"foobar",
            &[0xfb, 0xff, 0xfe],
        ] {
            for url in [false, true] {
                for pad in [false, true] {
                    let e = crate::codec::base64_encode(data, url, pad);
                    assert_eq!(decode(e.as_bytes()).as_deref(), Some(data), "{e}");
                }
            }
        }
        assert_eq!(
            crate::codec::base64_encode(b"foobar", false, true),
            "Zm9vYmFy"
        );
        assert_eq!(crate::codec::base64_encode(b"fo", false, true), "Zm8=");
        assert_eq!(
            crate::codec::base64_encode(&[0xfb, 0xff], true, false),
            "-_8"
        );
        assert_eq!(decode(b"Zm9v!"), None);
    }

    #[test]
    fn finds_text_blobs_only() {
        let env = crate::codec::base64_encode(b"API_KEY=abc\nDEBUG=1\n", false, true);
        let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
        let text = format!("env={env} img={png}");
        let spans = scan(&text, |t| t.contains("API_KEY")).expect("env blob");
        assert_eq!(spans.len(), 1);
        assert_eq!(&text[spans[0].0..spans[0].1], env);
        assert!(scan(png, |_| true).is_none());
        let hex = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert!(scan(hex, |_| true).is_none());
        let uuid = "123e4567-e89b-12d3-a456-426614174000";
        assert!(scan(uuid, |_| true).is_none());
        let docker = crate::codec::base64_encode(b"robot:hunter2hunter2", false, true);
        assert!(scan(&format!("{{\"auth\":\"{docker}\"}}"), |_| false).is_some());
    }

    #[test]
    fn wrapped_blobs() {
        let long = "SECRET_TOKEN=".to_owned() + &"x".repeat(100);
        let enc = crate::codec::base64_encode(long.as_bytes(), false, true);
        let wrapped: Vec<&str> = enc
            .as_bytes()
            .chunks(76)
            .map(|c| std::str::from_utf8(c).unwrap_or(""))
            .collect();
        let text = wrapped.join("\n");
        let spans = scan(&text, |t| t.contains("SECRET_TOKEN=")).expect("wrapped");
        assert_eq!(spans, vec![(0, text.len())]);
    }
}

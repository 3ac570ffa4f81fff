//! Small encodings used in several places: sha256 in hex, base64 and
//! percent-encoding. One implementation each, so the redactor looks for a
//! secret in exactly the forms the rest of bir (and its tests) produce.

/// Lowercase hex sha256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex_lower(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref())
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex_lower(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    // Byte pairs into a buffer, then one conversion: a `char` pushed at a
    // time cost the recorder more than the sha256 it renders.
    let mut out = vec![0u8; bytes.len() * 2];
    for (pair, &b) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = HEX[usize::from(b >> 4)];
        pair[1] = HEX[usize::from(b & 15)];
    }
    // ASCII by construction, so this never falls back.
    String::from_utf8(out).unwrap_or_default()
}

const STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Base64 of `data`; `url` picks the URL-safe alphabet, `pad` the `=` tail.
pub(crate) fn base64_encode(data: &[u8], url: bool, pad: bool) -> String {
    let alpha = if url { URL } else { STD };
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = match *chunk {
            [a, b, c] => u32::from(a) << 16 | u32::from(b) << 8 | u32::from(c),
            [a, b] => u32::from(a) << 16 | u32::from(b) << 8,
            [a] => u32::from(a) << 16,
            _ => 0,
        };
        let chars = chunk.len() + 1;
        for k in 0..4 {
            if k < chars {
                out.push(char::from(alpha[(n >> (18 - 6 * k) & 63) as usize]));
            } else if pad {
                out.push('=');
            }
        }
    }
    out
}

/// The value of one base64 character, of either alphabet.
fn base64_value(c: u8) -> Option<u32> {
    Some(u32::from(match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' | b'-' => 62,
        b'/' | b'_' => 63,
        _ => return None,
    }))
}

/// Decodes base64 of either alphabet, leniently: `=`, line breaks and a
/// dangling final character are ignored (the redactor meets wrapped and cut
/// blobs). `None` on any other byte.
pub fn base64_decode(s: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() / 4 * 3 + 3);
    let mut acc = 0u32;
    let mut bits = 0u32;
    for &c in s {
        if matches!(c, b'=' | b'\n' | b'\r') {
            continue;
        }
        acc = acc << 6 | base64_value(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits & 0xff) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// Percent-encoding of everything but RFC 3986 unreserved characters;
/// `upper` picks the hex case, `plus_for_space` the form encoding of ` `.
pub(crate) fn percent_encode(b: &[u8], upper: bool, plus_for_space: bool) -> String {
    const UP: &[u8; 16] = b"0123456789ABCDEF";
    const LO: &[u8; 16] = b"0123456789abcdef";
    let hex = if upper { UP } else { LO };
    let mut out = String::with_capacity(b.len() * 3);
    for &c in b {
        if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(c));
        } else if c == b' ' && plus_for_space {
            out.push('+');
        } else {
            out.push('%');
            out.push(char::from(hex[usize::from(c >> 4)]));
            out.push(char::from(hex[usize::from(c & 15)]));
        }
    }
    out
}

/// Lenient percent-decoding (`+` is a space); bad escapes stay as they are.
pub(crate) fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    if !b.iter().any(|&c| c == b'%' || c == b'+') {
        return s.to_owned();
    }
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len()
                && hex_value(b[i + 1]).is_some()
                && hex_value(b[i + 2]).is_some() =>
            {
                let hi = hex_value(b[i + 1]).unwrap_or(0);
                let lo = hex_value(b[i + 2]).unwrap_or(0);
                out.push(hi << 4 | lo);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings() {
        assert_eq!(base64_encode(b"ab", false, true), "YWI=");
        assert_eq!(base64_encode(b"abc", false, true), "YWJj");
        assert_eq!(base64_encode(b"\xfb\xff", true, false), "-_8");
        assert_eq!(percent_encode(b"a b/", true, false), "a%20b%2F");
        assert_eq!(percent_encode(b"a b", false, true), "a+b");
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(hex_lower(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        for data in [&b""[..], b"a", b"ab", b"abc", b"\xfb\xff\x00"] {
            for (url, pad) in [(false, true), (true, false)] {
                let e = base64_encode(data, url, pad);
                assert_eq!(base64_decode(e.as_bytes()).as_deref(), Some(data), "{e}");
            }
        }
        assert_eq!(base64_decode(b"YW\nJj"), Some(b"abc".to_vec()));
        assert_eq!(base64_decode(b"YW J"), None);
    }
}

//! `${VAR}` in a client's server entry: the one expansion rule for every
//! command that starts an entry the way its client would (`bir doctor`,
//! `bir replay|verify|scenario check --config`).
//!
//! The rule (`docs/clients.md`, "Variables in entries"): `${VAR}` is the
//! variable's value; `${VAR:-default}` is the value, or `default` when the
//! variable is unset or empty; an unset variable without a default, a name
//! that is not letters, digits and `_`, and an unclosed `${` stay as
//! written, so a missing variable shows in what the server is given (and in
//! its error) rather than silently becoming an empty string.

/// Expands `${VAR}` and `${VAR:-default}` like Claude Code: an unset
/// variable without a default stays as written.
pub(crate) fn expand(s: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[i..]);
            return out;
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        let valid = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        match (
            valid,
            lookup(name).filter(|v| !v.is_empty() || default.is_none()),
            default,
        ) {
            (true, Some(v), _) => out.push_str(&v),
            (true, None, Some(d)) => out.push_str(d),
            _ => out.push_str(&rest[i..i + 2 + end + 1]),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// [`expand`] with this process's environment.
pub(crate) fn expand_env(s: &str) -> String {
    expand(s, &|k| std::env::var(k).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_like_claude_code() {
        let env = |k: &str| match k {
            "A" => Some("1".to_owned()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        assert_eq!(expand("x${A}y", &env), "x1y");
        assert_eq!(expand("${B:-def}", &env), "def");
        assert_eq!(expand("${B}", &env), "${B}");
        assert_eq!(expand("${EMPTY:-d}", &env), "d");
        assert_eq!(expand("${A:-d}/${A}", &env), "1/1");
        assert_eq!(expand("${unterminated", &env), "${unterminated");
        assert_eq!(expand("${v%pat}", &env), "${v%pat}");
    }
}

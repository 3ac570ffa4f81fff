//! A minimal unified diff for `--dry-run`: bir's edits change one
//! contiguous region, so the common leading and trailing lines are context
//! and the middle is the change.

/// `---`/`+++` headers and one hunk (3 lines of context), or an empty
/// string when the texts are equal.
pub(crate) fn unified(path: &str, before: &[u8], after: &[u8]) -> String {
    if before == after {
        return String::new();
    }
    let a = String::from_utf8_lossy(before);
    let b = String::from_utf8_lossy(after);
    let a: Vec<&str> = a.split_inclusive('\n').collect();
    let b: Vec<&str> = b.split_inclusive('\n').collect();
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let max_suffix = a.len().min(b.len()) - prefix;
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(max_suffix)
        .take_while(|(x, y)| x == y)
        .count();
    let ctx_start = prefix.saturating_sub(3);
    let a_end = a.len() - suffix;
    let b_end = b.len() - suffix;
    let ctx_end_a = (a_end + 3).min(a.len());
    let ctx_end_b = (b_end + 3).min(b.len());
    let mut out = format!("--- {path}\n+++ {path} (after)\n");
    out.push_str(&format!(
        "@@ -{},{} +{},{} @@\n",
        ctx_start + 1,
        ctx_end_a - ctx_start,
        ctx_start + 1,
        ctx_end_b - ctx_start
    ));
    let line = |out: &mut String, mark: char, l: &str| {
        out.push(mark);
        out.push_str(l.trim_end_matches(['\n', '\r']));
        if !l.ends_with('\n') {
            out.push_str("\n\\ No newline at end of file");
        }
        out.push('\n');
    };
    for l in &a[ctx_start..prefix] {
        line(&mut out, ' ', l);
    }
    for l in &a[prefix..a_end] {
        line(&mut out, '-', l);
    }
    for l in &b[prefix..b_end] {
        line(&mut out, '+', l);
    }
    for l in &a[a_end..ctx_end_a] {
        line(&mut out, ' ', l);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_hunk_with_context() {
        let a = "1\n2\n3\n4\n5\n6\n7\n8\n";
        let b = "1\n2\n3\n4\nfive\n6\n7\n8\n";
        assert_eq!(
            unified("f", a.as_bytes(), b.as_bytes()),
            "--- f\n+++ f (after)\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
        );
        assert_eq!(unified("f", b"x", b"x"), "");
        let d = unified("f", b"{}", b"{\"a\":1}");
        assert!(
            d.contains("-{}\n\\ No newline at end of file\n+{\"a\":1}"),
            "{d}"
        );
    }
}

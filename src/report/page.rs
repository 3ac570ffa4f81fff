//! The HTML page: a fixed shell (inline CSS and script, no link to
//! anything outside the file) with the run's document embedded as data.
//!
//! Safety rests on two rules, both kept here and in `page.js`:
//! * recorded data enters the file only as JSON inside
//!   `<script type="application/json">`, with `<`, `>` and `&` (and the
//!   line separators U+2028/U+2029) written as `\u003c`-style escapes: no
//!   tool result can close the element (`</script>`), open a comment or
//!   start markup, whatever it holds. The JSON still parses to the same
//!   strings;
//! * the script builds the page with DOM calls and `textContent`, never by
//!   parsing recorded text as HTML.
//!
//! The page makes no network request: no external script, style, font or
//! image, and a Content-Security-Policy that forbids them (`default-src
//! 'none'`; inline style and script allowed, images only as `data:`),
//! so even a bug in the script cannot fetch anything.

use serde_json::Value;

const SHELL: &str = include_str!("page.html");
const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

/// The whole page for `doc` (see `document.rs`). `title` is recorded data
/// too: it is escaped as HTML text.
pub(crate) fn render(doc: &Value, title: &str) -> String {
    let data = embeddable_json(doc);
    let mut page = String::with_capacity(SHELL.len() + STYLE.len() + SCRIPT.len() + data.len());
    // The shell names each slot once; filled in order, and a slot's
    // content is never searched again, so data cannot fake a slot.
    let mut rest = SHELL;
    for (slot, content) in [
        ("{{TITLE}}", html_text(title)),
        ("{{STYLE}}", STYLE.to_owned()),
        ("{{DATA}}", data),
        ("{{SCRIPT}}", SCRIPT.to_owned()),
    ] {
        match rest.split_once(slot) {
            Some((before, after)) => {
                page.push_str(before);
                page.push_str(&content);
                rest = after;
            }
            None => unreachable!("page.html names every slot once, in order"),
        }
    }
    page.push_str(rest);
    page
}

/// `doc` as JSON that can sit inside a `<script>` element: every `<`, `>`,
/// `&`, U+2028 and U+2029 written as a `\uXXXX` escape. They can occur only
/// inside JSON strings, where the escape means the same character.
pub(crate) fn embeddable_json(doc: &Value) -> String {
    let json = serde_json::to_string(doc).unwrap_or_else(|_| "null".into());
    let mut out = String::with_capacity(json.len() + json.len() / 16);
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// Text for an HTML element's content or a quoted attribute.
fn html_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A payload that would close the data element or start markup stays
    /// inside its JSON string, and reads back unchanged.
    #[test]
    fn data_cannot_leave_its_element() {
        let evil = "</script><img src=x onerror=alert(1)><!-- & \u{2028}\u{2029} ]]>";
        let doc = json!({"result": evil, "</script>": 1});
        let data = embeddable_json(&doc);
        for bad in ['<', '>', '&', '\u{2028}', '\u{2029}'] {
            assert!(!data.contains(bad), "{bad:?} in {data}");
        }
        let back: Value = serde_json::from_str(&data).expect("still JSON");
        assert_eq!(back, doc);

        let page = render(&doc, "run <b>&\"x\"");
        assert_eq!(page.matches("</script>").count(), 2, "the shell's own two");
        assert!(page.contains("<title>bir report · run &lt;b&gt;&amp;&quot;x&quot;</title>"));
        assert!(!page.contains("<img src=x"));
    }

    /// No slot left unfilled, and nothing in the shell, style or script
    /// refers to the network.
    #[test]
    fn the_page_is_self_contained() {
        let page = render(&json!({}), "t");
        assert!(!page.contains("{{"), "a slot left unfilled");
        for shell in [SHELL, STYLE, SCRIPT] {
            for link in [
                "http://",
                "https://",
                "//cdn",
                "@import",
                "url(",
                "fetch(",
                "XMLHttpRequest",
                "WebSocket",
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
            ] {
                assert!(!shell.contains(link), "{link} in the page's source");
            }
        }
        assert!(page.contains("default-src 'none'"));
    }
}

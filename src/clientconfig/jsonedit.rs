//! Byte-preserving edits of JSON (and JSONC) config files.
//!
//! A config file is never re-serialised: it is parsed into a tree of byte
//! spans ([`Doc`]), and an edit replaces exactly one span (a member's value,
//! or the gap where a member is inserted or removed). Everything else —
//! key order, indentation, a BOM, CRLF, the trailing newline, comments,
//! unknown fields, `${VAR}` placeholders, number spelling — is left as it
//! was. A new value is laid out in the file's own style (indent unit,
//! `": "` vs `":"`, line ending), at the indentation of the line it goes on.
//!
//! Comments and trailing commas are accepted only in [`Flavor::Jsonc`]; in
//! plain JSON they are an error, like any other syntax error, reported with
//! its line and column.

use crate::error::Error;
use std::fmt;

/// What the file's client accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// Strict JSON (Claude Code, Cursor, …).
    Json,
    /// JSON with `//` and `/* */` comments and trailing commas (VS Code, Zed).
    Jsonc,
}

/// A syntax error, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParseError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

/// One parsed value: its byte span in the text and, for containers, the
/// children.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub start: usize,
    pub end: usize,
    pub kind: Kind,
}

#[derive(Debug, Clone)]
pub(crate) enum Kind {
    Object(Vec<Member>),
    Array(Vec<Node>),
    /// A string; the decoded value.
    String(String),
    /// `true` or `false`.
    Bool(bool),
    /// A number or `null`.
    Scalar,
}

#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub key: String,
    pub key_start: usize,
    pub key_end: usize,
    pub value: Node,
}

impl Node {
    /// The member `key` of an object (the last one, as `JSON.parse` keeps).
    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        self.member(key).map(|m| &m.value)
    }

    pub(crate) fn member(&self, key: &str) -> Option<&Member> {
        match &self.kind {
            Kind::Object(members) => members.iter().rev().find(|m| m.key == key),
            _ => None,
        }
    }

    pub(crate) fn members(&self) -> &[Member] {
        match &self.kind {
            Kind::Object(members) => members,
            _ => &[],
        }
    }

    pub(crate) fn items(&self) -> &[Node] {
        match &self.kind {
            Kind::Array(items) => items,
            _ => &[],
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match &self.kind {
            Kind::String(s) => Some(s),
            _ => None,
        }
    }

    pub(crate) fn is_true(&self) -> bool {
        matches!(self.kind, Kind::Bool(true))
    }

    pub(crate) fn is_object(&self) -> bool {
        matches!(self.kind, Kind::Object(_))
    }

    /// The value at `path` (object keys), if every step exists.
    pub(crate) fn at(&self, path: &[&str]) -> Option<&Node> {
        let mut node = self;
        for key in path {
            node = node.get(key)?;
        }
        Some(node)
    }
}

/// The layout conventions of a file, used for every value bir writes.
#[derive(Debug, Clone)]
pub(crate) struct Style {
    /// One level of indentation; `None` for a file on a single line.
    pub indent: Option<String>,
    /// Between a key and its value: `": "` or `":"`.
    pub colon: String,
    /// Between items on one line: `", "` or `","` (single-line files).
    pub comma: String,
    pub newline: &'static str,
}

/// A parsed file: the text (without a BOM), the tree, and the style.
#[derive(Debug, Clone)]
pub(crate) struct Doc {
    pub bom: bool,
    pub text: String,
    pub root: Node,
    pub flavor: Flavor,
    pub style: Style,
}

const BOM: &str = "\u{feff}";
const MAX_DEPTH: usize = 256;

impl Doc {
    /// Parses `bytes` (a leading UTF-8 BOM is remembered and restored).
    pub(crate) fn parse(bytes: &[u8], flavor: Flavor) -> Result<Doc, ParseError> {
        let text = std::str::from_utf8(bytes).map_err(|e| {
            let (line, column) = line_col(&String::from_utf8_lossy(bytes), e.valid_up_to());
            ParseError {
                line,
                column,
                message: "the file is not valid UTF-8".into(),
            }
        })?;
        let bom = text.starts_with(BOM);
        let body = text.strip_prefix(BOM).unwrap_or(text);
        let root = parse_text(body, flavor).map_err(|(offset, message)| {
            let (line, column) = line_col(body, offset);
            ParseError {
                line,
                column,
                message,
            }
        })?;
        let style = detect_style(body, &root);
        Ok(Doc {
            bom,
            text: body.to_owned(),
            root,
            flavor,
            style,
        })
    }

    /// The raw text of a node.
    pub(crate) fn raw(&self, node: &Node) -> &str {
        &self.text[node.start..node.end]
    }

    /// Sets `path` (object keys; at least one) to `value` (JSON text, in any
    /// layout). Missing objects along the path are created. Returns the new
    /// file's bytes; only the changed span differs.
    pub(crate) fn set(&self, path: &[&str], value: &str) -> Result<Vec<u8>, Error> {
        let (last, parents) = path.split_last().ok_or("empty path")?;
        let value_doc = Doc::parse(value.as_bytes(), Flavor::Jsonc)
            .map_err(|e| Error::failure(format!("bir produced an invalid value ({e}): {value}")))?;
        let mut obj = &self.root;
        for (i, key) in parents.iter().enumerate() {
            match obj.get(key) {
                Some(next) if next.is_object() => obj = next,
                Some(_) => {
                    return Err(Error::failure(format!(
                        "`{}` is not an object; refusing to edit it",
                        parents[..=i].join(".")
                    )));
                }
                None => {
                    // Create the rest of the path as nested objects.
                    let mut nested = value_doc.text.clone();
                    for k in path[i + 1..].iter().rev() {
                        nested = format!("{{{}:{}}}", json_string(k), nested);
                    }
                    let nested_doc = Doc::parse(nested.as_bytes(), Flavor::Json)
                        .map_err(|e| Error::failure(format!("internal: {e}")))?;
                    return Ok(self.insert_member(obj, key, &nested_doc));
                }
            }
        }
        if !obj.is_object() {
            return Err(Error::failure(
                "the file's top level is not an object; refusing to edit it",
            ));
        }
        match obj.member(last) {
            Some(m) => {
                let base = self.line_indent(m.key_start);
                let mut text = String::new();
                // A member of an object written on one line stays on one line.
                let one_line = !self.text[obj.start..obj.end].contains('\n');
                let style = if one_line {
                    let spaced =
                        self.text[obj.start..obj.end].contains(", ") || self.style.colon == ": ";
                    Style {
                        indent: None,
                        comma: if spaced { ", " } else { "," }.to_owned(),
                        ..self.style.clone()
                    }
                } else {
                    self.style.clone()
                };
                render(&value_doc, &value_doc.root, &style, &base, &mut text);
                Ok(self.splice(m.value.start, m.value.end, &text))
            }
            None => Ok(self.insert_member(obj, last, &value_doc)),
        }
    }

    /// Removes the member at `path`. `None` if it is not there.
    pub(crate) fn remove(&self, path: &[&str]) -> Option<Vec<u8>> {
        let (last, parents) = path.split_last()?;
        let obj = self.root.at(parents)?;
        let members = obj.members();
        let idx = members.iter().rposition(|m| m.key == *last)?;
        let m = &members[idx];
        let (start, end) = if members.len() == 1 {
            if self.only_ws_around(obj, m) {
                // The object becomes `{}`.
                (obj.start + 1, obj.end - 1)
            } else {
                // Comments inside the object stay.
                (m.key_start, self.after_comma(m.value.end))
            }
        } else if idx + 1 < members.len() {
            (m.key_start, members[idx + 1].key_start)
        } else {
            (members[idx - 1].value.end, m.value.end)
        };
        Some(self.splice(start, end, ""))
    }

    /// How many leading keys of `path` (excluding the last) name existing
    /// objects: what [`Doc::set`] would not have to create.
    pub(crate) fn existing_parents(&self, path: &[&str]) -> usize {
        let mut node = &self.root;
        for (i, key) in path[..path.len().saturating_sub(1)].iter().enumerate() {
            match node.get(key) {
                Some(n) if n.is_object() => node = n,
                _ => return i,
            }
        }
        path.len().saturating_sub(1)
    }

    /// Removes the member at `path`, then each enclosing object (up to, not
    /// including, the first `keep` keys of the path) that is left empty: the
    /// inverse of a [`Doc::set`] that created those objects.
    pub(crate) fn remove_pruning(&self, path: &[&str], keep: usize) -> Option<Vec<u8>> {
        let mut bytes = self.remove(path)?;
        let mut len = path.len() - 1;
        while len > keep {
            let doc = Doc::parse(&bytes, self.flavor).ok()?;
            match doc.root.at(&path[..len]) {
                Some(n) if n.members().is_empty() && n.is_object() => {
                    bytes = doc.remove(&path[..len])?;
                }
                _ => break,
            }
            len -= 1;
        }
        Some(bytes)
    }

    /// Appends `value` (JSON text) as the last item of the array at `path`,
    /// in the array's own layout: on its own line when the items are, else
    /// after a comma on the same line. [`Doc::remove_item`] of that item
    /// gives back the original bytes (for an empty array: when it was `[]`;
    /// other whitespace inside an empty array is the caller's to restore).
    pub(crate) fn push_item(&self, path: &[&str], value: &str) -> Result<Vec<u8>, String> {
        let value_doc = Doc::parse(value.as_bytes(), Flavor::Jsonc)
            .map_err(|e| format!("bir produced an invalid value ({e}): {value}"))?;
        let arr = self
            .root
            .at(path)
            .ok_or_else(|| format!("`{}` is missing", path.join(".")))?;
        let Kind::Array(items) = &arr.kind else {
            return Err(format!(
                "`{}` is not an array; refusing to edit it",
                path.join(".")
            ));
        };
        let nl = self.style.newline;
        let mut text = String::new();
        match (items.first(), items.last()) {
            (Some(first), Some(last)) => {
                if self.text[arr.start + 1..first.start].contains('\n') {
                    let indent = self.line_indent(first.start);
                    text.push(',');
                    text.push_str(nl);
                    text.push_str(&indent);
                    render(&value_doc, &value_doc.root, &self.style, &indent, &mut text);
                } else {
                    text.push_str(&self.style.comma);
                    let compact = Style {
                        indent: None,
                        ..self.style.clone()
                    };
                    render(&value_doc, &value_doc.root, &compact, "", &mut text);
                }
                Ok(self.splice(last.end, last.end, &text))
            }
            _ => {
                match &self.style.indent {
                    Some(unit) => {
                        let base = self.line_indent(arr.start);
                        let indent = format!("{base}{unit}");
                        text.push_str(nl);
                        text.push_str(&indent);
                        render(&value_doc, &value_doc.root, &self.style, &indent, &mut text);
                        text.push_str(nl);
                        text.push_str(&base);
                    }
                    None => render(&value_doc, &value_doc.root, &self.style, "", &mut text),
                }
                Ok(self.splice(arr.start + 1, arr.end - 1, &text))
            }
        }
    }

    /// Removes item `index` of the array at `path`: the inverse of
    /// [`Doc::push_item`]. An array left without items becomes `[]`.
    /// `None` if there is no such item.
    pub(crate) fn remove_item(&self, path: &[&str], index: usize) -> Option<Vec<u8>> {
        let arr = self.root.at(path)?;
        let Kind::Array(items) = &arr.kind else {
            return None;
        };
        let item = items.get(index)?;
        let (start, end) = if items.len() == 1 {
            let before = &self.text[arr.start + 1..item.start];
            let after = &self.text[item.end..arr.end - 1];
            if before.trim().is_empty() && after.trim().trim_start_matches(',').trim().is_empty() {
                (arr.start + 1, arr.end - 1)
            } else {
                (item.start, self.after_comma(item.end))
            }
        } else if index + 1 < items.len() {
            (item.start, items[index + 1].start)
        } else {
            (items[index - 1].end, item.end)
        };
        Some(self.splice(start, end, ""))
    }

    fn only_ws_around(&self, obj: &Node, m: &Member) -> bool {
        let before = &self.text[obj.start + 1..m.key_start];
        let after = &self.text[m.value.end..obj.end - 1];
        before.trim().is_empty() && after.trim().trim_start_matches(',').trim().is_empty()
    }

    /// The position after a `,` that follows `pos` (whitespace between), or
    /// `pos`.
    fn after_comma(&self, pos: usize) -> usize {
        let rest = &self.text[pos..];
        let trimmed = rest.trim_start();
        if trimmed.starts_with(',') {
            pos + (rest.len() - trimmed.len()) + 1
        } else {
            pos
        }
    }

    fn insert_member(&self, obj: &Node, key: &str, value: &Doc) -> Vec<u8> {
        let members = obj.members();
        let key_text = json_string(key);
        let colon = &self.style.colon;
        let nl = self.style.newline;
        match members.last() {
            Some(last) => {
                let first = &members[0];
                let on_own_line = self.text[obj.start + 1..first.key_start].contains('\n');
                let mut text = String::new();
                if on_own_line {
                    let indent = self.line_indent(first.key_start);
                    text.push(',');
                    text.push_str(nl);
                    text.push_str(&indent);
                    text.push_str(&key_text);
                    text.push_str(colon);
                    render(value, &value.root, &self.style, &indent, &mut text);
                } else {
                    text.push_str(&self.style.comma);
                    text.push_str(&key_text);
                    text.push_str(colon);
                    let compact = Style {
                        indent: None,
                        ..self.style.clone()
                    };
                    render(value, &value.root, &compact, "", &mut text);
                }
                self.splice(last.value.end, last.value.end, &text)
            }
            None => {
                let inner = &self.text[obj.start + 1..obj.end - 1];
                let replace_end = if inner.trim().is_empty() {
                    obj.end - 1
                } else {
                    obj.start + 1
                };
                let mut text = String::new();
                match &self.style.indent {
                    Some(unit) => {
                        let base = self.line_indent(obj.start);
                        let indent = format!("{base}{unit}");
                        text.push_str(nl);
                        text.push_str(&indent);
                        text.push_str(&key_text);
                        text.push_str(colon);
                        render(value, &value.root, &self.style, &indent, &mut text);
                        if replace_end == obj.end - 1 {
                            text.push_str(nl);
                            text.push_str(&base);
                        } else {
                            text.push(',');
                        }
                    }
                    None => {
                        text.push_str(&key_text);
                        text.push_str(colon);
                        render(value, &value.root, &self.style, "", &mut text);
                        if replace_end != obj.end - 1 {
                            text.push(',');
                        }
                    }
                }
                self.splice(obj.start + 1, replace_end, &text)
            }
        }
    }

    /// The leading whitespace of the line holding `pos`.
    pub(crate) fn line_indent(&self, pos: usize) -> String {
        let line_start = self.text[..pos].rfind('\n').map_or(0, |i| i + 1);
        self.text[line_start..]
            .chars()
            .take_while(|c| *c == ' ' || *c == '\t')
            .collect()
    }

    /// The file with `start..end` replaced by `text`.
    pub(crate) fn splice(&self, start: usize, end: usize, text: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.text.len() + text.len() + 3);
        if self.bom {
            out.extend_from_slice(BOM.as_bytes());
        }
        out.extend_from_slice(&self.text.as_bytes()[..start]);
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(&self.text.as_bytes()[end..]);
        out
    }
}

/// `s` as a JSON string literal.
pub(crate) fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// Lays out `node` (from `doc`) in `style`, its nested lines indented from
/// `base`. Strings and scalars are copied as written; comments inside the
/// value are dropped (a value bir writes has none).
pub(crate) fn render(doc: &Doc, node: &Node, style: &Style, base: &str, out: &mut String) {
    match &node.kind {
        Kind::Object(members) if members.is_empty() => out.push_str("{}"),
        Kind::Array(items) if items.is_empty() => out.push_str("[]"),
        Kind::Object(members) => {
            out.push('{');
            let inner = style.indent.as_ref().map(|u| format!("{base}{u}"));
            for (i, m) in members.iter().enumerate() {
                push_separator(out, i, inner.as_deref(), style);
                out.push_str(&doc.text[m.key_start..m.key_end]);
                out.push_str(&style.colon);
                render(doc, &m.value, style, inner.as_deref().unwrap_or(""), out);
            }
            if inner.is_some() {
                out.push_str(style.newline);
                out.push_str(base);
            }
            out.push('}');
        }
        Kind::Array(items) => {
            out.push('[');
            let inner = style.indent.as_ref().map(|u| format!("{base}{u}"));
            for (i, item) in items.iter().enumerate() {
                push_separator(out, i, inner.as_deref(), style);
                render(doc, item, style, inner.as_deref().unwrap_or(""), out);
            }
            if inner.is_some() {
                out.push_str(style.newline);
                out.push_str(base);
            }
            out.push(']');
        }
        Kind::String(_) | Kind::Bool(_) | Kind::Scalar => {
            out.push_str(&doc.text[node.start..node.end])
        }
    }
}

/// Before item `i`: a comma (after the first), then a new line and the
/// indentation, or the single-line separator.
fn push_separator(out: &mut String, i: usize, inner: Option<&str>, style: &Style) {
    match inner {
        Some(inner) => {
            if i > 0 {
                out.push(',');
            }
            out.push_str(style.newline);
            out.push_str(inner);
        }
        None if i > 0 => out.push_str(&style.comma),
        None => {}
    }
}

fn detect_style(text: &str, root: &Node) -> Style {
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let mut indent = None;
    let mut colon = None;
    // The first member that starts its own line gives the indent unit.
    let mut stack = vec![(root, 0usize)];
    while let Some((node, depth)) = stack.pop() {
        if let Kind::Object(members) = &node.kind
            && let Some(first) = members.first()
        {
            if colon.is_none() {
                let between = &text[first.key_end..first.value.start];
                colon = Some(if between.contains(": ") { ": " } else { ":" }.to_owned());
            }
            let before = &text[node.start + 1..first.key_start];
            if indent.is_none()
                && let Some(nl) = before.rfind('\n')
            {
                let ws: String = before[nl + 1..]
                    .chars()
                    .take_while(|c| *c == ' ' || *c == '\t')
                    .collect();
                if !ws.is_empty() {
                    let per = if ws.starts_with('\t') {
                        "\t".to_owned()
                    } else {
                        " ".repeat((ws.len() / (depth + 1)).max(1))
                    };
                    indent = Some(per);
                }
            }
            if indent.is_none() && depth < 2 {
                for m in members.iter().rev() {
                    stack.push((&m.value, depth + 1));
                }
            }
        }
    }
    let multi_line = text.trim_end().contains('\n');
    let spaced = text.contains(", ") || colon.as_deref() == Some(": ");
    Style {
        indent: indent.or_else(|| multi_line.then(|| "  ".to_owned())),
        colon: colon.unwrap_or_else(|| if multi_line { ": " } else { ":" }.to_owned()),
        comma: if !multi_line && spaced { ", " } else { "," }.to_owned(),
        newline,
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..text.floor_char_boundary(offset)];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

type PResult<T> = Result<T, (usize, String)>;

fn parse_text(text: &str, flavor: Flavor) -> PResult<Node> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
        flavor,
    };
    p.ws()?;
    if p.i >= p.s.len() {
        return Err((p.i, "the file is empty (expected a JSON value)".into()));
    }
    let root = p.value(0)?;
    p.ws()?;
    if p.i < p.s.len() {
        return Err((
            p.i,
            "unexpected text after the end of the JSON value (two documents in one file?)".into(),
        ));
    }
    Ok(root)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    flavor: Flavor,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    /// After a member or item of a container closed by `close`: consumes a
    /// `,` (false: more follow) or the closing bracket (true: done). A trailing
    /// comma is JSONC, not JSON.
    fn after_element(&mut self, close: u8, inside: &str) -> PResult<bool> {
        let close_char = char::from(close);
        self.ws()?;
        match self.peek() {
            Some(b',') => {
                let comma = self.i;
                self.i += 1;
                self.ws()?;
                if self.peek() == Some(close) && self.flavor == Flavor::Json {
                    return Err((comma, format!("trailing comma before `{close_char}`")));
                }
                Ok(false)
            }
            Some(c) if c == close => {
                self.i += 1;
                Ok(true)
            }
            None => Err((self.i, format!("unexpected end of file inside {inside}"))),
            Some(_) => Err((self.i, format!("expected `,` or `{close_char}`"))),
        }
    }

    fn ws(&mut self) -> PResult<()> {
        while let Some(c) = self.peek() {
            match c {
                b' ' | b'\t' | b'\n' | b'\r' => self.i += 1,
                b'/' if self
                    .s
                    .get(self.i + 1)
                    .is_some_and(|c| *c == b'/' || *c == b'*') =>
                {
                    if self.flavor == Flavor::Json {
                        return Err((self.i, "comments are not allowed in this JSON file".into()));
                    }
                    if self.s[self.i + 1] == b'/' {
                        while let Some(c) = self.peek() {
                            if c == b'\n' {
                                break;
                            }
                            self.i += 1;
                        }
                    } else {
                        let start = self.i;
                        self.i += 2;
                        loop {
                            match self.peek() {
                                None => return Err((start, "unterminated /* comment".into())),
                                Some(b'*') if self.s.get(self.i + 1) == Some(&b'/') => {
                                    self.i += 2;
                                    break;
                                }
                                Some(_) => self.i += 1,
                            }
                        }
                    }
                }
                _ => break,
            }
        }
        Ok(())
    }

    fn value(&mut self, depth: usize) -> PResult<Node> {
        if depth > MAX_DEPTH {
            return Err((self.i, "nested too deeply".into()));
        }
        let start = self.i;
        match self.peek() {
            None => Err((
                self.i,
                "unexpected end of file (the file is truncated?)".into(),
            )),
            Some(b'{') => {
                self.i += 1;
                let mut members = Vec::new();
                loop {
                    self.ws()?;
                    match self.peek() {
                        Some(b'}') => {
                            self.i += 1;
                            break;
                        }
                        Some(b'"') => {}
                        None => {
                            return Err((self.i, "unexpected end of file inside an object".into()));
                        }
                        Some(_) => return Err((self.i, "expected a string key or `}`".into())),
                    }
                    let key_start = self.i;
                    let key = self.string()?;
                    let key_end = self.i;
                    self.ws()?;
                    if self.peek() != Some(b':') {
                        return Err((self.i, "expected `:` after the key".into()));
                    }
                    self.i += 1;
                    self.ws()?;
                    let value = self.value(depth + 1)?;
                    members.push(Member {
                        key,
                        key_start,
                        key_end,
                        value,
                    });
                    if self.after_element(b'}', "an object")? {
                        break;
                    }
                }
                Ok(Node {
                    start,
                    end: self.i,
                    kind: Kind::Object(members),
                })
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    self.ws()?;
                    if self.peek() == Some(b']') {
                        self.i += 1;
                        break;
                    }
                    items.push(self.value(depth + 1)?);
                    if self.after_element(b']', "an array")? {
                        break;
                    }
                }
                Ok(Node {
                    start,
                    end: self.i,
                    kind: Kind::Array(items),
                })
            }
            Some(b'"') => {
                let s = self.string()?;
                Ok(Node {
                    start,
                    end: self.i,
                    kind: Kind::String(s),
                })
            }
            Some(b't') => self.literal("true", Kind::Bool(true)),
            Some(b'f') => self.literal("false", Kind::Bool(false)),
            Some(b'n') => self.literal("null", Kind::Scalar),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err((self.i, "expected a JSON value".into())),
        }
    }

    fn literal(&mut self, word: &str, kind: Kind) -> PResult<Node> {
        let start = self.i;
        if self.s[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(Node {
                start,
                end: self.i,
                kind,
            })
        } else {
            Err((self.i, "expected a JSON value".into()))
        }
    }

    fn number(&mut self) -> PResult<Node> {
        let start = self.i;
        let digits = |p: &mut Self| {
            let from = p.i;
            while p.peek().is_some_and(|c| c.is_ascii_digit()) {
                p.i += 1;
            }
            p.i > from
        };
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        if self.peek() == Some(b'0') {
            self.i += 1;
        } else if !digits(self) {
            return Err((self.i, "invalid number".into()));
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if !digits(self) {
                return Err((self.i, "invalid number".into()));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if !digits(self) {
                return Err((self.i, "invalid number".into()));
            }
        }
        Ok(Node {
            start,
            end: self.i,
            kind: Kind::Scalar,
        })
    }

    /// A string literal at `self.i` (which is `"`); returns the decoded text.
    fn string(&mut self) -> PResult<String> {
        let start = self.i;
        self.i += 1;
        let mut out = String::new();
        loop {
            let run_start = self.i;
            while let Some(c) = self.peek() {
                if c == b'"' || c == b'\\' || c < 0x20 {
                    break;
                }
                self.i += 1;
            }
            // The input is a &str, and the run stops at ASCII bytes only.
            out.push_str(std::str::from_utf8(&self.s[run_start..self.i]).unwrap_or_default());
            match self.peek() {
                None => return Err((start, "unterminated string".into())),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    let esc = self.s.get(self.i + 1).copied();
                    self.i += 2;
                    match esc {
                        Some(b'"') => out.push('"'),
                        Some(b'\\') => out.push('\\'),
                        Some(b'/') => out.push('/'),
                        Some(b'b') => out.push('\u{8}'),
                        Some(b'f') => out.push('\u{c}'),
                        Some(b'n') => out.push('\n'),
                        Some(b'r') => out.push('\r'),
                        Some(b't') => out.push('\t'),
                        Some(b'u') => {
                            let hi = self.hex4()?;
                            let c = if (0xD800..0xDC00).contains(&hi)
                                && self.s[self.i..].starts_with(b"\\u")
                            {
                                self.i += 2;
                                let lo = self.hex4()?;
                                if (0xDC00..0xE000).contains(&lo) {
                                    char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))
                                } else {
                                    None
                                }
                            } else {
                                char::from_u32(hi)
                            };
                            out.push(c.unwrap_or('\u{fffd}'));
                        }
                        _ => return Err((self.i - 2, "invalid escape in a string".into())),
                    }
                }
                Some(_) => {
                    return Err((self.i, "control character inside a string".into()));
                }
            }
        }
    }

    fn hex4(&mut self) -> PResult<u32> {
        let hex = self
            .s
            .get(self.i..self.i + 4)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or((self.i, "invalid \\u escape".to_owned()))?;
        self.i += 4;
        Ok(hex)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(s: &str) -> Doc {
        Doc::parse(s.as_bytes(), Flavor::Json).expect("parse")
    }

    fn set(s: &str, path: &[&str], v: &str) -> String {
        String::from_utf8(doc(s).set(path, v).expect("set")).expect("utf8")
    }

    fn remove(s: &str, path: &[&str]) -> String {
        String::from_utf8(doc(s).remove(path).expect("present")).expect("utf8")
    }

    /// Inserting then removing gives back the original bytes.
    fn round_trip(s: &str, path: &[&str], v: &str) -> String {
        let added = set(s, path, v);
        let keep = doc(s).existing_parents(path);
        let back = doc(&added).remove_pruning(path, keep).expect("present");
        assert_eq!(
            String::from_utf8(back).expect("utf8"),
            s,
            "round trip of {path:?}"
        );
        added
    }

    #[test]
    fn array_items_are_appended_in_the_arrays_layout_and_removed_exactly() {
        let cases = [
            (
                "{\n  \"a\": [\n    1,\n    2\n  ]\n}\n",
                "{\n  \"a\": [\n    1,\n    2,\n    {\n      \"k\": [\n        3\n      ]\n    }\n  ]\n}\n",
            ),
            ("{\"a\": [1, 2]}", "{\"a\": [1, 2, {\"k\": [3]}]}"),
            (
                "{\n  \"a\": []\n}",
                "{\n  \"a\": [\n    {\n      \"k\": [\n        3\n      ]\n    }\n  ]\n}",
            ),
            (
                "{\r\n\t\"a\": [\r\n\t\t0\r\n\t]\r\n}",
                "{\r\n\t\"a\": [\r\n\t\t0,\r\n\t\t{\r\n\t\t\t\"k\": [\r\n\t\t\t\t3\r\n\t\t\t]\r\n\t\t}\r\n\t]\r\n}",
            ),
        ];
        for (before, want) in cases {
            let added =
                String::from_utf8(doc(before).push_item(&["a"], r#"{"k":[3]}"#).expect("push"))
                    .expect("utf8");
            assert_eq!(added, want, "push into {before:?}");
            let n = doc(&added).root.at(&["a"]).expect("a").items().len();
            let back = doc(&added).remove_item(&["a"], n - 1).expect("present");
            assert_eq!(String::from_utf8(back).expect("utf8"), before);
        }
        // A middle item goes with its separator; a non-array is refused.
        let s = "{\"a\": [1, 2, 3]}";
        let out = doc(s).remove_item(&["a"], 1).expect("present");
        assert_eq!(String::from_utf8(out).expect("utf8"), "{\"a\": [1, 3]}");
        assert!(doc(s).remove_item(&["a"], 3).is_none());
        assert!(doc("{\"a\": {}}").push_item(&["a"], "1").is_err());
    }

    #[test]
    fn replaces_only_the_value_span() {
        let s = "{\n    \"b\": 1,\n    \"a\": {\"x\": \"${HOME}\"},\n    \"c\": [1e400, 12345678901234567890]\n}";
        let out = set(s, &["a"], r#"{"y":2}"#);
        assert_eq!(
            out,
            "{\n    \"b\": 1,\n    \"a\": {\n        \"y\": 2\n    },\n    \"c\": [1e400, 12345678901234567890]\n}"
        );
    }

    #[test]
    fn inserts_in_the_files_style_and_removes_exactly() {
        let s = "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"}\n  }\n}\n";
        let out = round_trip(s, &["mcpServers", "b"], r#"{"command":"y","args":["1"]}"#);
        assert_eq!(
            out,
            "{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"},\n    \"b\": {\n      \"command\": \"y\",\n      \"args\": [\n        \"1\"\n      ]\n    }\n  }\n}\n"
        );
    }

    #[test]
    fn empty_object_and_missing_parents() {
        let s = "{\n  \"projects\": {}\n}";
        let out = round_trip(s, &["projects", "/p"], r#"{"a":1}"#);
        assert_eq!(
            out,
            "{\n  \"projects\": {\n    \"/p\": {\n      \"a\": 1\n    }\n  }\n}"
        );
        let s = "{\n  \"other\": true\n}";
        let out = round_trip(s, &["projects", "/p", "mcpServers", "x"], "{}");
        assert!(out.contains("\"projects\": {\n    \"/p\": {\n      \"mcpServers\": {\n        \"x\": {}\n      }\n    }\n  }"), "{out}");
    }

    #[test]
    fn crlf_bom_tabs_and_no_trailing_newline_survive() {
        let s = "\u{feff}{\r\n\t\"mcpServers\": {\r\n\t\t\"a\": 1\r\n\t}\r\n}";
        let d = Doc::parse(s.as_bytes(), Flavor::Json).expect("parse");
        assert!(d.bom);
        let out = String::from_utf8(d.set(&["mcpServers", "b"], r#"{"k":[1]}"#).expect("set"))
            .expect("utf8");
        assert_eq!(
            out,
            "\u{feff}{\r\n\t\"mcpServers\": {\r\n\t\t\"a\": 1,\r\n\t\t\"b\": {\r\n\t\t\t\"k\": [\r\n\t\t\t\t1\r\n\t\t\t]\r\n\t\t}\r\n\t}\r\n}"
        );
        let back = Doc::parse(out.as_bytes(), Flavor::Json)
            .expect("parse")
            .remove(&["mcpServers", "b"])
            .expect("present");
        assert_eq!(back, s.as_bytes());
    }

    #[test]
    fn a_one_line_entry_in_a_pretty_file_stays_on_one_line() {
        let s = "{\n  \"m\": {\n    \"a\": {\"command\": \"x\", \"args\": [\"1\"]}\n  }\n}";
        let out = set(s, &["m", "a", "args"], r#"["--","x","1"]"#);
        assert_eq!(out, s.replace(r#"["1"]"#, r#"["--", "x", "1"]"#));
    }

    #[test]
    fn compact_files_stay_compact() {
        let s = r#"{"mcpServers":{"a":{"command":"x"}},"z":1}"#;
        let out = round_trip(s, &["mcpServers", "b"], r#"{ "command" : "y" }"#);
        assert_eq!(
            out,
            r#"{"mcpServers":{"a":{"command":"x"},"b":{"command":"y"}},"z":1}"#
        );
        let out = round_trip(r#"{"m":{}}"#, &["m", "k"], "[1, 2]");
        assert_eq!(out, r#"{"m":{"k":[1,2]}}"#);
    }

    #[test]
    fn removes_first_middle_and_only_members() {
        let s = "{\n  \"a\": 1,\n  \"b\": 2,\n  \"c\": 3\n}";
        assert_eq!(remove(s, &["a"]), "{\n  \"b\": 2,\n  \"c\": 3\n}");
        assert_eq!(remove(s, &["b"]), "{\n  \"a\": 1,\n  \"c\": 3\n}");
        assert_eq!(remove(s, &["c"]), "{\n  \"a\": 1,\n  \"b\": 2\n}");
        assert_eq!(remove("{\"m\": {\"a\": 1}}", &["m", "a"]), "{\"m\": {}}");
        assert!(doc(s).remove(&["zz"]).is_none());
    }

    #[test]
    fn unicode_keys_and_escapes_are_kept_as_written() {
        let s = "{\n  \"s\\u00e9rver\": {\"v\": \"a\\/b\"},\n  \"日本\": 1\n}";
        let d = doc(s);
        assert!(d.root.get("séerver").is_none());
        assert_eq!(
            d.root.at(&["sérver", "v"]).and_then(Node::as_str),
            Some("a/b")
        );
        let out = round_trip(s, &["日本2"], "2");
        assert!(out.contains("\"日本2\": 2"), "{out}");
        let out = set(s, &["日本"], "3");
        assert_eq!(out, s.replace("\"日本\": 1", "\"日本\": 3"));
    }

    #[test]
    fn jsonc_comments_and_trailing_commas_survive() {
        let s = "{\n  // my servers\n  \"servers\": {\n    \"a\": {\"command\": \"x\"}, // first\n    /* keep */\n  },\n  \"inputs\": [],\n}\n";
        assert!(Doc::parse(s.as_bytes(), Flavor::Json).is_err());
        let d = Doc::parse(s.as_bytes(), Flavor::Jsonc).expect("jsonc");
        let out = String::from_utf8(d.set(&["servers", "b"], r#"{"command":"y"}"#).expect("set"))
            .expect("utf8");
        assert_eq!(
            out,
            "{\n  // my servers\n  \"servers\": {\n    \"a\": {\"command\": \"x\"},\n    \"b\": {\n      \"command\": \"y\"\n    }, // first\n    /* keep */\n  },\n  \"inputs\": [],\n}\n"
        );
        let back = Doc::parse(out.as_bytes(), Flavor::Jsonc)
            .expect("parse")
            .remove(&["servers", "b"])
            .expect("present");
        assert_eq!(String::from_utf8(back).expect("utf8"), s);
        let out = String::from_utf8(d.set(&["servers", "a", "command"], "\"z\"").expect("set"))
            .expect("utf8");
        assert_eq!(out, s.replace("\"x\"", "\"z\""));
    }

    #[test]
    fn malformed_files_name_line_and_column() {
        let cases: &[(&str, (usize, usize), &str)] = &[
            ("{\n  \"a\": 1,\n", (3, 1), "end of file"),
            ("{}{}", (1, 3), "after the end"),
            ("", (1, 1), "empty"),
            ("  \n", (2, 1), "empty"),
            ("{\"a\" 1}", (1, 6), "`:`"),
            ("{\"a\": 1,}", (1, 8), "trailing comma"),
            ("{\"a\": tru}", (1, 7), "value"),
            ("{\"a\": \"x\ny\"}", (1, 9), "control character"),
            ("{\n // c\n}", (2, 2), "comments"),
        ];
        for (text, (line, column), needle) in cases {
            let err = Doc::parse(text.as_bytes(), Flavor::Json).expect_err(text);
            assert_eq!((err.line, err.column), (*line, *column), "{text:?}: {err}");
            assert!(err.message.contains(needle), "{text:?}: {err}");
        }
        let err = Doc::parse(b"{\"a\": \"\xff\"}", Flavor::Json).expect_err("utf8");
        assert!(err.message.contains("UTF-8"), "{err}");
    }

    #[test]
    fn refuses_to_descend_into_a_non_object() {
        let d = doc("{\"projects\": []}");
        let err = d
            .set(&["projects", "x", "y"], "1")
            .expect_err("not an object")
            .to_string();
        assert!(err.contains("`projects` is not an object"), "{err}");
    }
}

//! The layer rules of `ARCHITECTURE.md`, enforced.
//!
//! Reads every `use` path and every inline `crate::`/`super::`/`self::`
//! path in `src/`, resolves it to the module it names, and fails on:
//!
//! * a top-level module that the layer table does not place;
//! * an import from a top-level module to one in the same or a higher
//!   layer, unless the exception list names that pair;
//! * a cycle between top-level modules, or between the submodules of one
//!   module (a child using its parent's items is not a cycle);
//! * an import that an invariant of the form "X never reaches Y" forbids;
//! * a file under `src/` the codemap does not name, a path the codemap
//!   names that does not exist, or a layer table that places other
//!   modules than `lib.rs` declares (the map checked both ways);
//! * a document cited in `src/`, `tests/` or `docs/` (a `*.md` name) that
//!   no file in the repository has: a reader could not open it.
//!
//! The table, the exceptions and the absences are read from
//! `ARCHITECTURE.md` itself (the fenced blocks tagged `layers`,
//! `layer-exceptions` and `import-absences`), so the document and the code
//! cannot drift apart.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

type ModPath = Vec<String>;

/// One resolved import: who, whom, and where it was written.
struct Edge {
    from: ModPath,
    to: ModPath,
    file: PathBuf,
    path: String,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .expect("read src")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module a file defines: `src/a/b.rs` and `src/a/b/mod.rs` are
/// `a::b`; `lib.rs` and `main.rs` are the crate root (empty path).
fn module_of(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        parts.clear();
    }
    parts
}

/// The source with comments, string and character literals blanked out
/// (so a path in a doc comment or a message is not an import).
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, c: u8| out.push(if c == b'\n' { b'\n' } else { b' ' });
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == b'/' && next == Some(b'/') {
            while i < b.len() && b[i] != b'\n' {
                blank(&mut out, b[i]);
                i += 1;
            }
        } else if c == b'/' && next == Some(b'*') {
            let mut depth = 0usize;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
        } else if (c == b'r' || c == b'b')
            && !b[..i]
                .last()
                .is_some_and(|p| p.is_ascii_alphanumeric() || *p == b'_')
            && raw_string_len(&b[i..]).is_some()
        {
            let n = raw_string_len(&b[i..]).unwrap_or(1);
            for &x in &b[i..i + n] {
                blank(&mut out, x);
            }
            i += n;
        } else if c == b'"' {
            blank(&mut out, c);
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    blank(&mut out, b[i]);
                    i += 1;
                }
                if i < b.len() {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
            if i < b.len() {
                blank(&mut out, b[i]);
                i += 1;
            }
        } else if c == b'\'' {
            // A character literal ('a', '\n', '\u{1F}', '"'), or a lifetime.
            let len = if next == Some(b'\\') {
                b[i + 2..].iter().position(|&x| x == b'\'').map(|p| p + 3)
            } else {
                let ch_len = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch_len) == Some(&b'\'')).then_some(ch_len + 2)
            };
            match len {
                Some(n) => {
                    out.extend(std::iter::repeat_n(b' ', n));
                    i += n;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The length of a raw string literal (`r"…"`, `r#"…"#`, `br"…"`) starting
/// here, if one does.
fn raw_string_len(b: &[u8]) -> Option<usize> {
    let mut i = 0;
    if b.first() == Some(&b'b') {
        i += 1;
    }
    if b.get(i) != Some(&b'r') {
        return None;
    }
    i += 1;
    let hashes = b[i..].iter().take_while(|&&c| c == b'#').count();
    i += hashes;
    if b.get(i) != Some(&b'"') {
        return None;
    }
    i += 1;
    while i < b.len() {
        if b[i] == b'"'
            && b[i + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == b'#')
                .count()
                == hashes
        {
            return Some(i + 1 + hashes);
        }
        i += 1;
    }
    None
}

/// Splits a `use` tree (`a::{b, c::{d, e}}`) into its leaf paths.
fn flatten_use(tree: &str, prefix: &str, out: &mut Vec<String>) {
    let tree = tree.trim();
    if tree.is_empty() {
        return;
    }
    if let Some(open) = tree.find('{') {
        let head = tree[..open].trim().trim_end_matches("::");
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let base = join(prefix, head);
        let mut depth = 0usize;
        let mut start = 0;
        for (k, ch) in inner.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => depth = depth.saturating_sub(1),
                ',' if depth == 0 => {
                    flatten_use(&inner[start..k], &base, out);
                    start = k + 1;
                }
                _ => {}
            }
        }
        flatten_use(&inner[start..], &base, out);
    } else {
        let item = tree.split(" as ").next().unwrap_or(tree).trim();
        out.push(join(prefix, item));
    }
}

fn join(prefix: &str, rest: &str) -> String {
    match (prefix.is_empty(), rest.is_empty()) {
        (true, _) => rest.to_owned(),
        (_, true) => prefix.to_owned(),
        _ => format!("{prefix}::{rest}"),
    }
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path in the code that starts at `crate`, `super` or `self`.
fn paths_in(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    // `use` declarations, flattened.
    let mut rest = code;
    let mut offset = 0;
    while let Some(at) = rest.find("use ") {
        let abs = offset + at;
        let before = code[..abs].chars().next_back();
        let end = code[abs..].find(';').map(|e| abs + e);
        if before.is_none_or(|c| !is_ident(c))
            && let Some(end) = end
        {
            let mut leaves = Vec::new();
            flatten_use(&code[abs + 4..end], "", &mut leaves);
            out.extend(
                leaves
                    .into_iter()
                    .map(|p| p.replace(char::is_whitespace, "")),
            );
        }
        offset = abs + 4;
        rest = &code[offset..];
    }
    // Inline paths (`crate::a::b(…)`, `super::x::Y`).
    for root in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(root) {
            let abs = from + at;
            from = abs + root.len();
            if code[..abs]
                .chars()
                .next_back()
                .is_some_and(|c| is_ident(c) || c == ':')
            {
                continue;
            }
            let mut end = abs;
            let bytes = code.as_bytes();
            while end < code.len() {
                let c = bytes[end] as char;
                if is_ident(c) || (c == ':' && bytes.get(end + 1) == Some(&b':')) {
                    end += if c == ':' { 2 } else { 1 };
                } else {
                    break;
                }
            }
            out.push(code[abs..end].trim_end_matches("::").to_owned());
        }
    }
    out
}

/// The module a path names, from the module it is written in: the longest
/// prefix that is a module of the crate.
fn resolve(path: &str, here: &ModPath, modules: &BTreeSet<ModPath>) -> Option<ModPath> {
    let mut segs = path.split("::").filter(|s| !s.is_empty());
    let mut base: ModPath = match segs.next()? {
        "crate" => Vec::new(),
        "self" => here.clone(),
        "super" => here[..here.len().checked_sub(1)?].to_vec(),
        _ => return None,
    };
    for seg in segs {
        if seg == "super" {
            base.pop();
            continue;
        }
        let mut next = base.clone();
        next.push(seg.to_owned());
        if !modules.contains(&next) {
            break;
        }
        base = next;
    }
    Some(base)
}

struct Rules {
    layer_of: HashMap<String, (u32, String)>,
    exceptions: BTreeSet<(String, String)>,
    /// `(module, never)`: `module` (and everything inside it) imports
    /// nothing from `never` (and everything inside it).
    absences: Vec<(ModPath, ModPath)>,
}

/// Reads the fenced `layers` and `layer-exceptions` blocks of
/// `ARCHITECTURE.md`.
fn rules() -> Rules {
    let doc = fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let block = |tag: &str| -> Vec<String> {
        let fence = format!("```{tag}\n");
        let start = doc
            .find(&fence)
            .unwrap_or_else(|| panic!("ARCHITECTURE.md has no ```{tag} block"));
        let body = &doc[start + fence.len()..];
        let end = body.find("```").expect("closed block");
        body[..end].lines().map(str::to_owned).collect()
    };
    let mut layer_of = HashMap::new();
    for line in block("layers") {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        // `5 daemon: daemon` — a number, a layer's name, its modules.
        let (head, mods) = line.split_once(':').expect("`N name: modules`");
        let mut head = head.split_whitespace();
        let n: u32 = head
            .next()
            .and_then(|n| n.parse().ok())
            .expect("layer number");
        let name = head.collect::<Vec<_>>().join(" ");
        for m in mods.split_whitespace() {
            let previous = layer_of.insert(m.to_owned(), (n, name.clone()));
            assert!(previous.is_none(), "{m} is placed twice in the layer table");
        }
    }
    let mut exceptions = BTreeSet::new();
    for line in block("layer-exceptions") {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        // `a -> b: why`
        let (pair, _why) = line.split_once(':').unwrap_or((line, ""));
        let (a, b) = pair.split_once("->").expect("`a -> b: why`");
        exceptions.insert((a.trim().to_owned(), b.trim().to_owned()));
    }
    let mut absences = Vec::new();
    for line in block("import-absences") {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        // `proxy::relay: record redact service`
        let (module, never) = line.split_once(": ").expect("`module: modules`");
        let split = |m: &str| m.split("::").map(str::to_owned).collect::<ModPath>();
        for n in never.split_whitespace() {
            absences.push((split(module.trim()), split(n)));
        }
    }
    Rules {
        layer_of,
        exceptions,
        absences,
    }
}

fn edges() -> (BTreeSet<ModPath>, Vec<Edge>) {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<ModPath> = files.iter().map(|f| module_of(&src, f)).collect();
    let mut edges = Vec::new();
    for file in &files {
        let here = module_of(&src, file);
        let text = fs::read_to_string(file).expect("read source");
        for path in paths_in(&code_only(&text)) {
            if let Some(to) = resolve(&path, &here, &modules) {
                edges.push(Edge {
                    from: here.clone(),
                    to,
                    file: file.strip_prefix(root()).unwrap_or(file).to_path_buf(),
                    path,
                });
            }
        }
    }
    (modules, edges)
}

/// One cycle in `graph`, if it has one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut HashMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_owned(), 1);
        stack.push(n.to_owned());
        for m in graph.get(n).into_iter().flatten() {
            match state.get(m.as_str()) {
                Some(1) => {
                    let from = stack.iter().position(|s| s == m).unwrap_or(0);
                    let mut cycle = stack[from..].to_vec();
                    cycle.push(m.clone());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(m, graph, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(n.to_owned(), 2);
        None
    }
    let mut state = HashMap::new();
    for n in graph.keys() {
        if !state.contains_key(n.as_str())
            && let Some(c) = visit(n, graph, &mut state, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

#[test]
fn every_import_goes_down_a_layer_and_no_module_cycle_exists() {
    let rules = rules();
    let (modules, edges) = edges();
    let mut problems = Vec::new();

    for m in modules.iter().filter(|m| m.len() == 1) {
        if !rules.layer_of.contains_key(&m[0]) {
            problems.push(format!(
                "src/{0}: top-level module `{0}` has no place in ARCHITECTURE.md's layer table",
                m[0]
            ));
        }
    }

    let mut top: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in &edges {
        let (Some(a), Some(b)) = (e.from.first(), e.to.first()) else {
            continue; // the crate root dispatches to everything
        };
        if a == b {
            continue;
        }
        top.entry(a.clone()).or_default().insert(b.clone());
        let (Some((la, na)), Some((lb, nb))) = (rules.layer_of.get(a), rules.layer_of.get(b))
        else {
            continue;
        };
        if la <= lb && !rules.exceptions.contains(&(a.clone(), b.clone())) {
            problems.push(format!(
                "{}: `{a}` (layer {la}, {na}) imports `{}` from `{b}` (layer {lb}, {nb}); \
                 a module may only import from lower layers",
                e.file.display(),
                e.path
            ));
        }
    }
    for e in &edges {
        for (module, never) in &rules.absences {
            if e.from.starts_with(module) && e.to.starts_with(never) {
                problems.push(format!(
                    "{}: `{}` imports `{}`, but ARCHITECTURE.md says `{}` never reaches `{}`",
                    e.file.display(),
                    e.from.join("::"),
                    e.path,
                    module.join("::"),
                    never.join("::")
                ));
            }
        }
    }
    if let Some(cycle) = find_cycle(&top) {
        problems.push(format!(
            "a cycle between top-level modules: {}",
            cycle.join(" -> ")
        ));
    }

    // Within each module: its submodules must not import each other in a
    // circle. Edges to the parent itself (its shared types) are allowed.
    let mut inner: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for e in &edges {
        let common = e.from.iter().zip(&e.to).take_while(|(x, y)| x == y).count();
        if common < e.from.len() && common < e.to.len() {
            inner
                .entry(e.from[..common].to_vec())
                .or_default()
                .entry(e.from[common].clone())
                .or_default()
                .insert(e.to[common].clone());
        }
    }
    for (parent, graph) in &inner {
        if parent.is_empty() {
            continue; // top level: checked above
        }
        if let Some(cycle) = find_cycle(graph) {
            problems.push(format!(
                "a cycle inside `{}`: {}",
                parent.join("::"),
                cycle.join(" -> ")
            ));
        }
    }

    assert!(
        problems.is_empty(),
        "layer rules broken (see ARCHITECTURE.md, \"Layers\"):\n{}",
        problems.join("\n")
    );
}

/// The checker itself: it must see the imports it is meant to judge.
#[test]
fn the_reader_finds_use_trees_and_inline_paths_but_not_comments_or_strings() {
    let code = code_only(
        "use crate::{a::{b, c as d}, e};\n\
         // use crate::commented;\n\
         let s = \"crate::in_a_string\"; let c = '\"'; let r = r#\"crate::raw\"#;\n\
         fn f<'a>(x: &'a str) { super::sibling::call(x); }\n",
    );
    let paths = paths_in(&code);
    for want in [
        "crate::a::b",
        "crate::a::c",
        "crate::e",
        "super::sibling::call",
    ] {
        assert!(
            paths.iter().any(|p| p == want),
            "missing {want} in {paths:?}"
        );
    }
    for unwanted in ["commented", "in_a_string", "raw"] {
        assert!(
            !paths.iter().any(|p| p.contains(unwanted)),
            "{unwanted} read as an import: {paths:?}"
        );
    }
    let modules: BTreeSet<ModPath> = [vec!["x".to_owned()], vec!["x".into(), "y".into()]]
        .into_iter()
        .collect();
    let here = vec!["x".to_owned(), "z".to_owned()];
    assert_eq!(
        resolve("super::y::Thing", &here, &modules),
        Some(vec!["x".to_owned(), "y".to_owned()])
    );
    assert_eq!(
        resolve("crate::x::Other", &here, &modules),
        Some(vec!["x".to_owned()])
    );
    let mut graph = BTreeMap::new();
    graph.insert("a".to_owned(), BTreeSet::from(["b".to_owned()]));
    graph.insert("b".to_owned(), BTreeSet::from(["a".to_owned()]));
    assert!(find_cycle(&graph).is_some());
    graph.remove("b");
    assert!(find_cycle(&graph).is_none());
}

/// Every file under `src/`, relative to the repository (`src/a/b.rs`).
fn src_files(dir: &Path, out: &mut BTreeSet<String>) {
    for entry in fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            src_files(&path, out);
        } else if let Ok(rel) = path.strip_prefix(root()) {
            out.insert(rel.to_string_lossy().into_owned());
        }
    }
}

/// Whether a backquoted word of the codemap is a path: a directory
/// (`name/`) or a source file (`.rs`, or the report page's assets).
fn is_map_path(word: &str) -> bool {
    !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
        && (word.ends_with('/')
            || [".rs", ".css", ".html", ".js"]
                .iter()
                .any(|ext| word.ends_with(ext)))
}

/// The paths the codemap names, relative to the repository.
///
/// The codemap is a list of bullets. A bullet's first path is read from
/// the directory of the bullet it is nested in (the repository for a
/// top-level bullet); the bullet's later paths, and its nested bullets'
/// first paths, are read from that first path's directory (itself, for a
/// directory). A path starting with `src/` or `tests/` is always read
/// from the repository.
fn codemap_paths(doc: &str) -> BTreeSet<String> {
    let start = doc.find("\n## Codemap").expect("a Codemap section");
    let body = &doc[start + 1..];
    let body = &body[..body[3..].find("\n## ").map_or(body.len(), |e| e + 3)];
    // (indent, directory) of the bullets enclosing the current line.
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut here = String::new(); // the current bullet's directory
    let mut first = false; // the next path is the current bullet's first
    let mut parent = String::new();
    let mut out = BTreeSet::new();
    for line in body.lines() {
        let indent = line.len() - line.trim_start().len();
        if line.trim_start().starts_with("* ") {
            while stack.last().is_some_and(|(i, _)| *i >= indent) {
                stack.pop();
            }
            parent = stack.last().map(|(_, d)| d.clone()).unwrap_or_default();
            here = parent.clone();
            first = true;
            stack.push((indent, here.clone()));
        } else if line.trim().is_empty() {
            first = false;
        }
        for (k, word) in line.split('`').enumerate() {
            if k % 2 == 0 || !is_map_path(word) {
                continue;
            }
            let base = if word.starts_with("src/") || word.starts_with("tests/") {
                ""
            } else if first {
                &parent
            } else {
                &here
            };
            let path = format!("{base}{word}");
            if first {
                here = if path.ends_with('/') {
                    path.clone()
                } else {
                    path.rfind('/')
                        .map_or(String::new(), |i| path[..=i].to_owned())
                };
                if let Some(top) = stack.last_mut() {
                    top.1 = here.clone();
                }
                first = false;
            }
            out.insert(path);
        }
    }
    out
}

/// The map checked both ways: every file under `src/` is named in the
/// codemap (a directory's `mod.rs` by the directory's own entry), every
/// path the codemap names exists, and the layer table places exactly the
/// modules `lib.rs` declares.
#[test]
fn the_codemap_and_the_layer_table_match_the_tree() {
    let doc = fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let named = codemap_paths(&doc);
    let mut files = BTreeSet::new();
    src_files(&root().join("src"), &mut files);
    let mut problems = Vec::new();
    for file in &files {
        let covered = named.contains(file)
            || file
                .strip_suffix("mod.rs")
                .is_some_and(|dir| named.contains(dir));
        if !covered {
            problems.push(format!(
                "{file}: not in ARCHITECTURE.md's codemap (name it where its module is described)"
            ));
        }
    }
    for path in &named {
        if !root().join(path).exists() {
            problems.push(format!(
                "ARCHITECTURE.md's codemap names `{path}`, which does not exist"
            ));
        }
    }
    let lib = fs::read_to_string(root().join("src/lib.rs")).expect("lib.rs");
    let declared: BTreeSet<String> = lib
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("pub ").unwrap_or(l);
            l.strip_prefix("mod ")?.strip_suffix(';').map(str::to_owned)
        })
        .collect();
    let placed: BTreeSet<String> = rules().layer_of.into_keys().collect();
    for m in declared.difference(&placed) {
        problems.push(format!(
            "src/lib.rs declares `mod {m}`, which ARCHITECTURE.md's layer table does not place"
        ));
    }
    for m in placed.difference(&declared) {
        problems.push(format!(
            "ARCHITECTURE.md's layer table places `{m}`, which src/lib.rs does not declare"
        ));
    }
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md and src/ disagree:\n{}",
        problems.join("\n")
    );
}

/// The codemap reader resolves nested and relative paths the way the
/// codemap writes them.
#[test]
fn the_codemap_reader_resolves_nested_paths() {
    let doc = "# A\n\n## Codemap\n\n\
               * `src/main.rs` — entry.\n\
               * `src/proxy/` — the proxy: `relay.rs`, `x/y.rs`.\n  \
                 * `mod.rs` — its loop.\n  \
                 * `http/` — transport: `sse.rs` and\n    \
                   `policy.rs`.\n    \
                   * `inner.rs` — deeper.\n  \
                 * `lazy.rs` — lazy start; see `src/record/mod.rs`.\n\
               * `src/runs.rs` — runs; `runs/list.rs`.\n\
               * `tests/it/` — tests.\n\n\
               ## Invariants\n\n* `not/here.rs`\n";
    let got: Vec<String> = codemap_paths(doc).into_iter().collect();
    let want = [
        "src/main.rs",
        "src/proxy/",
        "src/proxy/http/",
        "src/proxy/http/inner.rs",
        "src/proxy/http/policy.rs",
        "src/proxy/http/sse.rs",
        "src/proxy/lazy.rs",
        "src/proxy/mod.rs",
        "src/proxy/relay.rs",
        "src/proxy/x/y.rs",
        "src/record/mod.rs",
        "src/runs.rs",
        "src/runs/list.rs",
        "tests/it/",
    ];
    assert_eq!(got, want);
}

// ------------------------------------------- documents the repository has

/// The directories whose text may cite a document.
const CITING_DIRS: [&str; 3] = ["src", "tests", "docs"];

/// Recorded host data (what agents sent, word for word): the `.md` names in
/// it are the agents' files, not citations.
const NOT_CITING: [&str; 1] = ["tests/fixtures"];

/// The basenames of every `*.md` file in the repository (outside `target/`,
/// `.git/`, and the installed peers).
fn repository_documents(dir: &Path, out: &mut BTreeSet<String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !matches!(name.as_str(), "target" | ".git" | ".peers" | "node_modules") {
                repository_documents(&path, out);
            }
        } else if name.ends_with(".md") {
            out.insert(name);
        }
    }
}

/// The text files under `dir` that may cite a document (source, scripts,
/// docs; not data).
fn citing_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let rel = path.strip_prefix(root()).unwrap_or(&path).to_path_buf();
        if NOT_CITING.iter().any(|n| rel.starts_with(n)) {
            continue;
        }
        if path.is_dir() {
            citing_files(&path, out);
        } else if path.extension().is_some_and(|e| {
            ["rs", "md", "sh", "py", "mjs", "cjs", "toml", "txt"].contains(&&*e.to_string_lossy())
        }) {
            out.push(path);
        }
    }
}

/// Every document that `text` cites, with its line: a word ending in
/// `.md` that is not part of a URL (`scheme://…`).
fn cited_documents(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for word in line.split(|c: char| c.is_whitespace() || "`'\"()[]<>,;*|".contains(c)) {
            if word.contains("://") {
                continue;
            }
            let word = word.trim_end_matches(['.', ':', '!', '?']);
            let Some(stem) = word.strip_suffix(".md") else {
                continue;
            };
            let name = stem.rsplit('/').next().unwrap_or(stem);
            let name = name.trim_start_matches(|c: char| !c.is_alphanumeric());
            if !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_alphanumeric() || "_-.".contains(c))
            {
                out.push((n + 1, format!("{name}.md")));
            }
        }
    }
    out
}

/// A reader of the repository can open every document its code, tests and
/// docs cite: a `*.md` name that no file in the repository has (a note
/// kept elsewhere) fails, with where it is cited.
#[test]
fn every_cited_document_is_in_the_repository() {
    let mut have = BTreeSet::new();
    repository_documents(&root(), &mut have);
    let mut files = Vec::new();
    for dir in CITING_DIRS {
        citing_files(&root().join(dir), &mut files);
    }
    let mut missing = Vec::new();
    for file in files {
        let Ok(text) = fs::read_to_string(&file) else {
            continue;
        };
        for (line, name) in cited_documents(&text) {
            if !have.contains(&name) {
                let rel = file.strip_prefix(root()).unwrap_or(&file);
                missing.push(format!("{}:{line}: {name}", rel.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "documents cited but not in the repository (cite docs/*.md, or state the fact in place):\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_citation_reader_finds_document_names_but_not_urls() {
    // Built at run time, so this test's own source cites nothing.
    let md = ".md";
    let text = format!(
        "see `docs/replay{md}` and NOTES{md} §3.\n\
         (FACTS{md}): x; demo://resource/features{md} and https://a.io/b/c{md}\n\
         not markdown: README{md}x, file{md}5"
    );
    assert_eq!(
        cited_documents(&text),
        [
            (1, format!("replay{md}")),
            (1, format!("NOTES{md}")),
            (2, format!("FACTS{md}")),
        ]
    );
}

/// `tests/it/main.rs`'s index names every test module it declares, so a
/// reader finds what each file tests from one place.
#[test]
fn the_test_index_names_every_test_module() {
    let main = fs::read_to_string(root().join("tests/it/main.rs")).expect("tests/it/main.rs");
    let unnamed: Vec<&str> = main
        .lines()
        .filter_map(|l| l.strip_prefix("mod ")?.strip_suffix(';'))
        .filter(|m| !main.contains(&format!("//! * `{m}` — ")))
        .collect();
    assert!(
        unnamed.is_empty(),
        "tests/it/main.rs declares modules its index does not describe: {unnamed:?}"
    );
}

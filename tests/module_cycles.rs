//! No two files of a crate import each other, directly or around a longer loop: the code reads
//! bottom up, one concept per module, and a module can be understood (and moved) without the
//! modules that use it.
//!
//! Reads every crate's sources, and for each file the modules its paths name (`crate::…`,
//! `super::…`, `self::…`, with `{…}` groups expanded, and paths through a name a `use` bound,
//! such as `cube::adamw::f` after `use crate::cube::{self}`), outside comments, strings and
//! `#[cfg(test)]` modules. A path through a re-export (`crate::Backend` where lib.rs says `pub use
//! backend::Backend`) names the module the item comes from. A module reaching into its own
//! submodules is not counted: it declares them and they are part of it; a submodule reaching up
//! (`super::`) is. Then it looks for a strongly connected set of files of more than one.

#![allow(clippy::unwrap_used, reason = "test helpers: a failed unwrap fails the test, as an assertion would")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path inside its crate: `[]` for the root, `["session", "channel"]`, ….
type ModulePath = Vec<String>;

#[test]
fn no_file_of_a_crate_imports_a_file_that_imports_it_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut crates = vec![root.join("src")];
    for entry in std::fs::read_dir(root.join("crates")).expect("crates/ is readable") {
        crates.push(entry.expect("crates/ lists").path().join("src"));
    }
    let mut cycles = Vec::new();
    for src in crates.iter().filter(|src| src.is_dir()) {
        for cycle in cycles_in(src) {
            let modules: Vec<String> = cycle.iter().map(|module| module.join("::")).collect();
            let folder = src.strip_prefix(root).unwrap_or(src).display();
            cycles.push(format!("{folder}: {}", modules.join(" ↔ ")));
        }
    }
    assert!(cycles.is_empty(), "files that import each other (move what both need into a module of its own):\n{}", cycles.join("\n"));
}

#[test]
fn the_checker_sees_a_cycle_through_a_use_group_and_super() {
    let dir = std::env::temp_dir().join(format!("qkv-module-cycles-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a; mod b; // crate::b::x in a comment\n").unwrap();
    std::fs::write(dir.join("a/mod.rs"), "mod c;\nuse crate::{b::Thing, other};\nfn f() { let _ = \"crate::b\"; }\n").unwrap();
    std::fs::write(dir.join("a/c.rs"), "use super::super::b;\n").unwrap();
    std::fs::write(dir.join("b.rs"), "pub struct Thing;\n#[cfg(test)]\npub(crate) mod tests { use crate::a::c; }\n").unwrap();
    assert!(cycles_in(&dir).is_empty(), "b uses a only in its tests");
    std::fs::write(dir.join("b.rs"), "pub struct Thing;\nfn g(_: crate::a::c::D) {}\n").unwrap();
    let cycles = cycles_in(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    let names: Vec<Vec<String>> = cycles.into_iter().map(|c| c.into_iter().map(|m| m.join("::")).collect()).collect();
    assert_eq!(names, [vec!["a::c", "b"]], "a reaches the cycle but nothing reaches back to it");
}

/// Writes the files (path, text) into a fresh folder and returns its cycles, by module name.
fn cycles_of(name: &str, files: &[(&str, &str)]) -> Vec<Vec<String>> {
    let dir = std::env::temp_dir().join(format!("qkv-module-cycles-{name}-{}", std::process::id()));
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let cycles = cycles_in(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    cycles.into_iter().map(|c| c.into_iter().map(|m| m.join("::")).collect()).collect()
}

#[test]
fn the_checker_follows_re_exports_to_the_file_they_come_from() {
    let lib = "mod a; mod b; mod c;\npub use a::Apple;\npub(crate) use b::{Berry as Fruit};\n";
    let a = "pub struct Apple; fn f(_: crate::Fruit) {}\n";
    let b = "pub struct Berry; use crate::Apple;\n";
    assert_eq!(cycles_of("reexport", &[("lib.rs", lib), ("a.rs", a), ("b.rs", b), ("c.rs", "use crate::Apple;\n")]), [vec!["a", "b"]]);
    // Without the way back there is no cycle: c imports a through lib.rs and nothing imports c.
    assert!(
        cycles_of("reexport-none", &[("lib.rs", lib), ("a.rs", "pub struct Apple;\n"), ("b.rs", b), ("c.rs", "use crate::Apple;\n")])
            .is_empty()
    );
}

#[test]
fn the_checker_follows_an_ancestor_s_private_import() {
    let lib = "mod a; mod b;\nuse b::Berry;\n";
    let files = [
        ("lib.rs", lib),
        ("a.rs", "pub struct Apple; fn f(_: crate::Berry) {}\n"),
        ("b.rs", "pub struct Berry; fn g(_: crate::a::Apple) {}\n"),
    ];
    assert_eq!(cycles_of("private", &files), [vec!["a", "b"]], "a reads b's Berry through lib.rs's private use");
}

#[test]
fn the_checker_follows_a_module_a_use_named() {
    let files = [
        ("lib.rs", "mod a; mod b;\n"),
        ("a.rs", "use crate::b::{self};\nfn f(_: b::c::Cherry) {}\npub struct Apple;\n"),
        ("b/mod.rs", "pub mod c;\n"),
        ("b/c.rs", "pub struct Cherry; fn g(_: crate::a::Apple) {}\n"),
    ];
    assert_eq!(cycles_of("self-alias", &files), [vec!["a", "b::c"]]);
    let renamed = [files[0], ("a.rs", "use super::b as basket;\nfn f(_: basket::c::Cherry) {}\npub struct Apple;\n"), files[2], files[3]];
    assert_eq!(cycles_of("as-alias", &renamed), [vec!["a", "b::c"]]);
}

/// The import cycles between the files under `src` (a crate's source folder), each sorted.
fn cycles_in(src: &Path) -> Vec<Vec<ModulePath>> {
    let files = rust_files(src);
    let modules: BTreeMap<ModulePath, PathBuf> = files.iter().map(|file| (module_of(src, file), file.clone())).collect();
    let tokens: BTreeMap<&ModulePath, Vec<Token>> = modules
        .iter()
        .map(|(module, file)| (module, without_test_modules(&tokenize(&std::fs::read_to_string(file).expect("a source file is UTF-8")))))
        .collect();
    // What each module's `use`s bind, as absolute paths: all of them serve the module's own paths
    // (and its submodules'), the public ones paths that reach the module from elsewhere.
    let mut bound: BTreeMap<&ModulePath, BTreeMap<String, Bound>> = BTreeMap::new();
    for (module, tokens) in &tokens {
        for binding in bindings(tokens) {
            let ours = matches!(binding.path[0].as_str(), "crate" | "super" | "self")
                || modules.contains_key(&[module.as_slice(), &binding.path[..1]].concat());
            let Some(path) = resolve(module, &binding.path).filter(|_| ours) else { continue };
            bound.entry(module).or_default().insert(binding.name, Bound { path, public: binding.public });
        }
    }
    let mut imports: BTreeMap<ModulePath, BTreeSet<ModulePath>> = BTreeMap::new();
    for (module, tokens) in &tokens {
        let nothing = BTreeMap::new();
        let own = bound.get(module).unwrap_or(&nothing);
        for path in named_paths(tokens, own) {
            let absolute = match own.get(&path[0]) {
                Some(alias) if !matches!(path[0].as_str(), "crate" | "super" | "self") => [alias.path.as_slice(), &path[1..]].concat(),
                _ => match resolve(module, &path) {
                    Some(absolute) => absolute,
                    None => continue,
                },
            };
            if let Some(target) = file_of(absolute, module, &modules, &bound)
                && !target.starts_with(module)
            {
                imports.entry((*module).clone()).or_default().insert(target);
            }
        }
    }
    strongly_connected(&modules.keys().cloned().collect::<Vec<_>>(), &imports).into_iter().filter(|set| set.len() > 1).collect()
}

/// The file an absolute path, named in module `from`, leads to: the longest prefix that is a file
/// (`crate::app::Tab` names app/mod.rs), followed through what that file's `use`s
/// bind: its re-exports (lib.rs's `pub use backend::Backend` sends `crate::Backend` on to
/// backend.rs), and its private ones too where `from` is inside it (a submodule sees its
/// ancestors' private imports: `super::Name`, or `crate::Name` for lib.rs's).
fn file_of(
    mut absolute: ModulePath,
    from: &ModulePath,
    modules: &BTreeMap<ModulePath, PathBuf>,
    bound: &BTreeMap<&ModulePath, BTreeMap<String, Bound>>,
) -> Option<ModulePath> {
    let mut file = None;
    // A bound on the hops, for re-exports that lead around in a circle: the last file reached.
    for _ in 0..16 {
        let here = (0..=absolute.len()).rev().map(|n| absolute[..n].to_vec()).find(|prefix| modules.contains_key(prefix))?;
        let seen = |binding: &&Bound| binding.public || from.starts_with(&here);
        let onward = absolute.get(here.len()).and_then(|name| bound.get(&here)?.get(name)).filter(seen).map(|b| b.path.clone());
        file = Some(here.clone());
        let Some(onward) = onward else { break };
        absolute = [onward.as_slice(), &absolute[here.len() + 1..]].concat();
    }
    file
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a source folder is readable") {
        let path = entry.expect("a source folder lists").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    files
}

fn module_of(src: &Path, file: &Path) -> ModulePath {
    let relative = file.strip_prefix(src).expect("under src").with_extension("");
    let mut parts: ModulePath = relative.iter().map(|part| part.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// `crate::a::b`, `super::super::c`, `self::d` as absolute module paths; `None` for a `super`
/// above the root (not ours to judge).
fn resolve(module: &ModulePath, path: &[String]) -> Option<ModulePath> {
    let (mut base, rest) = match path.first().map(String::as_str) {
        Some("crate") => (Vec::new(), &path[1..]),
        Some("self") => (module.clone(), &path[1..]),
        _ => (module.clone(), path),
    };
    let mut rest = rest.iter().peekable();
    while rest.peek().is_some_and(|part| *part == "super") {
        base.pop()?;
        rest.next();
    }
    base.extend(rest.cloned());
    Some(base)
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Punct(char),
    /// `::`
    PathSep,
}

/// Identifiers and the punctuation paths are made of; comments, strings and character literals
/// dropped.
fn tokenize(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            loop {
                match (chars.get(i), chars.get(i + 1)) {
                    (Some('/'), Some('*')) => (depth, i) = (depth + 1, i + 2),
                    (Some('*'), Some('/')) => (depth, i) = (depth - 1, i + 2),
                    (Some(_), _) => i += 1,
                    (None, _) => break,
                }
                if depth == 0 {
                    break;
                }
            }
        } else if c == '"' || ((c == 'r' || c == 'b') && raw_string_start(&chars, i).is_some()) {
            i = skip_string(&chars, i);
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{1F600}') or a lifetime ('a): a literal closes.
            let close = if next == Some('\\') {
                chars[i + 2..].iter().position(|&c| c == '\'').map(|p| i + 2 + p)
            } else {
                (chars.get(i + 2) == Some(&'\'')).then_some(i + 2)
            };
            i = close.map_or(i + 1, |close| close + 1);
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            tokens.push(Token::Ident(chars[start..i].iter().collect()));
        } else if c == ':' && next == Some(':') {
            tokens.push(Token::PathSep);
            i += 2;
        } else {
            if !c.is_whitespace() {
                tokens.push(Token::Punct(c));
            }
            i += 1;
        }
    }
    tokens
}

/// The number of `#` of a raw string (`r"`, `r#"`, `br"`) or byte string (`b"`) starting at `i`.
fn raw_string_start(chars: &[char], i: usize) -> Option<usize> {
    if i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_') {
        return None; // inside an identifier
    }
    let mut j = i + usize::from(chars[i] == 'b');
    if chars.get(j) == Some(&'"') {
        return Some(0);
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = chars[j..].iter().take_while(|&&c| c == '#').count();
    (chars.get(j + hashes) == Some(&'"')).then_some(hashes)
}

/// The index just past the string literal starting at `i`.
fn skip_string(chars: &[char], i: usize) -> usize {
    let raw = if chars[i] == '"' { None } else { raw_string_start(chars, i) };
    let mut j = i;
    while chars[j] != '"' {
        j += 1;
    }
    j += 1;
    let is_raw = chars[i] == 'r' || (chars[i] == 'b' && chars.get(i + 1) == Some(&'r'));
    if is_raw {
        let closing: Vec<char> = std::iter::once('"').chain(std::iter::repeat_n('#', raw.unwrap_or(0))).collect();
        while j < chars.len() && !chars[j..].starts_with(&closing) {
            j += 1;
        }
        return (j + closing.len()).min(chars.len());
    }
    while j < chars.len() && chars[j] != '"' {
        j += if chars[j] == '\\' { 2 } else { 1 };
    }
    j + 1
}

/// The tokens without `#[cfg(test)] [pub(…)] mod name { … }`: tests may reach anywhere.
fn without_test_modules(tokens: &[Token]) -> Vec<Token> {
    let punct = |c| Token::Punct(c);
    let word = |w: &str| Token::Ident(w.to_string());
    let cfg_test = [punct('#'), punct('['), word("cfg"), punct('('), word("test"), punct(')'), punct(']')];
    let mut kept = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        if let Some(body) = tokens[i..].starts_with(&cfg_test).then(|| test_module_body(tokens, i + cfg_test.len())).flatten() {
            let mut depth = 0;
            i = body;
            loop {
                match tokens.get(i) {
                    Some(Token::Punct('{')) => depth += 1,
                    Some(Token::Punct('}')) => depth -= 1,
                    None => break,
                    _ => {}
                }
                i += 1;
                if depth == 0 {
                    break;
                }
            }
        } else {
            kept.push(tokens[i].clone());
            i += 1;
        }
    }
    kept
}

/// Where the `{` of `[pub(…)] mod name {` at `i` is, if a module with a body starts there.
fn test_module_body(tokens: &[Token], mut i: usize) -> Option<usize> {
    if tokens.get(i) == Some(&Token::Ident("pub".into())) {
        i += 1;
        if tokens.get(i) == Some(&Token::Punct('(')) {
            i += tokens[i..].iter().position(|t| *t == Token::Punct(')'))? + 1;
        }
    }
    let is_module = tokens.get(i) == Some(&Token::Ident("mod".into()))
        && matches!(tokens.get(i + 1), Some(Token::Ident(_)))
        && tokens.get(i + 2) == Some(&Token::Punct('{'));
    is_module.then_some(i + 2)
}

/// Every path starting with `crate`, `super`, `self` or a name in `aliases`, use groups expanded:
/// `crate::{a::b, c}` gives `crate::a::b` and `crate::c`.
fn named_paths(tokens: &[Token], aliases: &BTreeMap<String, Bound>) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let Token::Ident(word) = token else { continue };
        let starts_path = (matches!(word.as_str(), "crate" | "super" | "self") || aliases.contains_key(word))
            && tokens.get(i + 1) == Some(&Token::PathSep);
        let continues_path = i > 0 && tokens[i - 1] == Token::PathSep;
        if starts_path && !continues_path {
            tree(tokens, i, vec![], &mut |path, _| paths.push(path));
        }
    }
    paths
}

/// What a name a module's `use` binds stands for: an absolute path, and whether other modules
/// than the module's own submodules see it (`pub use`).
struct Bound {
    path: ModulePath,
    public: bool,
}

/// A name a `use` binds in its module, and the path it stands for, as written.
struct Binding {
    name: String,
    path: Vec<String>,
    /// `pub use` or `pub(…) use`: other modules reach the item through this name.
    public: bool,
}

/// What the module's `use` declarations bind: `use a::b` binds `b`, `use a::{self}` binds `a`,
/// `use a::b as c` binds `c`; `as _` and globs bind no name.
fn bindings(tokens: &[Token]) -> Vec<Binding> {
    let mut found = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        if *token != Token::Ident("use".into()) {
            continue;
        }
        let public = match i.checked_sub(1).map(|before| &tokens[before]) {
            Some(Token::Ident(word)) => word == "pub",
            // `pub(crate) use`, `pub(super) use`, `pub(in …) use`.
            Some(Token::Punct(')')) => tokens[..i]
                .iter()
                .rposition(|t| *t == Token::Punct('('))
                .is_some_and(|open| open > 0 && tokens[open - 1] == Token::Ident("pub".into())),
            _ => false,
        };
        let start = i + 1 + usize::from(tokens.get(i + 1) == Some(&Token::PathSep));
        tree(tokens, start, vec![], &mut |mut path, name| {
            if path.last().is_some_and(|last| last == "self") {
                path.pop();
            }
            let name = name.or_else(|| path.last().cloned()).filter(|name| name != "_" && !path.is_empty());
            if let Some(name) = name {
                found.push(Binding { name, path, public });
            }
        });
    }
    found
}

/// Reads the use tree at `i` (a path, then maybe `::{…}`) under `prefix`, handing each path and
/// the name its `as` gives it to `found`; returns where it ends.
fn tree(tokens: &[Token], mut i: usize, mut prefix: Vec<String>, found: &mut dyn FnMut(Vec<String>, Option<String>)) -> usize {
    loop {
        match tokens.get(i) {
            Some(Token::Ident(word)) => {
                prefix.push(word.clone());
                i += 1;
            }
            Some(Token::Punct('{')) => {
                i += 1;
                while !matches!(tokens.get(i), Some(Token::Punct('}')) | None) {
                    i = tree(tokens, i, prefix.clone(), found);
                    if tokens.get(i) == Some(&Token::Punct(',')) {
                        i += 1;
                    }
                }
                return i + 1;
            }
            // A glob binds no name of its own; the path up to it still names a module.
            Some(Token::Punct('*')) => {
                i += 1;
                found(prefix, Some("_".into()));
                return skip_branch(tokens, i);
            }
            _ => break,
        }
        if tokens.get(i) == Some(&Token::PathSep) {
            i += 1;
        } else {
            break;
        }
    }
    let renamed = match (tokens.get(i), tokens.get(i + 1)) {
        (Some(Token::Ident(word)), Some(Token::Ident(name))) if word == "as" => Some(name.clone()),
        _ => None,
    };
    found(prefix, renamed);
    skip_branch(tokens, i)
}

/// Past `as name` and anything else up to the end of a use tree's branch.
fn skip_branch(tokens: &[Token], mut i: usize) -> usize {
    while !matches!(tokens.get(i), Some(Token::Punct(',' | '}' | ';')) | None) {
        if tokens.get(i) == Some(&Token::Punct('{')) || tokens.get(i) == Some(&Token::Punct('(')) {
            break;
        }
        i += 1;
    }
    i
}

/// Tarjan's strongly connected components.
fn strongly_connected(nodes: &[ModulePath], edges: &BTreeMap<ModulePath, BTreeSet<ModulePath>>) -> Vec<Vec<ModulePath>> {
    struct State<'a> {
        edges: &'a BTreeMap<ModulePath, BTreeSet<ModulePath>>,
        index: BTreeMap<ModulePath, usize>,
        low: BTreeMap<ModulePath, usize>,
        stack: Vec<ModulePath>,
        components: Vec<Vec<ModulePath>>,
    }
    fn visit(state: &mut State, node: &ModulePath) {
        let n = state.index.len();
        state.index.insert(node.clone(), n);
        state.low.insert(node.clone(), n);
        state.stack.push(node.clone());
        for next in state.edges.get(node).into_iter().flatten() {
            if !state.index.contains_key(next) {
                visit(state, next);
                let low = state.low[node].min(state.low[next]);
                state.low.insert(node.clone(), low);
            } else if state.stack.contains(next) {
                let low = state.low[node].min(state.index[next]);
                state.low.insert(node.clone(), low);
            }
        }
        if state.low[node] == state.index[node] {
            let at = state.stack.iter().position(|m| m == node).expect("on the stack");
            let mut component = state.stack.split_off(at);
            component.sort();
            state.components.push(component);
        }
    }
    let mut state = State { edges, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), components: Vec::new() };
    for node in nodes {
        if !state.index.contains_key(node) {
            visit(&mut state, node);
        }
    }
    state.components
}

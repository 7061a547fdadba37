//! The source tree's own rules that Cargo does not keep, checked by reading it: within each
//! crate of the workspace, modules import only the layers below them (the map at the top
//! of each `lib.rs`; between crates, Cargo's dependencies keep the order), the wire crate
//! does no IO, no files import each other (through others or directly), and the command
//! line goes one way: its flags, then its plans, then its commands.

use std::path::{Path, PathBuf};

/// Every `.rs` file below `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(sources(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}

/// The top-level modules a module's files name as `crate::X` (comments left out).
fn imports(src: &Path, module: &str) -> Vec<(String, String)> {
    let mut files = sources(&src.join(module));
    let single = src.join(format!("{module}.rs"));
    if single.exists() {
        files.push(single);
    }
    let mut found = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read a source file");
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or("");
            for (i, _) in code.match_indices("crate::") {
                let name: String = code[i + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                if !name.is_empty() && name != module {
                    found.push((name, f.display().to_string()));
                }
            }
        }
    }
    found
}

/// A crate's modules, each with the modules it may import.
type Layers = Vec<(&'static str, Vec<&'static str>)>;

/// The workspace's crates, bottom up: each one's name, its `src/`, and each of its modules
/// with what it may import. Cargo keeps a crate from importing one above it (it does not
/// depend on it); within a crate, these tables keep the layers of its `lib.rs` map. A
/// lower crate's module is imported by its name, re-exported (`crate::stats` in the
/// engine is `mailbench_results::stats`).
fn crates() -> Vec<(&'static str, PathBuf, Layers)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    vec![
        (
            "wire",
            root.join("crates/wire/src"),
            vec![
                ("units", vec![]),
                ("sasl", vec![]),
                ("smtp", vec!["sasl"]),
                ("pop3", vec!["sasl"]),
                ("imap", vec!["sasl"]),
                ("ldap", vec![]),
                ("dns", vec!["units"]),
            ],
        ),
        (
            "results",
            root.join("crates/results/src"),
            vec![
                ("error", vec![]),
                ("stats", vec!["error"]),
                ("report", vec!["stats"]),
            ],
        ),
        (
            "engine",
            root.join("crates/engine/src"),
            vec![
                ("alarm", vec![]),
                ("search", vec![]),
                ("transport", vec!["alarm", "error"]),
                ("limits", vec![]),
                ("doctor", vec!["limits"]),
                ("run", vec!["alarm", "stats"]),
                ("shutdown", vec!["run"]),
                ("smtp", vec!["error", "sasl", "stats", "transport"]),
                ("pop3", vec!["error", "sasl", "stats", "transport"]),
                ("imap", vec!["error", "sasl", "stats", "transport"]),
                ("message", vec!["smtp", "stats"]),
                ("lab", vec!["limits", "stats", "transport"]),
                ("load", vec!["alarm", "error", "run", "shutdown", "stats"]),
                (
                    "send",
                    vec![
                        "error",
                        "load",
                        "message",
                        "run",
                        "shutdown",
                        "smtp",
                        "stats",
                        "transport",
                    ],
                ),
                (
                    "sink",
                    vec![
                        "message",
                        "run",
                        "shutdown",
                        "smtp",
                        "stats",
                        "transport",
                        "units",
                    ],
                ),
                ("dns", vec!["run", "shutdown", "stats", "units"]),
                (
                    "relay",
                    vec![
                        "alarm",
                        "dns",
                        "lab",
                        "limits",
                        "load",
                        "run",
                        "search",
                        "send",
                        "shutdown",
                        "sink",
                        "smtp",
                        "stats",
                        "transport",
                    ],
                ),
                (
                    "mailbox",
                    vec![
                        "error",
                        "imap",
                        "lab",
                        "limits",
                        "load",
                        "message",
                        "pop3",
                        "relay",
                        "report",
                        "run",
                        "send",
                        "shutdown",
                        "sink",
                        "smtp",
                        "stats",
                        "transport",
                        "units",
                    ],
                ),
            ],
        ),
        ("cli", root.join("src"), vec![]),
    ]
}

#[test]
fn modules_import_only_the_layers_below_them() {
    let mut upward = Vec::new();
    for (krate, src, allowed) in crates() {
        for (module, may) in &allowed {
            for (name, file) in imports(&src, module) {
                if !may.contains(&name.as_str()) {
                    upward.push(format!("{file}: {module} imports {name}"));
                }
            }
        }
        // The same through `super::super::…`, read down to the files (see the circles below).
        let graph = Graph::read(&src);
        for e in graph.edges() {
            let (Some(from), Some(to)) = (module_of(&src, &e.from), module_of(&src, &e.to)) else {
                continue;
            };
            let (Some(a), Some(b)) = (from.first(), to.first()) else {
                continue;
            };
            let may = allowed.iter().find(|(m, _)| m == a).map(|(_, may)| may);
            if a != b && may.is_some_and(|may| !may.contains(&b.as_str())) {
                upward.push(format!(
                    "{}:{}: {a} imports {b}    {}",
                    graph.name(&e.from),
                    e.line,
                    e.text
                ));
            }
        }
        // Every module is in the table, or is the command line on top.
        for e in std::fs::read_dir(&src).expect("src").flatten() {
            let name = e
                .file_name()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string();
            assert!(
                ["lib", "main"].contains(&name.as_str())
                    || (krate == "cli" && name == "cli")
                    || allowed.iter().any(|(m, _)| *m == name),
                "module {name} of crate {krate} is not placed in the layering"
            );
        }
    }
    assert!(
        upward.is_empty(),
        "imports against the layering of the crates' lib.rs maps:\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_wire_crate_is_sans_io() {
    // What a sans-IO core must not touch: the runtime, sockets, files, clocks. Cargo keeps
    // the runtime and TLS out (the crate does not depend on them: checked first); the
    // standard library's IO is read for here.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/wire");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("wire's Cargo.toml");
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .and_then(|d| d.split("\n[").next())
        .unwrap_or("");
    for io in ["tokio", "rustls", "socket2", "nix", "libc", "mailbench"] {
        assert!(
            !deps.lines().any(|l| l.trim_start().starts_with(io)),
            "crates/wire depends on {io}: the wire crate must not do IO\n{deps}"
        );
    }
    let forbidden = [
        "TcpStream",
        "TcpListener",
        "UdpSocket",
        "std::fs",
        "File::",
        "Instant::now",
        "SystemTime",
        "std::thread",
        "std::process",
    ];
    let files = sources(&root.join("src"));
    assert!(files.len() > 30, "the wire crate was not found: {files:?}");
    let mut found = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read a source file");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if forbidden.iter().any(|w| code.contains(w)) {
                found.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "IO or clocks in the wire crate:\n{}",
        found.join("\n")
    );
}

// ---------------------------------------------------------------------------------------
// Imports between files. A module map keeps its shape only while no file needs, through
// others, a file that needs it: such a circle makes its files one piece that cannot be
// read, tested or moved apart. So the test below reads every import of `src/` down to the
// file it names and looks for circles in that graph of files.
//
// What an import is here: a `use` (groups `{..}`, `self`, aliases) or a path written in
// the code, starting with `crate::`, `super::` (any number), `self::` or a child module the
// file declares (`mod x;`), resolved to the file that holds the module, or to the file an
// item is re-exported from. What is left out, and why:
// - a module's own face: `mod x;` and `pub use x::Item` of its own child modules are how a
//   `mod.rs` presents its parts, not something its code needs; a path through such a
//   re-export (`crate::relay::RelayPlan`) is followed to the file that defines the item
//   (`relay/bench.rs`);
// - a part taking from its own folder's `mod.rs` (`use super::LabError` in `lab/exim.rs`):
//   a `mod.rs` is both the bottom of its folder (the types all its parts share: the
//   error, the options) and its top (what composes the parts: `lab::Mta::start` picks the
//   MTA's file). Counting both would call every folder a circle (lab, load, doctor,
//   mailbox/profile do this today) where moving the shared types into a file of their own
//   would change nothing but the file count. A circle between two parts is counted (and
//   one between top-level modules is also the layering test's above);
// - test code: a `#[cfg(test)] mod` and the files that are test modules (`tests.rs`,
//   `*_tests.rs`), which check a module from outside its dependency order;
// - `main.rs`, a crate of its own on top.
// ---------------------------------------------------------------------------------------

/// One import from a file to another: where it is written and what it says.
struct Edge {
    from: PathBuf,
    to: PathBuf,
    line: usize,
    text: String,
}

/// What one source file declares and imports, as written.
struct Parsed {
    /// Its module path below the crate root (`["relay", "bench"]`).
    module: Vec<String>,
    /// The child modules it declares (`mod x;`).
    children: Vec<String>,
    /// Its `use` statements: line, the leaves of the use tree, and whether it is `pub`.
    uses: Vec<(usize, String, Vec<Leaf>, bool)>,
    /// Paths written in its code outside `use`: line, text, segments.
    paths: Vec<(usize, String, Vec<String>)>,
}

/// One leaf of a use tree: its path and the name it is visible by (`None` for `*`).
struct Leaf {
    path: Vec<String>,
    name: Option<String>,
}

/// The crate's source files, read.
struct Graph {
    src: PathBuf,
    files: Vec<(PathBuf, Parsed)>,
}

/// The module path of a file below `src` (`None` for `main.rs` and test-module files).
fn module_of(src: &Path, file: &Path) -> Option<Vec<String>> {
    let rel = file.strip_prefix(src).ok()?;
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().to_string())
        .collect();
    let last = parts.pop()?;
    let stem = last.strip_suffix(".rs")?;
    if stem == "tests" || stem.ends_with("_tests") || (parts.is_empty() && stem == "main") {
        return None;
    }
    if stem != "mod" && !(parts.is_empty() && stem == "lib") {
        parts.push(stem.to_string());
    }
    Some(parts)
}

/// The file that holds module `path`, if it is a file of its own.
fn module_file(src: &Path, path: &[String]) -> Option<PathBuf> {
    if path.is_empty() {
        return Some(src.join("lib.rs"));
    }
    let dir: PathBuf = path.iter().collect();
    [
        src.join(&dir).with_extension("rs"),
        src.join(&dir).join("mod.rs"),
    ]
    .into_iter()
    .find(|f| f.exists())
}

/// A file's code without comments and without its test module (by convention the last
/// item, after `#[cfg(test)]`).
fn code_lines(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim() == "#[cfg(test)]" {
            let next = lines[i + 1..]
                .iter()
                .map(|l| l.trim())
                .find(|l| !l.starts_with("#["))
                .unwrap_or("");
            if next.starts_with("mod ") || next.starts_with("pub mod ") {
                break;
            }
        }
        out.push(line.split("//").next().unwrap_or("").to_string());
    }
    out
}

/// The tokens of a use tree: names, `::`, braces, commas, `*`.
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
            continue;
        }
        if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push("::".into());
            i += 2;
            continue;
        }
        if "{},*".contains(c) {
            out.push(c.to_string());
        }
        i += 1;
    }
    out
}

/// The leaves of a use tree from `toks[*at..]`, each prefixed by `prefix`.
fn use_tree(toks: &[String], at: &mut usize, prefix: &[String], out: &mut Vec<Leaf>) {
    let mut path = prefix.to_vec();
    loop {
        match toks.get(*at).map(String::as_str) {
            Some("{") => {
                *at += 1;
                while !matches!(toks.get(*at).map(String::as_str), Some("}") | None) {
                    use_tree(toks, at, &path, out);
                    if toks.get(*at).map(String::as_str) == Some(",") {
                        *at += 1;
                    }
                }
                *at += 1;
                return;
            }
            Some("*") => {
                *at += 1;
                out.push(Leaf { path, name: None });
                return;
            }
            Some("::") => *at += 1,
            Some(name) if name != "," && name != "}" && name != "as" => {
                path.push(name.to_string());
                *at += 1;
                if toks.get(*at).map(String::as_str) != Some("::") {
                    break;
                }
            }
            _ => break,
        }
    }
    // `x::{self}` names `x`.
    if path.last().is_some_and(|s| s == "self") && path.len() > 1 {
        path.pop();
    }
    let mut name = path.last().cloned();
    if toks.get(*at).map(String::as_str) == Some("as") {
        name = toks.get(*at + 1).cloned();
        *at += 2;
    }
    if !path.is_empty() {
        out.push(Leaf { path, name });
    }
}

/// Paths written in a line of code that start inside the crate: `crate::`, `super::`,
/// `self::` or one of `children`.
fn code_paths(code: &str, children: &[String]) -> Vec<Vec<String>> {
    let chars: Vec<char> = code.chars().collect();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts = ident(chars[i])
            && (i == 0 || (!ident(chars[i - 1]) && chars[i - 1] != ':' && chars[i - 1] != '#'));
        if !starts {
            i += 1;
            continue;
        }
        let mut segs: Vec<String> = Vec::new();
        loop {
            let start = i;
            while i < chars.len() && ident(chars[i]) {
                i += 1;
            }
            segs.push(chars[start..i].iter().collect());
            if chars.get(i) == Some(&':')
                && chars.get(i + 1) == Some(&':')
                && chars.get(i + 2).is_some_and(|c| ident(*c))
            {
                i += 2;
            } else {
                break;
            }
        }
        let first = segs[0].as_str();
        if segs.len() > 1
            && (["crate", "super", "self"].contains(&first) || children.iter().any(|c| c == first))
        {
            out.push(segs);
        }
    }
    out
}

/// Reads a source file.
fn parse(src: &Path, file: &Path) -> Option<Parsed> {
    let module = module_of(src, file)?;
    let text = std::fs::read_to_string(file).expect("read a source file");
    let lines = code_lines(&text);
    let mut children = Vec::new();
    for l in &lines {
        let t = l.trim();
        let t = t.strip_prefix("pub ").unwrap_or(t);
        if let Some(name) = t.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) {
            children.push(name.trim().to_string());
        }
    }
    let mut uses = Vec::new();
    let mut paths = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim();
        let (public, rest) = match t.strip_prefix("pub") {
            Some(r) if r.starts_with(' ') || r.starts_with('(') => (
                true,
                r.split_once("use ")
                    .map(|(_, u)| u)
                    .filter(|_| r.trim_start().starts_with("use ") || r.contains(") use ")),
            ),
            _ => (false, t.strip_prefix("use ")),
        };
        if let Some(rest) = rest {
            let start = i;
            let mut stmt = rest.to_string();
            while !stmt.contains(';') && i + 1 < lines.len() {
                i += 1;
                stmt.push(' ');
                stmt.push_str(lines[i].trim());
            }
            let stmt = stmt.split(';').next().unwrap_or("").trim().to_string();
            let toks = tokens(&stmt);
            let mut leaves = Vec::new();
            let mut at = 0;
            use_tree(&toks, &mut at, &[], &mut leaves);
            uses.push((start + 1, stmt, leaves, public));
        } else {
            for p in code_paths(&lines[i], &children) {
                paths.push((i + 1, lines[i].trim().to_string(), p));
            }
        }
        i += 1;
    }
    Some(Parsed {
        module,
        children,
        uses,
        paths,
    })
}

impl Graph {
    /// Reads every file of `src`.
    fn read(src: &Path) -> Graph {
        let mut all = sources(src);
        all.sort();
        let files = all
            .into_iter()
            .filter_map(|f| parse(src, &f).map(|p| (f, p)))
            .collect();
        Graph {
            src: src.to_path_buf(),
            files,
        }
    }

    fn parsed(&self, file: &Path) -> Option<&Parsed> {
        self.files.iter().find(|(f, _)| f == file).map(|(_, p)| p)
    }

    /// `path` as written in a file of module `module`, from the crate root; `None` when it
    /// starts outside the crate (`std::`, a dependency).
    fn absolute(p: &Parsed, path: &[String]) -> Option<Vec<String>> {
        let mut rest = path;
        let mut base = match path.first()?.as_str() {
            "crate" => {
                rest = &path[1..];
                Vec::new()
            }
            "self" => {
                rest = &path[1..];
                p.module.clone()
            }
            "super" => {
                let mut b = p.module.clone();
                while rest.first().is_some_and(|s| s == "super") {
                    b.pop()?;
                    rest = &rest[1..];
                }
                b
            }
            c if p.children.iter().any(|x| x == c) => p.module.clone(),
            _ => return None,
        };
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The file that defines what the crate path `abs` names: the deepest module file on
    /// it, or where that file re-exports the next name from.
    fn locate(&self, abs: &[String], depth: u32) -> Option<PathBuf> {
        for k in (0..=abs.len()).rev() {
            let Some(file) = module_file(&self.src, &abs[..k]) else {
                continue;
            };
            if k < abs.len()
                && depth < 8
                && let Some(t) = self.reexported(&file, &abs[k], depth + 1)
            {
                return Some(t);
            }
            return Some(file);
        }
        None
    }

    /// Where `file` re-exports `name` from (`pub use x::name`).
    fn reexported(&self, file: &Path, name: &str, depth: u32) -> Option<PathBuf> {
        let p = self.parsed(file)?;
        p.uses
            .iter()
            .filter(|u| u.3)
            .flat_map(|u| &u.2)
            .filter(|l| l.name.as_deref() == Some(name))
            .find_map(|l| self.locate(&Self::absolute(p, &l.path)?, depth))
    }

    /// Every import between two different files.
    fn edges(&self) -> Vec<Edge> {
        let mut out: Vec<Edge> = Vec::new();
        for (file, p) in &self.files {
            let mut add = |to: PathBuf, line: usize, text: &str| {
                if &to != file && !out.iter().any(|e| &e.from == file && e.to == to) {
                    out.push(Edge {
                        from: file.clone(),
                        to,
                        line,
                        text: text.to_string(),
                    });
                }
            };
            for (line, text, leaves, public) in &p.uses {
                for leaf in leaves {
                    let Some(abs) = Self::absolute(p, &leaf.path) else {
                        continue;
                    };
                    let Some(to) = self.locate(&abs, 0) else {
                        continue;
                    };
                    // A module's face re-exporting its own parts.
                    let own_part = module_of(&self.src, &to)
                        .is_some_and(|m| m.len() > p.module.len() && m.starts_with(&p.module));
                    if *public && own_part {
                        continue;
                    }
                    if Self::takes_from_its_module(file, &to) {
                        continue;
                    }
                    add(to, *line, &format!("use {text}"));
                }
            }
            for (line, text, path) in &p.paths {
                if let Some(to) = Self::absolute(p, path).and_then(|a| self.locate(&a, 0))
                    && !Self::takes_from_its_module(file, &to)
                {
                    add(to, *line, text);
                }
            }
        }
        out
    }

    /// True when `file` is a part of a folder taking what the folder's `mod.rs` declares
    /// for all its parts (`super::LabError`).
    fn takes_from_its_module(file: &Path, to: &Path) -> bool {
        to.file_name().is_some_and(|n| n == "mod.rs")
            && file.file_name().is_some_and(|n| n != "mod.rs")
            && file.parent() == to.parent()
    }

    /// The name of a file for messages: its path below `src/`.
    fn name(&self, f: &Path) -> String {
        f.strip_prefix(&self.src).unwrap_or(f).display().to_string()
    }
}

/// The strongly connected groups of more than one file: each is a circle (or several).
fn circles(edges: &[Edge]) -> Vec<Vec<PathBuf>> {
    let mut nodes: Vec<&PathBuf> = edges.iter().flat_map(|e| [&e.from, &e.to]).collect();
    nodes.sort();
    nodes.dedup();
    let idx = |f: &PathBuf| nodes.binary_search(&f).unwrap_or(0);
    let next: Vec<Vec<usize>> = (0..nodes.len())
        .map(|n| {
            edges
                .iter()
                .filter(|e| idx(&e.from) == n)
                .map(|e| idx(&e.to))
                .collect()
        })
        .collect();
    // Tarjan's algorithm.
    struct State {
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        stack: Vec<usize>,
        on: Vec<bool>,
        count: usize,
        found: Vec<Vec<usize>>,
    }
    fn visit(v: usize, next: &[Vec<usize>], s: &mut State) {
        s.index[v] = Some(s.count);
        s.low[v] = s.count;
        s.count += 1;
        s.stack.push(v);
        s.on[v] = true;
        for &w in &next[v] {
            match s.index[w] {
                None => {
                    visit(w, next, s);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(i) if s.on[w] => s.low[v] = s.low[v].min(i),
                _ => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut group = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on[w] = false;
                group.push(w);
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                s.found.push(group);
            }
        }
    }
    let n = nodes.len();
    let mut s = State {
        index: vec![None; n],
        low: vec![0; n],
        stack: Vec::new(),
        on: vec![false; n],
        count: 0,
        found: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(v, &next, &mut s);
        }
    }
    let mut out: Vec<Vec<PathBuf>> = s
        .found
        .into_iter()
        .map(|g| {
            let mut files: Vec<PathBuf> = g.into_iter().map(|i| nodes[i].clone()).collect();
            files.sort();
            files
        })
        .collect();
    out.sort();
    out
}

#[test]
fn no_import_circle_between_files() {
    // Between crates Cargo forbids circles; within each, they are read for here.
    let mut said = Vec::new();
    let mut found = 0;
    for (_, src, _) in crates() {
        let graph = Graph::read(&src);
        let edges = graph.edges();
        found += edges.len();
        said.extend(circles_said(&graph, &edges));
    }
    assert!(found > 300, "the imports were not found: {found}");
    assert!(
        said.is_empty(),
        "files that import each other, through others or directly:\n{}",
        said.join("\n")
    );
}

/// Each circle among `edges`, with the imports that make it, as lines.
fn circles_said(graph: &Graph, edges: &[Edge]) -> Vec<String> {
    let mut said = Vec::new();
    for files in circles(edges) {
        let names: Vec<String> = files.iter().map(|f| graph.name(f)).collect();
        said.push(format!(
            "a circle of {} files: {}",
            files.len(),
            names.join(", ")
        ));
        for e in edges
            .iter()
            .filter(|e| files.contains(&e.from) && files.contains(&e.to))
        {
            said.push(format!(
                "  {}:{} -> {}    {}",
                graph.name(&e.from),
                e.line,
                graph.name(&e.to),
                e.text
            ));
        }
    }
    said
}

/// True when `file`'s module path below `src` starts with `prefix` (`["cli", "args"]`:
/// `cli/args.rs` or any file under `cli/args/`).
fn under(src: &Path, file: &Path, prefix: &[&str]) -> bool {
    module_of(src, file)
        .is_some_and(|m| m.len() >= prefix.len() && m.iter().zip(prefix).all(|(a, b)| a == b))
}

#[test]
fn the_cli_reads_flags_then_plans_then_runs_commands() {
    // The command line in one direction, as ripgrep's flags: the clap structs (`cli::args`)
    // know no other part of the CLI; the planners (`cli::plan`) turn them into the
    // engine's plans and know only the args; the commands compose plans and call the
    // engine. Checked for `cli/args` and `cli/plan` as a file or a folder, once they exist.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = Graph::read(&src);
    let cli: &[&str] = &["cli"];
    let args: &[&str] = &["cli", "args"];
    let plan: &[&str] = &["cli", "plan"];
    let mut wrong = Vec::new();
    for e in graph.edges() {
        if !under(&src, &e.to, cli) {
            continue;
        }
        let may: &[&[&str]] = if under(&src, &e.from, args) {
            &[args]
        } else if under(&src, &e.from, plan) {
            &[args, plan]
        } else {
            continue;
        };
        if !may.iter().any(|m| under(&src, &e.to, m)) {
            wrong.push(format!(
                "{}:{} -> {}    {}",
                graph.name(&e.from),
                e.line,
                graph.name(&e.to),
                e.text
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "cli/args may import only cli/args, cli/plan only cli/args and cli/plan:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_module_map_names_its_modules() {
    // A module's doc comment is its map: each child module it declares is named there in
    // backticks, so that the tree explains itself from the top down.
    let mut missing = Vec::new();
    for (_, src, _) in crates() {
        for f in sources(&src) {
            let text = std::fs::read_to_string(&f).expect("read a source file");
            let doc: String = text
                .lines()
                .filter_map(|l| l.strip_prefix("//!"))
                .collect::<Vec<_>>()
                .join(" ");
            for line in code_lines(&text) {
                let t = line.trim();
                let t = t
                    .strip_prefix("pub(crate) ")
                    .or_else(|| t.strip_prefix("pub "))
                    .unwrap_or(t);
                let Some(name) = t.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) else {
                    continue;
                };
                let named = doc.split('`').skip(1).step_by(2).any(|quoted| {
                    quoted
                        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .any(|w| w == name)
                });
                if !named {
                    missing.push(format!("{}: `{name}`", f.display()));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "modules their parent's map (its //! comment) does not name:\n{}",
        missing.join("\n")
    );
}

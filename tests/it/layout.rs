//! The source tree's own rules, checked by reading it: modules import only the layers
//! below them (the map at the top of `src/lib.rs`), and every protocol core (SMTP's,
//! POP3's, SASL) is sans-IO.

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

#[test]
fn modules_import_only_the_layers_below_them() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    // Each module with what it may import; the layers of src/lib.rs's map, bottom up.
    let allowed: &[(&str, &[&str])] = &[
        ("error", &[]),
        ("units", &[]),
        ("sasl", &[]),
        ("search", &[]),
        ("transport", &["error"]),
        ("limits", &[]),
        ("doctor", &["limits"]),
        ("stats", &["error"]),
        ("run", &["stats"]),
        ("shutdown", &["run"]),
        ("smtp", &["error", "sasl", "stats", "transport"]),
        ("pop3", &["error", "sasl", "stats", "transport"]),
        ("imap", &["error", "sasl", "stats", "transport"]),
        ("message", &["smtp", "stats"]),
        ("lab", &["limits", "stats", "transport"]),
        ("load", &["error", "run", "shutdown", "stats"]),
        (
            "send",
            &[
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
            &[
                "message",
                "run",
                "shutdown",
                "smtp",
                "stats",
                "transport",
                "units",
            ],
        ),
        ("dns", &["run", "shutdown", "stats", "units"]),
        (
            "relay",
            &[
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
            &[
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
        ("report", &["stats"]),
    ];
    let mut upward = Vec::new();
    for (module, may) in allowed {
        for (name, file) in imports(&src, module) {
            if !may.contains(&name.as_str()) {
                upward.push(format!("{file}: {module} imports {name}"));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports against the layering of src/lib.rs:\n{}",
        upward.join("\n")
    );
    // Every module is in the table or is the command line on top.
    for e in std::fs::read_dir(&src).expect("src").flatten() {
        let name = e
            .file_name()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        assert!(
            ["cli", "lib", "main"].contains(&name.as_str())
                || allowed.iter().any(|(m, _)| *m == name),
            "module {name} is not placed in the layering"
        );
    }
}

#[test]
fn protocol_cores_are_sans_io() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    // What a sans-IO core must not touch: the runtime, sockets, files, clocks.
    let forbidden = [
        "tokio",
        "std::net",
        "std::fs",
        "Instant::now",
        "SystemTime",
        "std::thread",
    ];
    let mut found = Vec::new();
    let mut files = sources(&src.join("smtp/proto"));
    let pop3 = sources(&src.join("pop3/proto"));
    assert!(pop3.len() >= 3, "the POP3 core was not found: {pop3:?}");
    files.extend(pop3);
    let imap = sources(&src.join("imap/proto"));
    assert!(imap.len() >= 4, "the IMAP core was not found: {imap:?}");
    files.extend(imap);
    files.push(src.join("sasl.rs"));
    assert!(
        files.len() > 8,
        "the protocol core was not found: {files:?}"
    );
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read a source file");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for word in forbidden {
                if code.contains(word) {
                    found.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
                }
            }
            if let Some(i) = code.find("crate::") {
                let name = &code[i + 7..];
                if !["sasl", "smtp::proto", "pop3::proto", "imap::proto"]
                    .iter()
                    .any(|core| name.starts_with(core))
                {
                    found.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "IO, clocks or outside modules in a protocol core:\n{}",
        found.join("\n")
    );
}

//! `mailbench mailbox imap` against a real Dovecot: message counts checked with Python's
//! imaplib before and after, zero state violations from a correct server in closed and
//! open loop, and a proxy that corrupts UIDs or flags caught by the state checks.

use std::process::{Command, Stdio};

use crate::mailbox::{Store, count, python, run_json};
use crate::util::{Proc, TempDir, free_port, refused_in_one_line, require, results, run_expect};

/// Messages in each user's INBOX, as imaplib sees them.
pub(crate) fn inbox_counts(store: &Store) -> Vec<u64> {
    let v = python(
        &store.imap,
        &store.users(),
        "out = []
for u, p in USERS:
    m = imap(u, p)
    typ, data = m.select('INBOX')
    out.append(int(data[0]))
    m.logout()
print(json.dumps(out))",
    );
    serde_json::from_value(v).expect("counts")
}

/// Messages in each user's Archive folder (where `move` puts them), as imaplib sees
/// them; 0 where it does not exist yet.
fn archive_counts(store: &Store) -> Vec<u64> {
    let v = python(
        &store.imap,
        &store.users(),
        "out = []
for u, p in USERS:
    m = imap(u, p)
    typ, data = m.select('Archive')
    out.append(int(data[0]) if typ == 'OK' else 0)
    m.logout()
print(json.dumps(out))",
    );
    serde_json::from_value(v).expect("counts")
}

fn imap(args: &[&str], json: &std::path::Path, code: i32) -> serde_json::Value {
    run_json("imap", args, json, code)
}

/// The store's own count of each thing it did (`--server-stats`), by its name, to set
/// beside mailbench's.
fn store_stats(r: &serde_json::Value) -> std::collections::BTreeMap<String, u64> {
    r["extra"]["store_stats"]
        .as_array()
        .expect("the store's own statistics")
        .iter()
        .filter_map(|m| Some((m["name"].as_str()?.to_string(), m["count"].as_u64()?)))
        .collect()
}

fn summary(r: &serde_json::Value, key: &str) -> u64 {
    r["summary"][key]
        .as_u64()
        .unwrap_or_else(|| panic!("no summary {key} in {:#}", r["summary"]))
}

/// A mix that changes the mailboxes in every way it can (append, copy, delete and
/// expunge) and reads them: what imaplib counts afterwards is what mailbench says it
/// added and removed, and Dovecot's answers contradict nothing, closed loop and open loop.
#[test]
fn imap_counts_agree_with_imaplib_and_dovecot_shows_no_violations() {
    let Some(store) = Store::start(&["--users", "4", "--fill", "5", "--fill-size", "3k"]) else {
        return;
    };
    let dir = TempDir::new("imap-counts");
    let json = dir.0.join("r.json");
    let mix = "append=2,copy=1,move=1,delete=2,expunge=1,fetch=2,fetch_body=2,store=2,search=1,select=1,status=1,list=1,noop=1,idle=1";
    let base = [
        "--target",
        &store.imap,
        "--users-file",
        &store.users_file,
        "--mix",
        mix,
        "--append-size",
        "2k",
    ];
    let shapes: [&[&str]; 2] = [
        &["-n", "400", "-c", "4", "--per-conn", "25"],
        &["--rate", "200/s", "-z", "2s", "-c", "4"],
    ];
    for shape in shapes {
        let before: u64 = inbox_counts(&store).iter().sum();
        let archived_before: u64 = archive_counts(&store).iter().sum();
        let logins_before = store.logged(&["imap-login: Info: Login: "]) as u64;
        let args = [&base[..], shape].concat();
        let r = imap(&args, &json, 0);
        let ctx = format!("{shape:?}: {:#}", r["summary"]);
        // Dovecot's logins, read before imaplib logs in to count.
        let logins = || store.logged(&["imap-login: Info: Login: "]) as u64 - logins_before;
        crate::util::wait_until(std::time::Duration::from_secs(3), || {
            logins() >= summary(&r, "sessions")
        });
        assert_eq!(summary(&r, "sessions"), logins(), "{ctx}: Dovecot's logins");
        let after: u64 = inbox_counts(&store).iter().sum();
        let archived: u64 = archive_counts(&store).iter().sum::<u64>() - archived_before;
        assert_eq!(summary(&r, "violations"), 0, "{ctx}");
        assert_eq!(
            (summary(&r, "errors"), summary(&r, "refused")),
            (0, 0),
            "{ctx}"
        );
        assert_eq!(summary(&r, "completed"), summary(&r, "commands"), "{ctx}");
        let (appended, expunged) = (summary(&r, "appended"), summary(&r, "expunged"));
        let (copied, moved) = (summary(&r, "copied"), summary(&r, "moved"));
        assert!(
            appended > 0 && expunged > 0 && copied > 0 && moved > 0,
            "{ctx}"
        );
        // Issue 40, item 2: from mailbench's own output (EXPUNGE's count held MOVEs, and
        // no copied count was printed).
        assert_eq!(
            after,
            before + appended + copied - expunged - moved,
            "{ctx}: imaplib counted {before} messages before and {after} after; mailbench \
             appended {appended}, copied {copied}, expunged {expunged} and moved {moved}"
        );
        assert_eq!(archived, moved, "{ctx}: imaplib's Archive vs moved");
        assert_eq!(
            summary(&r, "expunges_shared"),
            0,
            "{ctx}: one session per user"
        );
        assert_eq!(copied, count(&r, "copy"), "{ctx}: each COPY copies one");
        // Each fetch_body fetches one whole message.
        assert_eq!(summary(&r, "fetched"), count(&r, "fetch_body"), "{ctx}");
        let steps: u64 = [
            "select",
            "list",
            "status",
            "fetch",
            "fetch_body",
            "search",
            "store",
            "delete",
            "expunge",
            "copy",
            "move",
            "append",
            "noop",
            "idle",
        ]
        .iter()
        .map(|s| count(&r, s))
        .sum();
        // Every session's first SELECT is set-up, not a unit.
        let sessions = summary(&r, "sessions");
        // A MOVE the server refused for want of its folder is tried again after CREATE.
        let created = count(&r, "create");
        assert_eq!(
            steps,
            summary(&r, "commands") + sessions + created,
            "{ctx}: one timed command per unit, one more per CREATE"
        );
        assert_eq!(count(&r, "login"), sessions, "{ctx}");
    }
}

/// Dovecot's own count of the commands it finished (`--server-stats`) is mailbench's: each
/// command of the mix, plus every session's login, SELECT and LOGOUT.
#[test]
fn dovecot_counts_the_commands_mailbench_counts() {
    if require("dovecot").is_none() {
        return;
    }
    let dir = TempDir::new("imap-server-stats");
    let json = dir.0.join("r.json");
    let args = [
        "--lab",
        "dovecot",
        "--users",
        "5",
        "--fill",
        "4",
        "--server-stats",
        "--mix",
        "fetch=2,fetch_body=2,fetch_part=2,store=1,noop=1,search=1",
        "-n",
        "300",
        "-c",
        "5",
        "--per-conn",
        "30",
    ];
    let r = imap(&args, &json, 0);
    let own = store_stats(&r);
    let sessions = summary(&r, "sessions");
    for (cmd, ours) in [
        (
            "imap_FETCH",
            count(&r, "fetch") + count(&r, "fetch_body") + count(&r, "fetch_part"),
        ),
        ("imap_STORE", count(&r, "store")),
        ("imap_NOOP", count(&r, "noop")),
        ("imap_UID_SEARCH", count(&r, "search")),
        ("imap_SELECT", sessions),
        ("imap_LOGOUT", sessions),
        // Logins are imap-login's: the authentication count.
        ("logins_ok", sessions),
    ] {
        assert_eq!(own.get(cmd), Some(&ours), "{cmd}: Dovecot's count {own:?}");
    }
}

/// Ten commands in flight per session, reading and changing the mailboxes (FETCH, STORE,
/// EXPUNGE, APPEND, COPY, SEARCH): Dovecot counts every command mailbench counts, and its
/// answers, attributed to their commands whatever order they come in, contradict nothing.
#[test]
fn pipelined_dovecot_counts_the_commands_mailbench_counts() {
    if require("dovecot").is_none() {
        return;
    }
    let dir = TempDir::new("imap-pipelined");
    let json = dir.0.join("r.json");
    let args = [
        "--lab",
        "dovecot",
        "--users",
        "5",
        "--fill",
        "20",
        "--server-stats",
        "--mix",
        "fetch=4,fetch_body=4,store=2,delete=1,expunge=1,append=1,copy=1,noop=1,search=1",
        "--pipeline",
        "10",
        "-n",
        "600",
        "-c",
        "5",
        // One session per user for the whole run: sessions of one user at the same time
        // race each other's STOREs, which the checks cannot tell from a wrong answer.
        "--per-conn",
        "0",
    ];
    let r = imap(&args, &json, 0);
    assert_eq!(summary(&r, "violations"), 0, "{:#}", r["summary"]);
    assert_eq!(r["config"]["pipeline"], 10, "{:#}", r["config"]);
    let own = store_stats(&r);
    let sessions = summary(&r, "sessions");
    for (cmd, ours) in [
        ("imap_FETCH", count(&r, "fetch") + count(&r, "fetch_body")),
        ("imap_STORE", count(&r, "store") + count(&r, "delete")),
        ("imap_EXPUNGE", count(&r, "expunge")),
        ("imap_APPEND", count(&r, "append")),
        ("imap_COPY", count(&r, "copy")),
        ("imap_NOOP", count(&r, "noop")),
        ("imap_UID_SEARCH", count(&r, "search")),
        ("imap_SELECT", sessions),
        ("imap_LOGOUT", sessions),
    ] {
        assert_eq!(own.get(cmd), Some(&ours), "{cmd}: Dovecot's count {own:?}");
    }
    let commands: u64 = [
        "fetch",
        "fetch_body",
        "store",
        "delete",
        "expunge",
        "append",
        "copy",
    ]
    .iter()
    .chain(&["noop", "search"])
    .map(|s| count(&r, s))
    .sum();
    assert_eq!(commands, 600, "every command drawn was sent and completed");
    // Each command's total is its own write to its completion, as its step times it: no
    // total is shorter than the quickest command (a newcomer saw total p50 0.014 ms
    // beside every step's p50 above 0.6 ms: the engine timed a command from the
    // completion of the one before it, though they were written together).
    let steps = [
        "fetch",
        "fetch_body",
        "store",
        "delete",
        "expunge",
        "append",
        "copy",
        "noop",
        "search",
    ];
    let quickest = steps
        .iter()
        .filter(|s| count(&r, s) > 0)
        .filter_map(|s| r["latency"][*s]["min_us"].as_f64())
        .fold(f64::INFINITY, f64::min);
    let total = &r["latency"]["total"];
    assert_eq!(total["count"].as_u64(), Some(600), "{total:#}");
    let shortest = total["min_us"].as_f64().unwrap_or(0.0);
    assert!(
        shortest >= quickest * 0.99,
        "the shortest total {shortest} µs is below the quickest command's {quickest} µs"
    );
    // The unit that opened a session is charged the opening (connect, greeting, login,
    // SELECT), as without pipelining: the longest total is at least the longest login
    // (a newcomer saw total = fetch_body pipelined, total max 42 ms beside 2 ms one at
    // a time).
    let login = r["latency"]["login"]["max_us"]
        .as_f64()
        .unwrap_or(f64::INFINITY);
    let longest = total["max_us"].as_f64().unwrap_or(0.0);
    assert!(
        longest >= login,
        "the longest total {longest} µs is below the longest login {login} µs"
    );
}

/// What the rewriting proxy runs: server lines are passed on, except that in `uid` mode
/// every other FETCH's UID is raised by 1000 and in `flags` mode `\Flagged` vanishes
/// from FETCH responses; the client's bytes pass untouched.
const REWRITING_PROXY: &str = r#"
import asyncio, re, sys
LISTEN, HOST, PORT, MODE = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
UID = re.compile(rb"^(\* \d+ FETCH \(.*?UID )(\d+)")
seen = [0]

def rewrite(line):
    if MODE == "uid":
        m = UID.match(line)
        if m:
            seen[0] += 1
            if seen[0] % 2 == 0:
                return m.group(1) + str(int(m.group(2)) + 1000).encode() + line[m.end():]
    if MODE == "flags" and line.startswith(b"* ") and b" FETCH (" in line:
        return line.replace(b"\\Flagged ", b"").replace(b" \\Flagged", b"").replace(b"\\Flagged", b"")
    return line

async def up(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except Exception:
        pass
    writer.close()

async def down(reader, writer):
    try:
        while line := await reader.readline():
            writer.write(rewrite(line))
            await writer.drain()
    except Exception:
        pass
    writer.close()

async def serve(creader, cwriter):
    sreader, swriter = await asyncio.open_connection(HOST, PORT)
    await asyncio.gather(up(creader, swriter), down(sreader, cwriter))

async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", LISTEN, limit=1 << 24)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()

asyncio.run(main())
"#;

fn rewriting_proxy(target: &str, mode: &str) -> (Proc, String) {
    let (host, port) = target.rsplit_once(':').expect("host:port");
    let listen = free_port();
    let mut child = Command::new("python3")
        .args(["-c", REWRITING_PROXY, &listen.to_string(), host, port, mode])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the rewriting proxy");
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line);
    }
    assert_eq!(line.trim(), "ready", "the rewriting proxy did not start");
    (Proc(child), format!("127.0.0.1:{listen}"))
}

/// The state checks can fail: through a proxy that changes UIDs, the same sequence
/// numbers come back with other UIDs (and the UIDs stop ascending); through one that hides
/// `\Flagged`, a STORE +FLAGS (\Flagged) does not show it. Through the same proxy passing
/// everything, there is nothing to find.
#[test]
fn a_corrupting_proxy_is_caught_by_the_state_checks() {
    corruption_is_caught(&[]);
}

/// The same with ten commands in flight per session: a FETCH's data is checked whichever
/// command's completion it came before, and a STORE's own FETCH is still found.
#[test]
fn a_corrupting_proxy_is_caught_by_the_state_checks_when_pipelined() {
    corruption_is_caught(&["--pipeline", "10"]);
}

fn corruption_is_caught(extra: &[&str]) {
    let Some(store) = Store::start(&["--users", "2", "--fill", "6", "--fill-size", "1k"]) else {
        return;
    };
    let dir = TempDir::new("imap-corrupt");
    let json = dir.0.join("r.json");
    let run_through = |mode: &str, mix: &str| {
        let (_proxy, target) = rewriting_proxy(&store.imap, mode);
        let mut args = vec![
            "--target",
            &target,
            "--users-file",
            &store.users_file,
            "--mix",
            mix,
            "--fetch-range",
            "3",
            "-n",
            "60",
            "-c",
            "2",
        ];
        args.extend(extra);
        imap(&args, &json, 0)
    };
    let r = run_through("none", "fetch=1,store=1");
    assert_eq!(summary(&r, "violations"), 0, "{:#}", r["summary"]);
    let r = run_through("uid", "fetch=1");
    let kinds = &r["counters"]["violations"];
    let changed = kinds["uid_changed"].as_u64().unwrap_or(0);
    assert!(changed > 0, "UIDs that change are caught: {kinds:#}");
    let errors = r["errors"].as_array().expect("an error table");
    let state: u64 = errors
        .iter()
        .filter(|e| e["class"] == "state" && e["phase"] == "fetch")
        .map(|e| e["count"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(state, summary(&r, "violations"), "{errors:#?}");
    let r = run_through("flags", "store=1");
    let kinds = &r["counters"]["violations"];
    assert!(
        kinds["flags_not_stored"].as_u64().unwrap_or(0) > 0,
        "a flag that was not stored is caught: {kinds:#}"
    );
    assert_eq!(
        kinds.as_object().map(|k| k.len()),
        Some(1),
        "only flags: {kinds:#}"
    );
}

/// Sessions of one user at the same time (one user, four connections), changing the
/// mailbox under each other: Dovecot is right and the checks say so, one at a time and
/// pipelined. Before, they counted `search_mismatch` (a UID SEARCH ALL answered before the
/// EXISTS of another session's APPEND), `metadata_changed` (a body FETCH of a message
/// another session expunged, answered `RFC822.SIZE 0 BODY[] NIL` with [EXPUNGEISSUED]) and
/// now and then `flags_not_stored` (another session's STORE between a STORE and its FETCH),
/// and a MOVE of a message another session had expunged (NO, not [TRYCREATE]) was taken
/// for a missing Archive: its reply's EXPUNGEs were dropped, the model lost track, and the
/// next commands named sequence numbers that no longer existed (`BAD Invalid messageset`,
/// `uid_changed`, `exists_shrank`).
#[test]
fn overlapping_sessions_of_one_user_are_no_violations() {
    let Some(store) = Store::start(&["--users", "1", "--fill", "30", "--fill-size", "2k"]) else {
        return;
    };
    let dir = TempDir::new("imap-overlap");
    let json = dir.0.join("r.json");
    for depth in ["1", "10"] {
        let args = [
            "--target",
            &store.imap,
            "--users-file",
            &store.users_file,
            "--mix",
            "search=3,append=2,fetch=2,fetch_body=2,store=2,delete=1,expunge=1,move=1,copy=1",
            "-n",
            "1500",
            "-c",
            "4",
            "--per-conn",
            "0",
            "--pipeline",
            depth,
        ];
        let before: u64 = inbox_counts(&store).iter().sum();
        let archived_before: u64 = archive_counts(&store).iter().sum();
        let r = imap(&args, &json, 0);
        let after: u64 = inbox_counts(&store).iter().sum();
        let archived: u64 = archive_counts(&store).iter().sum::<u64>() - archived_before;
        let (appended, expunged) = (summary(&r, "appended"), summary(&r, "expunged"));
        let (copied, moved) = (summary(&r, "copied"), summary(&r, "moved"));
        // MOVEs are counted exactly (each OK moved the one message it named); EXPUNGE's
        // replies also report the other sessions' expunges, so its count is an upper
        // bound, and the results say so.
        let ctx = format!(
            "--pipeline {depth}: imaplib counted {before} messages before and {after} after \
             ({archived} moved to Archive); mailbench appended {appended}, copied {copied}, \
             expunged {expunged} and moved {moved}"
        );
        assert_eq!(archived, moved, "{ctx}");
        let removed = (before + appended + copied).checked_sub(after + moved);
        assert!(removed.is_some_and(|x| x <= expunged), "{ctx}");
        assert!(summary(&r, "expunges_shared") > 0, "{ctx}");
        assert_eq!(
            summary(&r, "violations"),
            0,
            "--pipeline {depth}: {:#}",
            r["errors"]
        );
        // A MOVE or COPY of a message another session expunged is refused (NO); nothing
        // is BAD, which only a sequence number the server never had gets.
        assert_eq!(
            summary(&r, "completed") + summary(&r, "refused"),
            1500,
            "{:#}",
            r["summary"]
        );
        let bad: Vec<&serde_json::Value> = r["errors"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["sample"].as_str().is_none_or(|s| !s.starts_with("NO ")))
            .collect();
        assert!(
            bad.is_empty(),
            "--pipeline {depth}: only NO refusals expected: {bad:#?}"
        );
    }
}

/// `fetch_part` asks for one section as imaptest's FETCH2 does, and counts its octets: in
/// a mailbox of one message, whose header (H octets) and text (T) imaplib measures, every
/// command downloads H (HEADER, RFC822.HEADER), T (the first part, TEXT) or H + T (the
/// whole message). So the octets mailbench counts for N of them are x·H + y·T with x + y
/// between N and 2N, headers and texts both drawn — one at a time and pipelined.
#[test]
fn fetch_part_downloads_the_sections_imaplib_measures() {
    let Some(store) = Store::start(&["--users", "1", "--fill", "1", "--fill-size", "3k"]) else {
        return;
    };
    let sizes = python(
        &store.imap,
        &store.users(),
        "u, p = USERS[0]
m = imap(u, p)
m.select('INBOX')
out = {}
for item in ['BODY.PEEK[HEADER]', 'RFC822.HEADER', 'BODY.PEEK[]', 'BODY.PEEK[1]', 'BODY.PEEK[TEXT]']:
    typ, data = m.fetch('1', '(' + item + ')')
    out[item] = len(data[0][1])
m.logout()
print(json.dumps(out))",
    );
    let size = |k: &str| sizes[k].as_u64().expect("a size");
    let (h, t) = (size("BODY.PEEK[HEADER]"), size("BODY.PEEK[TEXT]"));
    assert_eq!(
        (
            size("RFC822.HEADER"),
            size("BODY.PEEK[1]"),
            size("BODY.PEEK[]")
        ),
        (h, t, h + t),
        "imaplib's sections of a single-part message: {sizes}"
    );
    let dir = TempDir::new("imap-fetch-part");
    let json = dir.0.join("r.json");
    let n: u64 = 60;
    for depth in ["1", "4"] {
        let args = [
            "--target",
            &store.imap,
            "--users-file",
            &store.users_file,
            "--mix",
            "fetch_part=1",
            "-n",
            "60",
            "-c",
            "1",
            "--pipeline",
            depth,
        ];
        let r = imap(&args, &json, 0);
        let ctx = format!("--pipeline {depth}: {:#}", r["summary"]);
        // Issue 40, item 2: `fetched` is whole messages (it counted every section).
        let (whole, parts) = (summary(&r, "fetched"), summary(&r, "fetched_parts"));
        assert_eq!((count(&r, "fetch_part"), whole + parts), (n, n), "{ctx}");
        assert!(whole > 0 && parts > 0, "{ctx}");
        assert_eq!(summary(&r, "violations"), 0, "{ctx}");
        let octets = summary(&r, "bytes");
        // The whole messages are imaplib's size each; the sections headers or texts.
        let rest = octets.checked_sub(whole * (h + t)).expect("octets");
        assert!(
            (0..=parts).any(|x| x * h + (parts - x) * t == rest),
            "{ctx}: {octets} octets is not {whole} whole messages ({}) and {parts} \
             headers ({h}) or texts ({t})",
            h + t
        );
    }
}

/// A fake server that greets as IMAP without IMAP4rev1: one line, exit 1. (Dovecot cannot
/// be made to drop IMAP4rev1, so this server is a few lines of Python.)
#[test]
fn bad_imap_input_is_one_line_and_exit_1() {
    let dir = TempDir::new("imap-bad");
    let users = dir.0.join("users.txt");
    std::fs::write(&users, "u1@x.test secret\n").expect("write");
    let u = users.to_string_lossy().to_string();
    let remote = [
        "mailbox",
        "imap",
        "--target",
        "127.0.0.1:1",
        "--users-file",
        &u,
    ];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            [&remote[..], &["--mix", "fetch=1,bogus=2"]].concat(),
            "--mix",
        ),
        ([&remote[..], &["--mix", "fetch=0"]].concat(), "--mix"),
        (
            [&remote[..], &["--fetch-range", "0"]].concat(),
            "--fetch-range",
        ),
        (
            [&remote[..], &["--append-size", "1g"]].concat(),
            "--append-size",
        ),
        ([&remote[..], &["--mailbox", ""]].concat(), "--mailbox"),
        ([&remote[..], &["--fill", "3"]].concat(), "--fill"),
        (
            [&remote[..], &["--pipeline", "4", "--rate", "50/s"]].concat(),
            "--pipeline 4 needs a closed loop",
        ),
        (remote.to_vec(), "is not reachable"),
    ];
    for (args, needle) in cases {
        refused_in_one_line(&args, needle);
    }
    if require("python3").is_none() {
        return;
    }
    let port = free_port();
    let fake = Command::new("python3")
        .args([
            "-c",
            "import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(8); print('ready', flush=True)
while True:
    c, _ = s.accept(); c.sendall(b'* OK [CAPABILITY IMAP2 AUTH=PLAIN] not quite IMAP\\r\\n'); c.close()",
            &port.to_string(),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the fake server");
    let mut fake = Proc(fake);
    let mut line = String::new();
    if let Some(out) = fake.0.stdout.take() {
        let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line);
    }
    let target = format!("127.0.0.1:{port}");
    let args = [
        "mailbox",
        "imap",
        "-q",
        "--target",
        &target,
        "--users-file",
        &u,
        "-n",
        "3",
    ];
    refused_in_one_line(&args, "IMAP4rev1");
}

/// `populate --via imap`: APPEND with flags into a store of one's own; imaplib finds every
/// message in its folder, `\Seen` on all of them (100 %) and `\Flagged` on none (0 %).
#[test]
fn append_population_fills_folders_with_flags() {
    let Some(store) = Store::start(&["--users", "3", "--fill", "0"]) else {
        return;
    };
    let dir = TempDir::new("imap-append");
    let json = dir.0.join("r.json");
    let j = json.to_string_lossy().to_string();
    let args = [
        "mailbox",
        "populate",
        "-q",
        "--json",
        &j,
        "--via",
        "imap",
        "--imap",
        &store.imap,
        "--users-file",
        &store.users_file,
        "--per-user",
        "6",
        "--folders",
        "2",
        "--fill-size",
        "1k-4k",
        "--flags",
        "\\Seen=100,\\Flagged=0",
    ];
    let out = run_expect(&args, 0);
    let r = results(&json);
    assert_eq!(summary(&r, "appended"), 18, "{:#}", r["summary"]);
    // Issue 25 item 20: the octets APPENDed went up ("uploaded", not "downloaded").
    let printed = String::from_utf8_lossy(&out.stdout);
    let want = format!("{:.2} MB uploaded", summary(&r, "bytes") as f64 / 1e6);
    assert!(
        printed.contains(&want) && !printed.contains("downloaded"),
        "expected {want:?} in:\n{printed}"
    );
    assert_eq!(count(&r, "append"), 18);
    let seen = python(
        &store.imap,
        &store.users(),
        "out = []
for u, p in USERS:
    m = imap(u, p)
    row = []
    for box in ('INBOX', 'f2'):
        n = int(m.select(box, readonly=True)[1][0])
        seen = len(m.search(None, 'SEEN')[1][0].split())
        flagged = len(m.search(None, 'FLAGGED')[1][0].split())
        row.append([n, seen, flagged])
    out.append(row)
    m.logout()
print(json.dumps(out))",
    );
    let want = serde_json::json!([
        [[3, 3, 0], [3, 3, 0]],
        [[3, 3, 0], [3, 3, 0]],
        [[3, 3, 0], [3, 3, 0]]
    ]);
    assert_eq!(seen, want, "[messages, seen, flagged] per folder per user");
}

/// STARTTLS against a lab with its own certificate: through, counted as TLS sessions; with
/// a CA that did not sign it, every session fails at the handshake (exit 2, the reason
/// named); and a user whose password is wrong fails at login, counted, while the others
/// go on.
#[test]
fn starttls_trust_and_a_refused_login() {
    let Some(store) = Store::start(&["--users", "2", "--fill", "3", "--starttls"]) else {
        return;
    };
    let dir = TempDir::new("imap-tls");
    let json = dir.0.join("r.json");
    let base = [
        "--target",
        &store.imap,
        "--users-file",
        &store.users_file,
        "-n",
        "20",
        "-c",
        "2",
        "--per-conn",
        "5",
        "--tls",
        "starttls",
    ];
    let cert = store.cert.clone().expect("the lab names its certificate");
    let trusted = [&base[..], &["--tls-ca", &cert]].concat();
    let r = imap(&trusted, &json, 0);
    assert_eq!(summary(&r, "completed"), 20, "{:#}", r["summary"]);
    assert_eq!(
        r["counters"]["tls_connections"],
        r["counters"]["connections"]
    );
    assert_eq!(count(&r, "starttls"), summary(&r, "sessions"));
    let stranger = crate::util::stranger_ca(&dir.0);
    let wrong = [&base[..], &["--tls-ca", &stranger]].concat();
    let r = imap(&wrong, &json, 2);
    let e = &r["errors"][0];
    assert_eq!(
        (e["class"].as_str(), e["phase"].as_str()),
        (Some("tls"), Some("tls_handshake")),
        "{e:#}"
    );
    assert!(
        e["sample"]
            .as_str()
            .unwrap_or("")
            .to_lowercase()
            .contains("certificate"),
        "{e:#}"
    );
    // The second user's password is wrong: its sessions are refused at login.
    let users = store.users();
    let bad = dir.0.join("users.txt");
    let text = format!("{} {}\n{} wrong\n", users[0].0, users[0].1, users[1].0);
    std::fs::write(&bad, text).expect("write");
    let bad = bad.to_string_lossy().to_string();
    let logins_before = store.logged(&["imap-login: Info: Login: "]) as u64;
    let args = [
        "--target",
        &store.imap,
        "--users-file",
        &bad,
        "-n",
        "40",
        "-c",
        "2",
        "--per-conn",
        "5",
        "--mix",
        "noop=1",
    ];
    let r = imap(&args, &json, 0);
    let refused: u64 = r["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["class"] == "rejected" && e["phase"] == "login")
        .map(|e| e["count"].as_u64().unwrap_or(0))
        .sum();
    assert!(refused > 0, "refused logins counted: {:#}", r["errors"]);
    // Issue 25: refused at login, not failed to connect; Dovecot logged each refusal.
    assert_eq!(
        (
            r["counters"]["connect_failures"].as_u64(),
            r["counters"]["login_failures"].as_u64()
        ),
        (Some(0), Some(refused)),
        "{:#}",
        r["counters"]
    );
    let logged = || store.logged(&["imap-login", "auth failed"]) as u64;
    crate::util::wait_until(std::time::Duration::from_secs(5), || logged() == refused);
    assert_eq!(
        logged(),
        refused,
        "Dovecot's refused IMAP logins vs mailbench's"
    );
    assert_eq!(
        summary(&r, "errors"),
        refused,
        "every error is a refused login"
    );
    // Issue 40, item 2: a command lost with a session refused at login was never sent,
    // and `sessions` are logins (it counted the refused ones): Dovecot's Login lines.
    assert_eq!(
        (summary(&r, "commands"), summary(&r, "unstarted")),
        (summary(&r, "completed"), refused),
        "{:#}",
        r["summary"]
    );
    let logins = store.logged(&["imap-login: Info: Login: "]) as u64 - logins_before;
    assert_eq!(summary(&r, "sessions"), logins, "{:#}", r["summary"]);
    // A refused login keeps the latency of its steps: each login, refused or not, is
    // timed, as Dovecot logged it.
    assert_eq!(count(&r, "login"), logins + refused, "{:#}", r["latency"]);
    assert_eq!(count(&r, "banner"), logins + refused, "{:#}", r["latency"]);
}

/// Issue 25: what APPEND stores is the size asked for, to the octet, as imaplib's
/// RFC822.SIZE reports it — `populate --via imap --fill-size 5k` gives 5,120-octet
/// messages and `mailbox imap --append-size 10k` 10,240-octet ones — and every message
/// `populate --via imap` appends carries the run's own id in its trace header.
#[test]
fn issue_25_appended_sizes_are_exact_and_the_run_id_real() {
    let Some(store) = Store::start(&["--users", "2", "--fill", "0"]) else {
        return;
    };
    let dir = TempDir::new("imap-sizes");
    let json = dir.0.join("r.json");
    let j = json.to_string_lossy().to_string();
    let populate = [
        "mailbox",
        "populate",
        "-q",
        "--json",
        &j,
        "--via",
        "imap",
        "--imap",
        &store.imap,
        "--users-file",
        &store.users_file,
        "--per-user",
        "3",
        "--fill-size",
        "5k",
    ];
    run_expect(&populate, 0);
    let run_id = results(&json)["run_id"]
        .as_str()
        .expect("a run id")
        .to_string();
    let args = [
        "--target",
        &store.imap,
        "--users-file",
        &store.users_file,
        "-n",
        "8",
        "-c",
        "1",
        "--mix",
        "append=1",
        "--append-size",
        "10k",
    ];
    let r = imap(&args, &json, 0);
    assert_eq!(summary(&r, "appended"), 8, "{:#}", r["summary"]);
    let got = python(
        &store.imap,
        &store.users(),
        "import re
sizes, runs = {}, set()
for u, p in USERS:
    m = imap(u, p)
    m.select('INBOX', readonly=True)
    typ, data = m.fetch('1:*', '(RFC822.SIZE BODY.PEEK[HEADER.FIELDS (X-Mailbench-Trace)])')
    for part in data:
        if not isinstance(part, tuple):
            continue
        size = re.search(rb'RFC822.SIZE (\\d+)', part[0]).group(1).decode()
        sizes[size] = sizes.get(size, 0) + 1
        if size == '5120':
            runs.add(re.search(rb'run=([0-9a-f]+)', part[1]).group(1).decode())
    m.logout()
print(json.dumps([sizes, sorted(runs)]))",
    );
    assert_eq!(
        got,
        serde_json::json!([{"5120": 6, "10240": 8}, [run_id]]),
        "[messages by RFC822.SIZE, run ids of the populated ones]"
    );
}

/// What the scripted IMAP server says to `line`; `true` when it answers after its delay.
fn slow_imap(line: &str) -> (bool, String) {
    let mut words = line.split(' ');
    let (tag, cmd) = (words.next().unwrap_or("*"), words.next().unwrap_or(""));
    match cmd.to_ascii_uppercase().as_str() {
        "LOGIN" => (false, format!("{tag} OK logged in\r\n")),
        "CAPABILITY" => (
            false,
            format!("* CAPABILITY IMAP4rev1\r\n{tag} OK listed\r\n"),
        ),
        "SELECT" => (
            false,
            format!("* 3 EXISTS\r\n* OK [UIDVALIDITY 7] ok\r\n{tag} OK [READ-WRITE] selected\r\n"),
        ),
        "LOGOUT" => (false, format!("* BYE\r\n{tag} OK bye\r\n")),
        _ => (true, format!("{tag} OK done\r\n")),
    }
}

/// What the scripted IMAP server says when CAPABILITY is slow: a greeting without
/// capabilities makes mailbench ask, and the answer comes after the limit.
fn slow_capability(line: &str) -> (bool, String) {
    let tag = line.split(' ').next().unwrap_or("*");
    (
        true,
        format!("* CAPABILITY IMAP4rev1\r\n{tag} OK listed\r\n"),
    )
}

/// A scripted IMAP server (see `crate::util::scripted_server`) whose slow replies come
/// 400 ms late, a users file of one user for it, and where to write results: the
/// directory (removed when dropped), the users file, the results file and the target.
fn scripted_imap(
    name: &str,
    greeting: &'static str,
    reply: fn(&str) -> (bool, String),
) -> (TempDir, String, std::path::PathBuf, String) {
    let dir = TempDir::new(name);
    let users = dir.0.join("users.txt");
    std::fs::write(&users, "u1@x.test p1\n").expect("a users file");
    let json = dir.0.join("r.json");
    let port = crate::util::scripted_server(greeting, std::time::Duration::from_millis(400), reply);
    let users = users.to_string_lossy().to_string();
    (dir, users, json, format!("127.0.0.1:{port}"))
}

/// A session that connected and was greeted, then timed out at CAPABILITY, is a
/// connection that failed at `capability`, not a failure to connect (the newcomer's
/// find): the text report says "failed to connect 0" and the error names the step.
#[test]
fn a_session_lost_after_connecting_is_not_a_failure_to_connect() {
    let (_dir, users, json, target) = scripted_imap(
        "imap-setup-timeout",
        "* OK no capabilities here\r\n",
        slow_capability,
    );
    let args = [
        "--target",
        &target,
        "--users-file",
        &users,
        "-n",
        "3",
        "-c",
        "1",
        "--mix",
        "noop=1",
        "--timeout",
        "150ms",
    ];
    let r = imap(&args, &json, 2);
    crate::util::assert_timed_out(&r, "capability", 3, "CAPABILITY slower than --timeout");
    let c = &r["counters"];
    assert_eq!(
        (c["connections"].as_u64(), c["connect_failures"].as_u64()),
        (Some(3), Some(0)),
        "three connections made: {c:#}"
    );
    assert_eq!(
        r["summary"]["commands_per_sec"].as_f64(),
        Some(0.0),
        "nothing answered, no rate: {:#}",
        r["summary"]
    );
    let out = run_expect(&[&["mailbox", "imap", "-q"][..], &args[..]].concat(), 2);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "sessions   0 logged in; connections 3 (TLS 0), failed to connect 0, refused at login 0"
        ),
        "the text report: {text}"
    );
    // Issue 40, item 2: a session lost in its set-up keeps its finished steps' times.
    assert_eq!(
        (count(&r, "connect"), count(&r, "banner")),
        (3, 3),
        "{:#}",
        r["latency"]
    );
}

/// `--timeout` is the longest wait for each reply: a server answering every NOOP 400 ms
/// after it came never times out under a 1 s limit (pipelined, the last of four waits
/// 1.6 s, but a reply comes every 400 ms), and under a 150 ms one every NOOP fails as a
/// timeout about 150 ms after it was sent, pipelined or not.
#[test]
fn a_reply_later_than_the_timeout_fails_as_a_timeout_and_one_within_it_does_not() {
    let (_dir, users, json, target) = scripted_imap(
        "imap-timeout",
        "* OK [CAPABILITY IMAP4rev1] slow server ready\r\n",
        slow_imap,
    );
    for pipeline in ["1", "4"] {
        let args = |timeout: &'static str| {
            let base = ["--target", &target, "--users-file", &users];
            let rest = [
                "-n",
                "4",
                "-c",
                "1",
                "--mix",
                "noop=1",
                "--timeout",
                timeout,
            ];
            [&base[..], &rest[..], &["--pipeline", pipeline]].concat()
        };
        let r = imap(&args("1s"), &json, 0);
        assert_eq!(
            (summary(&r, "completed"), summary(&r, "errors")),
            (4, 0),
            "--pipeline {pipeline}, 400 ms replies under a 1 s limit: {:#}",
            r["summary"]
        );
        // One at a time each NOOP waits 400 ms; four in flight on a server that answers
        // them one after the other complete 400 ms apart, the last 1.6 s after its write:
        // longer than the limit, yet never 1 s without a reply.
        let slowest = if pipeline == "1" {
            400_000.0
        } else {
            1_600_000.0
        };
        let noop = &r["latency"]["noop"];
        let (min, max) = (noop["min_us"].as_f64(), noop["max_us"].as_f64());
        assert!(
            min.zip(max).is_some_and(|(lo, hi)| lo >= 400_000.0
                && hi >= slowest
                && hi < slowest + 150_000.0),
            "--pipeline {pipeline}: NOOPs timed from their write, 400 ms to {slowest} us: {noop:#}"
        );
        let started = std::time::Instant::now();
        let r = imap(&args("150ms"), &json, 2);
        let took = started.elapsed();
        crate::util::assert_timed_out(&r, "noop", 4, &format!("--pipeline {pipeline}"));
        // Each waited its 150 ms, those in flight behind the one that timed out too
        // (they were charged ~0.06 ms once: the newcomer's find).
        let total = &r["latency"]["total"];
        assert!(
            total["min_us"].as_f64().is_some_and(|lo| lo >= 140_000.0),
            "--pipeline {pipeline}: every unit's total is its wait: {total:#}"
        );
        // Four timeouts of 150 ms each, one connection at a time (a timeout costs the
        // connection): well under the 1.6 s that four 400 ms replies would take.
        assert!(
            took < std::time::Duration::from_millis(1500),
            "--pipeline {pipeline}: four 150 ms timeouts took {took:?}"
        );
    }
}

//! The cheapest IMAP client this design can be: the same sessions as `mailbench mailbox
//! imap` with a read-only mix (LOGIN, SELECT, then commands drawn by weight on message
//! numbers up to EXISTS, LOGOUT) on the same one-thread tokio runtime, but with commands
//! pre-encoded and responses only scanned for their tag — no parsing, no state, no
//! timing, no statistics. The IMAP benchmark runs it beside mailbench: its CPU per command
//! is what the kernel and the runtime cost.
//!
//! `imap_floor HOST:PORT CONNECTIONS COMMANDS PER_SESSION USERS_FILE MIX [DEPTH]` prints
//! the commands completed. MIX is `name=weight,...` over fetch, fetch_body, fetch_part,
//! search, status, list, noop and select (the same commands as mailbench's). DEPTH (default 1) is the
//! commands in flight per session, under the same rules as `mailbench mailbox imap
//! --pipeline` (nothing by sequence number beside a command that may renumber, SELECT
//! alone), so "within 1.15x of the floor" compares the same depth.

use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};

use memchr::memmem;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A connection: bytes read and not yet consumed, the next tag, and how much one read
/// takes while commands are in flight (mailbench's sizes: 64 KiB pipelined, 16 KiB not).
struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
    tag: u32,
    chunk: usize,
}

impl Conn {
    /// Reads what has come, straight into the buffer, up to `chunk` more octets.
    async fn fill(&mut self, chunk: usize) {
        self.buf.reserve(chunk);
        let n = self.s.read_buf(&mut self.buf).await.expect("read");
        assert!(n > 0, "server closed");
    }

    /// Sends `tag command` and skips everything up to its tagged completion line; returns
    /// the response bytes (for SELECT's EXISTS).
    async fn command(&mut self, cmd: &[u8]) -> Vec<u8> {
        self.tag += 1;
        let tag = format!("a{} ", self.tag);
        let mut line = Vec::with_capacity(tag.len() + cmd.len() + 2);
        line.extend_from_slice(tag.as_bytes());
        line.extend_from_slice(cmd);
        line.extend_from_slice(b"\r\n");
        self.s.write_all(&line).await.expect("write");
        let done = format!("\r\n{tag}");
        let mut from = 0;
        loop {
            let hit = if self.buf.starts_with(tag.as_bytes()) {
                Some(0)
            } else {
                memmem::find(&self.buf[from..], done.as_bytes()).map(|p| from + p + 2)
            };
            if let Some(at) = hit
                && let Some(end) = memmem::find(&self.buf[at..], b"\r\n")
            {
                let used = at + end + 2;
                return self.buf.drain(..used).collect();
            }
            from = self.buf.len().saturating_sub(done.len());
            self.fill(16384).await;
        }
    }

    /// Appends `tag command` to `out` (written later, with the others of the same turn);
    /// returns the tag.
    fn encode(&mut self, cmd: &[u8], out: &mut Vec<u8>) -> u32 {
        self.tag += 1;
        out.extend_from_slice(format!("a{} ", self.tag).as_bytes());
        out.extend_from_slice(cmd);
        out.extend_from_slice(b"\r\n");
        self.tag
    }

    /// Skips responses up to the next tagged completion, whichever command's; returns its
    /// tag. `out` (the commands encoded since the last write) is written only when the
    /// buffer holds no completion: one write carries every command the completions already
    /// read freed, as mailbench writes.
    async fn completion(&mut self, out: &mut Vec<u8>) -> u32 {
        let mut from = 0;
        loop {
            let mut at = from;
            loop {
                let line = if at == 0 && self.buf.first() == Some(&b'a') {
                    0
                } else if let Some(p) = memmem::find(&self.buf[at..], b"\r\na") {
                    at + p + 2
                } else {
                    from = self.buf.len().saturating_sub(2);
                    break;
                };
                let Some(end) = memmem::find(&self.buf[line..], b"\r\n") else {
                    from = line.saturating_sub(2);
                    break;
                };
                let digits = self.buf[line + 1..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit())
                    .count();
                let tag = std::str::from_utf8(&self.buf[line + 1..line + 1 + digits])
                    .ok()
                    .and_then(|t| t.parse().ok());
                if let Some(tag) = tag
                    && self.buf.get(line + 1 + digits) == Some(&b' ')
                {
                    self.buf.drain(..line + end + 2);
                    return tag;
                }
                at = line + 1;
            }
            if !out.is_empty() {
                self.s.write_all(out).await.expect("write");
                out.clear();
            }
            self.fill(self.chunk).await;
        }
    }
}

/// The mix's commands, pre-encoded as far as they can be.
#[derive(Clone, Copy)]
enum Cmd {
    Fetch,
    FetchBody,
    FetchPart,
    Search,
    Status,
    List,
    Noop,
    Select,
}

fn encode(c: Cmd, exists: u32, rng: &mut fastrand::Rng) -> Vec<u8> {
    let pick = rng.u32(1..=exists.max(1));
    match c {
        Cmd::Fetch => format!(
            "FETCH {pick}:{} (UID FLAGS RFC822.SIZE ENVELOPE BODYSTRUCTURE)",
            (pick + 9).min(exists.max(1))
        )
        .into_bytes(),
        Cmd::FetchBody => format!("FETCH {pick} (UID RFC822.SIZE BODY.PEEK[])").into_bytes(),
        Cmd::FetchPart => {
            // mailbench's `fetch_part`: one of imaptest's FETCH2 sections.
            const SECTIONS: [&str; 5] = [
                "BODY.PEEK[HEADER]",
                "RFC822.HEADER",
                "BODY.PEEK[]",
                "BODY.PEEK[1]",
                "BODY.PEEK[TEXT]",
            ];
            let section = SECTIONS[rng.usize(..SECTIONS.len())];
            format!("FETCH {pick} (UID {section})").into_bytes()
        }
        Cmd::Search => b"UID SEARCH ALL".to_vec(),
        Cmd::Status => b"STATUS \"INBOX\" (MESSAGES UIDNEXT UNSEEN)".to_vec(),
        Cmd::List => b"LIST \"\" \"*\"".to_vec(),
        Cmd::Noop => b"NOOP".to_vec(),
        Cmd::Select => b"SELECT \"INBOX\"".to_vec(),
    }
}

impl Cmd {
    /// Names messages by sequence number (so waits for commands that may renumber).
    fn numbers(self) -> bool {
        matches!(
            self,
            Cmd::Fetch | Cmd::FetchBody | Cmd::FetchPart | Cmd::Search
        )
    }

    /// The server may send EXPUNGE during it.
    fn renumbers(self) -> bool {
        matches!(self, Cmd::Search | Cmd::Status | Cmd::List | Cmd::Noop)
    }
}

/// `mailbench`'s pipelining rules over the floor's commands.
fn may_send(cmd: Cmd, flying: &VecDeque<(u32, Cmd)>) -> bool {
    flying.iter().all(|(_, f)| {
        let alone = matches!(cmd, Cmd::Select) || matches!(f, Cmd::Select);
        let renumbered = cmd.numbers() && f.renumbers();
        let search_moved = matches!(f, Cmd::Search) && cmd.renumbers();
        !(alone || renumbered || search_moved)
    })
}

fn exists(select: &[u8]) -> u32 {
    let at = memmem::find(select, b" EXISTS\r\n").expect("SELECT says EXISTS");
    let start = select[..at]
        .iter()
        .rposition(|b| *b == b' ')
        .map_or(0, |p| p + 1);
    std::str::from_utf8(&select[start..at])
        .ok()
        .and_then(|n| n.parse().ok())
        .expect("EXISTS count")
}

/// One session as `user`/`pass` running up to `per_session` commands, `depth` in flight,
/// each claimed from `handed` until `commands` are handed out (as mailbench's load engine
/// claims units); returns how many it ran.
async fn session(
    addr: &str,
    user: &str,
    pass: &str,
    (handed, commands, per_session, depth): (&AtomicUsize, usize, usize, usize),
    mix: &[(Cmd, u32)],
    rng: &mut fastrand::Rng,
) -> usize {
    let s = TcpStream::connect(addr).await.expect("connect");
    s.set_nodelay(true).expect("nodelay");
    let mut c = Conn {
        s,
        buf: Vec::with_capacity(16384),
        tag: 0,
        chunk: if depth > 1 { 65536 } else { 16384 },
    };
    while memmem::find(&c.buf, b"\r\n").is_none() {
        c.fill(16384).await;
    }
    c.buf.clear();
    c.command(format!("LOGIN \"{user}\" \"{pass}\"").as_bytes())
        .await;
    let mut count = exists(&c.command(b"SELECT \"INBOX\"").await);
    let total: u32 = mix.iter().map(|(_, w)| w).sum();
    let mut n = 0;
    let mut flying: VecDeque<(u32, Cmd)> = VecDeque::with_capacity(depth);
    let mut planned: Option<Cmd> = None;
    let mut out = Vec::with_capacity(1024);
    let mut claiming = true;
    loop {
        // Send, in order, what may go beside what is in flight.
        loop {
            if planned.is_none()
                && claiming
                && flying.len() < depth
                && n < per_session
                && handed.fetch_add(1, Ordering::Relaxed) < commands
            {
                n += 1;
                let mut at = rng.u32(..total);
                planned = mix
                    .iter()
                    .find(|(_, w)| {
                        let hit = at < *w;
                        at = at.saturating_sub(*w);
                        hit
                    })
                    .map(|(c, _)| *c)
                    .or(Some(Cmd::Noop));
            } else if planned.is_none() && flying.len() < depth {
                claiming = false;
            }
            let Some(cmd) = planned.filter(|c| may_send(*c, &flying)) else {
                break;
            };
            planned = None;
            if matches!(cmd, Cmd::Select) {
                // Alone on the wire (may_send saw nothing in flight): its EXISTS is needed.
                count = exists(&c.command(&encode(cmd, count, rng)).await);
                continue;
            }
            let tag = c.encode(&encode(cmd, count, rng), &mut out);
            flying.push_back((tag, cmd));
        }
        if flying.is_empty() && planned.is_none() {
            break;
        }
        let tag = c.completion(&mut out).await;
        flying.retain(|(t, _)| *t != tag);
    }
    c.command(b"LOGOUT").await;
    n
}

fn parse_mix(spec: &str) -> Vec<(Cmd, u32)> {
    spec.split(',')
        .filter_map(|part| part.split_once('='))
        .map(|(name, w)| {
            let c = match name.trim() {
                "fetch" => Cmd::Fetch,
                "fetch_body" => Cmd::FetchBody,
                "fetch_part" => Cmd::FetchPart,
                "search" => Cmd::Search,
                "status" => Cmd::Status,
                "list" => Cmd::List,
                "noop" => Cmd::Noop,
                "select" => Cmd::Select,
                other => panic!("the floor has no {other:?}"),
            };
            (c, w.trim().parse().expect("a weight"))
        })
        .collect()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage =
        "usage: imap_floor HOST:PORT CONNECTIONS COMMANDS PER_SESSION USERS_FILE MIX [DEPTH]";
    let addr = Rc::new(args.get(1).expect(usage).clone());
    let conns: usize = args.get(2).and_then(|a| a.parse().ok()).expect(usage);
    let commands: usize = args.get(3).and_then(|a| a.parse().ok()).expect(usage);
    let per_session: usize = args.get(4).and_then(|a| a.parse().ok()).expect(usage);
    let text = std::fs::read_to_string(args.get(5).expect(usage)).expect("users file");
    let mix = Rc::new(parse_mix(args.get(6).expect(usage)));
    let depth: usize = args
        .get(7)
        .map_or(Some(1), |a| a.parse().ok())
        .expect(usage);
    let users: Rc<Vec<(String, String)>> = Rc::new(
        text.lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(u, p)| (u.to_string(), p.trim().to_string()))
            .collect(),
    );
    // Commands are claimed one at a time; a session ends after PER_SESSION of them.
    let handed = Rc::new(AtomicUsize::new(0));
    let sessions = Rc::new(AtomicUsize::new(0));
    let local = tokio::task::LocalSet::new();
    let total = local
        .run_until(async {
            let mut tasks = Vec::new();
            for i in 0..conns {
                let (addr, users, mix) = (addr.clone(), users.clone(), mix.clone());
                let (handed, sessions) = (handed.clone(), sessions.clone());
                tasks.push(tokio::task::spawn_local(async move {
                    let mut rng = fastrand::Rng::with_seed(i as u64);
                    let mut got = 0;
                    while handed.load(Ordering::Relaxed) < commands {
                        let k = sessions.fetch_add(1, Ordering::Relaxed);
                        let (u, p) = &users[k % users.len()];
                        let claim = (&*handed, commands, per_session, depth.max(1));
                        got += session(&addr, u, p, claim, &mix, &mut rng).await;
                    }
                    got
                }));
            }
            let mut total = 0;
            for t in tasks {
                total += t.await.expect("session task");
            }
            total
        })
        .await;
    println!("{total}");
}

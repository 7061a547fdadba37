//! What parsing IMAP responses costs, apart from sockets and the runtime: a recorded
//! Dovecot session (the workload's commands against a lab Dovecot, mostly FETCH of
//! message metadata) cut into responses and parsed ROUNDS times (default 1000). Run
//! under `valgrind --tool=callgrind` and divide `response::parse`'s inclusive count by
//! the responses parsed (printed) for instructions per response; the callgrind total
//! divided likewise is close to it, as the loop does nothing else.
//!
//! `imap_parse_cost [ROUNDS] [FILE]` — FILE is raw server output (default the recorded
//! session in `crates/wire/src/imap/proto/testdata/dovecot-session.bin`).

use mailbench_wire::imap::proto::frame::Framer;
use mailbench_wire::imap::proto::response::parse;

const SESSION: &[u8] = include_bytes!("../src/imap/proto/testdata/dovecot-session.bin");

fn main() {
    if let Err(e) = run() {
        eprintln!("imap_parse_cost: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let rounds: usize = match args.next() {
        Some(r) => r
            .parse()
            .map_err(|_| format!("ROUNDS {r:?} is not a count; give e.g. 1000"))?,
        None => 1000,
    };
    let owned = match args.next() {
        Some(f) => std::fs::read(&f).map_err(|e| format!("cannot read {f}: {e}"))?,
        None => SESSION.to_vec(),
    };
    let mut frames = Vec::new();
    let mut rest = &owned[..];
    while let Ok(Some(frame)) = Framer::default().next(rest) {
        let len = frame.len;
        frames.push((&rest[..len], frame));
        rest = &rest[len..];
    }
    let mut ok = 0usize;
    for _ in 0..rounds {
        for (buf, frame) in &frames {
            ok += usize::from(std::hint::black_box(parse(buf, frame)).is_ok());
        }
    }
    println!(
        "{} responses parsed ({} per round, {} bytes left unframed), {ok} without error",
        rounds * frames.len(),
        frames.len(),
        rest.len()
    );
    Ok(())
}

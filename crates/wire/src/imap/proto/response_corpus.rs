//! The parser's answers to a recorded corpus must not change when the parser is made
//! faster. `testdata/dovecot-session.bin` holds real Dovecot 2.3.19 responses (a lab
//! session of the workload's commands plus APPEND, COPY, MOVE, EXPUNGE and errors);
//! `testdata/responses.bin` hand-written edge cases (escapes, literals and parentheses
//! inside ENVELOPE and BODYSTRUCTURE, NIL Message-IDs, odd FLAGS, numbers past 2^32, bare
//! CR, truncated lines) and responses framed out of the `imap_client` fuzz corpus.
//! `testdata/responses.txt` is what the parser of commit 54ce8b6 (before it was made
//! cheaper) said of each, one line per response: a digest of its answers to every
//! mutation below, then the `Debug` of its answer to the response itself. Change a line
//! only for a behaviour change you mean.

use super::frame::Framer;
use super::response::parse;

const SESSION: &[u8] = include_bytes!("testdata/dovecot-session.bin");
const EDGES: &[u8] = include_bytes!("testdata/responses.bin");
const EXPECTED: &str = include_str!("testdata/responses.txt");

/// Octets that steer the grammar, written over each position of a response in turn.
const SPLICE: &[u8] = b" ()[]\"\\{}\r\nN0x<";

/// The corpus cut into responses, as the framer cuts a stream.
fn responses() -> Vec<&'static [u8]> {
    let mut out = Vec::new();
    for mut rest in [SESSION, EDGES] {
        while !rest.is_empty() {
            let frame = Framer::default()
                .next(rest)
                .expect("the corpus frames")
                .expect("the corpus ends with a whole response");
            out.push(&rest[..frame.len]);
            rest = &rest[frame.len..];
        }
    }
    out
}

/// What the parser makes of `input`, as text (`unframed` when it is not one response).
fn answer(input: &[u8]) -> String {
    match Framer::default().next(input) {
        Ok(Some(frame)) => format!("{:?}", parse(input, &frame)),
        other => format!("unframed {other:?}"),
    }
}

/// Positions mutated: the grammar is in a response's first octets (past them is a
/// message body).
const MUTATED: usize = 600;

/// FNV-1a over the answers to `input` cut short at each of its first [`MUTATED`]
/// positions and with each [`SPLICE`] octet written over each of them.
fn mutations_digest(input: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |s: &str| {
        for &b in s.as_bytes().iter().chain(b"\n") {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    };
    let mut m = Vec::with_capacity(input.len() + 2);
    for at in 0..input.len().min(MUTATED) {
        m.clear();
        m.extend_from_slice(&input[..at]);
        m.extend_from_slice(b"\r\n");
        eat(&answer(&m));
        for &o in SPLICE {
            m.clear();
            m.extend_from_slice(input);
            m[at] = o;
            eat(&answer(&m));
        }
    }
    h
}

/// One line of `responses.txt`.
fn line(input: &[u8]) -> String {
    format!("{:016x} {}", mutations_digest(input), answer(input))
}

#[test]
fn the_corpus_parses_as_the_reference_parser_did() {
    let inputs = responses();
    let want: Vec<&str> = EXPECTED.lines().collect();
    assert_eq!(inputs.len(), want.len(), "one expected line per response");
    let mut wrong = 0;
    for (i, (input, want)) in inputs.iter().zip(&want).enumerate() {
        let got = line(input);
        if got != *want {
            wrong += 1;
            if wrong <= 5 {
                eprintln!(
                    "response {i}: {:?}\n  want {want}\n  got  {got}",
                    String::from_utf8_lossy(input)
                );
            }
        }
    }
    assert_eq!(wrong, 0, "responses parsed differently (first five above)");
}

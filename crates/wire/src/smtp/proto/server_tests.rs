//! Byte-level tests of the server session.

use super::*;

fn cfg() -> ServerConfig {
    ServerConfig {
        hostname: "sink.test".into(),
        max_message_size: 1000,
        smtputf8: false,
        dsn: false,
        ..ServerConfig::default()
    }
}

/// Accepts everything and keeps the messages.
#[derive(Default)]
struct Keep {
    messages: Vec<(Envelope, Vec<u8>, bool)>,
    refuse_rcpt: Option<&'static str>,
    auths: Vec<String>,
}

impl Handler for Keep {
    fn decide(&mut self, cmd: Command, _env: &Envelope, arg: &str) -> Decision {
        if cmd == Command::Auth {
            self.auths.push(arg.to_string());
        }
        if cmd == Command::Rcpt && Some(arg) == self.refuse_rcpt {
            return reply(550, "5.1.1", "no such user");
        }
        Decision::ACCEPT
    }
}

/// Feeds `input` as one read, keeping and accepting each message it completes.
fn feed(s: &mut ServerSession, input: &[u8], h: &mut Keep) {
    let mut at = 0;
    loop {
        at += s.feed(&input[at..], h);
        let Some(m) = s.received() else {
            assert_eq!(
                at,
                input.len(),
                "without a message waiting, all input is consumed"
            );
            return;
        };
        h.messages
            .push((m.env.clone(), m.data.to_vec(), m.oversize));
        s.finish(&[Decision::ACCEPT]);
    }
}

/// Feeds `input` in two pieces cut at `cut`; returns all output bytes and whether the
/// session asked to close.
fn session_with(cfg: ServerConfig, h: &mut Keep, input: &[u8], cut: usize) -> (String, bool) {
    let mut s = ServerSession::new(cfg, false, h);
    feed(&mut s, &input[..cut], h);
    feed(&mut s, &input[cut..], h);
    let mut out = Vec::new();
    s.take_output(&mut out);
    let mut text = Vec::new();
    let mut closed = false;
    for o in out {
        match o {
            Out::Bytes(b) => text.extend(b),
            Out::Close => closed = true,
            _ => {}
        }
    }
    (String::from_utf8(text).expect("ascii replies"), closed)
}

const SESSION: &[u8] = b"EHLO client.test\r\nMAIL FROM:<a@example.org> SIZE=40\r\nRCPT TO:<b@example.com>\r\nRCPT TO:<c@example.com>\r\nDATA\r\nSubject: t\r\n\r\n..dotted\r\nline\r\n.\r\nQUIT\r\n";

#[test]
fn a_pipelined_session_works_at_every_split() {
    for cut in 0..=SESSION.len() {
        let mut h = Keep::default();
        let (text, closed) = session_with(cfg(), &mut h, SESSION, cut);
        assert!(closed, "cut {cut}: QUIT must close");
        let codes: Vec<&str> = text
            .lines()
            .map(|l| &l[..4])
            .filter(|c| c.ends_with(' '))
            .collect();
        assert_eq!(
            codes,
            [
                "220 ", "250 ", "250 ", "250 ", "250 ", "354 ", "250 ", "221 "
            ],
            "cut {cut}: {text}"
        );
        assert_eq!(h.messages.len(), 1, "cut {cut}");
        let (env, data, oversize) = &h.messages[0];
        assert_eq!(env.from, "a@example.org");
        assert_eq!(env.rcpts, ["b@example.com", "c@example.com"]);
        assert_eq!(
            data, b"Subject: t\r\n\r\n.dotted\r\nline\r\n",
            "cut {cut}: unstuffed exactly"
        );
        assert!(!oversize);
    }
}

#[test]
fn ehlo_advertises_what_is_enabled() {
    let mut c = cfg();
    c.chunking = false;
    let mut h = Keep::default();
    let (text, _) = session_with(c, &mut h, b"EHLO x\r\n", 0);
    assert!(
        text.contains("250-PIPELINING")
            && text.contains("STARTTLS")
            && text.contains("AUTH PLAIN LOGIN")
    );
    assert!(!text.contains("CHUNKING"), "{text}");
}

#[test]
fn bdat_chunks_make_one_message() {
    let input = b"EHLO x\r\nMAIL FROM:<a@x.test>\r\nRCPT TO:<b@x.test>\r\nBDAT 5\r\nab\r\ncBDAT 4 LAST\r\n.d\r\n";
    for cut in 0..=input.len() {
        let mut h = Keep::default();
        let (text, _) = session_with(cfg(), &mut h, input, cut);
        assert_eq!(h.messages.len(), 1, "cut {cut}: {text}");
        assert_eq!(
            h.messages[0].1, b"ab\r\nc.d\r\n",
            "BDAT content is not unstuffed"
        );
    }
}

#[test]
fn lmtp_replies_once_per_recipient() {
    let mut c = cfg();
    c.lmtp = true;
    let mut h = Keep::default();
    let input = b"LHLO x\r\nMAIL FROM:<a@x.test>\r\nRCPT TO:<b@x.test>\r\nRCPT TO:<c@x.test>\r\nRCPT TO:<d@x.test>\r\nDATA\r\nhi\r\n.\r\n";
    let (text, _) = session_with(c, &mut h, input, 0);
    let after_data = text.split("354 ").nth(1).expect("354");
    assert_eq!(after_data.matches("250 ").count(), 3, "{text}");
}

#[test]
fn refusals_and_errors_get_the_right_codes() {
    let mut h = Keep {
        refuse_rcpt: Some("bad@x.test"),
        ..Keep::default()
    };
    let input = b"MAIL FROM:<a@x.test>\r\nEHLO x\r\nFOO\r\nMAIL FROM:<a@x.test>\r\nRCPT TO:<bad@x.test>\r\nDATA\r\nRSET\r\n";
    let (text, _) = session_with(cfg(), &mut h, input, 0);
    let codes: Vec<&str> = text
        .lines()
        .filter(|l| l.as_bytes()[3] == b' ')
        .map(|l| &l[..3])
        .collect();
    assert_eq!(
        codes,
        ["220", "503", "250", "500", "250", "550", "554", "250"],
        "{text}"
    );
    assert_eq!(h.messages.len(), 0);
}

#[test]
fn oversize_messages_get_552_and_memory_stays_bounded() {
    let mut h = Keep::default();
    let mut input = b"EHLO x\r\nMAIL FROM:<a@x.test>\r\nRCPT TO:<b@x.test>\r\nDATA\r\n".to_vec();
    for _ in 0..200 {
        input.extend_from_slice(b"0123456789012345678901234567890123456789\r\n");
    }
    input.extend_from_slice(b".\r\n");
    let (text, _) = session_with(cfg(), &mut h, &input, 100);
    assert!(text.contains("552 "), "{text}");
    assert!(h.messages[0].2, "flagged oversize");
    assert!(h.messages[0].1.len() <= 1000);
}

#[test]
fn overlong_command_line_is_refused() {
    let mut h = Keep::default();
    let mut input = b"EHLO ".to_vec();
    input.extend(std::iter::repeat_n(b'x', 5000));
    input.extend_from_slice(b"\r\nNOOP\r\n");
    // Whole, smtp-proto reports bad syntax; arriving in pieces it is "line too long".
    for cut in [0, 100] {
        let (text, _) = session_with(cfg(), &mut h, &input, cut);
        let codes: Vec<&str> = text.lines().map(|l| &l[..3]).collect();
        assert!(codes[1].starts_with('5'), "cut {cut}: {text}");
        assert_eq!(codes.last(), Some(&"250"), "the session goes on: {text}");
    }
}

#[test]
fn starttls_stops_reading_until_the_handshake() {
    let mut h = Keep::default();
    let mut s = ServerSession::new(cfg(), false, &mut h);
    feed(
        &mut s,
        b"EHLO x\r\nSTARTTLS\r\nMAIL FROM:<smuggled@x.test>\r\n",
        &mut h,
    );
    let mut out = Vec::new();
    s.take_output(&mut out);
    assert_eq!(out.last(), Some(&Out::StartTls));
    let text: Vec<u8> = out
        .iter()
        .filter_map(|o| {
            if let Out::Bytes(b) = o {
                Some(b.clone())
            } else {
                None
            }
        })
        .flatten()
        .collect();
    assert!(
        !String::from_utf8_lossy(&text).contains("2.1.0"),
        "plaintext after STARTTLS must be ignored"
    );
    s.tls_established();
    feed(&mut s, b"MAIL FROM:<a@x.test>\r\n", &mut h);
    s.take_output(&mut out);
    assert!(
        matches!(out.last(), Some(Out::Bytes(b)) if b.starts_with(b"503")),
        "EHLO needed again"
    );
}

#[test]
fn auth_login_and_plain_are_accepted() {
    let mut h = Keep::default();
    let input = b"EHLO x\r\nAUTH LOGIN\r\ndQ==\r\ncA==\r\nAUTH PLAIN AHUAcA==\r\n";
    let (text, _) = session_with(cfg(), &mut h, input, 13);
    let codes: Vec<&str> = text
        .lines()
        .filter(|l| l.as_bytes()[3] == b' ')
        .map(|l| &l[..3])
        .collect();
    assert_eq!(codes, ["220", "250", "334", "334", "235", "235"], "{text}");
    assert_eq!(
        h.auths,
        ["u\0p", "u\0p"],
        "the handler sees the credentials"
    );
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = fastrand::Rng::with_seed(99);
    for _ in 0..2000 {
        let len = rng.usize(0..300);
        let mut input: Vec<u8> = (0..len).map(|_| rng.u8(..)).collect();
        if rng.bool() {
            let mut valid = SESSION.to_vec();
            let at = rng.usize(0..valid.len());
            valid.splice(at..at, input.drain(..));
            input = valid;
        }
        let mut h = Keep::default();
        let cut = rng.usize(0..=input.len());
        let _ = session_with(cfg(), &mut h, &input, cut);
    }
}

#[test]
fn a_message_waits_for_its_decision_and_input_behind_it_waits_too() {
    let mut h = Keep::default();
    let mut s = ServerSession::new(cfg(), false, &mut h);
    let input =
        b"EHLO x\r\nMAIL FROM:<a@x.test>\r\nRCPT TO:<b@x.test>\r\nDATA\r\nhi\r\n.\r\nQUIT\r\n";
    let used = s.feed(input, &mut h);
    assert_eq!(
        &input[used..],
        b"QUIT\r\n",
        "feeding stops right after the message"
    );
    let m = s.received().expect("a message waits");
    assert_eq!(
        (m.env.rcpts.as_slice(), m.data),
        (["b@x.test".to_string()].as_slice(), b"hi\r\n".as_slice())
    );
    assert_eq!(
        s.feed(&input[used..], &mut h),
        0,
        "no input while a message waits"
    );
    s.finish(&[reply(451, "4.3.0", "disk full")]);
    assert!(s.received().is_none(), "finish releases the session");
    assert_eq!(s.feed(&input[used..], &mut h), 6);
    let mut out = Vec::new();
    s.take_output(&mut out);
    let text: String = out
        .iter()
        .filter_map(|o| match o {
            Out::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        })
        .collect();
    let codes: Vec<&str> = text
        .lines()
        .filter(|l| l.as_bytes().get(3) == Some(&b' '))
        .map(|l| &l[..3])
        .collect();
    assert_eq!(
        codes,
        ["220", "250", "250", "250", "354", "451", "221"],
        "{text}"
    );
}

/// Refuses what it is told to, for counting attempts.
struct Refuse {
    mail: bool,
    rcpt: bool,
    data_end: Option<Decision>,
}

impl Refuse {
    /// Refuses MAIL and/or RCPT; accepts the rest.
    fn at(mail: bool, rcpt: bool) -> Refuse {
        Refuse {
            mail,
            rcpt,
            data_end: None,
        }
    }

    /// Accepts the envelope; ends every message with `d`.
    fn ending(verdict: Verdict, delay: Duration) -> Refuse {
        Refuse {
            mail: false,
            rcpt: false,
            data_end: Some(Decision { delay, verdict }),
        }
    }
}

impl Handler for Refuse {
    fn decide(&mut self, cmd: Command, _env: &Envelope, _arg: &str) -> Decision {
        match cmd {
            Command::Mail if self.mail => reply(550, "5.7.1", "sender refused"),
            Command::Rcpt if self.rcpt => reply(451, "4.3.0", "try later"),
            _ => Decision::ACCEPT,
        }
    }
}

/// Runs `input` as one read through a session with `h`; every complete message gets
/// `h.data_end` (accept by default). Returns the counts and the output.
fn counted(h: &mut Refuse, input: &[u8]) -> (SessionCounts, Vec<Out>) {
    let mut s = ServerSession::new(cfg(), false, h);
    let mut at = 0;
    loop {
        at += s.feed(&input[at..], h);
        if s.received().is_none() {
            break;
        }
        let d = h.data_end.clone().unwrap_or(Decision::ACCEPT);
        s.finish(&[d]);
    }
    s.end();
    let mut out = Vec::new();
    s.take_output(&mut out);
    (s.counts.clone(), out)
}

const PIPELINED_TXN: &[u8] = b"EHLO c\r\nMAIL FROM:<a@x.test>\r\nRCPT TO:<b@x.test>\r\nDATA\r\nSubject: t\r\n\r\nbody\r\n.\r\n";

#[test]
fn a_refused_transaction_counts_once_and_its_follow_on_replies_are_not_refusals() {
    // RCPT refused: DATA's 554 follows from it.
    let (c, _) = counted(
        &mut Refuse::at(false, true),
        b"EHLO c\r\nMAIL FROM:<a@x.test>\r\nRCPT TO:<b@x.test>\r\nDATA\r\nRSET\r\nQUIT\r\n",
    );
    assert_eq!((c.refused, c.abandoned, c.rejected), (1, 0, 1), "{c:?}");
    // MAIL refused: RCPT's 503 and DATA's 554 follow from it.
    let (c, _) = counted(
        &mut Refuse::at(true, false),
        b"EHLO c\r\nMAIL FROM:<a@x.test>\r\nRCPT TO:<b@x.test>\r\nDATA\r\nQUIT\r\n",
    );
    assert_eq!((c.refused, c.abandoned, c.rejected), (1, 0, 1), "{c:?}");
    // Not pipelined: MAIL refused, then RSET ends the attempt.
    let (c, _) = counted(
        &mut Refuse::at(true, false),
        b"EHLO c\r\nMAIL FROM:<a@x.test>\r\nRSET\r\nMAIL FROM:<a@x.test>\r\nQUIT\r\n",
    );
    assert_eq!((c.refused, c.rejected), (2, 2), "{c:?}");
    // End of data refused.
    let (c, _) = counted(
        &mut Refuse::ending(Verdict::Reply(554, "5.6.0", "no".into()), Duration::ZERO),
        PIPELINED_TXN,
    );
    assert_eq!((c.refused, c.abandoned, c.rejected), (1, 0, 1), "{c:?}");
    // Delivered: neither.
    let (c, _) = counted(&mut Refuse::at(false, false), PIPELINED_TXN);
    assert_eq!((c.refused, c.abandoned, c.transactions), (0, 0, 1), "{c:?}");
}

#[test]
fn a_client_that_leaves_mid_transaction_abandoned_it_and_a_server_drop_refused_it() {
    let accept = || Refuse::at(false, false);
    let (c, _) = counted(
        &mut accept(),
        b"EHLO c\r\nMAIL FROM:<a@x.test>\r\nRCPT TO:<b@x.test>\r\n",
    );
    assert_eq!((c.refused, c.abandoned), (0, 1), "client went away: {c:?}");
    let (c, _) = counted(
        &mut accept(),
        b"EHLO c\r\nMAIL FROM:<a@x.test>\r\nRCPT TO:<b@x.test>\r\nQUIT\r\n",
    );
    assert_eq!((c.refused, c.abandoned), (0, 1), "client quit: {c:?}");
    let (c, _) = counted(
        &mut Refuse::ending(Verdict::Disconnect, Duration::ZERO),
        PIPELINED_TXN,
    );
    assert_eq!((c.refused, c.abandoned), (1, 0), "server dropped it: {c:?}");
}

#[test]
fn a_delayed_acceptance_is_a_hold_and_a_delayed_refusal_a_plain_delay() {
    let delay = Duration::from_millis(300);
    let (_, out) = counted(&mut Refuse::ending(Verdict::Accept, delay), PIPELINED_TXN);
    let hold = out.iter().position(|o| *o == Out::Hold(delay));
    assert!(hold.is_some(), "{out:?}");
    let after = out.get(hold.unwrap_or(0) + 1);
    assert!(
        matches!(after, Some(Out::Bytes(b)) if b.starts_with(b"250 2.0.0 message accepted")),
        "the accepting reply comes right after the hold: {out:?}"
    );
    let (_, out) = counted(
        &mut Refuse::ending(Verdict::Reply(451, "4.3.0", "later".into()), delay),
        PIPELINED_TXN,
    );
    assert!(
        out.contains(&Out::Delay(delay)) && !out.iter().any(|o| matches!(o, Out::Hold(_))),
        "{out:?}"
    );
}

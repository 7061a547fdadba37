//! Byte-level tests of the client session: what it writes for each reply it is fed.

use super::*;
use bytes::Bytes;

fn cfg() -> ClientConfig {
    ClientConfig {
        lmtp: false,
        helo_name: "client.test".into(),
        pipelining: true,
        chunking: false,
        starttls: false,
        auth: None,
    }
}

fn txn(rcpts: &[&str]) -> Transaction {
    Transaction {
        mail_from: "a@example.org".into(),
        rcpts: rcpts.iter().map(|r| r.to_string()).collect(),
        prefix: Bytes::from_static(b"X-T: 1\r\n"),
        raw: Bytes::from_static(b"Subject: x\r\n\r\n.dot\r\n"),
        stuffed: Bytes::from_static(b"Subject: x\r\n\r\n..dot\r\n"),
        suffix: Bytes::new(),
        eight_bit: false,
    }
}

fn r(code: u16, text: &str) -> Reply {
    Reply::new(code, text)
}

/// Drives the session: asserts it wants to write `expect_out` (if given) and then feeds
/// `replies` one at a time.
fn written(s: &mut ClientSession) -> String {
    assert_eq!(s.step(), Step::Flush, "session should have bytes to write");
    String::from_utf8(s.outbox().take_vec()).expect("utf8")
}

/// Feeds replies in order; each must be accepted without a session error.
fn feed(s: &mut ClientSession, replies: &[(u16, &str)]) {
    for (code, text) in replies {
        s.on_reply(r(*code, text))
            .unwrap_or_else(|e| panic!("reply {code} {text} refused: {e}"));
    }
}

/// The outcome the session must report next.
fn done(s: &mut ClientSession) -> TxnOutcome {
    match s.step() {
        Step::TxnDone(o) => o,
        other => panic!("expected a transaction outcome, got {other:?}"),
    }
}

fn ready_session(cfg: ClientConfig, ehlo: &str) -> ClientSession {
    let mut s = ClientSession::new(cfg, false);
    assert_eq!(s.step(), Step::Read(Phase::Banner));
    s.on_reply(r(220, "mx.test ESMTP")).expect("banner");
    let hello = written(&mut s);
    assert!(hello.ends_with("HLO client.test\r\n"), "got {hello:?}");
    s.on_reply(r(250, ehlo)).expect("ehlo");
    s
}

#[test]
fn pipelined_transaction_is_one_write_then_body() {
    let mut s = ready_session(cfg(), "mx.test\nPIPELINING\nSIZE 1000");
    assert_eq!(s.step(), Step::Ready);
    s.begin(txn(&["b@example.com", "c@example.com"]));
    assert_eq!(
        written(&mut s),
        "MAIL FROM:<a@example.org> SIZE=28\r\nRCPT TO:<b@example.com>\r\nRCPT TO:<c@example.com>\r\nDATA\r\n"
    );
    assert_eq!(s.step(), Step::Read(Phase::Mail));
    s.on_reply(r(250, "ok")).expect("mail");
    assert_eq!(s.step(), Step::Read(Phase::Rcpt));
    feed(&mut s, &[(250, "ok"), (250, "ok")]);
    assert_eq!(s.step(), Step::Read(Phase::Data));
    s.on_reply(r(354, "go")).expect("data");
    assert_eq!(s.step(), Step::OfferFollow);
    s.no_follow();
    assert_eq!(
        written(&mut s),
        "X-T: 1\r\nSubject: x\r\n\r\n..dot\r\n.\r\n"
    );
    assert_eq!(s.step(), Step::Read(Phase::DataDot));
    s.on_reply(r(250, "queued")).expect("dot");
    match s.step() {
        Step::TxnDone(o) => {
            assert!(o.accepted);
            assert_eq!((o.rcpts_accepted, o.rcpts_delivered), (2, 2));
            assert_eq!(o.failure, None);
        }
        other => panic!("expected TxnDone, got {other:?}"),
    }
    assert_eq!(s.step(), Step::Ready);
    s.quit();
    assert_eq!(written(&mut s), "QUIT\r\n");
    s.on_reply(r(221, "bye")).expect("quit");
    assert_eq!(s.step(), Step::Closed);
}

#[test]
fn without_pipelining_commands_go_one_by_one() {
    let mut c = cfg();
    c.pipelining = false;
    let mut s = ready_session(c, "mx.test\nPIPELINING");
    s.begin(txn(&["b@example.com", "c@example.com"]));
    assert_eq!(written(&mut s), "MAIL FROM:<a@example.org>\r\n");
    s.on_reply(r(250, "ok")).expect("mail");
    assert_eq!(written(&mut s), "RCPT TO:<b@example.com>\r\n");
    s.on_reply(r(550, "no such user")).expect("rcpt");
    assert_eq!(written(&mut s), "RCPT TO:<c@example.com>\r\n");
    s.on_reply(r(250, "ok")).expect("rcpt");
    assert_eq!(written(&mut s), "DATA\r\n");
    s.on_reply(r(354, "go")).expect("data");
    let _ = written(&mut s);
    s.on_reply(r(250, "ok")).expect("dot");
    let o = done(&mut s);
    assert!(o.accepted);
    assert_eq!((o.rcpts_accepted, o.rcpts_refused), (1, 1));
    assert_eq!(o.rcpt_failures, vec![(Phase::Rcpt, 550)]);
}

#[test]
fn rfc2920_refused_mail_fails_the_transaction_and_rset_follows() {
    let mut s = ready_session(cfg(), "mx\nPIPELINING");
    s.begin(txn(&["b@example.com"]));
    let _ = written(&mut s);
    feed(
        &mut s,
        &[
            (550, "sender refused"),
            (503, "need mail"),
            (503, "need rcpt"),
        ],
    );
    let o = done(&mut s);
    assert!(!o.accepted);
    assert_eq!(o.failure, Some((Phase::Mail, 550)));
    assert_eq!(o.failure_text.as_deref(), Some("550 sender refused"));
    // The 503s only follow from the refused MAIL: no recipient was refused.
    assert_eq!((o.rcpts_refused, o.rcpt_failures.len()), (0, 0));
    s.begin(txn(&["b@example.com"]));
    let w = written(&mut s);
    assert!(w.starts_with("RSET\r\nMAIL FROM:"), "got {w:?}");
    assert_eq!(s.step(), Step::Read(Phase::Rset));
}

#[test]
fn rfc2920_354_without_valid_recipient_sends_a_lone_dot() {
    let mut s = ready_session(cfg(), "mx\nPIPELINING");
    s.begin(txn(&["b@example.com"]));
    let _ = written(&mut s);
    feed(&mut s, &[(250, "ok"), (550, "unknown"), (354, "go anyway")]);
    assert_eq!(written(&mut s), ".\r\n");
    s.on_reply(r(554, "no valid recipients")).expect("dot");
    let o = done(&mut s);
    assert!(!o.accepted);
    assert_eq!(o.failure, Some((Phase::Rcpt, 550)));
}

#[test]
fn rfc2920_data_554_after_all_rcpts_refused_is_not_a_new_failure() {
    let mut s = ready_session(cfg(), "mx\nPIPELINING");
    s.begin(txn(&["b@example.com", "c@example.com"]));
    let _ = written(&mut s);
    feed(
        &mut s,
        &[
            (250, "ok"),
            (450, "try later"),
            (550, "unknown"),
            (554, "no valid recipients"),
        ],
    );
    let o = done(&mut s);
    assert!(!o.accepted);
    assert_eq!(o.failure, Some((Phase::Rcpt, 550)));
    assert_eq!(o.rcpts_refused, 2);
    assert_eq!(
        o.rcpt_failures,
        vec![(Phase::Rcpt, 450), (Phase::Rcpt, 550)]
    );
    assert_eq!(o.rcpt_failure_text.as_deref(), Some("450 try later"));
}

#[test]
fn end_of_data_refusal_is_recorded() {
    let mut s = ready_session(cfg(), "mx\nPIPELINING");
    s.begin(txn(&["b@example.com"]));
    let _ = written(&mut s);
    feed(&mut s, &[(250, "ok"), (250, "ok"), (354, "go")]);
    s.no_follow();
    let _ = written(&mut s);
    s.on_reply(r(452, "insufficient storage")).expect("dot");
    let o = done(&mut s);
    assert_eq!(o.failure, Some((Phase::DataDot, 452)));
}

#[test]
fn ehlo_refused_falls_back_to_helo() {
    let mut s = ClientSession::new(cfg(), false);
    s.on_reply(r(220, "old server")).expect("banner");
    assert_eq!(written(&mut s), "EHLO client.test\r\n");
    s.on_reply(r(502, "command not implemented")).expect("ehlo");
    assert_eq!(written(&mut s), "HELO client.test\r\n");
    s.on_reply(r(250, "hello")).expect("helo");
    assert_eq!(s.step(), Step::Ready);
    // No PIPELINING after HELO: MAIL goes alone.
    s.begin(txn(&["b@example.com"]));
    assert_eq!(written(&mut s), "MAIL FROM:<a@example.org>\r\n");
}

#[test]
fn refused_greeting_is_a_session_error() {
    let mut s = ClientSession::new(cfg(), false);
    let err = s.on_reply(r(554, "go away")).expect_err("must fail");
    assert!(matches!(
        err,
        SessionError::Rejected {
            phase: Phase::Banner,
            ..
        }
    ));
    assert_eq!(s.step(), Step::Closed);
}

#[test]
fn lmtp_reads_one_reply_per_accepted_recipient() {
    let mut c = cfg();
    c.lmtp = true;
    let mut s = ClientSession::new(c, false);
    s.on_reply(r(220, "lmtp")).expect("banner");
    assert_eq!(written(&mut s), "LHLO client.test\r\n");
    s.on_reply(r(250, "lmtp\nPIPELINING")).expect("lhlo");
    s.begin(txn(&["a@x.test", "b@x.test", "c@x.test"]));
    let _ = written(&mut s);
    feed(
        &mut s,
        &[
            (250, "ok"),
            (250, "ok"),
            (550, "unknown"),
            (250, "ok"),
            (354, "go"),
        ],
    );
    s.no_follow();
    let _ = written(&mut s);
    s.on_reply(r(250, "saved a")).expect("dot a");
    assert_eq!(s.step(), Step::Read(Phase::DataDot), "second LMTP reply");
    s.on_reply(r(452, "over quota c")).expect("dot c");
    let o = done(&mut s);
    assert!(o.accepted);
    assert_eq!(o.rcpts_delivered, 1);
    assert_eq!(
        o.rcpt_failures,
        vec![(Phase::Rcpt, 550), (Phase::DataDot, 452)]
    );
}

#[test]
fn bdat_sends_the_raw_body_with_the_commands() {
    let mut c = cfg();
    c.chunking = true;
    let mut s = ready_session(c, "mx\nPIPELINING\nCHUNKING");
    s.begin(txn(&["b@example.com"]));
    assert_eq!(s.step(), Step::OfferFollow);
    s.no_follow();
    assert_eq!(
        written(&mut s),
        "MAIL FROM:<a@example.org>\r\nRCPT TO:<b@example.com>\r\nBDAT 28 LAST\r\nX-T: 1\r\nSubject: x\r\n\r\n.dot\r\n"
    );
    feed(&mut s, &[(250, "ok"), (250, "ok")]);
    assert_eq!(s.step(), Step::Read(Phase::DataDot));
    s.on_reply(r(250, "ok")).expect("bdat");
    assert!(matches!(
        s.step(),
        Step::TxnDone(TxnOutcome { accepted: true, .. })
    ));
}

#[test]
fn starttls_then_ehlo_again_then_auth_plain() {
    let mut c = cfg();
    c.starttls = true;
    c.auth = Some(Credentials {
        user: "u".into(),
        pass: "p".into(),
    });
    let mut s = ready_session(c, "mx\nSTARTTLS");
    assert_eq!(written(&mut s), "STARTTLS\r\n");
    s.on_reply(r(220, "ready")).expect("starttls");
    assert_eq!(s.step(), Step::StartTls);
    s.tls_established();
    assert_eq!(written(&mut s), "EHLO client.test\r\n");
    s.on_reply(r(250, "mx\nAUTH PLAIN LOGIN")).expect("ehlo2");
    // base64("\0u\0p") = AHUAcA==
    assert_eq!(written(&mut s), "AUTH PLAIN AHUAcA==\r\n");
    s.on_reply(r(235, "ok")).expect("auth");
    assert_eq!(s.step(), Step::Ready);
}

#[test]
fn auth_login_when_plain_is_not_offered() {
    let mut c = cfg();
    c.auth = Some(Credentials {
        user: "u".into(),
        pass: "p".into(),
    });
    let mut s = ready_session(c, "mx\nAUTH LOGIN");
    assert_eq!(written(&mut s), "AUTH LOGIN\r\n");
    s.on_reply(r(334, "VXNlcm5hbWU6")).expect("login");
    assert_eq!(written(&mut s), "dQ==\r\n");
    s.on_reply(r(334, "UGFzc3dvcmQ6")).expect("user");
    assert_eq!(written(&mut s), "cA==\r\n");
    s.on_reply(r(535, "bad credentials"))
        .expect_err("auth must fail");
}

#[test]
fn starttls_not_offered_is_an_error() {
    let mut c = cfg();
    c.starttls = true;
    let mut s = ClientSession::new(c, false);
    s.on_reply(r(220, "mx")).expect("banner");
    let _ = written(&mut s);
    assert!(s.on_reply(r(250, "mx\nPIPELINING")).is_err());
}

#[test]
fn reply_421_closes_after_the_transaction() {
    let mut s = ready_session(cfg(), "mx\nPIPELINING");
    s.begin(txn(&["b@example.com"]));
    let _ = written(&mut s);
    feed(
        &mut s,
        &[
            (421, "shutting down"),
            (421, "shutting down"),
            (421, "shutting down"),
        ],
    );
    let o = done(&mut s);
    assert_eq!(o.failure, Some((Phase::Mail, 421)));
    assert_eq!(s.step(), Step::Closed);
}

#[test]
fn next_transaction_rides_with_the_content_and_quit_with_the_last() {
    let mut s = ready_session(cfg(), "mx\nPIPELINING");
    s.begin(txn(&["b@example.com"]));
    let _ = written(&mut s);
    feed(&mut s, &[(250, "ok"), (250, "ok"), (354, "go")]);
    assert_eq!(s.step(), Step::OfferFollow);
    let mut second = txn(&["c@example.com"]);
    second.mail_from = "second@example.org".into();
    s.follow_with(second);
    assert_eq!(
        written(&mut s),
        "X-T: 1\r\nSubject: x\r\n\r\n..dot\r\n.\r\nMAIL FROM:<second@example.org>\r\nRCPT TO:<c@example.com>\r\nDATA\r\n"
    );
    s.on_reply(r(250, "queued 1")).expect("dot 1");
    let first = done(&mut s);
    assert!(first.accepted);
    assert!(s.in_transaction(), "the follow-on is in flight");
    assert_eq!(s.step(), Step::Read(Phase::Mail));
    feed(
        &mut s,
        &[
            (250, "ok"),
            (550, "no such user"),
            (554, "no valid recipients"),
        ],
    );
    let o = done(&mut s);
    assert_eq!(o.failure, Some((Phase::Rcpt, 550)));
    // The follow-on ended before its content: the next transaction starts with RSET.
    s.begin(txn(&["d@example.com"]));
    let w = written(&mut s);
    assert!(w.starts_with("RSET\r\nMAIL FROM:"), "got {w:?}");
    feed(
        &mut s,
        &[(250, "ok"), (250, "ok"), (250, "ok"), (354, "go")],
    );
    assert_eq!(s.step(), Step::OfferFollow);
    s.follow_quit();
    assert!(written(&mut s).ends_with(".\r\nQUIT\r\n"));
    s.on_reply(r(250, "queued 3")).expect("dot 3");
    assert!(matches!(
        s.step(),
        Step::TxnDone(TxnOutcome { accepted: true, .. })
    ));
    assert_eq!(s.step(), Step::Read(Phase::Quit));
    s.on_reply(r(221, "bye")).expect("quit");
    assert_eq!(s.step(), Step::Closed);
}

#[test]
fn failed_content_needs_no_rset() {
    let mut s = ready_session(cfg(), "mx\nPIPELINING");
    s.begin(txn(&["b@example.com"]));
    let _ = written(&mut s);
    feed(&mut s, &[(250, "ok"), (250, "ok"), (354, "go")]);
    s.no_follow();
    let _ = written(&mut s);
    s.on_reply(r(554, "content rejected")).expect("dot");
    let _ = s.step();
    s.begin(txn(&["b@example.com"]));
    assert!(written(&mut s).starts_with("MAIL FROM:"));
}

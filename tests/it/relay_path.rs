//! `mailbench send` → a real Postfix (smtpd, queue, smtp client) → `mailbench sink`:
//! Postfix's smtpd as a target for `send`, and Postfix's SMTP client delivering to `sink`.

use std::time::Duration;

use crate::sink::Sink;
use crate::util::postfix::Postfix;
use crate::util::{TempDir, results, run_expect, wait_until};

#[test]
fn postfix_relays_every_message_from_send_to_sink_exactly_once() {
    let dir = TempDir::new("relay-path");
    let json = dir.0.join("sink.json");
    let sink = Sink::start(&["--json", &json.to_string_lossy()]);
    let Some(postfix) = Postfix::start(sink.port) else {
        return;
    };
    let target = format!("127.0.0.1:{}", postfix.port);
    let send_json = dir.0.join("send.json");
    run_expect(
        &[
            "send",
            &target,
            "-n",
            "300",
            "-c",
            "8",
            "--rcpts",
            "2",
            "--to",
            "r{rcpt}.{seq}@example.test",
            "--size",
            "2k",
            "--json",
            &send_json.to_string_lossy(),
            "-q",
        ],
        0,
    );
    let sent = results(&send_json);
    assert_eq!(
        sent["summary"]["accepted"], 300,
        "Postfix smtpd accepted all: {:#}",
        sent["summary"]
    );
    assert!(
        wait_until(Duration::from_secs(60), || postfix.sent_count() >= 600),
        "Postfix delivered {} of 600 recipients",
        postfix.sent_count()
    );
    let (code, _) = sink.stop();
    assert_eq!(code, Some(0));
    let r = results(&json);
    assert_eq!(r["summary"]["recipients"], 600, "{:#}", r["summary"]);
    assert_eq!(r["summary"]["duplicates"], 0);
    assert_eq!(r["summary"]["lost"], 0);
    assert_eq!(postfix.sent_count(), 600, "maillog agrees with the sink");
}

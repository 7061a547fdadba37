//! Bounces for user-list recipients flagged `b` (BHM's "accept and bounce"): the message is
//! accepted, then a delivery status notification (RFC 3464) goes back to the envelope
//! sender over SMTP to `--bounce-to`. A dedicated task sends them, so a slow bounce target
//! never stalls a session; when its bounded queue is full, bounces are counted as dropped.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::smtp::conn::ClientConn;
use crate::smtp::proto::data::{dot_stuff, normalize_crlf};
use crate::smtp::proto::{ClientConfig, Transaction};
use crate::transport::connect::ConnectOptions;
use crate::transport::target::Target;

/// Bounces waiting to be sent, at most.
const QUEUE: usize = 10_000;

/// Counts of bounces.
#[derive(Debug, Default)]
pub struct BounceCounts {
    /// Delivered to the bounce target.
    pub sent: AtomicU64,
    /// Refused by it, or it was unreachable.
    pub failed: AtomicU64,
    /// Not sent because the queue was full.
    pub dropped: AtomicU64,
}

/// The sending side, shared by all connections.
pub struct Bouncer {
    tx: mpsc::Sender<Transaction>,
    /// Outcome counts.
    pub counts: Arc<BounceCounts>,
}

impl Bouncer {
    /// Starts the sending task for `target`.
    pub fn start(target: SocketAddr, hostname: String) -> Bouncer {
        let (tx, mut rx) = mpsc::channel::<Transaction>(QUEUE);
        let counts = Arc::new(BounceCounts::default());
        let c = counts.clone();
        tokio::spawn(async move {
            let target = Target::Tcp {
                addr: target,
                host: target.ip().to_string(),
            };
            let opts = ConnectOptions {
                connect_timeout: Duration::from_secs(10),
                command_timeout: Duration::from_secs(60),
                source_ip: None,
                tls: None,
                implicit_tls: false,
                count: None,
            };
            while let Some(txn) = rx.recv().await {
                let cfg = ClientConfig {
                    lmtp: false,
                    helo_name: hostname.clone(),
                    pipelining: true,
                    chunking: false,
                    starttls: false,
                    auth: None,
                };
                let ok = match ClientConn::open(&target, &opts, cfg).await {
                    Ok(mut conn) => {
                        let r = conn.send(txn).await;
                        let ok = r.is_ok_and(|o| o.accepted);
                        let _ = conn.quit_timed().await;
                        ok
                    }
                    Err(_) => false,
                };
                let counter = if ok { &c.sent } else { &c.failed };
                counter.fetch_add(1, Ordering::Relaxed);
            }
        });
        Bouncer { tx, counts }
    }

    /// Queues a DSN for `rcpt` of a message from `sender`; never waits.
    pub fn bounce(&self, reporting: &str, sender: &str, rcpt: &str, original: &[u8]) {
        if sender.is_empty() || sender == "<>" {
            return; // never bounce a bounce (RFC 3461 §6.2)
        }
        let raw = Bytes::from(normalize_crlf(&dsn(reporting, sender, rcpt, original)));
        let txn = Transaction {
            mail_from: String::new(),
            rcpts: vec![sender.to_string()],
            prefix: Bytes::new(),
            stuffed: Bytes::from(dot_stuff(&raw)),
            suffix: Bytes::new(),
            raw,
            eight_bit: false,
        };
        if self.tx.try_send(txn).is_err() {
            self.counts.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// An RFC 3464 delivery status notification: a human-readable part, the
/// message/delivery-status part, and the original header section.
pub fn dsn(reporting: &str, sender: &str, rcpt: &str, original: &[u8]) -> Vec<u8> {
    let headers_end = memchr::memmem::find(original, b"\r\n\r\n")
        .map(|p| p + 2)
        .unwrap_or(original.len());
    let id = fastrand::u64(..);
    let boundary = format!("mailbench-dsn-{id:016x}");
    let now = crate::stats::clock::unix_us() / 1_000_000;
    let date = mail_builder::headers::date::Date::new(now as i64).to_rfc822();
    let mut m = format!(
        "From: Mail Delivery System <MAILER-DAEMON@{reporting}>\r\n\
To: <{sender}>\r\n\
Date: {date}\r\n\
Message-ID: <dsn.{id:016x}@{reporting}>\r\n\
Subject: Undelivered Mail Returned to Sender\r\n\
Auto-Submitted: auto-replied\r\n\
MIME-Version: 1.0\r\n\
Content-Type: multipart/report; report-type=delivery-status; boundary=\"{boundary}\"\r\n\
\r\n\
--{boundary}\r\n\
Content-Type: text/plain; charset=us-ascii\r\n\
\r\n\
The message to <{rcpt}> was accepted and then bounced, as the sink's user list asked.\r\n\
\r\n\
--{boundary}\r\n\
Content-Type: message/delivery-status\r\n\
\r\n\
Reporting-MTA: dns; {reporting}\r\n\
\r\n\
Final-Recipient: rfc822; {rcpt}\r\n\
Action: failed\r\n\
Status: 5.0.0\r\n\
Diagnostic-Code: smtp; 550 5.0.0 bounced by the mailbench sink (user flag b)\r\n\
\r\n\
--{boundary}\r\n\
Content-Type: text/rfc822-headers\r\n\
\r\n"
    )
    .into_bytes();
    m.extend_from_slice(&original[..headers_end]);
    m.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dsn_has_the_three_parts_and_the_original_headers_only() {
        let d = dsn(
            "sink.test",
            "a@x.test",
            "b@x.test",
            b"Subject: hi\r\nX-T: 1\r\n\r\nsecret body\r\n",
        );
        let t = String::from_utf8(d).expect("ascii");
        assert!(t.contains("multipart/report; report-type=delivery-status"));
        assert!(t.contains("Final-Recipient: rfc822; b@x.test"));
        assert!(t.contains("Action: failed") && t.contains("Status: 5.0.0"));
        assert!(t.contains("Subject: hi\r\nX-T: 1\r\n"));
        assert!(!t.contains("secret body"));
        // RFC 5322 §3.6: Date is required; Message-ID should be there.
        let head = &t[..t.find("\r\n\r\n").expect("header section")];
        assert!(
            head.contains("\r\nDate: ") && head.contains(" +0000"),
            "{head}"
        );
        assert!(
            head.contains("\r\nMessage-ID: <dsn.") && head.contains("@sink.test>"),
            "{head}"
        );
    }
}

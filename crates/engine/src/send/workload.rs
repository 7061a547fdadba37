//! What each message is: envelope and content for a sequence number. Per message this only
//! renders addresses and a ~130-byte prefix; the body is a shared template.

use std::fmt::Write as _;
use std::sync::Arc;

use bytes::BytesMut;

use super::plan::{Addresses, MessagePlan};
use crate::message::dkim::Signer;
use crate::message::template::Content;
use crate::message::trace::{BodySum, Trace};
use crate::smtp::proto::Transaction;

/// Builds transactions for a run.
pub struct Workload {
    run_id: u64,
    from: Addresses,
    to: Addresses,
    rcpts: u32,
    content: Arc<Content>,
    dkim: Option<Arc<Signer>>,
}

impl Workload {
    /// The workload of a plan's messages.
    pub fn new(plan: &MessagePlan, run_id: u64) -> Self {
        Workload {
            run_id,
            from: plan.from.clone(),
            to: plan.to.clone(),
            rcpts: plan.rcpts,
            content: plan.content.clone(),
            dkim: plan.dkim.clone(),
        }
    }

    /// The transaction for message `seq`. `sender` overrides the reverse-path (a connection
    /// authenticated as a list user sends as that user).
    pub fn transaction(
        &self,
        seq: u64,
        sender: Option<&str>,
        rng: &mut fastrand::Rng,
    ) -> Transaction {
        let mail_from = match (sender, &self.from) {
            (Some(s), _) => s.to_string(),
            (None, Addresses::Template(t)) => t.render(seq, 0, rng),
            (None, Addresses::List(l)) => l[(seq % l.len() as u64) as usize].address.clone(),
        };
        let rcpts = (0..self.rcpts)
            .map(|i| match &self.to {
                Addresses::Template(t) => t.render(seq, i, rng),
                Addresses::List(l) => {
                    let k = (seq * self.rcpts as u64 + i as u64) % l.len() as u64;
                    l[k as usize].address.clone()
                }
            })
            .collect();
        let sent_us = crate::stats::clock::unix_us();
        let mut prefix = prefix(Trace {
            run: self.run_id,
            seq,
            sent_us,
        });
        let body = self.content.pick(seq, prefix.len(), rng);
        // The trace line comes first and ends with its sum's slot and CRLF.
        let slot = trace_line_len(&prefix) - 2 - BodySum::WIDTH;
        body.sum().put(&mut prefix[slot..slot + BodySum::WIDTH]);
        if let Some(signer) = &self.dkim
            && let Some(h) = sign(signer, &[&prefix, &body.raw, &body.suffix])
        {
            // The signature goes first, above the headers it covers.
            let mut signed = BytesMut::with_capacity(h.len() + prefix.len());
            signed.extend_from_slice(h.as_bytes());
            signed.extend_from_slice(&prefix);
            prefix = signed;
        }
        Transaction {
            mail_from,
            rcpts,
            prefix: prefix.freeze(),
            raw: body.raw,
            stuffed: body.stuffed,
            suffix: body.suffix,
            eight_bit: body.eight_bit,
        }
    }
}

/// The length of the first line of `prefix`, its CRLF included.
fn trace_line_len(prefix: &[u8]) -> usize {
    memchr::memchr(b'\n', prefix).map_or(prefix.len(), |p| p + 1)
}

/// A message's own header lines, above the shared template: its trace header (with a slot
/// for its body's sum) and its Message-ID (`<RUN.SEQ@mailbench.test>`, which MTAs log and
/// the relay reads back from their logs; a message file's own is removed when read).
fn prefix(trace: Trace) -> BytesMut {
    let mut prefix = BytesMut::with_capacity(160);
    trace.write_with_sum_slot(&mut prefix);
    let _ = write!(
        prefix,
        "Message-ID: <{:016x}.{}@mailbench.test>\r\n",
        trace.run, trace.seq
    );
    prefix
}

/// The longest own header lines a generated message can have (the largest sequence
/// number, a send time in the 16 digits of µs since 1970 that last until 2286): a
/// message asked for a size below its header section and these cannot be made that
/// small.
pub fn longest_prefix() -> usize {
    prefix(Trace {
        run: u64::MAX,
        seq: u64::MAX,
        sent_us: 9_999_999_999_999_999,
    })
    .len()
}

/// Signs on this connection's thread. A slow (RSA) signature on a multi-threaded runtime
/// is made with `block_in_place`, so that the other connections of this thread move to
/// another one instead of waiting; a one-thread runtime has nowhere to move them (the
/// schedule's lag then shows the cost, and `--threads` spreads it).
fn sign(signer: &Signer, parts: &[&[u8]]) -> Option<String> {
    let multi = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if signer.is_slow() && multi {
        tokio::task::block_in_place(|| signer.sign(parts))
    } else {
        signer.sign(parts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::address::AddrTemplate;
    use crate::message::template::{GenSpec, SizeRange, Template};
    use crate::message::trace::Traced;

    fn workload(content: Content) -> Workload {
        let addr = |s: &str| Addresses::Template(AddrTemplate::parse(s).expect("address"));
        Workload::new(
            &MessagePlan {
                from: addr("a@example.org"),
                to: addr("b@example.com"),
                rcpts: 1,
                content: Arc::new(content),
                dkim: None,
            },
            0xabc,
        )
    }

    /// Issue 42: every message's trace header carries the sum of the body it is sent with,
    /// generated (of any size, the last line cut to fit) or read from a file, and its size
    /// is still the one asked for.
    #[test]
    fn issue_42_each_message_carries_its_bodys_sum() {
        let generated = Content::generate(&GenSpec {
            size: SizeRange {
                min: 300,
                max: 5000,
            },
            attach: 0,
            from: "a@example.org".into(),
            to: "b@example.com".into(),
        })
        .expect("generate");
        let file = Content::Files(vec![Template::from_message(
            b"Subject: x\n\n.dot line\nend\n",
        )]);
        for (what, c) in [("generated", generated), ("file", file)] {
            let w = workload(c);
            let mut rng = fastrand::Rng::with_seed(4);
            for seq in [0, 9, 123_456_789] {
                let t = w.transaction(seq, None, &mut rng);
                let whole = [&t.prefix[..], &t.raw[..], &t.suffix[..]].concat();
                let got = Traced::find(&whole).expect("traced");
                assert_eq!(
                    (got.trace.seq, got.intact),
                    (seq, Some(true)),
                    "{what} {seq}"
                );
                if what == "generated" {
                    assert!((300..=5000).contains(&whole.len()), "{}", whole.len());
                }
                let mut cut = whole.clone();
                cut.truncate(whole.len() - 3);
                assert_eq!(Traced::find(&cut).and_then(|t| t.intact), Some(false));
            }
        }
    }
}

//! What each message is: envelope and content for a sequence number. Per message this only
//! renders addresses and a ~130-byte prefix; the body is a shared template.

use std::fmt::Write as _;
use std::sync::Arc;

use bytes::BytesMut;

use super::plan::{Addresses, MessagePlan};
use crate::message::template::Content;
use crate::message::trace::Trace;
use crate::smtp::proto::Transaction;

/// Builds transactions for a run.
pub struct Workload {
    run_id: u64,
    from: Addresses,
    to: Addresses,
    rcpts: u32,
    content: Arc<Content>,
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
        let mut prefix = BytesMut::with_capacity(160);
        Trace {
            run: self.run_id,
            seq,
            sent_us,
        }
        .write(&mut prefix);
        if self.content.wants_message_id() {
            let _ = write!(
                prefix,
                "Message-ID: <{:016x}.{seq}@mailbench.test>\r\n",
                self.run_id
            );
        }
        let body = self.content.pick(seq, prefix.len(), rng);
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

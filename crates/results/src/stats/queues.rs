//! An MTA's queues and the messages each holds, as the MTA's own queue tools count them
//! (Postfix's `qshape` and `postqueue -j`, qmail's `qmail-qstat`): a growing deferred
//! queue or an active queue stuck at `qmgr_message_active_limit` is a curve only these
//! counts draw. The lab counts them, the relay samples them per interval into the series
//! and keeps each queue's largest in the summary; this file is data only.

use serde::{Deserialize, Serialize};

/// One queue of an MTA and how many messages are in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueState {
    /// The queue as the MTA's tools name it (`incoming`, `active`, `deferred`, `hold`;
    /// qmail's `queue` and `todo`).
    pub queue: String,
    /// Messages in it.
    pub messages: u64,
}

impl QueueState {
    /// A queue holding `messages`.
    pub fn new(queue: &str, messages: u64) -> QueueState {
        QueueState {
            queue: queue.to_string(),
            messages,
        }
    }
}

/// `more` added queue by queue into `into` (the instances of a chain counted as one MTA);
/// a queue `into` lacks is appended, so the order of the first instance is kept.
pub fn add(into: &mut Vec<QueueState>, more: &[QueueState]) {
    for q in more {
        match into.iter_mut().find(|s| s.queue == q.queue) {
            Some(s) => s.messages += q.messages,
            None => into.push(q.clone()),
        }
    }
}

/// Each queue's largest count over `readings`, in the order the queues first appear.
pub fn max_per_queue<'a>(readings: impl IntoIterator<Item = &'a [QueueState]>) -> Vec<QueueState> {
    let mut out: Vec<QueueState> = Vec::new();
    for reading in readings {
        for q in reading {
            match out.iter_mut().find(|s| s.queue == q.queue) {
                Some(s) => s.messages = s.messages.max(q.messages),
                None => out.push(q.clone()),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_add_up_and_the_largest_of_each_queue_is_kept_in_order() {
        let mut total = vec![QueueState::new("incoming", 1), QueueState::new("active", 2)];
        add(
            &mut total,
            &[QueueState::new("active", 5), QueueState::new("hold", 3)],
        );
        assert_eq!(
            total,
            [
                QueueState::new("incoming", 1),
                QueueState::new("active", 7),
                QueueState::new("hold", 3)
            ]
        );
        let a = [QueueState::new("active", 7), QueueState::new("deferred", 0)];
        let b = [QueueState::new("active", 4), QueueState::new("deferred", 9)];
        assert_eq!(
            max_per_queue([&a[..], &b[..]]),
            [QueueState::new("active", 7), QueueState::new("deferred", 9)]
        );
        assert!(max_per_queue(std::iter::empty::<&[QueueState]>()).is_empty());
    }
}

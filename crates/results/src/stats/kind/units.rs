//! What a kind's unit of work is called: one set of words that the live line and
//! `/metrics` both read, so that they cannot drift apart.

/// What a run's units of work are called on its live line and on `/metrics`.
#[derive(Debug, Clone, Copy)]
pub struct Units {
    /// What one unit is called on `/metrics` (`mailbench_<noun>_total`).
    pub noun: &'static str,
    /// The rate's unit.
    pub rate: &'static str,
    /// Units started.
    pub started: &'static str,
    /// Units that succeeded.
    pub done: &'static str,
    /// Units the server refused.
    pub refused: &'static str,
}

/// Messages (send, relay, populate, sink).
pub const MESSAGES: Units = Units {
    noun: "messages",
    rate: "msg/s",
    started: "sent",
    done: "accepted",
    refused: "rejected",
};

/// Sessions (POP3).
pub const SESSIONS: Units = Units {
    noun: "sessions",
    rate: "sessions/s",
    started: "started",
    done: "completed",
    refused: "refused",
};

/// Commands (IMAP).
pub const COMMANDS: Units = Units {
    noun: "commands",
    rate: "cmd/s",
    started: "started",
    done: "completed",
    refused: "refused",
};

/// Actions of virtual users (a mailbox profile).
pub const ACTIONS: Units = Units {
    noun: "actions",
    rate: "actions/min",
    started: "started",
    done: "completed",
    refused: "refused",
};

/// Questions to the test DNS server.
pub const QUESTIONS: Units = Units {
    noun: "questions",
    rate: "q/s",
    started: "questions",
    done: "answered",
    refused: "dropped",
};

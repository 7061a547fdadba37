//! Which commands may be in flight together on one connection (RFC 9051 §5.5, RFC 3501
//! §5.5), and whose command a FETCH's flags answer while several are: pipelining sends the
//! next command before the last one completes, and both must stay unambiguous for the
//! server and for the state checks. The rules are imaptest's state flags (its
//! `client-state.c`), made a little stricter where mailbench checks more.

use super::client::{Command, FetchItems};
use super::response::Fetch;

/// What a command does to the session that another command in flight could trip over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Hazards {
    /// It names messages by sequence number (FETCH, STORE, COPY, MOVE): an EXPUNGE while
    /// it waits would make it name other messages.
    pub numbers: bool,
    /// The server may send EXPUNGE (or EXISTS from a change it makes) during it: RFC 9051
    /// §7.5.1 forbids EXPUNGE only during FETCH, STORE and SEARCH by sequence number.
    pub renumbers: bool,
    /// It must be alone on the wire: it changes the session's state (SELECT, CLOSE,
    /// LOGOUT, IDLE), waits for a continuation (a synchronising literal), or is retried
    /// on refusal (MOVE, CREATE) with the numbers it was sent with.
    pub alone: bool,
}

impl Command {
    /// Its hazards for pipelining.
    pub fn hazards(&self) -> Hazards {
        let (numbers, renumbers, alone) = match self {
            Command::Fetch { .. } | Command::Store { .. } => (true, false, false),
            // UID SEARCH may carry EXPUNGE; its answer is checked against the numbering,
            // so it also must not start while the numbering may change.
            Command::Copy { .. } | Command::Search(_) => (true, true, false),
            Command::Append { literal_plus, .. } => (false, true, !literal_plus),
            Command::Capability
            | Command::List
            | Command::Status(_)
            | Command::FetchHeader { .. }
            | Command::Expunge
            | Command::Noop => (false, true, false),
            Command::Starttls
            | Command::Login { .. }
            | Command::AuthPlain(_)
            | Command::Select { .. }
            | Command::Close
            | Command::Create(_)
            | Command::Move { .. }
            | Command::Idle
            | Command::Logout => (true, true, true),
        };
        Hazards {
            numbers,
            renumbers,
            alone,
        }
    }

    /// The sequence numbers whose FLAGS its responses report, when it reports any.
    fn reports_flags(&self) -> Option<(u32, u32)> {
        match self {
            Command::Store { seq, .. } => Some((*seq, *seq)),
            Command::Fetch {
                first,
                last,
                items: FetchItems::Meta | FetchItems::Flags | FetchItems::Read,
            } => Some((*first, *last)),
            _ => None,
        }
    }
}

/// True when `cmd` may be sent while `in_flight` wait for their completions.
///
/// Besides RFC 9051 §5.5 (nothing by sequence number while an EXPUNGE may come; nothing
/// beside a change of state), a STORE never shares a message with another command whose
/// responses carry that message's FLAGS, so [`flags_answer`] can say whose a FETCH is
/// whatever order the server answers in; and a SEARCH, checked against the numbering,
/// never waits beside a command that may change it.
pub fn may_send<'a>(cmd: &Command, in_flight: impl IntoIterator<Item = &'a Command>) -> bool {
    let mine = cmd.hazards();
    let flags = cmd.reports_flags();
    let searching = matches!(cmd, Command::Search(_));
    for other in in_flight {
        let theirs = other.hazards();
        if mine.alone || theirs.alone || (mine.numbers && theirs.renumbers) {
            return false;
        }
        if matches!(other, Command::Search(_)) && mine.renumbers || searching && theirs.renumbers {
            return false;
        }
        let storing =
            matches!(cmd, Command::Store { .. }) || matches!(other, Command::Store { .. });
        if let (true, Some(a), Some(b)) = (storing, flags, other.reports_flags())
            && a.0 <= b.1
            && b.0 <= a.1
        {
            return false;
        }
    }
    true
}

/// Which of `in_flight` (by position) a FETCH carrying FLAGS answers, when it is a STORE's:
/// under [`may_send`]'s rules at most one STORE in flight can report that message.
pub fn flags_answer<'a>(
    f: &Fetch,
    in_flight: impl IntoIterator<Item = &'a Command>,
) -> Option<usize> {
    f.flags.as_ref()?;
    in_flight
        .into_iter()
        .position(|c| matches!(c, Command::Store { seq, .. } if *seq == f.seq))
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::super::client::{Event, FlagOp, ImapClient};
    use super::super::response::Data;
    use super::*;

    fn fetch(first: u32, last: u32, items: FetchItems) -> Command {
        Command::Fetch { first, last, items }
    }

    fn store(seq: u32) -> Command {
        Command::Store {
            seq,
            op: FlagOp::Add,
            flag: "\\Seen",
        }
    }

    fn append(literal_plus: bool) -> Command {
        Command::Append {
            mailbox: "INBOX".into(),
            flags: "",
            message: Bytes::from_static(b"x"),
            literal_plus,
        }
    }

    #[test]
    fn nothing_by_sequence_number_while_an_expunge_may_come() {
        let body = fetch(3, 3, FetchItems::Body);
        for renumbering in [Command::Expunge, Command::Noop, append(true), Command::List] {
            assert!(!may_send(&body, [&renumbering]), "{renumbering:?}");
            assert!(!may_send(&store(1), [&renumbering]), "{renumbering:?}");
            // The other way round is safe: the server answers the FETCH first and sends
            // no EXPUNGE during it.
            assert!(may_send(&renumbering, [&body]), "{renumbering:?}");
        }
        let copy = Command::Copy {
            seq: 2,
            mailbox: "INBOX".into(),
        };
        assert!(may_send(&copy, [&body, &store(1)]));
        assert!(!may_send(&body, [&copy]), "COPY may carry EXPUNGE");
        assert!(may_send(&body, [&fetch(1, 5, FetchItems::Meta), &store(9)]));
    }

    #[test]
    fn a_change_of_state_is_alone() {
        let select = Command::Select {
            mailbox: "INBOX".into(),
            read_only: false,
        };
        let body = fetch(1, 1, FetchItems::Body);
        for alone in [
            select,
            Command::Logout,
            Command::Idle,
            Command::Close,
            append(false),
        ] {
            assert!(may_send(&alone, []), "{alone:?} on an empty wire");
            assert!(!may_send(&alone, [&Command::Noop]), "{alone:?} after NOOP");
            assert!(!may_send(&Command::Noop, [&alone]), "NOOP after {alone:?}");
            assert!(!may_send(&body, [&alone]), "FETCH after {alone:?}");
        }
    }

    #[test]
    fn a_store_never_shares_a_message_with_another_report_of_its_flags() {
        let meta = fetch(2, 6, FetchItems::Meta);
        assert!(!may_send(&store(4), [&meta]));
        assert!(!may_send(&meta, [&store(6)]));
        assert!(!may_send(&store(4), [&store(4)]));
        assert!(may_send(&store(7), [&meta, &store(4)]));
        assert!(
            may_send(&store(4), [&fetch(4, 4, FetchItems::Body)]),
            "a body FETCH reports no FLAGS"
        );
        assert!(may_send(&meta, [&fetch(1, 9, FetchItems::Flags)]));
    }

    #[test]
    fn one_search_and_a_steady_numbering() {
        let search = Command::Search("ALL");
        assert!(!may_send(&search, [&Command::Search("ALL")]));
        assert!(!may_send(&Command::Noop, [&search]));
        assert!(!may_send(&search, [&append(true)]));
        assert!(may_send(
            &search,
            [&store(1), &fetch(1, 3, FetchItems::Meta)]
        ));
        assert!(
            !may_send(&store(2), [&search]),
            "UID SEARCH may carry EXPUNGE"
        );
    }

    #[test]
    fn flags_are_attributed_to_their_store_whatever_order_the_server_answers() {
        // STORE 2, a metadata FETCH of 3:4 and STORE 5 in flight together; the server
        // completes them out of order and one FETCH of 2 comes late.
        let cmds = [
            store(2),
            fetch(3, 4, FetchItems::Meta),
            Command::Store {
                seq: 5,
                op: FlagOp::Remove,
                flag: "\\Seen",
            },
        ];
        let mut sent = Vec::new();
        for c in &cmds {
            assert!(may_send(c, &sent), "{c:?}");
            sent.push(c.clone());
        }
        let mut client = ImapClient::new();
        for c in &cmds {
            client.send(c);
        }
        let mut buf = b"* 5 FETCH (FLAGS ())\r\na3 OK\r\n* 3 FETCH (UID 8 FLAGS (\\Seen))\r\n\
                        * 2 FETCH (FLAGS (\\Seen))\r\n* 4 FETCH (UID 9 FLAGS ())\r\na2 OK\r\na1 OK\r\n"
            .to_vec();
        let mut tags: Vec<u32> = vec![1, 2, 3];
        let mut answered = Vec::new();
        let mut done = Vec::new();
        while let Some((used, e)) = client.feed(&buf).expect("valid") {
            buf.drain(..used);
            match e {
                Event::Data(Data::Fetch(f)) => {
                    let in_flight = tags.iter().map(|t| &cmds[*t as usize - 1]);
                    let whose = flags_answer(&f, in_flight).map(|i| tags[i]);
                    answered.push((f.seq, whose));
                }
                Event::Done(d) => {
                    tags.retain(|t| *t != d.tag);
                    done.push(d.tag);
                }
                e => panic!("{e:?}"),
            }
        }
        assert_eq!(done, [3, 2, 1]);
        assert_eq!(
            answered,
            [(5, Some(3)), (3, None), (2, Some(1)), (4, None)],
            "each STORE's FETCH is its own; the metadata FETCH's are nobody's"
        );
    }
}

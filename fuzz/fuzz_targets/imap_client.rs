//! Any bytes as an IMAP server's answers to a session's commands, split anywhere: never a
//! panic, every completion matches a command in flight (so never more than were sent), and
//! the state model takes whatever data the parser accepted with its memory bounded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mailbench_wire::imap::proto::{Command, Event, FetchItems, ImapClient};
use mailbench_wire::imap::state::{MAX_TRACKED, Model, Shared};

fuzz_target!(|input: &[u8]| {
    let Some((&split, rest)) = input.split_first() else { return };
    let mut client = ImapClient::new();
    let cmds = [
        Command::Select {
            mailbox: "INBOX".into(),
            read_only: false,
        },
        Command::Fetch {
            first: 1,
            last: 3,
            items: FetchItems::Meta,
        },
        Command::Fetch {
            first: 2,
            last: 2,
            items: FetchItems::Body,
        },
        Command::Search("ALL"),
        Command::Idle,
        Command::Logout,
    ];
    for c in &cmds {
        client.send(c);
    }
    let shared = Shared::default();
    let mut model = Model::new(0, 0);
    let mut violations = Vec::new();
    let mut done = 0;
    let mut buf = Vec::new();
    'feed: for chunk in rest.chunks(usize::from(split).max(1)) {
        buf.extend_from_slice(chunk);
        loop {
            match client.feed(&buf) {
                Ok(Some((used, e))) => {
                    assert!(used > 0 && used <= buf.len());
                    buf.drain(..used);
                    match e {
                        Event::Data(d) => model.apply(&d, Some(&shared), &mut violations),
                        Event::Done(_) => done += 1,
                        Event::Continue => {}
                    }
                }
                Ok(None) => break,
                Err(_) => break 'feed,
            }
        }
    }
    assert!(done <= cmds.len());
    assert!(model.tracked() <= MAX_TRACKED as usize, "the UID map is bounded");
});

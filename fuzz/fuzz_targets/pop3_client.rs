//! Any bytes as a POP3 server's answers to a session's commands, split anywhere: never a
//! panic, never more responses than the greeting and one per command, and a kept body never grows past its bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mailbench_wire::pop3::proto::{Command, Pop3Client};

fuzz_target!(|input: &[u8]| {
    let Some((&split, rest)) = input.split_first() else { return };
    let mut client = Pop3Client::new();
    let cmds = [
        Command::Capa,
        Command::Stat,
        Command::Retr(1),
        Command::Top(2, 0),
        Command::Dele(1),
        Command::Quit,
    ];
    for c in &cmds {
        client.send(c);
    }
    let mut responses = 0;
    'feed: for chunk in rest.chunks(usize::from(split).max(1)) {
        let mut buf = chunk;
        while !buf.is_empty() {
            match client.feed(buf) {
                Ok((used, done)) => {
                    assert!(used <= buf.len());
                    if let Some((_, r)) = done {
                        responses += 1;
                        assert!(r.body.as_ref().is_none_or(|b| b.kept.len() <= 1 << 20));
                    } else if used == 0 {
                        break;
                    }
                    buf = &buf[used..];
                }
                Err(_) => break 'feed,
            }
        }
    }
    // The greeting, then one response per command.
    assert!(responses <= cmds.len() + 1);
});

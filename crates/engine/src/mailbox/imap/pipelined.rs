//! `--pipeline N`: up to N commands in flight per session, as imaptest sends them. The
//! engine hands the driver one unit at a time and asks it for follow-ons; the session keeps
//! them in order, sends each when `imap::proto::pipeline::may_send` lets it beside those
//! in flight (a command that must be alone waits for an empty wire and runs as without
//! pipelining), and hands back each unit's outcome in the engine's order whatever order
//! the server completes them in. Untagged data is applied to the model as it arrives; what
//! a command's own check needs (a STORE's FETCH, a SEARCH's answer) is found by
//! `pipeline::flags_answer` and by the one SEARCH the rules allow in flight.

use crate::imap::conn::{ConnError, Reply};
use crate::imap::proto::pipeline::{flags_answer, may_send};
use crate::imap::proto::{Code, Command, Cond, Data, Phase};
use crate::imap::state::Violation;
use crate::load::Next;

use super::{ImapDriver, Outcome, Session, expunge_issued};

/// One unit of the session's queue.
pub struct Unit {
    /// The command drawn for it.
    phase: Phase,
    /// Built but not sent yet (it may not go beside those in flight). One that names
    /// messages by number is built again when it can go, on the numbers known then.
    built: Option<Command>,
    /// Sent: its tag and the command.
    sent: Option<(u32, Command)>,
    /// Completed.
    done: bool,
    outcome: Outcome,
    /// A SEARCH's answer compared with the model where it arrived (an EXISTS after it
    /// announces later messages): the violations, kept until its completion says OK.
    searched: Option<Vec<Violation>>,
    /// An EXPUNGE arrived while it was in flight (a SEARCH is not compared then).
    expunge_seen: bool,
}

impl Unit {
    /// A unit drawn as `phase`, not sent yet.
    pub fn new(phase: Phase) -> Unit {
        Unit {
            phase,
            built: None,
            sent: None,
            done: false,
            outcome: Outcome::default(),
            searched: None,
            expunge_seen: false,
        }
    }

    fn in_flight(&self) -> Option<&Command> {
        self.sent.as_ref().filter(|_| !self.done).map(|(_, c)| c)
    }
}

impl ImapDriver {
    /// The current unit (the front of the session's queue) to its end, with up to
    /// `--pipeline` units in flight.
    pub(super) async fn pipelined(
        &self,
        s: &mut Session,
        next: &mut (dyn FnMut() -> Next + Send),
        rng: &mut fastrand::Rng,
    ) -> Result<Outcome, ConnError> {
        let mut asking = true;
        loop {
            self.send_ready(s, rng);
            // Units are sent in order: all are sent when the last is.
            while asking
                && s.units.len() < self.plan.pipeline
                && s.units.back().is_none_or(|u| u.sent.is_some())
            {
                match next() {
                    Next::Unit(_) => {
                        s.units.push_back(Unit::new(self.plan.mix.draw(rng)));
                        self.send_ready(s, rng);
                    }
                    Next::Last | Next::Wait => asking = false,
                }
            }
            let Some(front) = s.units.front() else {
                // The engine began no unit: nothing to do (not reached).
                return Ok(Outcome::default());
            };
            if front.done {
                // What was queued behind it is written when the connection next waits for
                // the server: with the commands that the responses already read free.
                let unit = s.units.pop_front().map(|u| u.outcome);
                return Ok(unit.unwrap_or_default());
            }
            if front.sent.is_none() {
                // Nothing in flight, and the first unsent must be alone: run it so.
                let cmd = self.build(s, 0, rng);
                let mut o = self.one(s, &cmd).await?;
                o.took = s.conn.timings.last().map(|(_, d)| *d);
                s.units.pop_front();
                return Ok(o);
            }
            let r = s.conn.reply().await?;
            // Its own time, write to completion, as `reply` timed it under its phase: the
            // engine's clock would start it where the unit before it completed.
            let took = s.conn.timings.last().map(|(_, d)| *d);
            self.answered(s, &r, took);
            s.conn.recycle(r.data);
        }
    }

    /// Sends, in order, every unsent unit that may go beside those in flight; stops at the
    /// first that may not (imaptest does too: commands keep their order).
    fn send_ready(&self, s: &mut Session, rng: &mut fastrand::Rng) {
        // The units sent are the queue's first ones (order is kept).
        let unsent = s.units.partition_point(|u| u.sent.is_some());
        for i in unsent..s.units.len() {
            let cmd = self.build(s, i, rng);
            let alone = cmd.hazards().alone;
            if alone || !may_send(&cmd, s.units.iter().filter_map(Unit::in_flight)) {
                s.units[i].built = Some(cmd);
                return;
            }
            let tag = s.conn.push(&cmd);
            s.units[i].outcome.phase = Some(cmd.phase());
            s.units[i].sent = Some((tag, cmd));
        }
    }

    /// Unit `i`'s command: the one built before unless it names messages by number (an
    /// APPEND's message is made once, however long it waits).
    fn build(&self, s: &mut Session, i: usize, rng: &mut fastrand::Rng) -> Command {
        match s.units[i].built.take() {
            Some(cmd) if !cmd.hazards().numbers => cmd,
            _ => self.command(s, s.units[i].phase, rng.u64(..), rng),
        }
    }

    /// Applies a completion and the data before it: the data to the model as it came, a
    /// STORE's FETCH to its STORE and a SEARCH's answer to the SEARCH wherever they came,
    /// the rest of the checks to the command completed.
    fn answered(&self, s: &mut Session, r: &Reply, took: Option<std::time::Duration>) {
        let Some(at) = s
            .units
            .iter()
            .position(|u| !u.done && u.sent.as_ref().is_some_and(|(t, _)| *t == r.done.tag))
        else {
            return;
        };
        s.units[at].outcome.took = took;
        let check = self.plan.check_state;
        // A reply completed [EXPUNGEISSUED] says nothing true of messages expunged
        // elsewhere. With several commands in flight the data before a completion may be
        // another FETCH's (Dovecot runs FETCHes side by side), so while another session of
        // the user is open (only it can expunge) nothing is compared across sessions then.
        // The command whose expunges these are: the EXPUNGE or MOVE in flight (it goes
        // alone among sequence-number commands). Without one, an EXPUNGE reports another
        // session's and is that session's count. A MOVE's count is its OK (it names one
        // message); the EXPUNGE responses it gets may be another session's too.
        let (mut flying, mut expunger) = (0, None);
        for (i, u) in s.units.iter().enumerate() {
            let Some(c) = u.in_flight() else { continue };
            flying += 1;
            if expunger.is_none() && matches!(c, Command::Expunge | Command::Move { .. }) {
                expunger = Some(i);
            }
        }
        let trusted = !expunge_issued(r) && (flying <= 1 || s.lease.alone());
        let shared = self.shared.as_ref().filter(|_| trusted);
        for d in &r.data {
            if let (Data::Expunge(_), Some(e)) = (d, expunger)
                && matches!(s.units[e].in_flight(), Some(Command::Expunge))
            {
                let alone = s.lease.alone();
                let o = &mut s.units[e].outcome;
                o.expunged += 1;
                o.expunge_shared |= !alone;
            }
            let o = &mut s.units[at].outcome;
            if let Data::Fetch(f) = d
                && let Some(b) = &f.body
            {
                o.fetched += u64::from(b.whole);
                o.parts += u64::from(!b.whole);
                o.octets += b.len;
            }
            if !check {
                if matches!(d, Data::Exists(_) | Data::Expunge(_)) {
                    s.model.apply(d, None, &mut Vec::new());
                }
                continue;
            }
            s.model.apply(d, shared, &mut o.violations);
            match d {
                Data::Fetch(f) => {
                    let cmds = s.units.iter().filter_map(Unit::in_flight);
                    let whose = flags_answer(f, cmds).and_then(|nth| {
                        let mut flying =
                            (0..s.units.len()).filter(|i| s.units[*i].in_flight().is_some());
                        flying.nth(nth)
                    });
                    if let Some(j) = whose
                        && s.lease.alone()
                        && let Some((_, Command::Store { op, flag, .. })) = &s.units[j].sent
                    {
                        let (op, flag) = (*op, *flag);
                        s.model
                            .stored(f, op, flag, &mut s.units[j].outcome.violations);
                    }
                }
                Data::Search(found) => {
                    if let Some(u) = s
                        .units
                        .iter_mut()
                        .find(|u| matches!(u.in_flight(), Some(Command::Search(_))))
                    {
                        let mut v = Vec::new();
                        s.model.searched(found, &mut v);
                        u.searched = Some(v);
                    }
                }
                Data::Expunge(_) => {
                    for u in s.units.iter_mut().filter(|u| u.in_flight().is_some()) {
                        u.expunge_seen = true;
                    }
                }
                _ => {}
            }
        }
        let u = &mut s.units[at];
        u.done = true;
        let ok = r.done.cond == Cond::Ok;
        if !ok {
            u.outcome.refused = Some(r.said());
        }
        let Some((_, cmd)) = &u.sent else { return };
        match cmd {
            Command::Append { .. } if ok => u.outcome.appended = 1,
            Command::Copy { .. } if ok => u.outcome.copied = 1,
            Command::Move { .. } if ok && !expunge_issued(r) => u.outcome.moved = 1,
            _ => {}
        }
        if !ok || !check {
            return;
        }
        match (cmd, &r.done.code) {
            (Command::Search("ALL"), _) if !u.expunge_seen => match u.searched.take() {
                Some(mut v) => u.outcome.violations.append(&mut v),
                None => s.model.searched(&[], &mut u.outcome.violations),
            },
            (Command::Append { .. }, Some(Code::AppendUid(v, uid))) => {
                s.model.appended(*v, *uid, &mut u.outcome.violations);
            }
            _ => {}
        }
    }
}

//! One descriptor per kind of run — what its results files are called, the steps it times,
//! what its unit of work is called live and on `/metrics`, how its summary is read back,
//! which text summary shows it, what its thresholds may name, what its report puts
//! first — registered once in [`KINDS`], so that reading results, the exporter, the
//! report and the end of a command look a kind up here instead of each matching command
//! names.
//!
//! A new kind of run is its own file here (name, steps, units, decoder, threshold keys)
//! and one line in [`KINDS`]; a new summary type adds its variant to `Summary`, and a new
//! layout its file in `report::text` and its arm in `report::text::summary`.
//!
//! The kinds: `send` and `populate` (`send`), `sink`, `relay` and `arrival` (`relay`),
//! `pop3`, `imap` and `populate_imap` (`imap`), `profile`, `dns`; the units they count in (`units`); their reports'
//! headlines (`headline`).

pub mod dns;
pub mod headline;
pub mod imap;
pub mod pop3;
pub mod profile;
pub mod relay;
pub mod send;
pub mod sink;
pub mod units;

use super::metric::Steps;
use super::recorder::Recorder;
use super::summary::{ImapSummary, Pop3Summary, SendSummary, Summary, Vocabulary};
pub use units::Units;

/// Which text summary shows a kind's results: the output stage (above this layer) holds
/// one renderer per layout, so that no caller has to pick one by the command's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// A generator's: messages, rates, connections, latency and errors.
    Generator,
    /// A receiver's: what arrived, what was refused, what the traces say.
    Sink,
    /// Injection, delivery, drain and the MTA's cost, then the injection's detail.
    Relay,
    /// Questions and replies by code, latency by question type.
    Dns,
    /// POP3 sessions and what they downloaded, on a store.
    Pop3,
    /// IMAP commands, what they moved, the state checks, on a store.
    Imap,
    /// The capacity in users and the steps of the ramp it stands on.
    Profile,
}

/// Everything the layers below the command line need to know about one kind of run.
#[derive(Debug, Clone, Copy)]
pub struct Kind {
    /// The command as results files name it (`command`).
    pub name: &'static str,
    /// The protocol steps it times: the names of its latency rows and error phases.
    pub steps: Steps,
    /// What one unit of work is called on the live line and on `/metrics` while it runs.
    pub units: Units,
    /// What `/metrics` calls a unit once the results are in (`--prometheus-hold`): the
    /// live noun for every kind but `dns`, which has always switched to `messages` there;
    /// kept so that a dashboard sees the names it saw.
    pub held_noun: &'static str,
    /// Reads the `summary` object of its results files into its typed summary.
    pub decode: fn(serde_json::Value) -> Result<Summary, serde_json::Error>,
    /// Which text summary shows it.
    pub layout: Layout,
    /// What its `--threshold`s may name.
    pub thresholds: Vocabulary,
    /// What its report puts first, and the words its charts use.
    pub headline: &'static headline::Headline,
    /// A server that runs until it is stopped (`sink`, `dns`): a signal is how it ends,
    /// not a cut-short run, and it accepts nothing of its own to judge.
    pub serves: bool,
}

/// Every kind of run, once.
pub const KINDS: &[&Kind] = &[
    &send::SEND,
    &send::POPULATE,
    &sink::SINK,
    &relay::RELAY,
    &relay::ARRIVAL,
    &pop3::POP3,
    &imap::IMAP,
    &imap::POPULATE_IMAP,
    &profile::PROFILE,
    &dns::DNS,
];

/// How `merge` adds up the results files of a kind whose runs split over processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merge {
    /// The generator agents of one split run (`send`, `mailbox pop3`, `mailbox imap`
    /// with `--shard`): the summary derived again from the summed counters and
    /// histograms, by the summary type of the generator.
    Agents(Generator),
    /// Several receivers of one run (sinks): their sequence numbers united as well.
    Receivers,
}

/// Which load-engine generator's summary a merge of its agents derives again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generator {
    /// `send`'s.
    Smtp,
    /// `mailbox pop3`'s: its agents log in as disjoint users of one store.
    Pop3,
    /// `mailbox imap`'s: its agents log in as disjoint users of one store.
    Imap,
    /// `mailbox profile`'s: its agents run disjoint virtual users of one store; the
    /// capacity is judged again on the summed steps (`report::capacity::merged`).
    Profile,
}

impl Generator {
    /// The summary of the summed recorder `total`, as one agent would have derived it.
    pub fn derive(
        self,
        total: &Recorder,
        intended: u64,
        duration_s: f64,
        active_s: f64,
    ) -> Summary {
        match self {
            Generator::Smtp => {
                Summary::Send(SendSummary::derive(total, intended, duration_s, active_s))
            }
            Generator::Pop3 => {
                Summary::Pop3(Pop3Summary::derive(total, intended, duration_s, active_s))
            }
            Generator::Imap => {
                Summary::Imap(ImapSummary::derive(total, intended, duration_s, active_s))
            }
            Generator::Profile => {
                let all = profile::STEPS
                    .find("action")
                    .unwrap_or(super::metric::Metric::Step(0));
                Summary::Profile(super::summary::ProfileSummary::derive(
                    total, all, duration_s,
                ))
            }
        }
    }

    /// True when the agents drive a mail store as its users: each agent's users are
    /// checked disjoint, and the store's figures come from the one agent that watched it.
    pub fn on_a_store(self) -> bool {
        self != Generator::Smtp
    }
}

/// The kinds `merge` adds up, and how; any other kind's files it refuses.
const MERGED: &[(&Kind, Merge)] = &[
    (&send::SEND, Merge::Agents(Generator::Smtp)),
    (&pop3::POP3, Merge::Agents(Generator::Pop3)),
    (&imap::IMAP, Merge::Agents(Generator::Imap)),
    (&profile::PROFILE, Merge::Agents(Generator::Profile)),
    (&sink::SINK, Merge::Receivers),
];

/// How `merge` adds up results files of the kind `name`, if it does.
pub fn merging(name: &str) -> Option<Merge> {
    MERGED.iter().find(|(k, _)| k.name == name).map(|(_, m)| *m)
}

/// The kind of run a results file names.
pub fn find(name: &str) -> Option<&'static Kind> {
    KINDS.iter().copied().find(|k| k.name == name)
}

/// The summary of a results file, read as the kind of run that wrote it says (here, not
/// in `summary`, which the kinds build on).
pub fn decode(command: &str, v: serde_json::Value) -> Result<Summary, String> {
    let kind =
        find(command).ok_or_else(|| format!("it was written by an unknown command {command:?}"))?;
    (kind.decode)(v).map_err(|e| format!("its {command} summary is unreadable: {e}"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        for (i, k) in KINDS.iter().enumerate() {
            assert!(
                KINDS[i + 1..].iter().all(|o| o.name != k.name),
                "{} is registered twice",
                k.name
            );
            assert_eq!(find(k.name).map(|f| f.name), Some(k.name));
        }
        assert!(find("nope").is_none());
        assert_eq!(merging("send"), Some(Merge::Agents(Generator::Smtp)));
        assert_eq!(merging("pop3"), Some(Merge::Agents(Generator::Pop3)));
        assert_eq!(merging("imap"), Some(Merge::Agents(Generator::Imap)));
        assert_eq!(merging("sink"), Some(Merge::Receivers));
        assert_eq!(merging("profile"), Some(Merge::Agents(Generator::Profile)));
        for k in ["relay", "populate", "populate_imap", "nope"] {
            assert_eq!(merging(k), None, "{k}");
        }
    }

    /// Every kind's summary comes back from its results JSON as it went in, and names
    /// each threshold key once.
    #[test]
    fn every_kind_round_trips_its_summary() {
        for k in KINDS {
            let sample = sample(k);
            let json = serde_json::to_value(&sample).expect("json");
            assert_eq!((k.decode)(json).ok(), Some(sample), "{}", k.name);
            let keys: Vec<&str> = k.thresholds.keys().collect();
            for (i, key) in keys.iter().enumerate() {
                assert!(!keys[i + 1..].contains(key), "{}: {key} twice", k.name);
            }
        }
    }

    /// A summary of `k`'s type: the one of every summary type its decoder reads back whole.
    pub fn sample(k: &Kind) -> Summary {
        use crate::stats::summary::*;
        let all = [
            Summary::Send(SendSummary::default()),
            Summary::Sink(SinkSummary::default()),
            Summary::Relay(RelaySummary::default()),
            Summary::Pop3(Pop3Summary::default()),
            Summary::Imap(ImapSummary::default()),
            Summary::Profile(ProfileSummary::default()),
            Summary::Dns(crate::stats::dns::DnsSummary::default()),
        ];
        all.into_iter()
            .find(|s| {
                let json = serde_json::to_value(s).expect("json");
                (k.decode)(json).ok().as_ref() == Some(s)
            })
            .unwrap_or_else(|| panic!("{}: no summary type decodes", k.name))
    }
}

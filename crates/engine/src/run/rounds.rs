//! Rounds: one benchmark run again and again (`--rounds N`), or variants of it run in
//! turns to be compared (`--lab postfix,exim`, `--compare-postconf KEY=A,B`). A single run
//! on a shared machine swings by ±10 %, so figures that are to hold, or to be compared,
//! come from several rounds; between variants the order rotates each round (A B, B A, …
//! for two; A B C, B C A, C A B, … for more), so that a drift of the machine hits all
//! alike. A round a signal cut short is not a round like the others: it is left out of
//! what is kept (and named in it), and a comparison keeps only the rounds every variant
//! completed.
//!
//! What a round runs is the caller's (a closure giving a future of its results: a relay
//! benchmark on a fresh lab, a generator run); how rounds become one document too
//! (`report::rounds::combine`). Here is only the order, the stop, and what is kept.

use std::future::Future;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::live::say;
use crate::stats::Results;

/// How the rounds learn that a signal asked the run to stop (`shutdown::Shutdown` is one;
/// it lives above this layer).
pub trait Stop {
    /// After each round: start no other.
    fn stopping(&self) -> bool;
    /// At the end: whether a signal came at all (a comparison it reached is cut short).
    fn signalled(&self) -> bool;
}

/// What the rounds read of a round's outcome and write into the document kept:
/// [`Results`] is one (the unit tests use a stand-in).
pub trait Round {
    /// A signal cut this round short.
    fn cut_short(&self) -> bool;
    /// How the kept document names this round when it is left out of it
    /// (`extra.dropped_rounds`): its 1-based number and, in a comparison, its variant.
    fn left_out(&self, round: usize, label: Option<&str>) -> Value;
    /// Marks the kept document as cut short, when it was, with the rounds left out.
    fn mark(&mut self, interrupted: bool, dropped: &[Value]);
}

impl Round for Results {
    fn cut_short(&self) -> bool {
        self.interrupted
    }

    fn left_out(&self, round: usize, label: Option<&str>) -> Value {
        let mut v = json!({
            "round": round,
            "interrupted": self.interrupted,
            "duration_s": self.duration_s,
            "mta_logs": self.extra.get("mta_logs"),
        });
        if let Some(l) = label {
            v["label"] = l.into();
        }
        v
    }

    fn mark(&mut self, interrupted: bool, dropped: &[Value]) {
        if interrupted {
            self.interrupted = true;
        }
        if !dropped.is_empty() {
            self.extra
                .insert("dropped_rounds".into(), dropped.to_vec().into());
        }
    }
}

/// Why rounds gave nothing to keep.
#[derive(Debug, PartialEq)]
pub enum RoundsError<E> {
    /// A round failed: its own error, as its run gave it.
    Round(E),
    /// Nothing can be kept: no round ran, or a signal came before any run measured
    /// anything.
    NoneKept(String),
}

impl<E> RoundsError<E> {
    /// The error in the caller's terms, `none_kept` saying what nothing kept is to it.
    pub fn or(self, none_kept: impl FnOnce(String) -> E) -> E {
        match self {
            RoundsError::Round(e) => e,
            RoundsError::NoneKept(why) => none_kept(why),
        }
    }
}

/// Runs a benchmark `rounds` times, one after another, until a signal stops it, and keeps
/// the rounds as one document (`combine`); one round is the run itself. A last round a
/// signal cut short, with whole rounds before it, is left out of the document and named
/// in it. `run` is given the round's 1-based number.
pub async fn repeat<T, E, F, Fut>(
    rounds: u32,
    stop: &impl Stop,
    combine: impl FnOnce(Vec<T>) -> Option<T>,
    mut run: F,
) -> Result<T, RoundsError<E>>
where
    T: Round,
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut done = Vec::new();
    for round in 1..=rounds {
        if rounds > 1 {
            say(&format!("mailbench: round {round} of {rounds}"));
        }
        match run(round).await {
            Ok(r) => done.push(r),
            // A signal cut this round off before it measured anything (its lab still
            // starting): the rounds before it are what was measured.
            Err(_) if stop.stopping() && !done.is_empty() => break,
            Err(e) => return Err(RoundsError::Round(e)),
        }
        if stop.stopping() {
            break;
        }
    }
    let none = || RoundsError::NoneKept("no round ran".into());
    let cut = match done.last() {
        Some(last) if last.cut_short() && done.len() > 1 => done.pop(),
        _ => None,
    };
    if done.len() == 1 && cut.is_none() {
        return done.pop().ok_or_else(none);
    }
    let whole = done.len();
    let mut r = combine(done).ok_or_else(none)?;
    if let Some(c) = cut {
        let round = whole + 1;
        say(&format!(
            "mailbench: interrupted in round {round} of {rounds}: that round is left out; the figures are over the {whole} whole round{}",
            if whole == 1 { "" } else { "s" }
        ));
        r.mark(true, &[c.left_out(round, None)]);
    }
    Ok(r)
}

/// One variant's turn: the round (1-based) and the variant (an index into the labels).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Turn {
    /// The round, from 1.
    pub round: u32,
    /// The variant.
    pub side: usize,
}

/// What the rounds of a comparison gave: each variant's rounds combined (only the rounds
/// every variant completed), and what was left out.
pub struct Compared<T> {
    /// Per variant, in the order of the labels, its complete rounds as one document;
    /// `None` for a variant that never ran (a signal came before its first turn): the
    /// others' runs are still kept.
    pub sides: Vec<Option<T>>,
    /// A signal cut the comparison short.
    pub interrupted: bool,
    /// At least one round was completed by every variant (else nothing is compared).
    pub compared: bool,
    /// The rounds left out of the comparison (`extra.dropped_rounds`): the variant's round
    /// that a signal cut short, and the others' of that round, so that every variant is
    /// compared over the same whole rounds.
    pub dropped: Vec<Value>,
    /// One line for the screen about the interruption, when there was one.
    pub said: Option<String>,
}

impl<T: Round> Compared<T> {
    /// Marks a document of the comparison as cut short, when it was, with what was left
    /// out of it.
    pub fn mark(&self, r: &mut T) {
        r.mark(self.interrupted, &self.dropped);
    }

    /// The variants that ran, with their labels (every one unless a signal came before
    /// some had run once).
    pub fn ran<'a>(&'a self, labels: &'a [String]) -> impl Iterator<Item = (&'a String, &'a T)> {
        labels
            .iter()
            .zip(&self.sides)
            .filter_map(|(label, side)| Some((label, side.as_ref()?)))
    }

    /// The variants a signal kept from running, by label: what the results name as
    /// planned and not run.
    pub fn never_ran<'a>(&'a self, labels: &'a [String]) -> Vec<&'a String> {
        labels
            .iter()
            .zip(&self.sides)
            .filter(|(_, side)| side.is_none())
            .map(|(label, _)| label)
            .collect()
    }
}

/// The order of round `round` (0-based) over `n` variants: rotated by one each round.
fn order(round: u32, n: usize) -> Vec<usize> {
    (0..n).map(|i| (i + round as usize) % n).collect()
}

/// Runs every variant (named by `labels`) `rounds` times in rotating order, saying each
/// turn as `mailbench WHO: round R of N, LABEL`; each variant's rounds combined. Stops
/// after the turn a first signal interrupts, keeping what was measured; a round that not
/// every variant completed whole is left out of the comparison (and named), so that a
/// cut-short run is never compared as if it were whole.
pub async fn rotate<T, E, F, Fut>(
    who: &str,
    labels: &[String],
    rounds: u32,
    stop: &impl Stop,
    combine: impl Fn(Vec<T>) -> Option<T>,
    mut run: F,
) -> Result<Compared<T>, RoundsError<E>>
where
    T: Round,
    F: FnMut(Turn) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut done: Vec<Vec<T>> = labels.iter().map(|_| Vec::new()).collect();
    let mut cut_in = None;
    'rounds: for round in 0..rounds {
        for side in order(round, labels.len()) {
            say(&format!(
                "mailbench {who}: round {} of {rounds}, {}",
                round + 1,
                labels[side]
            ));
            let turn = Turn {
                round: round + 1,
                side,
            };
            match run(turn).await {
                Ok(r) => done[side].push(r),
                // The signal cut the turn off before it measured anything (its lab still
                // filling): the comparison ends there, as after any cut-short turn.
                Err(_) if stop.stopping() => {
                    cut_in = Some(turn);
                    break 'rounds;
                }
                Err(e) => return Err(RoundsError::Round(e)),
            }
            if stop.stopping() {
                cut_in = Some(turn);
                break 'rounds;
            }
        }
    }
    // A round is whole when every variant completed it: all rounds before the one a
    // signal cut short.
    let whole = match cut_in {
        Some(t) => t.round as usize - 1,
        None => done.iter().map(Vec::len).min().unwrap_or(0),
    };
    let mut dropped = Vec::new();
    for (side, rs) in done.iter_mut().enumerate() {
        let keep = if whole == 0 { rs.len() } else { whole };
        for (i, r) in rs.drain(keep..).enumerate() {
            dropped.push(r.left_out(keep + i + 1, Some(&labels[side])));
        }
    }
    let said = cut_in.map(|t| {
        let why = format!(
            "mailbench {who}: interrupted in round {} of {rounds} ({}):",
            t.round, labels[t.side]
        );
        let never: Vec<&str> = labels
            .iter()
            .zip(&done)
            .filter(|(_, rs)| rs.is_empty())
            .map(|(l, _)| l.as_str())
            .collect();
        match whole {
            0 if never.is_empty() => format!(
                "{why} no round was completed by every variant, so nothing is compared; the results keep the cut-short runs, marked interrupted"
            ),
            0 => format!(
                "{why} {} never ran, so nothing is compared; the results keep the runs of the others, marked interrupted",
                never.join(", ")
            ),
            n => format!(
                "{why} {} left out, each variant compared over its {n} whole round{}",
                match dropped.len() {
                    1 => "that round is".to_string(),
                    k => format!("the {k} runs of unfinished rounds are"),
                },
                if n == 1 { "" } else { "s" }
            ),
        }
    });
    let sides: Vec<Option<T>> = done.into_iter().map(&combine).collect();
    if sides.iter().all(Option::is_none) {
        return Err(RoundsError::NoneKept(
            "interrupted before any variant had run; nothing was measured".into(),
        ));
    }
    Ok(Compared {
        interrupted: stop.signalled() || cut_in.is_some(),
        compared: whole > 0,
        sides,
        dropped,
        said,
    })
}

/// Where round `round` of a run compared or repeated under `tag` (an MTA, a setting)
/// keeps its lab logs: a base that `relay` turns into `FILE.TAG.roundN.maillog.I` beside
/// the results file `FILE.json`, so that every round's log is kept and its round names it.
pub fn round_logs(json: &Path, tag: &str, round: u32) -> PathBuf {
    let tag: String = tag
        .chars()
        .map(|c| {
            if c == '/' || c.is_whitespace() {
                '_'
            } else {
                c
            }
        })
        .collect();
    let stem = json.with_extension("");
    PathBuf::from(format!("{}.{tag}.round{round}.json", stem.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};

    /// A stand-in round: which turns it holds, whether a signal cut it short, and how it
    /// was marked.
    #[derive(Debug, Clone, PartialEq)]
    struct Fake {
        turns: Vec<(u32, usize)>,
        cut: bool,
        interrupted: bool,
        dropped: Vec<Value>,
    }

    impl Round for Fake {
        fn cut_short(&self) -> bool {
            self.cut
        }
        fn left_out(&self, round: usize, label: Option<&str>) -> Value {
            json!({"round": round, "label": label, "interrupted": self.cut})
        }
        fn mark(&mut self, interrupted: bool, dropped: &[Value]) {
            self.interrupted |= interrupted;
            self.dropped = dropped.to_vec();
        }
    }

    /// Rounds kept as one: the turns of all.
    fn combine(v: Vec<Fake>) -> Option<Fake> {
        let first = v.first()?.clone();
        Some(Fake {
            turns: v.iter().flat_map(|f| f.turns.clone()).collect(),
            cut: v.iter().any(|f| f.cut),
            ..first
        })
    }

    /// A signal that comes during the `at`-th run (1-based), or never.
    struct Signal {
        at: Option<usize>,
        runs: Cell<usize>,
    }

    impl Signal {
        fn at(at: Option<usize>) -> Signal {
            Signal {
                at,
                runs: Cell::new(0),
            }
        }
        /// Counts a run; true when the signal comes during it.
        fn run(&self) -> bool {
            self.runs.set(self.runs.get() + 1);
            self.at.is_some_and(|a| self.runs.get() >= a)
        }
    }

    impl Stop for Signal {
        fn stopping(&self) -> bool {
            self.at.is_some_and(|a| self.runs.get() >= a)
        }
        fn signalled(&self) -> bool {
            self.stopping()
        }
    }

    fn labels(n: usize) -> Vec<String> {
        ["a", "b", "c", "d"][..n]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    /// Rotates `n` variants over `rounds` with a signal during run `at`; the turns run.
    fn rotated(n: usize, rounds: u32, at: Option<usize>) -> (Compared<Fake>, Vec<Turn>) {
        let signal = Signal::at(at);
        let ran = RefCell::new(Vec::new());
        let c = futures_lite(rotate(
            "relay",
            &labels(n),
            rounds,
            &signal,
            combine,
            |t: Turn| {
                ran.borrow_mut().push(t);
                let cut = signal.run();
                async move {
                    Ok::<_, ()>(Fake {
                        turns: vec![(t.round, t.side)],
                        cut,
                        interrupted: false,
                        dropped: Vec::new(),
                    })
                }
            },
        ))
        .expect("rotated");
        (c, ran.into_inner())
    }

    /// Rotates two variants over two rounds; the turn `fails_at` (1-based) fails after a
    /// signal came during it, as a lab cut off while filling does.
    fn failing(fails_at: usize) -> Result<Compared<Fake>, RoundsError<String>> {
        let signal = Signal::at(Some(fails_at));
        futures_lite(rotate(
            "mailbox profile",
            &labels(2),
            2,
            &signal,
            combine,
            |t: Turn| {
                let cut = signal.run();
                async move {
                    match cut {
                        true => {
                            Err("filling the mailboxes: 30 of 40 messages delivered".to_string())
                        }
                        false => Ok(Fake {
                            turns: vec![(t.round, t.side)],
                            cut,
                            interrupted: false,
                            dropped: Vec::new(),
                        }),
                    }
                }
            },
        ))
    }

    #[test]
    fn a_turn_a_signal_cut_off_before_it_measured_ends_the_comparison() {
        // The very first turn: nothing measured, said as for any early signal.
        match failing(1) {
            Err(RoundsError::NoneKept(why)) => assert_eq!(
                why,
                "interrupted before any variant had run; nothing was measured"
            ),
            other => panic!("expected nothing kept, got {:?}", other.map(|c| c.said)),
        }
        // In round 2: round 1 is whole and compared; b's round 2 is left out.
        let c = failing(3).expect("round 1 kept");
        assert!(c.interrupted && c.compared, "{:?}", c.said);
        assert_eq!(side(&c, 0).turns, [(1, 0)]);
        assert_eq!(side(&c, 1).turns, [(1, 1)]);
        assert_eq!(
            c.dropped.len(),
            0,
            "the failed turn has no run to leave out"
        );
    }

    /// Runs a future to its end on a runtime of the test's own.
    fn futures_lite<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
            .block_on(f)
    }

    #[test]
    fn every_variant_takes_every_place_in_turn() {
        let two: Vec<Vec<usize>> = (0..4).map(|r| order(r, 2)).collect();
        assert_eq!(two, [[0, 1], [1, 0], [0, 1], [1, 0]]);
        let four: Vec<Vec<usize>> = (0..4).map(|r| order(r, 4)).collect();
        for place in 0..4 {
            let mut firsts: Vec<usize> = four.iter().map(|o| o[place]).collect();
            firsts.sort_unstable();
            assert_eq!(firsts, [0, 1, 2, 3], "place {place}: {four:?}");
        }
    }

    #[test]
    fn two_variants_alternate_and_each_keeps_all_its_rounds() {
        let (c, ran) = rotated(2, 4, None);
        let turns: Vec<(u32, usize)> = ran.iter().map(|t| (t.round, t.side)).collect();
        assert_eq!(
            turns,
            [
                (1, 0),
                (1, 1),
                (2, 1),
                (2, 0),
                (3, 0),
                (3, 1),
                (4, 1),
                (4, 0)
            ]
        );
        assert_eq!(side(&c, 0).turns, [(1, 0), (2, 0), (3, 0), (4, 0)]);
        assert_eq!(side(&c, 1).turns, [(1, 1), (2, 1), (3, 1), (4, 1)]);
        assert!(!c.interrupted && c.compared && c.dropped.is_empty() && c.said.is_none());
    }

    #[test]
    fn a_round_cut_short_is_left_out_for_every_variant() {
        // Three variants; the signal comes in the third round's second turn (run 8).
        let (c, ran) = rotated(3, 4, Some(8));
        assert_eq!(ran.len(), 8, "no turn after the signal: {ran:?}");
        for (_, side) in c.ran(&labels(3)) {
            let rounds: Vec<u32> = side.turns.iter().map(|t| t.0).collect();
            assert_eq!(rounds, [1, 2], "{:?}", side.turns);
        }
        assert!(c.interrupted && c.compared);
        // Round 3 ran c then a (rotated by two): both runs are left out.
        assert_eq!(
            c.dropped,
            [
                json!({"round": 3, "label": "a", "interrupted": true}),
                json!({"round": 3, "label": "c", "interrupted": false}),
            ]
        );
        assert_eq!(
            c.said.as_deref(),
            Some(
                "mailbench relay: interrupted in round 3 of 4 (a): the 2 runs of unfinished rounds are left out, each variant compared over its 2 whole rounds"
            )
        );
        let mut doc = side(&c, 0).clone();
        c.mark(&mut doc);
        assert!(doc.interrupted && doc.dropped.len() == 2);
    }

    #[test]
    fn a_signal_before_any_whole_round_compares_nothing() {
        // The second of two variants cut short in round 1: the first's run is kept.
        let (c, _) = rotated(2, 4, Some(2));
        assert!(c.interrupted && !c.compared && c.dropped.is_empty());
        assert!(c.said.is_some_and(|s| s.contains("nothing is compared")));
        // Cut short in the first turn: b never ran; a's cut-short run is still kept
        // (nothing measured is lost), and the line says who never ran.
        let (c, ran) = rotated(2, 4, Some(1));
        assert_eq!(ran.len(), 1);
        assert!(c.interrupted && !c.compared);
        assert_eq!(side(&c, 0).turns, [(1, 0)]);
        assert!(c.sides[1].is_none());
        assert_eq!(
            c.ran(&labels(2))
                .map(|(l, _)| l.as_str())
                .collect::<Vec<_>>(),
            ["a"]
        );
        assert_eq!(
            c.said.as_deref(),
            Some(
                "mailbench relay: interrupted in round 1 of 4 (a): b never ran, so nothing is compared; the results keep the runs of the others, marked interrupted"
            )
        );
    }

    /// Variant `i`'s document, which the test expects to be there.
    fn side(c: &Compared<Fake>, i: usize) -> &Fake {
        c.sides[i].as_ref().expect("the variant ran")
    }

    /// Repeats one benchmark `rounds` times with a signal during run `at`.
    fn repeated(rounds: u32, at: Option<usize>) -> (Result<Fake, RoundsError<()>>, usize) {
        let signal = Signal::at(at);
        let r = futures_lite(repeat(rounds, &signal, combine, |round| {
            let cut = signal.run();
            async move {
                Ok(Fake {
                    turns: vec![(round, 0)],
                    cut,
                    interrupted: false,
                    dropped: Vec::new(),
                })
            }
        }));
        (r, signal.runs.get())
    }

    #[test]
    fn a_repeated_run_leaves_out_the_round_a_signal_cut_short() {
        let (r, runs) = repeated(5, Some(3));
        assert_eq!(runs, 3);
        let r = r.expect("two whole rounds");
        assert_eq!(r.turns, [(1, 0), (2, 0)]);
        assert!(r.interrupted);
        assert_eq!(
            r.dropped,
            [json!({"round": 3, "label": null, "interrupted": true})]
        );
        // One round is the run itself, even cut short; all whole rounds are combined.
        let (one, _) = repeated(1, Some(1));
        assert_eq!(one.expect("one").dropped, Vec::<Value>::new());
        let (all, runs) = repeated(3, None);
        assert_eq!((all.expect("three").turns.len(), runs), (3, 3));
        assert!(matches!(repeated(0, None).0, Err(RoundsError::NoneKept(_))));
    }

    #[test]
    fn round_logs_are_named_by_tag_and_round_beside_the_results() {
        assert_eq!(
            round_logs(Path::new("out/r.json"), "default_process_limit=1 0/x", 3),
            PathBuf::from("out/r.default_process_limit=1_0_x.round3.json")
        );
    }
}

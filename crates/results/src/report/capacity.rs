//! The capacity search of a profile run: the steps a population goes through, each step's
//! figures (users, actions per minute, response times per action, errors, late actions,
//! the store's CPU, disk and memory) judged against the capacity rules, and the verdict:
//! capacity = the largest user count whose step broke no rule, below the first that did.
//! A run's own search and `merge`'s judgment of a split run's steps (`merged`) use the
//! same rule.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::report::threshold::Threshold;
use crate::stats::hist::HistJson;
use crate::stats::hist::ms;
use crate::stats::kind::profile::STEPS;
use crate::stats::kind::profile::verdict_text;
use crate::stats::merge::Input;
use crate::stats::recorder::Counters;
use crate::stats::results::{Results, ThresholdResult};
use crate::stats::summary::{ProfileSummary, Summary};
use crate::stats::{Metric, Recorder, SutPoint};

/// How many users, for how long.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Population {
    /// A fixed count for `for`.
    Fixed {
        /// Virtual users.
        users: u64,
        /// How long.
        run_for: Duration,
    },
    /// `start`, then `step` more every `period`, until a rule breaks or `max` is passed.
    Ramp {
        /// Users of the first step.
        start: u64,
        /// Users added per step.
        step: u64,
        /// Each step's length.
        period: Duration,
        /// No step above this many users.
        max: u64,
    },
}

/// The row of every action together (those never done included).
pub fn action() -> Metric {
    STEPS.find("action").unwrap_or(Metric::Step(0))
}

/// One step as planned: how many users, for how long.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepPlan {
    /// Virtual users during the step.
    pub users: u64,
    /// Its length.
    pub length: Duration,
    /// Its settle (`--settle`): how long its start is kept out of its figures.
    pub settle: Duration,
}

impl StepPlan {
    /// Every step of a population, in order, each with a `settle` of that length.
    pub fn all(p: &Population, settle: Duration) -> Vec<StepPlan> {
        let mut all = Self::unsettled(p);
        all.iter_mut().for_each(|s| s.settle = settle);
        all
    }

    /// Every step of a population, in order, none with a settle.
    fn unsettled(p: &Population) -> Vec<StepPlan> {
        match *p {
            Population::Fixed { users, run_for } => vec![StepPlan {
                users,
                length: run_for,
                settle: Duration::ZERO,
            }],
            Population::Ramp {
                start,
                step,
                period,
                max,
            } => (0..)
                .map(|k| start + k * step)
                .take_while(|u| *u <= max)
                .take(10_000)
                .map(|users| StepPlan {
                    users,
                    length: period,
                    settle: Duration::ZERO,
                })
                .collect(),
        }
    }
}

/// One action type's figures in a step.
#[derive(Debug, Clone, Serialize)]
pub struct ActionRow {
    /// The step's actions of this type (`action`: all of them, those not done included).
    pub count: u64,
    /// Mean response time from the intended start, ms.
    pub mean_ms: f64,
    /// 95th percentile, ms.
    pub p95_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
}

/// How long a step's users waited for the store to begin their actions, as the step
/// ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Waits {
    /// The step's actions not begun.
    pub unstarted: u64,
    /// Users with an action due by the step's midpoint not begun.
    pub stuck_users: u64,
}

/// A step's settle (`--settle`): its first part, whose actions are kept out of its
/// figures and counted here (seed 001 judged only the steady part of each step).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Settled {
    /// When it began, seconds from the run's start (where the report shades it).
    pub from_s: f64,
    /// How long it was, s.
    pub duration_s: f64,
    /// The actions that fell due in it (those never done included).
    pub actions: u64,
}

/// What one step measured and how it was judged.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// Virtual users.
    pub users: u64,
    /// Its real length, s.
    pub seconds: f64,
    /// Its planned length, s.
    pub planned_s: f64,
    /// Its settle, kept out of every other figure of the step (absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settle: Option<Settled>,
    /// The step's summary (what rules read): the actions that fell due in it after its
    /// settle, wherever they finished; its rates are over the part after the settle.
    pub summary: ProfileSummary,
    /// Per action type (and `action`: all, with the overdue ones).
    pub actions: BTreeMap<String, ActionRow>,
    /// What the step counted, as a recorder holds it: `merge` adds the agents' up.
    pub counters: Counters,
    /// The step's latency histograms (its rows of `STEPS`): `merge` adds the agents'
    /// up bucket by bucket and judges the sum.
    pub latency: BTreeMap<String, HistJson>,
    /// The store over the step; absent when no store process was watched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<SutPoint>,
    /// Each rule's value in this step; `ok` true means the rule's condition held (it broke).
    pub rules: Vec<ThresholdResult>,
    /// Actions that failed in this step (an error or a refusal): a step where any failed
    /// has not held, whatever the rules say.
    pub failed: u64,
    /// Users the store left waiting half the step or more (`summary.stuck_users`): a step
    /// with any has not held, whatever the rules say.
    pub stuck_users: u64,
    /// It ended before its planned length (Ctrl-C, or a server found unreachable): not
    /// judged, so not held.
    pub cut_short: bool,
    /// A rule broke, actions failed, or users were left waiting in this step.
    pub broken: bool,
    /// The judgment in words (`ok`, `BROKE …` and why, or why it was not judged).
    pub verdict: String,
    /// Judged with actions not done yet (at the time they had waited so far): a judgment
    /// that can still turn to broken, never back (a live line's; results hold final ones).
    #[serde(skip)]
    pub provisional: bool,
}

impl Step {
    /// Judges a step that ran `seconds` of `plan` from what its actions recorded (those
    /// due after its settle): those not done are in the `action` row at the time they had
    /// waited and counted as `aborted` (its `overdue`); `waits` says how many had not
    /// begun when it ended, and how many users had waited half of it or more. Its rates
    /// are over the `seconds` after the plan's settle.
    pub fn judge(
        plan: &StepPlan,
        seconds: f64,
        rec: &Recorder,
        store: Option<SutPoint>,
        rules: &[Threshold],
        waits: Waits,
        cut_short: bool,
    ) -> Step {
        let summary = ProfileSummary {
            users: plan.users,
            sut_cpu: store.as_ref().map(|s| s.cpu_user_pct + s.cpu_sys_pct),
            unstarted: waits.unstarted,
            stuck_users: waits.stuck_users,
            ..ProfileSummary::derive(
                rec,
                action(),
                (seconds - plan.settle.as_secs_f64()).max(0.0),
            )
        };
        let (latency, _) = Results::tables(rec, STEPS);
        let rules: Vec<ThresholdResult> = rules
            .iter()
            .map(|r| r.evaluate(&Summary::Profile(summary.clone()), &latency))
            .collect();
        let actions = STEPS
            .metrics()
            .filter(|m| matches!(m, Metric::Step(i) if *i > 0))
            .filter(|m| !rec.hist(*m).is_empty())
            .map(|m| {
                let h = rec.hist(m);
                let row = ActionRow {
                    count: h.len(),
                    mean_ms: h.mean() / 1000.0,
                    p95_ms: ms(h, 0.95),
                    p99_ms: ms(h, 0.99),
                };
                (STEPS.name(m).to_string(), row)
            })
            .collect();
        let failed = summary.errors + summary.refused;
        let stuck_users = summary.stuck_users;
        let mut step = Step {
            counters: rec.counters.clone(),
            latency,
            users: plan.users,
            seconds,
            planned_s: plan.length.as_secs_f64(),
            settle: None,
            broken: !cut_short && (failed > 0 || stuck_users > 0 || rules.iter().any(|r| r.ok)),
            failed,
            stuck_users,
            cut_short,
            summary,
            actions,
            store,
            rules,
            provisional: false,
            verdict: String::new(),
        };
        step.verdict = step.judgment();
        step
    }

    /// The same judgment, with its settle's record (what was kept out of it).
    pub fn settled(mut self, settle: Option<Settled>) -> Step {
        self.settle = settle;
        self
    }

    /// The same judgment, marked provisional when `waiting` (actions of it not done yet).
    pub fn provisional(mut self, waiting: bool) -> Step {
        self.provisional = waiting;
        self
    }

    /// The step ran its length, actions were due in it, none failed and no rule broke (a
    /// step where no action was due measured nothing, so it held nothing either).
    pub fn held(&self) -> bool {
        !self.broken && !self.cut_short && self.summary.actions > 0
    }

    /// Why the step did not hold, or "ok".
    fn judgment(&self) -> String {
        verdict_text(
            self.cut_short,
            self.seconds,
            self.planned_s,
            self.rules
                .iter()
                .filter(|r| r.ok)
                .map(|r| format!("{} (at {:.1})", r.expr, r.value))
                .collect(),
            self.failed,
            self.stuck_users,
            self.summary.actions,
        )
    }

    /// The step's progress line, as it ends.
    pub fn line(&self) -> String {
        let s = &self.summary;
        let mut verdict = self.verdict.clone();
        if self.provisional && !self.broken && !self.cut_short {
            verdict = format!(
                "{verdict} so far ({} of its actions not done yet: judged again as they finish)",
                s.overdue
            );
        }
        format!(
            "mailbench profile: {} users: {:.0} actions/min, mean {:.1} ms, p95 {:.1} ms, errors {}, refused {}, late {}, not done {} (not begun {}), store CPU {}: {}",
            self.users,
            s.actions_per_min,
            s.mean_ms,
            s.p95_ms,
            s.errors,
            s.refused,
            s.late,
            s.overdue,
            s.unstarted,
            s.sut_cpu
                .map_or("not observed".into(), |c| format!("{c:.0} %")),
            verdict
        )
    }

    /// The line of an earlier step found broken at a later step's end: its actions that
    /// were not done have waited longer since, or failed.
    pub fn judged_again_line(&self) -> String {
        format!(
            "mailbench profile: {} users, judged again with {} of its actions still not done (mean {:.1} ms, p95 {:.1} ms so far): {}",
            self.users,
            self.summary.overdue,
            self.summary.mean_ms,
            self.summary.p95_ms,
            self.verdict
        )
    }
}

/// The outcome of a search.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The largest user count that held (a ramp that ran at least one step).
    pub users: Option<u64>,
    /// The users of the first step that broke (a rule, or failed actions).
    pub broke_at: Option<u64>,
    /// The users of a step cut short (the last one run), not judged.
    pub cut_short_at: Option<u64>,
    /// Steps that ran and had no action due: not judged.
    pub unjudged: Vec<u64>,
}

/// The capacity: the last step before the first broken one that held (ran its length,
/// no action failed, no rule broke); a step in which no action fell due is passed over.
/// A fixed population has no search: its users are the capacity only if its one step
/// held.
pub fn verdict(steps: &[Step], p: &Population) -> Verdict {
    let broke_at = steps.iter().find(|s| s.broken).map(|s| s.users);
    let cut_short_at = steps.iter().find(|s| s.cut_short).map(|s| s.users);
    let users = steps
        .iter()
        .take_while(|s| !s.broken)
        .filter(|s| s.held())
        .map(|s| s.users)
        .max();
    let users = match p {
        Population::Fixed { .. } => users.filter(|_| broke_at.is_none()),
        Population::Ramp { .. } => users,
    };
    let unjudged = steps
        .iter()
        .filter(|s| !s.broken && !s.cut_short && s.summary.actions == 0)
        .map(|s| s.users)
        .collect();
    Verdict {
        users,
        broke_at,
        cut_short_at,
        unjudged,
    }
}

impl Verdict {
    /// True when the capacity is a lower bound: a ramp whose steps all held (it never
    /// broke), so the store may carry more than its last step's users.
    pub fn at_least(&self, p: &Population) -> bool {
        matches!(p, Population::Ramp { .. }) && self.users.is_some() && self.broke_at.is_none()
    }

    /// The results file's `extra.capacity`.
    pub fn to_json(
        &self,
        steps: &[Step],
        rules: &[Threshold],
        p: &Population,
    ) -> serde_json::Value {
        serde_json::json!({
            "rules": rules.iter().map(|r| r.expr()).collect::<Vec<_>>(),
            "capacity_users": self.users,
            "capacity_at_least": self.at_least(p),
            "broke_at_users": self.broke_at,
            "cut_short_at_users": self.cut_short_at,
            "unjudged_users": self.unjudged,
            "steps": steps,
        })
    }
}

/// A split profile's capacity judged again on its agents' steps (`merge`): step k of
/// every agent (the same instants on the shared clock) added up — users, counters and
/// histograms bucket by bucket, the actions not begun and the users left waiting — and
/// judged by the run's capacity rules with [`Step::judge`] and [`verdict`], the rule the
/// run applies to its own steps, now to all agents' actions together. The store's
/// figures are those of the agent that watched it (`watcher`). The merged ramp is as long
/// as the shortest agent's: an agent that ended sooner (its own step broke, or it
/// failed) ends it, and is named; a shard missing from the files, or an agent that was
/// interrupted, leaves the capacity unjudged (`capacity_users` null, `partial` says why),
/// never a smaller ramp passed off as the run's. `agents` are (file, results) pairs.
pub fn merged(
    agents: &[(&str, &Results)],
    watcher: Option<usize>,
    missing: &[String],
) -> Result<(serde_json::Value, ProfileSummary), String> {
    let Some((_, first)) = agents.first() else {
        return Err("merge: no profile agents".into());
    };
    let config = &first.config;
    let rules = config["capacity_rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r.as_str())
        .map(|r| {
            Threshold::parse_as(
                r,
                &crate::stats::kind::profile::PROFILE.thresholds,
                "--capacity-rule",
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let pop = &config["population"];
    let secs = |k: &str| Duration::from_secs_f64(pop[k].as_f64().unwrap_or(0.0).max(0.0));
    let population = match pop["ramp_start"].as_u64() {
        Some(start) => Population::Ramp {
            start,
            step: pop["ramp_step"].as_u64().unwrap_or(0),
            period: secs("step_s"),
            max: pop["max_users"].as_u64().unwrap_or(0),
        },
        None => Population::Fixed {
            users: pop["users"].as_u64().unwrap_or(0),
            run_for: secs("duration_s"),
        },
    };
    let mut lists = Vec::new();
    for (file, r) in agents {
        let steps = r
            .extra
            .get("capacity")
            .and_then(|c| c["steps"].as_array())
            .ok_or_else(|| {
                format!("{file}: no extra.capacity.steps (not a profile agent's results)")
            })?;
        lists.push((*file, steps));
    }
    let n = lists.iter().map(|(_, s)| s.len()).min().unwrap_or(0);
    let ended_sooner: Vec<serde_json::Value> = lists
        .iter()
        .filter(|(_, s)| s.len() == n && lists.iter().any(|(_, o)| o.len() > n))
        .map(|(f, _)| serde_json::Value::from(*f))
        .collect();
    let mut steps = Vec::new();
    for k in 0..n {
        let mut rec = Recorder::new();
        let (mut users, mut seconds, mut planned_s) = (0u64, 0.0f64, 0.0f64);
        let (mut waits, mut cut_short) = (Waits::default(), false);
        // The agents' settles: the same instants on the shared clock, their actions added.
        let mut settle: Option<Settled> = None;
        for (file, list) in &lists {
            let s = &list[k];
            if let Some(v) = s.get("settle") {
                let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
                let was = settle.get_or_insert(Settled {
                    from_s: f("from_s"),
                    duration_s: f("duration_s"),
                    actions: 0,
                });
                was.actions += v["actions"].as_u64().unwrap_or(0);
            }
            users += s["users"].as_u64().unwrap_or(0);
            seconds = seconds.max(s["seconds"].as_f64().unwrap_or(0.0));
            planned_s = planned_s.max(s["planned_s"].as_f64().unwrap_or(0.0));
            cut_short |= s["cut_short"].as_bool().unwrap_or(false);
            waits.unstarted += s["summary"]["unstarted"].as_u64().unwrap_or(0);
            waits.stuck_users += s["summary"]["stuck_users"].as_u64().unwrap_or(0);
            let counters: Counters = serde_json::from_value(s["counters"].clone())
                .map_err(|e| format!("{file}: step {k}'s counters are unreadable ({e}): written by a mailbench older than profile merging; run the agents again"))?;
            rec.counters.add(&counters);
            let latency: BTreeMap<String, HistJson> = serde_json::from_value(s["latency"].clone())
                .map_err(|e| format!("{file}: step {k}'s histograms are unreadable ({e})"))?;
            for (name, h) in &latency {
                let m = STEPS
                    .find(name)
                    .ok_or_else(|| format!("{file}: step {k}: {name:?} is not a profile row"))?;
                rec.add_samples(m, &h.to_hist());
            }
        }
        let store = watcher
            .and_then(|w| lists.get(w))
            .and_then(|(_, l)| serde_json::from_value(l[k]["store"].clone()).ok());
        let plan = StepPlan {
            users,
            length: Duration::from_secs_f64(planned_s),
            settle: Duration::from_secs_f64(settle.map_or(0.0, |s| s.duration_s.max(0.0))),
        };
        steps.push(
            Step::judge(&plan, seconds, &rec, store, &rules, waits, cut_short).settled(settle),
        );
    }
    let mut v = verdict(&steps, &population);
    let interrupted: Vec<&str> = agents
        .iter()
        .filter(|(_, r)| r.interrupted)
        .map(|(f, _)| *f)
        .collect();
    let partial = if !missing.is_empty() {
        Some(format!(
            "shard(s) {} missing: the capacity of part of the run's users is not the run's",
            missing.join(", ")
        ))
    } else if !interrupted.is_empty() {
        Some(format!(
            "{} interrupted: its last step was not run to its end",
            interrupted.join(", ")
        ))
    } else {
        None
    };
    if partial.is_some() {
        v.users = None;
    }
    let mut json = v.to_json(&steps, &rules, &population);
    json["partial"] = partial.into();
    json["ended_by"] = ended_sooner.into();
    let sum = |k: &str| -> u64 {
        agents
            .iter()
            .map(|(_, r)| r.summary.number(k).unwrap_or(0.0) as u64)
            .sum()
    };
    let summary = ProfileSummary {
        users: sum("users"),
        capacity_users: v.users,
        unstarted: sum("unstarted"),
        stuck_users: sum("stuck_users"),
        sut_cpu: steps.last().and_then(|s| s.summary.sut_cpu),
        ..ProfileSummary::default()
    };
    Ok((json, summary))
}

/// Judges a merged profile run's capacity again (`merged`) and puts it in the merged
/// results: `extra.capacity` and the summary's users, capacity and waits. Other kinds
/// are left as they are.
pub fn judge_merged(inputs: &[Input], merged_run: &mut Results) -> Result<(), String> {
    if merged_run.command != crate::stats::kind::profile::PROFILE.name {
        return Ok(());
    }
    let agents: Vec<(&str, &Results)> = inputs
        .iter()
        .map(|i| (i.name.as_str(), &i.results))
        .collect();
    let watcher = inputs
        .iter()
        .position(|i| i.results.extra.contains_key("sut"));
    let missing: Vec<String> = merged_run.extra["merge"]["missing_shards"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(String::from))
        .collect();
    let (capacity, judged) = merged(&agents, watcher, &missing)?;
    if let Summary::Profile(s) = &mut merged_run.summary {
        s.users = judged.users;
        s.capacity_users = judged.capacity_users;
        s.unstarted = judged.unstarted;
        s.stuck_users = judged.stuck_users;
        s.sut_cpu = judged.sut_cpu;
    }
    merged_run.extra.insert("capacity".into(), capacity);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(users: u64, broken: bool) -> Step {
        Step {
            users,
            seconds: 1.0,
            planned_s: 1.0,
            settle: None,
            summary: ProfileSummary {
                actions: 10,
                ..ProfileSummary::default()
            },
            actions: BTreeMap::new(),
            counters: Counters::default(),
            latency: BTreeMap::new(),
            store: None,
            rules: Vec::new(),
            failed: 0,
            stuck_users: 0,
            cut_short: false,
            broken,
            provisional: false,
            verdict: String::new(),
        }
    }

    /// A step in which no action was due measured nothing: it is not capacity (a 1 s
    /// profile whose users had nothing to do said "2 users held").
    #[test]
    fn a_step_without_actions_holds_nothing() {
        let s = Step::judge(
            &one_second(2),
            1.0,
            &Recorder::new(),
            None,
            &[],
            Waits::default(),
            false,
        );
        assert!(!s.broken && !s.held(), "{s:?}");
        assert_eq!(s.verdict, "NO ACTION was due: not judged");
        let fixed = Population::Fixed {
            users: 2,
            run_for: Duration::from_secs(1),
        };
        assert_eq!(verdict(&[s], &fixed).users, None);
    }

    fn one_second(users: u64) -> StepPlan {
        StepPlan {
            users,
            length: Duration::from_secs(1),
            settle: Duration::ZERO,
        }
    }

    #[test]
    fn the_capacity_is_the_last_step_before_the_first_broken_one() {
        let ramp = Population::Ramp {
            start: 10,
            step: 10,
            period: Duration::from_secs(1),
            max: 100,
        };
        let steps = [step(10, false), step(20, false), step(30, true)];
        assert_eq!(
            verdict(&steps, &ramp),
            Verdict {
                users: Some(20),
                broke_at: Some(30),
                cut_short_at: None,
                unjudged: Vec::new(),
            }
        );
        let none = [step(10, true)];
        assert_eq!(verdict(&none, &ramp).users, None, "broken at the start");
        let all = [step(10, false), step(20, false)];
        assert_eq!(
            verdict(&all, &ramp).users,
            Some(20),
            "never broke: at least 20"
        );
        let fixed = Population::Fixed {
            users: 10,
            run_for: Duration::from_secs(1),
        };
        assert_eq!(verdict(&none, &fixed).users, None);
        assert_eq!(verdict(&[step(10, false)], &fixed).users, Some(10));
    }

    #[test]
    fn a_ramp_plans_its_steps_up_to_the_cap() {
        let ramp = Population::Ramp {
            start: 50,
            step: 25,
            period: Duration::from_secs(20),
            max: 120,
        };
        let users: Vec<u64> = StepPlan::all(&ramp, Duration::ZERO)
            .iter()
            .map(|s| s.users)
            .collect();
        assert_eq!(users, [50, 75, 100]);
    }

    /// Issue 43: a split run's merged step adds up its agents' settle actions (3 + 4)
    /// and, like a run's own step, keeps them out of its figures: 10 + 20 counted actions
    /// over the 3 s after a 1 s settle are 600/min.
    #[test]
    fn merged_agents_add_up_their_settles() {
        let agent = |actions: u64, kept: u64| {
            let mut rec = Recorder::new();
            for _ in 0..actions {
                rec.record(action(), Duration::from_millis(2));
            }
            rec.counters.sent = actions;
            rec.counters.accepted = actions;
            let plan = StepPlan {
                settle: Duration::from_secs(1),
                length: Duration::from_secs(4),
                ..one_second(2)
            };
            let settle = Settled {
                from_s: 0.0,
                duration_s: 1.0,
                actions: kept,
            };
            let step = Step::judge(&plan, 4.0, &rec, None, &[], Waits::default(), false)
                .settled(Some(settle));
            let mut r = Results::assemble(crate::stats::results::RunParts {
                command: "profile",
                run_id: 1,
                started_us: 0,
                duration_s: 4.0,
                config: serde_json::json!({"population": {"users": 2, "duration_s": 4.0},
                    "capacity_rules": []}),
                summary: Summary::Profile(ProfileSummary::default()),
                steps: STEPS,
                self_report: Default::default(),
                total: Recorder::new(),
                series: Vec::new(),
            });
            r.extra.insert(
                "capacity".into(),
                serde_json::json!({"steps": [serde_json::to_value(&step).expect("a step")]}),
            );
            r
        };
        let (a, b) = (agent(10, 3), agent(20, 4));
        let (json, _) = merged(&[("a.json", &a), ("b.json", &b)], None, &[]).expect("merged");
        let step = &json["steps"][0];
        assert_eq!(
            step["settle"],
            serde_json::json!({"from_s": 0.0, "duration_s": 1.0, "actions": 7}),
            "{step:#}"
        );
        assert_eq!(step["summary"]["actions"], 30, "{step:#}");
        assert_eq!(step["summary"]["actions_per_min"], 600.0, "{step:#}");
    }

    /// Issue 43: a step's rates are over the part after its settle: 30 actions due in
    /// the last 3 s of a 4 s step with a 1 s settle are 600/min, not 450.
    #[test]
    fn a_steps_rates_leave_out_its_settle() {
        let plan = StepPlan {
            settle: Duration::from_secs(1),
            ..one_second(5)
        };
        let mut rec = Recorder::new();
        for _ in 0..30 {
            rec.record(action(), Duration::from_millis(2));
        }
        rec.counters.sent = 30;
        rec.counters.accepted = 30;
        let kept = Settled {
            from_s: 8.0,
            duration_s: 1.0,
            actions: 7,
        };
        let s =
            Step::judge(&plan, 4.0, &rec, None, &[], Waits::default(), false).settled(Some(kept));
        assert_eq!(s.summary.actions, 30, "the settle's 7 are not the step's");
        assert_eq!(s.summary.actions_per_min, 600.0);
        assert_eq!(s.seconds, 4.0, "the step's length is its whole length");
        let json = serde_json::to_value(&s).expect("a step serializes");
        assert_eq!(
            json["settle"],
            serde_json::json!({"from_s": 8.0, "duration_s": 1.0, "actions": 7})
        );
        let none = Step::judge(
            &one_second(5),
            1.0,
            &rec,
            None,
            &[],
            Waits::default(),
            false,
        );
        let json = serde_json::to_value(&none).expect("a step serializes");
        assert!(json.get("settle").is_none(), "no settle: absent");
    }

    #[test]
    fn a_step_breaks_when_a_rule_holds() {
        use crate::stats::kind::profile::PROFILE;
        let thresholds = PROFILE.thresholds;
        let mut rec = Recorder::new();
        for ms in [400u64, 1600, 1900] {
            rec.record(action(), Duration::from_millis(ms));
        }
        rec.counters.sent = 3;
        rec.counters.accepted = 3;
        let rule = |e: &str| Threshold::parse(e, &thresholds).expect(e);
        let s = Step::judge(
            &one_second(10),
            1.0,
            &rec,
            None,
            &[rule("mean(action)>1s")],
            Waits::default(),
            false,
        );
        assert!(
            s.broken,
            "mean 1.3 s breaks 'mean(action)>1s': {:?}",
            s.rules
        );
        let s = Step::judge(
            &one_second(10),
            1.0,
            &rec,
            None,
            &[rule("mean(action)>2s")],
            Waits::default(),
            false,
        );
        assert!(!s.broken, "{:?}", s.rules);
        let busy = SutPoint {
            cpu_user_pct: 20.0,
            cpu_sys_pct: 10.0,
            ..SutPoint::default()
        };
        let s = Step::judge(
            &one_second(10),
            1.0,
            &rec,
            Some(busy),
            &[rule("sut_cpu>25%")],
            Waits::default(),
            false,
        );
        assert!(
            s.broken,
            "30 % of a core breaks 'sut_cpu>25%': {:?}",
            s.rules
        );
        assert_eq!(s.actions["action"].count, 3);
    }

    /// Issue 25, item 1: a step whose actions fail has not held, whatever the latency
    /// rule says; a step cut short is not judged; neither counts as capacity.
    #[test]
    fn failed_actions_and_a_cut_short_step_do_not_hold() {
        use crate::stats::kind::profile::PROFILE;
        let thresholds = PROFILE.thresholds;
        let rule = Threshold::parse("mean(action)>1s", &thresholds).expect("rule");
        let mut rec = Recorder::new();
        for _ in 0..4 {
            rec.record(action(), Duration::from_millis(3));
        }
        rec.counters.sent = 4;
        rec.counters.accepted = 1;
        rec.counters.errors = 2;
        rec.counters.rejected = 1;
        let s = Step::judge(
            &one_second(20),
            1.0,
            &rec,
            None,
            std::slice::from_ref(&rule),
            Waits::default(),
            false,
        );
        assert!(!s.rules[0].ok, "3 ms is within the latency rule");
        assert!(s.broken && !s.held(), "3 of 4 actions failed: {s:?}");
        assert_eq!(s.failed, 3);
        assert_eq!(s.verdict, "BROKE 3 of 4 actions failed");
        let fixed = Population::Fixed {
            users: 20,
            run_for: Duration::from_secs(1),
        };
        let v = verdict(std::slice::from_ref(&s), &fixed);
        assert_eq!((v.users, v.broke_at), (None, Some(20)));

        rec.counters.accepted = 4;
        rec.counters.errors = 0;
        rec.counters.rejected = 0;
        let plan = StepPlan {
            users: 30,
            length: Duration::from_secs(10),
            settle: Duration::ZERO,
        };
        let cut = Step::judge(&plan, 4.2, &rec, None, &[rule], Waits::default(), true);
        assert!(!cut.broken && !cut.held(), "{cut:?}");
        assert_eq!(cut.verdict, "CUT SHORT after 4.2 s of 10 s: not judged");
        let ramp = Population::Ramp {
            start: 10,
            step: 10,
            period: Duration::from_secs(10),
            max: 30,
        };
        let v = verdict(&[step(10, false), step(20, false), cut.clone()], &ramp);
        assert_eq!(
            v,
            Verdict {
                users: Some(20),
                broke_at: None,
                cut_short_at: Some(30),
                unjudged: Vec::new(),
            }
        );
        let fixed = Population::Fixed {
            users: 30,
            run_for: Duration::from_secs(10),
        };
        assert_eq!(verdict(&[cut], &fixed).users, None, "a fixed run cut short");
    }
}

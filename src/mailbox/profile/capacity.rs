//! The capacity search of a profile run: the steps a population goes through, each step's
//! figures (users, actions per minute, response times per action, errors, late actions,
//! the store's CPU, disk and memory) judged against the capacity rules, and the verdict:
//! capacity = the largest user count whose step broke no rule, below the first that did.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::{Population, STEPS};
use crate::report::threshold::Threshold;
use crate::stats::hist::ms;
use crate::stats::results::{Results, ThresholdResult};
use crate::stats::summary::{ProfileSummary, Summary};
use crate::stats::{Metric, Recorder, SutPoint};

/// One step as planned: how many users, for how long.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepPlan {
    /// Virtual users during the step.
    pub users: u64,
    /// Its length.
    pub length: Duration,
}

impl StepPlan {
    /// Every step of a population, in order.
    pub fn all(p: &Population) -> Vec<StepPlan> {
        match *p {
            Population::Fixed { users, run_for } => vec![StepPlan {
                users,
                length: run_for,
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
                })
                .collect(),
        }
    }
}

/// One action type's figures in a step.
#[derive(Debug, Clone, Serialize)]
pub struct ActionRow {
    /// Actions completed in the step.
    pub count: u64,
    /// Mean response time from the intended start, ms.
    pub mean_ms: f64,
    /// 95th percentile, ms.
    pub p95_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
}

/// What one step measured and how it was judged.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// Virtual users.
    pub users: u64,
    /// Its real length, s.
    pub seconds: f64,
    /// The step's summary (what rules read).
    pub summary: ProfileSummary,
    /// Per action type (and `action`: all).
    pub actions: BTreeMap<String, ActionRow>,
    /// The store over the step.
    pub store: SutPoint,
    /// Each rule's value in this step; `ok` true means the rule's condition held (it broke).
    pub rules: Vec<ThresholdResult>,
    /// A rule broke in this step.
    pub broken: bool,
}

impl Step {
    /// Judges a step from what it recorded (with the `overdue` actions still running at
    /// its end in the `action` row, at the time they had taken).
    pub fn judge(
        users: u64,
        seconds: f64,
        rec: &Recorder,
        store: SutPoint,
        rules: &[Threshold],
        overdue: u64,
    ) -> Step {
        let cpu = store.cpu_user_pct + store.cpu_sys_pct;
        let mut summary =
            ProfileSummary::derive(rec, super::metric(None), users, None, seconds, cpu);
        summary.overdue = overdue;
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
        Step {
            users,
            seconds,
            broken: rules.iter().any(|r| r.ok),
            summary,
            actions,
            store,
            rules,
        }
    }

    /// The step's progress line.
    pub fn line(&self) -> String {
        let s = &self.summary;
        let broke: Vec<String> = self
            .rules
            .iter()
            .filter(|r| r.ok)
            .map(|r| format!("{} (at {:.1})", r.expr, r.value))
            .collect();
        format!(
            "mailbench profile: {} users: {:.0} actions/min, mean {:.1} ms, p95 {:.1} ms, errors {}, late {}, still running {}, store CPU {:.0} %: {}",
            self.users,
            s.actions_per_min,
            s.mean_ms,
            s.p95_ms,
            s.errors,
            s.late,
            s.overdue,
            s.sut_cpu,
            if self.broken {
                format!("BROKE {}", broke.join(", "))
            } else {
                "ok".into()
            }
        )
    }
}

/// The outcome of a search.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The largest user count that met every rule (a ramp that ran at least one step).
    pub users: Option<u64>,
    /// The users of the first step that broke a rule.
    pub broke_at: Option<u64>,
}

/// The capacity: the last step before the first broken one that met every rule. A fixed
/// population has no search: its users are the capacity only if its one step held.
pub fn verdict(steps: &[Step], p: &Population) -> Verdict {
    let broke_at = steps.iter().find(|s| s.broken).map(|s| s.users);
    let users = steps
        .iter()
        .take_while(|s| !s.broken)
        .map(|s| s.users)
        .max();
    match p {
        Population::Fixed { .. } => Verdict {
            users: users.filter(|_| broke_at.is_none()),
            broke_at,
        },
        Population::Ramp { .. } => Verdict { users, broke_at },
    }
}

impl Verdict {
    /// The results file's `extra.capacity`.
    pub fn to_json(&self, steps: &[Step], rules: &[Threshold]) -> serde_json::Value {
        serde_json::json!({
            "rules": rules.iter().map(|r| r.expr()).collect::<Vec<_>>(),
            "capacity_users": self.users,
            "broke_at_users": self.broke_at,
            "steps": steps,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(users: u64, broken: bool) -> Step {
        Step {
            users,
            seconds: 1.0,
            summary: ProfileSummary::default(),
            actions: BTreeMap::new(),
            store: SutPoint::default(),
            rules: Vec::new(),
            broken,
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
                broke_at: Some(30)
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
        let users: Vec<u64> = StepPlan::all(&ramp).iter().map(|s| s.users).collect();
        assert_eq!(users, [50, 75, 100]);
    }

    #[test]
    fn a_step_breaks_when_a_rule_holds() {
        use crate::mailbox::profile::THRESHOLDS;
        let mut rec = Recorder::new();
        for ms in [400u64, 1600, 1900] {
            rec.record(super::super::metric(None), Duration::from_millis(ms));
        }
        rec.counters.sent = 3;
        rec.counters.accepted = 3;
        let rule = |e: &str| Threshold::parse(e, &THRESHOLDS).expect(e);
        let s = Step::judge(
            10,
            1.0,
            &rec,
            SutPoint::default(),
            &[rule("mean(action)>1s")],
            0,
        );
        assert!(
            s.broken,
            "mean 1.3 s breaks 'mean(action)>1s': {:?}",
            s.rules
        );
        let s = Step::judge(
            10,
            1.0,
            &rec,
            SutPoint::default(),
            &[rule("mean(action)>2s")],
            0,
        );
        assert!(!s.broken, "{:?}", s.rules);
        let busy = SutPoint {
            cpu_user_pct: 20.0,
            cpu_sys_pct: 10.0,
            ..SutPoint::default()
        };
        let s = Step::judge(10, 1.0, &rec, busy, &[rule("sut_cpu>25%")], 0);
        assert!(
            s.broken,
            "30 % of a core breaks 'sut_cpu>25%': {:?}",
            s.rules
        );
        assert_eq!(s.actions["action"].count, 3);
    }
}

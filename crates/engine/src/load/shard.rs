//! One agent's part of a run split over many (`--shard I/N`): which sequence numbers,
//! connections and source addresses are its own, so that the union of N agents is
//! exactly the run one agent would have made. The index comes from the flag or from the
//! launcher that started the agent (a Kubernetes Indexed Job, a Slurm array, Nomad, GNU
//! parallel); nothing is coordinated between agents.

use serde::Serialize;

/// The launchers' index variables `--shard auto/N` reads, in this order, and whether each
/// counts from 1.
pub const INDEX_VARIABLES: &[(&str, bool)] = &[
    // Kubernetes Indexed Job: 0 … completions−1.
    ("JOB_COMPLETION_INDEX", false),
    // Slurm job array (sbatch --array=0-(N−1)).
    ("SLURM_ARRAY_TASK_ID", false),
    // Slurm tasks of one step (srun -n N).
    ("SLURM_PROCID", false),
    // Nomad: the allocation's index within its group.
    ("NOMAD_ALLOC_INDEX", false),
    // GNU parallel: the job's sequence number, from 1.
    ("PARALLEL_SEQ", true),
];

/// Agent `index` of `count` (0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Shard {
    /// This agent, from 0.
    pub index: u64,
    /// How many agents share the run.
    pub count: u64,
}

impl Default for Shard {
    fn default() -> Self {
        Shard::WHOLE
    }
}

impl Shard {
    /// The whole run in one agent.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Parses `I/N` or `auto/N`; `env` looks up the launcher's variables.
    pub fn parse(spec: &str, env: impl Fn(&str) -> Option<String>) -> Result<Shard, String> {
        let bad = |why: &str| format!("--shard {spec}: {why}");
        let Some((i, n)) = spec.split_once('/') else {
            return Err(bad(
                "write I/N (agent I of N, from 0) or auto/N (I from the launcher)",
            ));
        };
        let count: u64 = n
            .trim()
            .parse()
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| bad("N must be a whole number of agents, 1 or more"))?;
        let index = if i.trim() == "auto" {
            let (name, value, one_based) = INDEX_VARIABLES
                .iter()
                .find_map(|(name, one)| env(name).map(|v| (*name, v, *one)))
                .ok_or_else(|| {
                    bad(&format!(
                        "no launcher index variable is set ({}); give the index yourself, e.g. --shard 0/{count}",
                        INDEX_VARIABLES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
                    ))
                })?;
            let v: u64 = value
                .trim()
                .parse()
                .map_err(|_| bad(&format!("{name}={value:?} is not a whole number")))?;
            if one_based {
                v.checked_sub(1)
                    .ok_or_else(|| bad(&format!("{name}=0, but it counts from 1")))?
            } else {
                v
            }
        } else {
            i.trim()
                .parse()
                .map_err(|_| bad("I must be a whole number from 0, or auto"))?
        };
        if index >= count {
            return Err(bad(&format!(
                "agent {index} does not exist among {count} (they are 0 to {})",
                count - 1
            )));
        }
        Ok(Shard { index, count })
    }

    /// True for a run that is not split.
    pub fn is_whole(&self) -> bool {
        self.count == 1
    }

    /// True when sequence number `seq` (or connection slot, or list position) is this
    /// agent's: agents take every N-th, from their index (k6's execution segments do the
    /// same for iterations).
    pub fn owns(&self, seq: u64) -> bool {
        seq % self.count == self.index
    }

    /// How many of `0..n` are this agent's.
    pub fn share(&self, n: u64) -> u64 {
        n / self.count + u64::from(self.index < n % self.count)
    }

    /// This agent's items of a list it splits with the others, when there are enough to
    /// go round; all of them otherwise (every agent then uses the whole list).
    pub fn split<T: Clone>(&self, items: &[T]) -> Vec<T> {
        if (items.len() as u64) < self.count {
            return items.to_vec();
        }
        items
            .iter()
            .enumerate()
            .filter(|(i, _)| self.owns(*i as u64))
            .map(|(_, t)| t.clone())
            .collect()
    }

    /// `I/N`, as results files and `/metrics` label it.
    pub fn label(&self) -> String {
        format!("{}/{}", self.index, self.count)
    }
}

/// What a results file records of an agent's part (`extra.shard`): which agent, the
/// shared start, and how far from it this agent began (its offset against the shared
/// start; positive when late). `None` for an unsplit run without a shared start.
pub fn record(
    shard: Shard,
    start_at: Option<std::time::SystemTime>,
    start_offset_s: Option<f64>,
) -> Option<serde_json::Value> {
    if shard.is_whole() && start_at.is_none() {
        return None;
    }
    Some(serde_json::json!({
        "index": shard.index,
        "count": shard.count,
        "label": shard.label(),
        "start_at": start_at.map(|t| humantime::format_rfc3339_millis(t).to_string()),
        "start_offset_s": start_offset_s,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn explicit_and_launcher_indexes_parse() {
        assert_eq!(Shard::parse("2/4", none), Ok(Shard { index: 2, count: 4 }));
        for (var, value, index) in [
            ("JOB_COMPLETION_INDEX", "3", 3),
            ("SLURM_ARRAY_TASK_ID", "1", 1),
            ("SLURM_PROCID", "0", 0),
            ("NOMAD_ALLOC_INDEX", "2", 2),
            ("PARALLEL_SEQ", "4", 3),
        ] {
            let env = |n: &str| (n == var).then(|| value.to_string());
            assert_eq!(
                Shard::parse("auto/4", env),
                Ok(Shard { index, count: 4 }),
                "{var}={value}"
            );
        }
    }

    #[test]
    fn bad_shards_say_what_to_write() {
        for (spec, says) in [
            ("3", "write I/N"),
            ("4/4", "0 to 3"),
            ("0/0", "1 or more"),
            ("x/2", "from 0, or auto"),
            ("auto/2", "JOB_COMPLETION_INDEX"),
        ] {
            let err = Shard::parse(spec, none).expect_err(spec);
            assert!(
                err.starts_with(&format!("--shard {spec}:")) && err.contains(says),
                "{spec}: expected a line containing {says:?}, got {err:?}"
            );
        }
        let zero = |n: &str| (n == "PARALLEL_SEQ").then(|| "0".to_string());
        assert!(
            Shard::parse("auto/2", zero).is_err(),
            "PARALLEL_SEQ counts from 1"
        );
        let text = |n: &str| (n == "JOB_COMPLETION_INDEX").then(|| "one".to_string());
        let err = Shard::parse("auto/2", text).expect_err("not a number");
        assert!(err.contains("JOB_COMPLETION_INDEX=\"one\""), "{err}");
    }

    #[test]
    fn shares_add_up_to_the_whole_without_overlap() {
        for count in 1..=5u64 {
            for n in [0u64, 1, 2, 7, 100, 1001] {
                let shards = (0..count).map(|index| Shard { index, count });
                let total: u64 = shards.clone().map(|s| s.share(n)).sum();
                assert_eq!(total, n, "{n} over {count}");
                for seq in 0..n {
                    assert_eq!(shards.clone().filter(|s| s.owns(seq)).count(), 1);
                }
            }
        }
        let ips = ["a", "b", "c", "d", "e"];
        assert_eq!(Shard { index: 1, count: 2 }.split(&ips), vec!["b", "d"]);
        assert_eq!(Shard { index: 1, count: 8 }.split(&ips), ips.to_vec());
    }
}

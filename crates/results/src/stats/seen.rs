//! What a sink saw of one run (the results' `extra.runs`, per run id): counts, the
//! missing sequence numbers, and every sequence number seen as ranges, so that the
//! records of several sinks can be united (`merge`).

/// What was seen for one run.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct RunReport {
    /// Distinct sequence numbers that arrived.
    pub distinct: u64,
    /// Recipient arrivals (a message to three recipients counts three).
    pub arrivals: u64,
    /// The same sequence number to the same recipient again.
    pub duplicates: u64,
    /// Highest sequence number seen.
    pub max_seq: u64,
    /// Sequence numbers below `max_seq` never seen (the first 1,000).
    pub missing: Vec<u64>,
    /// How many sequence numbers below `max_seq` were never seen.
    pub missing_count: u64,
    /// Every sequence number seen, as inclusive `[first, last]` ranges in order: what
    /// `mailbench merge` unites across sinks (a run without loss is one range).
    pub seen: Vec<[u64; 2]>,
}

/// Sequence numbers as inclusive ranges, in order.
pub fn ranges(seqs: impl IntoIterator<Item = u64>) -> Vec<[u64; 2]> {
    let mut sorted: Vec<u64> = seqs.into_iter().collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out: Vec<[u64; 2]> = Vec::new();
    for s in sorted {
        match out.last_mut() {
            Some(last) if last[1] + 1 == s => last[1] = s,
            _ => out.push([s, s]),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn sequence_numbers_fold_into_ranges() {
        assert_eq!(super::ranges([5, 3, 4, 9, 4]), vec![[3, 5], [9, 9]]);
        assert!(super::ranges([]).is_empty());
    }
}

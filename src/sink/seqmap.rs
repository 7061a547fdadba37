//! Sequence numbers seen, run-length coded: each maximal range of consecutive sequence
//! numbers with the same value (how many distinct recipients arrived) is one entry, so a
//! run without loss whose messages have the same number of recipients is one entry
//! however long it lasts. Memory grows with the gaps and changes of value, not with the
//! messages (issue 25 item 14: a per-message record grew the sink ~40 bytes a message).
//! Used by `correlate`; no IO, no locking.

use std::collections::BTreeMap;

/// A value per sequence number, as ranges of equal values.
#[derive(Debug, Default)]
pub struct SeqMap {
    /// First sequence number of each range → (last, value).
    ranges: BTreeMap<u64, (u64, u32)>,
    /// Sequence numbers held (the sum of the ranges' lengths).
    len: u64,
}

impl SeqMap {
    /// The value of `seq`, if it is held.
    pub fn get(&self, seq: u64) -> Option<u32> {
        let (_, (last, v)) = self.ranges.range(..=seq).next_back()?;
        (*last >= seq).then_some(*v)
    }

    /// Sets `seq` to `value`, merging with equal neighbours.
    pub fn set(&mut self, seq: u64, value: u32) {
        match self.get(seq) {
            Some(v) if v == value => return,
            Some(_) => self.cut(seq),
            None => self.len += 1,
        }
        let (mut first, mut last) = (seq, seq);
        if let Some(prev) = seq.checked_sub(1)
            && let Some((&start, &(end, v))) = self.ranges.range(..=prev).next_back()
            && end == prev
            && v == value
        {
            self.ranges.remove(&start);
            first = start;
        }
        if let Some(next) = seq.checked_add(1)
            && let Some(&(end, v)) = self.ranges.get(&next)
            && v == value
        {
            self.ranges.remove(&next);
            last = end;
        }
        self.ranges.insert(first, (last, value));
    }

    /// Takes `seq` out of the range holding it (which must exist), leaving its neighbours.
    fn cut(&mut self, seq: u64) {
        let Some((&start, &(end, v))) = self.ranges.range(..=seq).next_back() else {
            return;
        };
        self.ranges.remove(&start);
        if start < seq {
            self.ranges.insert(start, (seq - 1, v));
        }
        if end > seq {
            self.ranges.insert(seq + 1, (end, v));
        }
    }

    /// How many sequence numbers are held.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many entries the map keeps (what its memory grows with).
    pub fn entries(&self) -> usize {
        self.ranges.len()
    }

    /// Highest sequence number held.
    pub fn max(&self) -> Option<u64> {
        self.ranges.last_key_value().map(|(_, (last, _))| *last)
    }

    /// Every range of equal values in order: (first, last, value).
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64, u32)> + '_ {
        self.ranges.iter().map(|(a, (b, v))| (*a, *b, *v))
    }

    /// The sequence numbers held, as inclusive ranges regardless of value.
    pub fn seen(&self) -> Vec<[u64; 2]> {
        let mut out: Vec<[u64; 2]> = Vec::new();
        for (a, b, _) in self.iter() {
            match out.last_mut() {
                Some(last) if last[1] + 1 == a => last[1] = b,
                _ => out.push([a, b]),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_neighbours_merge_and_a_changed_value_splits_its_range() {
        let mut m = SeqMap::default();
        for s in [3, 1, 2, 0, 5] {
            m.set(s, 1);
        }
        assert_eq!(m.iter().collect::<Vec<_>>(), [(0, 3, 1), (5, 5, 1)]);
        m.set(2, 2);
        assert_eq!(
            m.iter().collect::<Vec<_>>(),
            [(0, 1, 1), (2, 2, 2), (3, 3, 1), (5, 5, 1)]
        );
        m.set(4, 1);
        m.set(2, 1);
        assert_eq!(m.iter().collect::<Vec<_>>(), [(0, 5, 1)]);
        assert_eq!((m.len(), m.entries(), m.max()), (6, 1, Some(5)));
        assert_eq!((m.get(4), m.get(6)), (Some(1), None));
        m.set(9, 3);
        assert_eq!(m.seen(), vec![[0, 5], [9, 9]]);
        assert_eq!(m.set(u64::MAX, 1), ());
        assert_eq!(m.get(u64::MAX), Some(1));
    }

    #[test]
    fn a_million_in_order_messages_are_one_entry() {
        let mut m = SeqMap::default();
        for s in 0..1_000_000 {
            m.set(s, 1);
        }
        assert_eq!((m.len(), m.entries()), (1_000_000, 1));
    }
}

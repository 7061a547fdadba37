//! Sequence numbers seen, each with a value (how many distinct recipients arrived), kept
//! in blocks of [`BLOCK`] numbers: a block whose numbers have all arrived with one value
//! joins its neighbours of that value in a single entry, so a run that arrives whole is one
//! entry however long it lasts; a block still filling (the window where messages overtake
//! each other, a gap not yet filled, or a sink that sees only part of a run, as several
//! sinks behind one MTA do) is a bitmap of its numbers plus the values that differ from
//! its most common one. Memory grows with the blocks that hold gaps — at most about a bit
//! a number, never an entry a message (issue 40: one range per gap grew the sink
//! 11 bytes a message when every other number was another sink's or another agent's).
//! Used by `correlate`; no IO, no locking.

use std::collections::BTreeMap;

/// Sequence numbers per block.
pub const BLOCK: u64 = 1024;
/// 64-bit words of a block's bitmap.
const WORDS: usize = (BLOCK / 64) as usize;
/// Values that differ from a block's common one, at which the common one is first
/// reconsidered.
const FIRST_REBASE: usize = 32;

/// A block still filling: which of its numbers arrived, and their values.
#[derive(Debug, Clone)]
struct Part {
    bits: [u64; WORDS],
    /// Numbers held (bits set).
    held: u32,
    /// The value of every held number not in `odd`.
    common: u32,
    /// (offset, value) of the held numbers whose value is not `common`, by offset.
    odd: Vec<(u16, u32)>,
    /// `odd`'s length at which `common` is reconsidered (doubles each time, so the
    /// rebuilding costs a constant per number on average).
    rebase_at: u16,
}

impl Part {
    fn new() -> Part {
        Part {
            bits: [0; WORDS],
            held: 0,
            common: 0,
            odd: Vec::new(),
            rebase_at: FIRST_REBASE as u16,
        }
    }

    /// Every number held with `value`.
    fn full(value: u32) -> Part {
        Part {
            bits: [u64::MAX; WORDS],
            held: BLOCK as u32,
            common: value,
            ..Part::new()
        }
    }

    fn has(&self, off: usize) -> bool {
        self.bits[off / 64] & (1 << (off % 64)) != 0
    }

    fn get(&self, off: usize) -> Option<u32> {
        if !self.has(off) {
            return None;
        }
        Some(
            match self.odd.binary_search_by_key(&(off as u16), |e| e.0) {
                Ok(i) => self.odd[i].1,
                Err(_) => self.common,
            },
        )
    }

    /// Sets `off` to `value`; true when `off` was not held before.
    fn set(&mut self, off: usize, value: u32) -> bool {
        let new = !self.has(off);
        if new {
            self.bits[off / 64] |= 1 << (off % 64);
            self.held += 1;
            if self.held == 1 {
                self.common = value;
                return true;
            }
        }
        match self.odd.binary_search_by_key(&(off as u16), |e| e.0) {
            Ok(i) if value == self.common => {
                self.odd.remove(i);
            }
            Ok(i) => self.odd[i].1 = value,
            Err(_) if value == self.common => {}
            Err(i) => self.odd.insert(i, (off as u16, value)),
        }
        if self.odd.len() >= usize::from(self.rebase_at) {
            self.rebase();
        }
        new
    }

    /// Makes the most frequent value the common one, so that `odd` holds the fewest.
    fn rebase(&mut self) {
        let mut counts: Vec<(u32, u32)> = Vec::new();
        for &(_, v) in &self.odd {
            match counts.iter_mut().find(|c| c.0 == v) {
                Some(c) => c.1 += 1,
                None => counts.push((v, 1)),
            }
        }
        let common_count = self.held - self.odd.len() as u32;
        if let Some(&(best, n)) = counts.iter().max_by_key(|c| c.1)
            && n > common_count
        {
            let old = self.common;
            let mut odd = Vec::with_capacity(common_count as usize + self.odd.len() - n as usize);
            let mut taken = self.odd.iter().peekable();
            for off in 0..BLOCK as usize {
                if !self.has(off) {
                    continue;
                }
                let v = match taken.peek() {
                    Some(&&(o, v)) if usize::from(o) == off => {
                        taken.next();
                        v
                    }
                    _ => old,
                };
                if v != best {
                    odd.push((off as u16, v));
                }
            }
            self.common = best;
            self.odd = odd;
        }
        self.rebase_at = (self.odd.len() * 2).clamp(FIRST_REBASE, BLOCK as usize + 1) as u16;
    }

    /// The value of every number, when all are held with one.
    fn uniform(&self) -> Option<u32> {
        if self.held != BLOCK as u32 {
            return None;
        }
        match self.odd.first() {
            None => Some(self.common),
            Some(&(_, v)) if self.odd.len() == BLOCK as usize => {
                self.odd.iter().all(|e| e.1 == v).then_some(v)
            }
            Some(_) => None,
        }
    }

    /// Heap bytes it takes (with its box).
    fn bytes(&self) -> usize {
        std::mem::size_of::<Part>() + self.odd.capacity() * std::mem::size_of::<(u16, u32)>()
    }
}

/// One entry of the map, keyed by its first block.
#[derive(Debug, Clone)]
enum Entry {
    /// Blocks from the key to `last` hold every number, all with `value`.
    Full { last: u64, value: u32 },
    /// The key's block, still filling.
    Part(Box<Part>),
}

/// A value per sequence number, in blocks (see the module's doc).
#[derive(Debug, Default)]
pub struct SeqMap {
    entries: BTreeMap<u64, Entry>,
    /// Sequence numbers held.
    len: u64,
    /// Blocks still filling.
    parts: usize,
    /// Highest sequence number held.
    max: Option<u64>,
}

impl SeqMap {
    /// The entry holding block `b`: its key and itself.
    fn entry(&self, b: u64) -> Option<(u64, &Entry)> {
        let (&k, e) = self.entries.range(..=b).next_back()?;
        match e {
            Entry::Full { last, .. } if *last >= b => Some((k, e)),
            Entry::Part(_) if k == b => Some((k, e)),
            _ => None,
        }
    }

    /// The value of `seq`, if it is held.
    pub fn get(&self, seq: u64) -> Option<u32> {
        let (b, off) = (seq / BLOCK, (seq % BLOCK) as usize);
        match self.entry(b)?.1 {
            Entry::Full { value, .. } => Some(*value),
            Entry::Part(p) => p.get(off),
        }
    }

    /// True when `seq`'s block is kept already (setting `seq` then adds no block).
    pub fn holds_block_of(&self, seq: u64) -> bool {
        self.entry(seq / BLOCK).is_some()
    }

    /// Sets `seq` to `value`.
    pub fn set(&mut self, seq: u64, value: u32) {
        let (b, off) = (seq / BLOCK, (seq % BLOCK) as usize);
        if let Some(Entry::Part(p)) = self.entries.get_mut(&b) {
            // The fast path: the block filling now.
            let (new, whole) = (p.set(off, value), p.uniform());
            if new {
                self.held_one(seq);
            }
            if let Some(v) = whole {
                self.entries.remove(&b);
                self.parts -= 1;
                self.put_full(b, b, v);
            }
            return;
        }
        match self.entry(b) {
            Some((k, &Entry::Full { last, value: v })) => {
                if v == value {
                    return;
                }
                // Another value inside a whole stretch: its block fills anew.
                self.entries.remove(&k);
                if k < b {
                    self.entries.insert(
                        k,
                        Entry::Full {
                            last: b - 1,
                            value: v,
                        },
                    );
                }
                if b < last {
                    self.entries.insert(b + 1, Entry::Full { last, value: v });
                }
                let mut p = Part::full(v);
                p.set(off, value);
                self.entries.insert(b, Entry::Part(Box::new(p)));
                self.parts += 1;
            }
            _ => {
                let mut p = Part::new();
                p.set(off, value);
                self.entries.insert(b, Entry::Part(Box::new(p)));
                self.parts += 1;
                self.held_one(seq);
            }
        }
    }

    fn held_one(&mut self, seq: u64) {
        self.len += 1;
        self.max = Some(self.max.map_or(seq, |m| m.max(seq)));
    }

    /// Makes blocks `first..=last` one whole stretch of `value`, joined with neighbours of
    /// the same value.
    fn put_full(&mut self, mut first: u64, mut last: u64, value: u32) {
        if let Some(prev) = first.checked_sub(1)
            && let Some((k, &Entry::Full { value: v, .. })) = self.entry(prev)
            && v == value
        {
            self.entries.remove(&k);
            first = k;
        }
        if let Some(next) = last.checked_add(1)
            && let Some(&Entry::Full { last: l, value: v }) = self.entries.get(&next)
            && v == value
        {
            self.entries.remove(&next);
            last = l;
        }
        self.entries.insert(first, Entry::Full { last, value });
    }

    /// How many sequence numbers are held.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Blocks still filling: what the memory grows with (a bitmap of [`BLOCK`] bits each,
    /// plus the values that differ from the block's most common one).
    pub fn parts(&self) -> usize {
        self.parts
    }

    /// Heap bytes the map takes, near enough (its entries and their blocks; the tree's
    /// nodes are counted at their entries' size).
    pub fn bytes(&self) -> usize {
        let node = std::mem::size_of::<u64>() + std::mem::size_of::<Entry>();
        self.entries
            .values()
            .map(|e| match e {
                Entry::Full { .. } => node,
                Entry::Part(p) => node + p.bytes(),
            })
            .sum()
    }

    /// Highest sequence number held.
    pub fn max(&self) -> Option<u64> {
        self.max
    }

    /// Every maximal range of held numbers with equal values, in order:
    /// (first, last, value).
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64, u32)> + '_ {
        let pieces =
            self.entries
                .iter()
                .flat_map(|(&k, e)| -> Box<dyn Iterator<Item = (u64, u64, u32)>> {
                    match e {
                        Entry::Full { last, value } => Box::new(std::iter::once((
                            k * BLOCK,
                            last * BLOCK + (BLOCK - 1),
                            *value,
                        ))),
                        Entry::Part(p) => Box::new(part_ranges(k * BLOCK, p)),
                    }
                });
        Coalesce {
            inner: pieces,
            pending: None,
        }
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

/// The ranges of equal values of one filling block whose first number is `base`.
fn part_ranges(base: u64, p: &Part) -> impl Iterator<Item = (u64, u64, u32)> + '_ {
    (0..BLOCK as usize)
        .filter_map(move |off| p.get(off).map(|v| (base + off as u64, v)))
        .map(|(s, v)| (s, s, v))
}

/// Joins adjacent ranges of equal values.
struct Coalesce<I> {
    inner: I,
    pending: Option<(u64, u64, u32)>,
}

impl<I: Iterator<Item = (u64, u64, u32)>> Iterator for Coalesce<I> {
    type Item = (u64, u64, u32);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match (self.inner.next(), self.pending) {
                (None, p) => {
                    self.pending = None;
                    return p;
                }
                (Some(r), None) => self.pending = Some(r),
                (Some(r), Some(p)) if p.1 + 1 == r.0 && p.2 == r.2 => {
                    self.pending = Some((p.0, r.1, p.2));
                }
                (Some(r), Some(p)) => {
                    self.pending = Some(r);
                    return Some(p);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every (seq, value) held, from `iter`.
    fn expand(m: &SeqMap) -> Vec<(u64, u32)> {
        m.iter()
            .flat_map(|(a, b, v)| (a..=b).map(move |s| (s, v)))
            .collect()
    }

    #[test]
    fn equal_neighbours_merge_and_a_changed_value_splits_its_range() {
        let mut m = SeqMap::default();
        for s in [3, 1, 2, 0, 5] {
            m.set(s, 1);
        }
        assert_eq!(m.iter().collect::<Vec<_>>(), [(0, 3, 1), (5, 5, 1)]);
        assert!(m.holds_block_of(BLOCK - 1) && !m.holds_block_of(BLOCK));
        m.set(2, 2);
        assert_eq!(
            m.iter().collect::<Vec<_>>(),
            [(0, 1, 1), (2, 2, 2), (3, 3, 1), (5, 5, 1)]
        );
        m.set(4, 1);
        m.set(2, 1);
        assert_eq!(m.iter().collect::<Vec<_>>(), [(0, 5, 1)]);
        assert_eq!((m.len(), m.max()), (6, Some(5)));
        assert_eq!((m.get(4), m.get(6)), (Some(1), None));
        m.set(9, 3);
        assert_eq!(m.seen(), vec![[0, 5], [9, 9]]);
        m.set(u64::MAX, 1);
        assert_eq!(m.get(u64::MAX), Some(1));
        assert_eq!(m.max(), Some(u64::MAX));
    }

    #[test]
    fn a_million_in_order_messages_are_one_entry() {
        let mut m = SeqMap::default();
        for s in 0..1_000_000 {
            m.set(s, 1);
        }
        // 1,000,000 is not a multiple of the block: the last block still fills.
        assert_eq!((m.len(), m.entries.len(), m.parts()), (1_000_000, 2, 1));
        assert_eq!(m.seen(), vec![[0, 999_999]]);
    }

    /// A whole stretch whose numbers change value one by one (each message's second
    /// recipient arriving later) splits block by block and joins again.
    #[test]
    fn values_that_change_across_whole_blocks_join_again() {
        let mut m = SeqMap::default();
        let n = 10 * BLOCK + 7;
        for s in 0..n {
            m.set(s, 1);
        }
        for s in 0..n {
            m.set(s, 2);
            assert_eq!(m.get(s), Some(2));
            assert!(m.parts() <= 2, "at {s}: {} blocks filling", m.parts());
        }
        assert_eq!(m.iter().collect::<Vec<_>>(), [(0, n - 1, 2)]);
        assert_eq!((m.len(), m.entries.len()), (n, 2));
        // A value changed in the middle of a stretch, then back.
        m.set(5 * BLOCK + 3, 9);
        assert_eq!(m.get(5 * BLOCK + 3), Some(9));
        assert_eq!(m.get(5 * BLOCK + 4), Some(2));
        assert_eq!(m.iter().count(), 3);
        m.set(5 * BLOCK + 3, 2);
        assert_eq!(m.iter().collect::<Vec<_>>(), [(0, n - 1, 2)]);
        assert_eq!((m.len(), m.entries.len()), (n, 2));
    }

    /// Against a plain map: random numbers and values, in any order, give the same
    /// contents, counts and ranges.
    #[test]
    fn random_numbers_and_values_agree_with_a_plain_map() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rng = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut m = SeqMap::default();
        let mut want = BTreeMap::new();
        for _ in 0..60_000 {
            let seq = rng() % (8 * BLOCK);
            let value = (rng() % 4) as u32;
            m.set(seq, value);
            want.insert(seq, value);
        }
        assert_eq!(expand(&m), want.into_iter().collect::<Vec<_>>());
        assert_eq!(m.len(), expand(&m).len() as u64);
    }

    /// Issue 40: a sink that sees every other number (another sink, or another agent,
    /// has the rest) keeps a bit a number, not an entry a message.
    #[test]
    fn every_other_number_costs_a_bit_each() {
        let mut m = SeqMap::default();
        let n = 1_000_000u64;
        for s in (0..n).step_by(2) {
            m.set(s, 1);
        }
        let per_number = m.bytes() as f64 / n as f64;
        assert!(
            per_number < 0.2,
            "{} bytes for {n} numbers: {per_number:.3} a number, expected about 1/8",
            m.bytes()
        );
        assert_eq!(m.len(), n / 2);
        assert_eq!(m.seen().len() as u64, n / 2);
    }
}

//! A sweep: the same workload at each of a list of levels (e.g. concurrency 1, 4, 16, 64),
//! one after another, every level run whatever the last one did.

/// The levels still to run.
#[derive(Debug, Clone)]
pub struct Sweep {
    levels: Vec<usize>,
    next: usize,
}

impl Sweep {
    /// A sweep over `levels`, in order.
    pub fn new(levels: Vec<usize>) -> Sweep {
        Sweep { levels, next: 0 }
    }

    /// The next level, or `None` when all ran.
    pub fn next_level(&mut self) -> Option<usize> {
        let level = self.levels.get(self.next).copied();
        self.next += 1;
        level
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_level_once_in_order() {
        let mut s = Sweep::new(vec![1, 4, 16]);
        let got: Vec<usize> = std::iter::from_fn(|| s.next_level()).collect();
        assert_eq!(got, vec![1, 4, 16]);
    }
}

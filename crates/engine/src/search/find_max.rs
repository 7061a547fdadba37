//! The highest sustainable rate: double from a start rate while each step is sustained,
//! then bisect between the best sustained rate and the lowest failed one until they are
//! within 5 % (at most 4 bisections, 16 steps). A first rate that fails is halved down to
//! 1/s.

/// The search's state between steps.
#[derive(Debug, Clone)]
pub struct FindMax {
    rate: f64,
    /// Highest rate sustained so far.
    good: f64,
    /// Lowest rate not sustained so far.
    bad: Option<f64>,
    bisections: u32,
    steps: u32,
}

impl FindMax {
    /// A search that starts at `start` per second.
    pub fn new(start: f64) -> FindMax {
        FindMax {
            rate: start,
            good: 0.0,
            bad: None,
            bisections: 0,
            steps: 0,
        }
    }

    /// The next rate to try, or `None` when the search is done.
    pub fn next_rate(&mut self) -> Option<f64> {
        if self.steps >= 16 || self.bisections >= 4 {
            return None;
        }
        if let Some(bad) = self.bad {
            if self.good > 0.0 && (bad - self.good) / self.good < 0.05 {
                return None;
            }
            if self.good == 0.0 && self.steps > 0 && bad <= self.rate {
                // Even the first rate failed: try lower, down to 1/s.
                if bad <= 1.0 {
                    return None;
                }
                self.rate = (bad / 2.0).max(1.0);
                return Some(self.rate);
            }
            self.rate = (self.good + bad) / 2.0;
            self.bisections += 1;
        }
        Some(self.rate)
    }

    /// Records the verdict of the step at the rate `next_rate` gave.
    pub fn record(&mut self, sustained: bool) {
        self.steps += 1;
        let rate = self.rate;
        if sustained {
            self.good = self.good.max(rate);
            if self.bad.is_none() {
                self.rate = rate * 2.0;
            }
        } else {
            self.bad = Some(self.bad.map_or(rate, |b| b.min(rate)));
        }
    }

    /// The highest rate sustained so far (0 when none was).
    pub fn best(&self) -> f64 {
        self.good
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the search against a system that sustains up to `capacity`.
    fn search(start: f64, capacity: f64) -> (f64, Vec<f64>) {
        let mut f = FindMax::new(start);
        let mut tried = Vec::new();
        while let Some(rate) = f.next_rate() {
            tried.push(rate);
            f.record(rate <= capacity);
        }
        (f.best(), tried)
    }

    #[test]
    fn doubles_then_bisects_to_within_five_percent_of_the_capacity() {
        let (best, tried) = search(50.0, 330.0);
        assert_eq!(&tried[..4], &[50.0, 100.0, 200.0, 400.0]);
        assert!((330.0 * 0.9..=330.0).contains(&best), "{best}: {tried:?}");
    }

    #[test]
    fn a_first_rate_that_fails_is_halved() {
        let (best, tried) = search(100.0, 30.0);
        assert_eq!(&tried[..3], &[100.0, 50.0, 25.0]);
        assert!((25.0..=30.0).contains(&best), "{best}: {tried:?}");
        let (best, _) = search(4.0, 0.5);
        assert_eq!(best, 0.0, "nothing is sustained, down to 1/s");
    }
}

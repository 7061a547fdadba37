//! Wall-clock time in the units the results and trace headers use.

use std::time::{SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch (0 if the clock is before it).
pub fn unix_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

//! Turning results into things people read: the text summary (`text`), live progress
//! (`live`), CSV files (`csv`) and `--threshold` checks (`threshold`).

pub mod csv;
pub mod live;
pub mod text;
pub mod threshold;

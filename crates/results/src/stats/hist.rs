//! The results-file form of a latency histogram: summary percentiles for people, and every
//! recorded bucket for machines, so that histograms from many runs or agents add exactly.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::recorder::new_histogram;

/// A histogram as written to the results file (all values in microseconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistJson {
    /// Number of samples.
    pub count: u64,
    /// Smallest sample.
    pub min_us: u64,
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 95th percentile (SPECmail's and many capacity rules' figure).
    #[serde(default)]
    pub p95_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Largest sample.
    pub max_us: u64,
    /// `[value, count]` for every non-empty bucket; enough to rebuild the histogram exactly.
    pub buckets: Vec<[u64; 2]>,
}

impl HistJson {
    /// Summarises a histogram.
    pub fn from_hist(h: &Histogram<u64>) -> Self {
        let empty = h.is_empty();
        let q = |q: f64| if empty { 0 } else { h.value_at_quantile(q) };
        HistJson {
            count: h.len(),
            min_us: if empty { 0 } else { h.min() },
            mean_us: if empty { 0.0 } else { h.mean() },
            p50_us: q(0.50),
            p90_us: q(0.90),
            p95_us: q(0.95),
            p99_us: q(0.99),
            p999_us: q(0.999),
            max_us: if empty { 0 } else { h.max() },
            buckets: h
                .iter_recorded()
                .map(|v| [v.value_iterated_to(), v.count_at_value()])
                .collect(),
        }
    }

    /// Rebuilds the histogram from its buckets.
    pub fn to_hist(&self) -> Histogram<u64> {
        let mut h = new_histogram();
        for [v, c] in &self.buckets {
            super::recorder::record_clamped(&mut h, *v, *c);
        }
        h
    }
}

/// A histogram in HdrHistogram's compressed V2 encoding, base64: the form every HDR
/// library reads, a few hundred bytes where a bucket list takes kilobytes (the series
/// keeps one per interval).
pub fn encode(h: &Histogram<u64>) -> String {
    use base64::Engine;
    use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
    let mut bytes = Vec::new();
    // Serializing into memory fails only on a histogram that cannot be encoded at all.
    let _ = V2DeflateSerializer::new().serialize(h, &mut bytes);
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The histogram [`encode`] wrote; the error says what is wrong with the text.
pub fn decode(text: &str) -> Result<Histogram<u64>, String> {
    use base64::Engine;
    use hdrhistogram::serialization::Deserializer;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("a histogram is not base64: {e}"))?;
    let h: Histogram<u64> = Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("a histogram does not decode: {e:?}"))?;
    let mut out = new_histogram();
    super::recorder::add_hist(&mut out, &h);
    Ok(out)
}

/// A percentile of a histogram in milliseconds, for people.
pub fn ms(h: &Histogram<u64>, q: f64) -> f64 {
    if h.is_empty() {
        0.0
    } else {
        h.value_at_quantile(q) as f64 / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_rebuild_the_same_percentiles() {
        let mut h = new_histogram();
        for v in [1u64, 10, 100, 1000, 10_000, 123_456, 9_999_999] {
            h.record_n(v, v % 7 + 1).expect("record");
        }
        let json = HistJson::from_hist(&h);
        let back = json.to_hist();
        assert_eq!(back.len(), h.len());
        for q in [0.1, 0.5, 0.9, 0.99, 1.0] {
            assert_eq!(back.value_at_quantile(q), h.value_at_quantile(q), "q={q}");
        }
        assert_eq!(HistJson::from_hist(&back), json);
        let decoded = decode(&encode(&h)).expect("decodes");
        assert_eq!(
            HistJson::from_hist(&decoded),
            json,
            "the compact form is exact"
        );
        assert!(decode("not base64!").is_err());
        assert!(decode("aGVsbG8=").is_err());
    }
}

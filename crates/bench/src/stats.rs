//! Latency samples and their percentiles, kept in an HDR histogram so a
//! long run costs constant memory and merging workers is cheap.

use hdrhistogram::Histogram;
use serde_json::{json, Value};

/// Longest latency the histogram tracks exactly (one hour); anything slower
/// is clamped to it rather than dropped, so a stall still shows as `max`.
const HIGHEST_MICROS: u64 = 3_600_000_000;

pub struct Samples {
    hist: Histogram<u64>,
}

impl Default for Samples {
    fn default() -> Self {
        // Three significant digits: 0.1 % resolution at every magnitude.
        let hist = Histogram::new_with_bounds(1, HIGHEST_MICROS, 3).expect("valid histogram bounds");
        Samples { hist }
    }
}

impl Samples {
    pub fn record(&mut self, micros: u64) {
        self.hist.saturating_record(micros.max(1));
    }

    pub fn merge(&mut self, other: Samples) {
        self.hist.add(&other.hist).expect("histograms share bounds");
    }

    pub fn len(&self) -> usize {
        self.hist.len() as usize
    }

    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// The `q` quantile (0..=1) in milliseconds.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.hist.is_empty() {
            return 0.0;
        }
        self.hist.value_at_quantile(q) as f64 / 1000.0
    }

    pub fn max_ms(&self) -> f64 {
        if self.hist.is_empty() {
            return 0.0;
        }
        self.hist.max() as f64 / 1000.0
    }

    /// The report's latency object: `{"p50","p99","p999","max"}` in ms.
    pub fn report(&self) -> Value {
        json!({
            "p50": self.quantile_ms(0.5),
            "p99": self.quantile_ms(0.99),
            "p999": self.quantile_ms(0.999),
            "max": self.max_ms(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_merge() {
        let mut a = Samples::default();
        let mut b = Samples::default();
        for us in 1..=1000 {
            a.record(us * 1000);
        }
        b.record(5_000_000);
        a.merge(b);
        assert_eq!(a.len(), 1001);
        assert!((a.quantile_ms(0.5) - 501.0).abs() < 1.0, "{}", a.quantile_ms(0.5));
        assert!((a.max_ms() - 5000.0).abs() < 5.0);
        assert_eq!(Samples::default().quantile_ms(0.99), 0.0);
    }
}

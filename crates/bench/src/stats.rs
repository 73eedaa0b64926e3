//! Latency samples and their percentiles.

#[derive(Default)]
pub struct Samples {
    micros: Vec<u64>,
}

impl Samples {
    pub fn record(&mut self, micros: u64) {
        self.micros.push(micros);
    }

    pub fn merge(&mut self, other: Samples) {
        self.micros.extend(other.micros);
    }

    pub fn len(&self) -> usize {
        self.micros.len()
    }

    /// The `q` quantile (0..=1) in milliseconds.
    pub fn quantile_ms(&mut self, q: f64) -> f64 {
        if self.micros.is_empty() {
            return 0.0;
        }
        self.micros.sort_unstable();
        let i = ((self.micros.len() - 1) as f64 * q).round() as usize;
        self.micros[i] as f64 / 1000.0
    }
}

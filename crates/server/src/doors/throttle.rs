//! Per-caller request rates (`--rate-limit`, off by default).
//!
//! Each caller has a token bucket: `rate` requests a second, up to `burst`
//! at once. A caller is its token's subject when it has one (an API key's
//! too), else its tenant (with tenancy on), else the default tenant. A
//! request past its caller's budget is refused with 429 `rate_limited` and
//! a `Retry-After` of the seconds until one more is allowed. Skip paths are
//! not counted. At most [`RATE_LIMIT_CALLERS_MAX`] callers are tracked;
//! buckets that have refilled are forgotten first.

use std::collections::HashMap;
use std::time::Duration;

// tokio's clock: the wall clock's pace in a node, virtual on a paused test
// runtime.
use tokio::time::Instant;

use parking_lot::Mutex;
use regina_types::limits::RATE_LIMIT_CALLERS_MAX;

pub struct Throttle {
    rate: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, Bucket>>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Throttle {
    /// `None` when `rate` is 0 (no limit).
    pub fn new(rate: u32, burst: Option<u32>) -> Option<Throttle> {
        (rate > 0).then(|| Throttle {
            rate: rate as f64,
            burst: burst.unwrap_or(rate).max(1) as f64,
            buckets: Mutex::new(HashMap::new()),
        })
    }

    /// Admits one request of `caller` now, or answers how long until one
    /// would be.
    pub fn admit(&self, caller: &str) -> Result<(), Duration> {
        self.admit_at(caller, Instant::now())
    }

    fn admit_at(&self, caller: &str, now: Instant) -> Result<(), Duration> {
        let mut buckets = self.buckets.lock();
        if !buckets.contains_key(caller) && buckets.len() >= RATE_LIMIT_CALLERS_MAX {
            let (rate, burst) = (self.rate, self.burst);
            buckets.retain(|_, b| b.tokens + now.duration_since(b.at).as_secs_f64() * rate < burst);
            if buckets.len() >= RATE_LIMIT_CALLERS_MAX {
                return Err(Duration::from_secs(1));
            }
        }
        let b = buckets.entry(caller.to_string()).or_insert(Bucket { tokens: self.burst, at: now });
        b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * self.rate).min(self.burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - b.tokens) / self.rate))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_refill_at_the_rate() {
        assert!(Throttle::new(0, None).is_none());
        let t = Throttle::new(2, Some(3)).unwrap();
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(t.admit_at("a", t0).is_ok());
        }
        let wait = t.admit_at("a", t0).unwrap_err();
        assert!(wait > Duration::from_millis(400) && wait <= Duration::from_millis(500), "{wait:?}");
        assert!(t.admit_at("b", t0).is_ok(), "callers are apart");
        assert!(t.admit_at("a", t0 + Duration::from_millis(500)).is_ok(), "one more after 1/rate");
        assert!(t.admit_at("a", t0 + Duration::from_millis(500)).is_err());
    }
}

//! Where the node's time comes from.
//!
//! The state machine never reads a clock: the leader stamps each entry with
//! its time. That stamp, the ids a node mints and the time a read judges
//! leases against all come from one [`Clock`] handed to the node
//! (`NodeOptions::clock`), so a test can run a real node on tokio's paused
//! clock ([`TokioClock`]) and let a lease lapse or a timer fall due without
//! waiting for it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of Unix milliseconds.
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    fn now_ms(&self) -> u64;
}

/// The wall clock: what a node runs on.
#[derive(Debug)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        wall_ms()
    }
}

fn wall_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The wall time at creation, moved on by tokio's clock: on a paused
/// runtime it advances only as virtual time does (`tokio::time::advance`,
/// or a sleep with nothing else to run).
#[derive(Debug)]
pub struct TokioClock {
    start_ms: u64,
    start: tokio::time::Instant,
}

impl TokioClock {
    /// Starts at the wall clock's current reading.
    pub fn new() -> TokioClock {
        TokioClock::starting_at(wall_ms())
    }

    /// Starts at `start_ms` (a fixed epoch makes a run repeatable).
    pub fn starting_at(start_ms: u64) -> TokioClock {
        TokioClock { start_ms, start: tokio::time::Instant::now() }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        TokioClock::new()
    }
}

impl Clock for TokioClock {
    fn now_ms(&self) -> u64 {
        self.start_ms + self.start.elapsed().as_millis() as u64
    }
}

/// The default clock of a node.
pub fn system() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

/// The leader's stamps for new entries: the clock's reading, never behind
/// the last stamp (the state machine also refuses to go back).
pub struct LeaderClock {
    source: Arc<dyn Clock>,
    last: AtomicU64,
}

impl LeaderClock {
    pub fn new(source: Arc<dyn Clock>) -> LeaderClock {
        LeaderClock { source, last: AtomicU64::new(0) }
    }

    pub fn stamp(&self) -> u64 {
        let now = self.source.now_ms();
        let prev = self.last.fetch_max(now, Ordering::AcqRel);
        prev.max(now)
    }

    /// The clock's reading, never behind `floor_ms` (the newest applied
    /// entry's time): what a read judges leases and lifetimes against, so a
    /// lease reads as lapsed once its expiry has passed even if nothing has
    /// been applied since.
    pub fn read_time(&self, floor_ms: u64) -> u64 {
        self.source.now_ms().max(floor_ms)
    }

    /// The clock it reads.
    pub fn source(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_tokio_clock_moves_with_virtual_time() {
        let clock = TokioClock::starting_at(1_000);
        assert_eq!(clock.now_ms(), 1_000);
        tokio::time::advance(std::time::Duration::from_secs(31)).await;
        assert_eq!(clock.now_ms(), 32_000);
    }

    #[test]
    fn stamps_never_go_back() {
        #[derive(Debug)]
        struct Back(AtomicU64);
        impl Clock for Back {
            fn now_ms(&self) -> u64 {
                self.0.fetch_sub(10, Ordering::AcqRel)
            }
        }
        let leader = LeaderClock::new(Arc::new(Back(AtomicU64::new(1_000))));
        let stamps: Vec<u64> = (0..5).map(|_| leader.stamp()).collect();
        assert_eq!(stamps, vec![1_000; 5]);
        assert_eq!(leader.read_time(2_000), 2_000);
    }
}

//! The leader's time-driven entries and chores.
//!
//! Nothing in the state machine happens by itself: each group's current
//! leader proposes `FireTimers` when a timer is due and `Sweep` when
//! something has outlived its retention or lifetime, and the state judges
//! them against the time stamped in the entry. What to propose is decided
//! by [`timers_due`] and [`sweep_due`] from the applied state and the
//! leader's clock alone, so the simulation asks the same questions.

use std::sync::Arc;
use std::time::Duration;

use regina_state::{Command, State};

use crate::replica::Replica;

/// How often the leader checks for due timers.
pub const TIMER_CHECK: Duration = Duration::from_millis(50);
/// How often the leader proposes a retention sweep.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(1);
/// The least log (in bytes, entries weighed as below) between snapshots.
pub const SNAPSHOT_LOG_BYTES_MIN: u64 = 256 * 1024 * 1024;
/// What one entry weighs toward the next snapshot besides its bytes:
/// replaying an entry costs more than reading it, so 20,000 small entries
/// count as [`SNAPSHOT_LOG_BYTES_MIN`].
pub const SNAPSHOT_ENTRY_WEIGHT_BYTES: u64 = SNAPSHOT_LOG_BYTES_MIN / 20_000;

/// Whether the log since the last snapshot calls for the next one: when it
/// weighs at least [`SNAPSHOT_LOG_BYTES_MIN`] and at least the last
/// snapshot's size. A snapshot encodes the whole state, so spacing them by
/// its size keeps their cost per logged byte bounded as the state grows
/// (snapshots of a fixed period cost more and more: the push rate fell by
/// half over 90 s as the state came to hold 15 M messages); a restart then
/// replays at most about as much log as it loads snapshot.
pub fn snapshot_due(log_bytes_since: u64, entries_since: u64, last_snapshot_bytes: u64) -> bool {
    let weight = log_bytes_since.saturating_add(entries_since.saturating_mul(SNAPSHOT_ENTRY_WEIGHT_BYTES));
    weight >= SNAPSHOT_LOG_BYTES_MIN.max(last_snapshot_bytes)
}

/// `FireTimers` when the earliest pending timer is due at `now_ms`. The
/// earliest due time counts pending timers only, retries of refused fires
/// among them (at their retry time): a failed timer never makes the driver
/// propose.
pub fn timers_due(state: &State, now_ms: u64) -> Option<Command> {
    state.next_timer_due_ms().filter(|at| *at <= now_ms).map(|_| Command::FireTimers)
}

/// `Sweep` when a queue has messages past retention, a KV row or lock
/// permit has expired, or finished jobs are past their retention. Expired
/// rows are already invisible; the sweep only gives their memory back.
pub fn sweep_due(state: &State, now_ms: u64) -> Option<Command> {
    state.wants_sweep(now_ms).then_some(Command::Sweep)
}

impl Replica {
    /// Fires due timers: every [`TIMER_CHECK`] the leader looks at the
    /// earliest due time and, when it has passed, proposes one entry that
    /// fires everything due at that entry's time. The earliest due time
    /// counts pending timers only, retries of refused fires among them (at
    /// their retry time): a failed timer never makes the driver propose.
    pub fn spawn_timer_driver(self: &Arc<Self>) {
        let node = self.clone();
        let mut stop = self.stopping.subscribe();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(TIMER_CHECK) => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
                if !node.is_leader() {
                    continue;
                }
                let due = timers_due(&node.shared.machine.read().state, node.stamp());
                if let Some(fire) = due {
                    if let Err(e) = node.propose(fire).await {
                        tracing::warn!("firing timers: {e}");
                    }
                }
            }
        });
    }

    /// The chores: retention sweeps (the leader's), snapshots by log volume,
    /// and the fsync of finished body segments that lets a restart skip
    /// their bodies (`BodyStore::sync_finished`).
    pub fn spawn_background(self: &Arc<Self>) {
        let node = self.clone();
        let mut stop = self.stopping.subscribe();
        tokio::spawn(async move {
            let mut logged_at_snapshot = 0u64;
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(SWEEP_INTERVAL) => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
                let sweep = match node.is_leader() {
                    true => sweep_due(&node.shared.machine.read().state, node.stamp()),
                    false => None,
                };
                if let Some(sweep) = sweep {
                    let _ = node.propose(sweep).await;
                }
                let written = node.log.wal_bytes_written();
                let entries_since = {
                    let m = node.raft.metrics().borrow().clone();
                    let (applied, snapshot) =
                        (m.last_applied.map_or(0, |l| l.index), m.snapshot.map_or(0, |l| l.index));
                    applied.saturating_sub(snapshot)
                };
                // Off this task: the fsyncs may wait for the disk.
                let shared = node.shared.clone();
                tokio::task::spawn_blocking(move || {
                    if let Err(e) = shared.bodies.sync_finished() {
                        tracing::error!(error = %e, "finished body segments cannot be made durable");
                    }
                });
                if snapshot_due(written - logged_at_snapshot, entries_since, node.shared.snapshot_bytes()) {
                    logged_at_snapshot = written;
                    let _ = node.raft.trigger().snapshot().await;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1024 * 1024;

    #[test]
    fn a_small_state_snapshots_every_256_mib_or_20_000_entries() {
        assert!(!snapshot_due(255 * MIB, 0, 0));
        assert!(snapshot_due(256 * MIB, 0, 10 * MIB));
        assert!(!snapshot_due(0, 19_000, 10 * MIB));
        assert!(snapshot_due(MIB, 20_000, 10 * MIB));
    }

    #[test]
    fn a_large_state_waits_for_as_much_log_as_its_snapshot() {
        let snapshot = 800 * MIB;
        assert!(!snapshot_due(300 * MIB, 10_000, snapshot));
        assert!(!snapshot_due(799 * MIB, 0, snapshot));
        assert!(snapshot_due(800 * MIB, 0, snapshot));
        assert!(snapshot_due(0, 70_000, snapshot));
    }

    #[test]
    fn huge_counts_do_not_overflow() {
        assert!(snapshot_due(u64::MAX, u64::MAX, u64::MAX));
    }
}

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
/// WAL bytes that also trigger a snapshot, so large payloads do not let the
/// log grow unbounded between entry-count triggers.
const SNAPSHOT_EVERY_WAL_BYTES: u64 = 256 * 1024 * 1024;

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

    /// The leader's chores: retention sweeps and snapshots by log volume.
    pub fn spawn_background(self: &Arc<Self>) {
        let node = self.clone();
        let mut stop = self.stopping.subscribe();
        tokio::spawn(async move {
            let mut last_snapshot_bytes = 0u64;
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
                if written - last_snapshot_bytes > SNAPSHOT_EVERY_WAL_BYTES {
                    last_snapshot_bytes = written;
                    let _ = node.raft.trigger().snapshot().await;
                }
            }
        });
    }
}

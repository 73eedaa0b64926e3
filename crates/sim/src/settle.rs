//! The runtime the simulation runs on, and what it does when idle.
//!
//! One current-thread tokio runtime with a paused clock: time moves only
//! when every task waits, and then jumps straight to the next timer. That
//! alone makes the Raft cores, their replication tasks and the network
//! deterministic. The WAL's writer threads (one per node, shared by its
//! groups) are the exception (see `gate`): their batches are completed in
//! the `on_thread_park` hook, i.e. exactly when the runtime has run out of
//! work, at most one batch per node, one node after another in id order,
//! before the clock may move. A batch waits a seeded few virtual
//! milliseconds first (a slow disk) and then lands at the first idle moment
//! from then on: always the same point of a replay.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::runtime::{Builder, Handle, Runtime};

use crate::gate::Gate;
use crate::NodeId;

/// The gates of the running node incarnations.
#[derive(Default)]
pub struct Settler {
    gates: Mutex<BTreeMap<NodeId, Arc<Gate>>>,
}

/// Tasks woken from outside the runtime that it has not run yet.
pub fn woken_from_outside() -> usize {
    Handle::try_current().map_or(0, |h| h.metrics().global_queue_depth())
}

impl Settler {
    pub fn register(&self, node: NodeId, gate: Arc<Gate>) {
        self.gates.lock().insert(node, gate);
    }

    pub fn unregister(&self, node: NodeId) {
        self.gates.lock().remove(&node);
    }

    /// Fails every parked and later disk call of every node: used when a
    /// run ends, so that dropping the stores never waits on a parked writer.
    pub fn close_all(&self) {
        for gate in self.gates.lock().values() {
            gate.close();
        }
    }

    /// Drives each node's WAL batch to its end, in node order.
    fn on_park(&self) {
        let gates: Vec<Arc<Gate>> = self.gates.lock().values().cloned().collect();
        for gate in gates {
            if gate.busy() {
                gate.complete(&woken_from_outside, false);
            }
        }
    }
}

/// A current-thread runtime on a paused clock that settles WAL flushes
/// whenever it runs out of work.
pub fn runtime(settler: Arc<Settler>) -> std::io::Result<Runtime> {
    Builder::new_current_thread().enable_time().start_paused(true).on_thread_park(move || settler.on_park()).build()
}

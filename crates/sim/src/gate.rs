//! The handshake between a node's WAL writer thread and the simulator.
//!
//! The WAL writes and fsyncs on its own OS thread and then calls openraft's
//! flush callback, which wakes the Raft core from outside the runtime. Left
//! alone, *when* that wake lands among the runtime's other tasks would be
//! decided by the OS scheduler, and so would the order of everything after
//! it: no seed could replay.
//!
//! So every disk call of the writer parks here until the simulator lets it
//! through, and the simulator only does that when the runtime has nothing
//! else to run (see `settle`). It then waits, holding the runtime thread,
//! until the wake has landed. Nothing on the runtime moves while the writer
//! works, so its completions arrive at the same point of every replay. The
//! one exception is a truncation marker, which nobody waits for: the log
//! wrapper drives it through the disk before returning (see `log`).
//!
//! The simulator also decides what each call does: go through, or fail as
//! if the machine had died right there (a crash between write and fsync).

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::NodeId;

/// A disk call the writer wants to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoCall {
    Write,
    Sync,
}

/// What the simulator lets that call do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Proceed,
    /// The machine is gone: the call fails and nothing more reaches disk.
    Fail,
}

#[derive(Default)]
struct State {
    /// Appends handed to the WAL whose flush openraft is waiting for.
    awaiting: u32,
    /// The call the writer is parked at, if any.
    parked: Option<IoCall>,
    verdict: Option<Verdict>,
    /// Calls that have finished (either way).
    finished: u64,
    /// The node has crashed: every further call fails.
    crashed: bool,
    /// Crash at the next call of this kind: before a write reaches the page
    /// cache, or between a write and its fsync.
    crash_at: Option<IoCall>,
    /// Torn down: calls fail at once without parking.
    closed: bool,
}

/// One per node incarnation, shared by its `SimIo` (writer side) and the
/// simulator (runtime side).
pub struct Gate {
    node: NodeId,
    state: Mutex<State>,
    cv: Condvar,
}

/// How long the simulator waits (in real time) for the writer thread before
/// declaring the handshake broken. Generous: a loaded machine can stall a
/// thread for a while, and a false alarm here would be a flaky test.
const STALL: Duration = Duration::from_secs(60);

impl Gate {
    pub fn new(node: NodeId) -> Arc<Gate> {
        Arc::new(Gate { node, state: Mutex::new(State::default()), cv: Condvar::new() })
    }

    // ---- writer side ----

    /// Parks the writer until the simulator decides what `call` does.
    pub fn pass(&self, call: IoCall) -> Verdict {
        let mut s = self.state.lock();
        if s.closed {
            return Verdict::Fail;
        }
        s.parked = Some(call);
        self.cv.notify_all();
        loop {
            if let Some(v) = s.verdict.take() {
                s.parked = None;
                return v;
            }
            if s.closed {
                s.parked = None;
                return Verdict::Fail;
            }
            self.cv.wait(&mut s);
        }
    }

    /// The writer has finished the call it was let through.
    pub fn finished(&self) {
        self.state.lock().finished += 1;
        self.cv.notify_all();
    }

    // ---- simulator side ----

    /// openraft now waits for the flush of an append just handed to the WAL.
    pub fn begin_append(&self) {
        self.state.lock().awaiting += 1;
    }

    /// The append was refused before it reached the WAL: nothing to wait for.
    pub fn cancel_append(&self) {
        self.state.lock().awaiting -= 1;
    }

    pub fn awaiting(&self) -> bool {
        self.state.lock().awaiting > 0
    }

    pub fn crashed(&self) -> bool {
        self.state.lock().crashed
    }

    /// From now on every disk call fails: the machine is gone.
    pub fn crash(&self) {
        self.state.lock().crashed = true;
    }

    /// The next call of kind `call` fails and the node is crashed from then
    /// on. At a sync, what the batch wrote stays unsynced (and may be lost at
    /// the restart); at a write, nothing of the batch reaches the disk.
    pub fn crash_at_next(&self, call: IoCall) {
        self.state.lock().crash_at = Some(call);
    }

    pub fn disarm(&self) {
        self.state.lock().crash_at = None;
    }

    /// Releases anything still parked with a failure and fails later calls
    /// without parking. Only once the node's Raft is gone.
    pub fn close(&self) {
        self.state.lock().closed = true;
        self.cv.notify_all();
    }

    fn verdict_for(s: &mut State, call: IoCall) -> Verdict {
        if s.crashed {
            return Verdict::Fail;
        }
        if s.crash_at == Some(call) {
            s.crash_at = None;
            s.crashed = true;
            return Verdict::Fail;
        }
        Verdict::Proceed
    }

    /// Lets the parked call through and waits until the writer finished it.
    fn release(&self, s: &mut MutexGuard<'_, State>) -> Verdict {
        let call = s.parked.expect("a parked call");
        let v = Self::verdict_for(s, call);
        let target = s.finished + 1;
        s.verdict = Some(v);
        self.cv.notify_all();
        let deadline = Instant::now() + STALL;
        while s.finished < target {
            if self.cv.wait_until(s, deadline).timed_out() {
                panic!("node {}: the WAL writer did not finish its {call:?} within {STALL:?}", self.node);
            }
        }
        v
    }

    fn wait_parked(&self, s: &mut MutexGuard<'_, State>, what: &str) {
        let deadline = Instant::now() + STALL;
        while s.parked.is_none() || s.verdict.is_some() {
            if self.cv.wait_until(s, deadline).timed_out() {
                panic!(
                    "node {}: the WAL writer never reached its {what} within {STALL:?}; has the write path changed?",
                    self.node
                );
            }
        }
    }

    /// Drives the append openraft waits for through its writes and fsyncs
    /// until its flush callback has woken the Raft core. `woken` counts the
    /// tasks woken from outside the runtime and not yet run; the core's wake
    /// is the only one that can happen meanwhile, because every other
    /// writer is parked and nothing on the runtime runs.
    ///
    /// Only when the runtime has run out of work: then the core is idle, so
    /// its wake surely queues it (a core already queued would not be queued
    /// again, and the wait would never end).
    pub fn complete_append(&self, woken: &dyn Fn() -> usize) {
        let base = woken();
        let deadline = Instant::now() + STALL;
        let mut s = self.state.lock();
        loop {
            // A parked writer has not called back yet: look at it first.
            if s.parked.is_some() && s.verdict.is_none() {
                self.release(&mut s);
                continue;
            }
            if woken() > base {
                s.awaiting -= 1;
                return;
            }
            if Instant::now() > deadline {
                panic!("node {}: an append's flush callback never woke the Raft core within {STALL:?}", self.node);
            }
            self.cv.wait_for(&mut s, Duration::from_micros(50));
        }
    }

    /// Drives a lone record that nobody waits for (a truncation marker)
    /// through its write and its fsync: one of each, as one small record
    /// always fits in one segment.
    pub fn complete_record(&self) {
        let mut s = self.state.lock();
        self.wait_parked(&mut s, "write of a truncation record");
        if self.release(&mut s) == Verdict::Fail {
            return;
        }
        self.wait_parked(&mut s, "fsync of a truncation record");
        self.release(&mut s);
    }
}

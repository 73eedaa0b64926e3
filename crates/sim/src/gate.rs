//! The handshake between a node's WAL writer thread and the simulator.
//!
//! The WAL writes and fsyncs on its own OS thread and then calls openraft's
//! flush callbacks, which wake the Raft cores from outside the runtime. Left
//! alone, *when* those wakes land among the runtime's other tasks would be
//! decided by the OS scheduler, and so would the order of everything after
//! it: no seed could replay. With several Raft groups on one WAL, so would
//! which appends the writer takes into one batch.
//!
//! So every disk call of the writer parks here until the simulator lets it
//! through, and the gate mirrors the WAL's queue: what was handed to the
//! writer and not yet taken (`queued`), and the batch it took (`batch`).
//! - A submission while the writer has no batch makes the runtime thread
//!   wait until the writer has taken it and parked at its first call, so a
//!   batch is always exactly what was queued at a point the runtime chose
//!   (the sim lifts the WAL's batch cap, see `node`, so that is everything
//!   queued).
//! - A batch is driven through its calls only when the runtime has nothing
//!   else to run (see `settle`), holding the runtime thread until every
//!   flush callback of the batch has woken its Raft core (one per append:
//!   each core waits for its flush before it appends again). If more was
//!   queued meanwhile, the gate also waits until the writer has taken that
//!   as its next batch. Nothing on the runtime moves while the writer
//!   works, so its completions arrive at the same point of every replay.
//! - A batch of truncation markers only, which nobody waits for, is done
//!   when its bytes are written and synced. A marker handed to an idle
//!   writer is driven through at once by the log wrapper (see `log`).
//!
//! The simulator also decides what each call does: go through, or fail as
//! if the machine had died right there (a crash between write and fsync).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::rng::Rng;
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

/// One request handed to the WAL, as the gate mirrors it.
#[derive(Debug, Clone, Copy)]
pub struct Sub {
    /// An append whose flush a Raft core waits for (else a truncation
    /// marker nobody waits for).
    pub append: bool,
    /// Framed bytes (only needed for markers).
    pub bytes: u64,
}

/// The batch the writer took.
#[derive(Debug, Default)]
struct Batch {
    appends: usize,
    bytes: u64,
    written: u64,
    /// A sync went through after the last write.
    synced: bool,
    /// A call of it failed: the writer fails the whole batch.
    failed: bool,
    /// Virtual time before which it is not driven: a slow fsync, behind
    /// which other groups' appends gather for the next batch. It is driven
    /// at the first idle moment from then on (the next timer: a heartbeat
    /// at the latest).
    ready_at: Option<tokio::time::Instant>,
}

struct State {
    /// Handed to the WAL, not yet taken by the writer, in order.
    queued: VecDeque<Sub>,
    /// What the writer took and has not finished.
    batch: Option<Batch>,
    /// The call the writer is parked at, if any, and its length.
    parked: Option<(IoCall, u64)>,
    verdict: Option<Verdict>,
    /// Calls that have finished (either way).
    finished: u64,
    /// Batches whose completion callbacks have all returned.
    returned: u64,
    /// The node has crashed: every further call fails.
    crashed: bool,
    /// Crash at the next call of this kind: before a write reaches the page
    /// cache, or between a write and its fsync.
    crash_at: Option<IoCall>,
    /// Torn down: calls fail at once without parking.
    closed: bool,
    /// How long each batch is held (seeded).
    rng: Rng,
}

/// One per node incarnation, shared by its `SimIo` (writer side) and the
/// simulator (runtime side). One per node, not per group: the groups share
/// the node's one WAL writer.
pub struct Gate {
    node: NodeId,
    state: Mutex<State>,
    cv: Condvar,
    joint: Arc<AtomicU64>,
}

/// How long the simulator waits (in real time) for the writer thread before
/// declaring the handshake broken. Generous: a loaded machine can stall a
/// thread for a while, and a false alarm here would be a flaky test.
const STALL: Duration = Duration::from_secs(60);

impl Gate {
    /// `joint` counts the batches that cover appends of several groups
    /// with one fsync (all incarnations together).
    pub fn new(node: NodeId, joint: Arc<AtomicU64>, rng: Rng) -> Arc<Gate> {
        let state = State {
            queued: VecDeque::new(),
            batch: None,
            parked: None,
            verdict: None,
            finished: 0,
            returned: 0,
            crashed: false,
            crash_at: None,
            closed: false,
            rng,
        };
        Arc::new(Gate { node, state: Mutex::new(state), cv: Condvar::new(), joint })
    }

    // ---- writer side ----

    /// Parks the writer until the simulator decides what `call` (of `len`
    /// bytes for a write) does.
    pub fn pass(&self, call: IoCall, len: u64) -> Verdict {
        let mut s = self.state.lock();
        if s.closed {
            return Verdict::Fail;
        }
        s.parked = Some((call, len));
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

    /// The writer has returned from every completion callback of the batch
    /// it took.
    pub fn completions_returned(&self) {
        self.state.lock().returned += 1;
        self.cv.notify_all();
    }

    // ---- simulator side ----

    /// About to hand `sub` to the WAL (before the call: the writer parks at
    /// its first disk call, so nothing completes before the gate knows).
    pub fn submit(&self, sub: Sub) {
        self.state.lock().queued.push_back(sub);
    }

    /// The submission just made has reached the WAL's queue. If the writer
    /// had no batch, it takes what is queued now: wait until it has parked
    /// with it. Answers whether that happened (the submission then makes up
    /// a batch of its own).
    pub fn handed(&self) -> bool {
        let mut s = self.state.lock();
        if s.batch.is_some() || s.queued.is_empty() {
            return false;
        }
        self.take_batch(&mut s);
        true
    }

    /// Whether the writer has work the simulator must drive.
    pub fn busy(&self) -> bool {
        self.state.lock().batch.is_some()
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
    /// without parking. Only once the node's Rafts are gone.
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
        let (call, len) = s.parked.expect("a parked call");
        let v = Self::verdict_for(s, call);
        if let Some(b) = s.batch.as_mut() {
            match (v, call) {
                (Verdict::Fail, _) => b.failed = true,
                (Verdict::Proceed, IoCall::Write) => {
                    b.written += len;
                    b.synced = false;
                }
                (Verdict::Proceed, IoCall::Sync) => b.synced = true,
            }
        }
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

    /// Waits until the writer has taken everything queued as its next batch
    /// and parked at the batch's first disk call.
    fn take_batch(&self, s: &mut MutexGuard<'_, State>) {
        let deadline = Instant::now() + STALL;
        while s.parked.is_none() || s.verdict.is_some() {
            if s.closed {
                // Torn down: the writer fails everything without parking.
                s.queued.clear();
                return;
            }
            if self.cv.wait_until(s, deadline).timed_out() {
                panic!(
                    "node {}: the WAL writer never took its next batch within {STALL:?}; has the write path changed?",
                    self.node
                );
            }
        }
        let hold = if s.rng.chance(400) { 0 } else { s.rng.range(1, 5) };
        let ready_at = Some(tokio::time::Instant::now() + Duration::from_millis(hold));
        let mut batch = Batch { ready_at, ..Batch::default() };
        for sub in s.queued.drain(..) {
            batch.appends += usize::from(sub.append);
            batch.bytes += sub.bytes;
        }
        if batch.appends > 1 {
            self.joint.fetch_add(1, Ordering::Relaxed);
        }
        s.batch = Some(batch);
    }

    /// Drives the writer's batch through its writes and fsyncs until it is
    /// done: every flush callback of it has woken its Raft core, or, for a
    /// batch of markers, its bytes are written and synced. `woken` counts
    /// the tasks woken from outside the runtime and not yet run; the
    /// batch's wakes are the only ones that can happen meanwhile, because
    /// every other writer is parked or idle and nothing on the runtime runs.
    /// Then, if more was queued, waits until the writer has taken it.
    ///
    /// A batch with appends only when the runtime has run out of work: then
    /// every core is idle, so each wake surely queues its core (a core
    /// already queued would not be queued again, and the wait would never
    /// end).
    ///
    /// A batch is held for a few (seeded) virtual milliseconds first, as a
    /// slow disk would hold it, unless `now`.
    pub fn complete(&self, woken: &dyn Fn() -> usize, now: bool) {
        let mut s = self.state.lock();
        // Without a batch nothing is queued either (a submission to an idle
        // writer is taken at once, see `handed`): nothing to drive.
        if s.batch.is_none() {
            return;
        }
        if s.closed {
            s.batch = None;
            s.queued.clear();
            return;
        }
        if !now && s.batch.as_ref().and_then(|b| b.ready_at).is_some_and(|at| tokio::time::Instant::now() < at) {
            return;
        }
        let base = woken();
        // Every earlier batch has returned from its callbacks by now: the
        // writer parked at this batch's first call after them.
        let returned = s.returned;
        let deadline = Instant::now() + STALL;
        loop {
            // Looked at with the writer's state in hand: a writer parked
            // again has made every callback of the batch before, so a
            // parked call of a batch that is not done yet is its own.
            let b = s.batch.as_ref().expect("driving a batch");
            // Woken or written is not enough: the writer goes on after
            // its last disk call (it poisons the log when a call failed,
            // and a callback goes on after waking its core: the log store
            // then raises its flushed signal, which wakes the proposer),
            // and whether that lands before or after the runtime moves on
            // would be the OS's choice. So the writer must also have
            // returned from every callback of the batch.
            let through = s.returned > returned;
            let done = if b.appends > 0 {
                woken() >= base + b.appends && through
            } else {
                (b.failed || (b.written >= b.bytes && b.synced)) && through
            };
            if done {
                break;
            }
            if s.parked.is_some() && s.verdict.is_none() {
                self.release(&mut s);
                continue;
            }
            if Instant::now() > deadline {
                panic!(
                    "node {}: a WAL batch ({} appends, {}/{} bytes) never completed within {STALL:?}",
                    self.node, b.appends, b.written, b.bytes
                );
            }
            self.cv.wait_for(&mut s, Duration::from_micros(50));
        }
        let done = s.batch.take().expect("driving a batch");
        if s.queued.is_empty() {
            return;
        }
        if !s.crashed {
            self.take_batch(&mut s);
            return;
        }
        // The log is poisoned: the writer fails what it takes next without
        // touching the disk. Wait for those failures to wake their cores.
        // They make one more batch, which returns from its callbacks too.
        let appends = s.queued.drain(..).filter(|q| q.append).count();
        let target = base + done.appends + appends;
        while woken() < target || s.returned < returned + 2 {
            if Instant::now() > deadline {
                panic!("node {}: appends failed by a crashed WAL never woke their cores within {STALL:?}", self.node);
            }
            self.cv.wait_for(&mut s, Duration::from_micros(50));
        }
    }

    /// Drives a batch of markers that was just taken (see [`Gate::handed`])
    /// through the disk; nothing waits for its callback.
    pub fn complete_markers(&self) {
        self.complete(&|| 0, true);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use regina_storage::{Wal, WalOptions};

    use super::*;
    use crate::disk::SimIo;

    /// A WAL over the simulated disk, and a count of its append callbacks
    /// standing in for the Raft cores they would wake.
    fn wal(gate: &Arc<Gate>) -> (tempfile::TempDir, Wal, Arc<AtomicUsize>) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let options = WalOptions { segment_bytes: 16 << 10, max_batch_bytes: u64::MAX, ..WalOptions::default() };
        let (wal, _) = Wal::open(dir.path().join("wal"), options, SimIo::new(gate.clone(), false)).expect("opens");
        (dir, wal, Arc::new(AtomicUsize::new(0)))
    }

    fn append(gate: &Gate, wal: &Wal, woken: &Arc<AtomicUsize>, bytes: &[u8]) -> bool {
        gate.submit(Sub { append: true, bytes: 0 });
        let woken = woken.clone();
        wal.append(
            vec![bytes.to_vec()],
            Box::new(move |r| {
                assert!(r.is_ok(), "{r:?}");
                woken.fetch_add(1, Ordering::SeqCst);
            }),
        );
        gate.handed()
    }

    /// Hands the WAL an append (or a marker, if not `append`) whose callback
    /// calls `first`, then goes on for a while before it counts itself in
    /// the answer: a callback that does something after its wake-up.
    fn slow_append(
        gate: &Gate,
        wal: &Wal,
        append: bool,
        first: impl FnOnce(&Result<Vec<regina_storage::RecordPos>, regina_storage::WalError>) + Send + 'static,
    ) -> Arc<AtomicUsize> {
        let after = Arc::new(AtomicUsize::new(0));
        gate.submit(Sub { append, bytes: 0 });
        let a = after.clone();
        wal.append(
            vec![b"slow".to_vec()],
            Box::new(move |r| {
                first(&r);
                std::thread::sleep(Duration::from_millis(50));
                a.fetch_add(1, Ordering::SeqCst);
            }),
        );
        after
    }

    #[test]
    fn appends_queued_behind_a_batch_make_the_next_batch_together() {
        let joint = Arc::new(AtomicU64::new(0));
        let gate = Gate::new(1, joint.clone(), Rng::new(1));
        let (_dir, wal, woken) = wal(&gate);
        let count = || woken.load(Ordering::SeqCst);
        // An idle writer takes the first append alone and parks with it.
        assert!(append(&gate, &wal, &woken, b"group 0"));
        // Two groups append while it is parked: queued, not taken.
        assert!(!append(&gate, &wal, &woken, b"group 1"));
        assert!(!append(&gate, &wal, &woken, b"group 2"));
        assert_eq!(count(), 0, "nothing is durable before the simulator lets it through");
        gate.complete(&count, true);
        assert_eq!(count(), 1, "the first batch is done, the next one not started");
        assert_eq!(joint.load(Ordering::SeqCst), 1, "the two queued appends were taken as one batch");
        assert!(gate.busy());
        gate.complete(&count, true);
        assert_eq!(count(), 3, "one batch covered both");
        assert!(!gate.busy());
        gate.close();
    }

    /// What a callback does after its wake-up has happened by the time the
    /// batch is complete: the log store's callback wakes its Raft core and
    /// then raises the flushed signal the proposer waits on. A gate that
    /// let the runtime go at the first wake-up left the second to race it,
    /// and a seed then replayed differently now and then.
    #[test]
    fn a_batch_is_complete_only_once_its_callbacks_have_returned() {
        let gate = Gate::new(1, Arc::default(), Rng::new(3));
        let (_dir, wal, woken) = wal(&gate);
        let w = woken.clone();
        let after = slow_append(&gate, &wal, true, move |r| {
            assert!(r.is_ok(), "{r:?}");
            w.fetch_add(1, Ordering::SeqCst);
        });
        assert!(gate.handed());
        gate.complete(&|| woken.load(Ordering::SeqCst), true);
        assert_eq!(after.load(Ordering::SeqCst), 1, "the runtime went on while a callback still ran");
        gate.close();
    }

    /// A failed batch of truncation markers is done only once the writer
    /// has poisoned the log: a gate that let the runtime go as soon as the
    /// failed write returned left the poisoning to race the Raft cores, and
    /// a request then failed with the log's reason in one replay and with
    /// the bare crash in another.
    #[test]
    fn a_failed_marker_batch_is_complete_only_once_the_log_is_poisoned() {
        let gate = Gate::new(1, Arc::default(), Rng::new(4));
        let (_dir, wal, _) = wal(&gate);
        let after = slow_append(&gate, &wal, false, |r| assert!(r.is_err(), "a crashed disk made it durable"));
        assert!(gate.handed());
        gate.crash_at_next(IoCall::Write);
        gate.complete_markers();
        assert!(wal.poisoned().is_some(), "the runtime went on before the log was poisoned");
        assert_eq!(after.load(Ordering::SeqCst), 1, "the runtime went on while a callback still ran");
        gate.close();
    }

    #[test]
    fn a_crash_at_the_fsync_fails_the_batch_and_what_was_queued_behind_it() {
        let gate = Gate::new(1, Arc::default(), Rng::new(2));
        let (_dir, wal, woken) = wal(&gate);
        let failed = Arc::new(AtomicUsize::new(0));
        let count = || woken.load(Ordering::SeqCst) + failed.load(Ordering::SeqCst);
        let submit = |bytes: &[u8]| {
            gate.submit(Sub { append: true, bytes: 0 });
            let failed = failed.clone();
            wal.append(
                vec![bytes.to_vec()],
                Box::new(move |r| {
                    assert!(r.is_err(), "a crashed disk made it durable");
                    failed.fetch_add(1, Ordering::SeqCst);
                }),
            );
            gate.handed()
        };
        assert!(submit(b"group 0"));
        assert!(!submit(b"group 1"));
        gate.crash_at_next(IoCall::Sync);
        gate.complete(&count, true);
        assert!(gate.crashed());
        assert_eq!(failed.load(Ordering::SeqCst), 2, "both appends failed, the queued one without a disk call");
        assert!(!gate.busy());
        gate.close();
    }
}

//! Leader-side batching of proposals.
//!
//! openraft 0.9 awaits each append's fsync inside its core loop, one client
//! write at a time, so one request per entry would cap writes at one fsync
//! each however many clients wait. The proposer keeps at most
//! [`MAX_IN_FLIGHT`] entries in flight and packs every request that arrived
//! meanwhile into the next one (`Command::Batch`): one append, one fsync,
//! many answers. An idle node proposes a lone request at once, unbatched.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use openraft::error::{ClientWriteError, RaftError};
use parking_lot::Mutex;
use regina_consensus::answers::{Deliver, Proposed, Ticket};
use regina_consensus::types::LogId;
use regina_consensus::{LogStore, Raft, SharedState};
use regina_state::{Command, Entry, Outcome};

use crate::clock::LeaderClock;
use regina_types::limits::PROPOSAL_ANSWER_MS_MAX;
use tokio::sync::{mpsc, oneshot, Semaphore};

use regina_types::limits::PROPOSER_QUEUE_BYTES_MAX;

/// Entries proposed and not yet answered. The next entry is formed only
/// once the last one is durable in the local log (`batch_loop`), so a
/// second one in flight is being fsynced while the first is applied (or,
/// in a cluster, waits for the followers).
const MAX_IN_FLIGHT: usize = 2;
/// Requests packed into one entry at most.
const MAX_BATCH_COMMANDS: usize = 1024;
/// Rough encoded bytes of one batch at most (one request may exceed it
/// alone); far below the log's record limit.
const MAX_BATCH_BYTES: usize = 8 << 20;
/// How long a request waits for its entry to be applied. A leader cut off
/// from its majority cannot commit; past this the client hears that the
/// outcome is unknown (the entry may still commit under a later leader).
const ANSWER_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(PROPOSAL_ANSWER_MS_MAX);

/// Why a write was not applied.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProposeError {
    #[error("no leader is elected yet; retry shortly")]
    NoLeader,
    #[error("this node cannot reach a majority of its cluster, so nothing was read or written: {0}")]
    NoQuorum(String),
    #[error("storage failed and the node refuses writes: {0}")]
    Storage(String),
    #[error("the outcome is unknown: {0}")]
    Unknown(String),
    /// Refused before it was queued: nothing was written (429).
    #[error("the node is overloaded, nothing was written; retry shortly: {0}")]
    Overloaded(String),
    /// The disk is past its high watermark and the command would grow
    /// storage: nothing was written (507).
    #[error("the disk is full, nothing was written: {0}")]
    StorageFull(String),
}

/// A command's outcome and the log entry it was applied in (shared with
/// the other commands of its batch).
pub type Logged = (LogId, Outcome);

struct Proposal {
    command: Command,
    /// `command.approx_bytes()`, counted once.
    bytes: usize,
    done: oneshot::Sender<Result<Logged, ProposeError>>,
}

/// What waits for the batching task: requests and their rough bytes. Past
/// either bound a proposal is refused (`Overloaded`) instead of queued, so
/// a burst the log cannot keep up with costs no unbounded memory.
struct Queue {
    requests: AtomicUsize,
    bytes: AtomicUsize,
    max_requests: usize,
}

pub struct Proposer {
    tx: mpsc::UnboundedSender<Proposal>,
    slots: Arc<Semaphore>,
    queue: Arc<Queue>,
    /// What this node's proposals wrote (the group's load while it leads).
    pub load: Arc<Written>,
}

/// Counts the requests a leader proposed. Only ever rises.
#[derive(Default)]
pub struct Written {
    pub commands: AtomicU64,
}

/// While held, nothing new reaches the log: requests wait in the proposer
/// and go out once the hold is dropped (see `crate::balance`).
pub struct Hold {
    _slots: tokio::sync::OwnedSemaphorePermit,
}

impl Proposer {
    /// Starts the batching task; it ends when the proposer is dropped. At
    /// most `max_queued` requests wait for it (`--max-queued-proposals`).
    /// `machine` (the group's state machine) answers the requests as it
    /// applies their entries, unless another proposer took that role.
    pub fn start(
        raft: Raft,
        log: LogStore,
        machine: &SharedState,
        clock: Arc<LeaderClock>,
        max_queued: usize,
    ) -> Proposer {
        let waiting = Arc::new(Waiting::default());
        let delivers = machine.answer_applied_through(waiting.clone());
        waiting.active.store(delivers, Ordering::Release);
        let writer = LogWriter { raft, log, waiting };
        let (tx, rx) = mpsc::unbounded_channel();
        let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
        let load = Arc::new(Written::default());
        let queue =
            Arc::new(Queue { requests: AtomicUsize::new(0), bytes: AtomicUsize::new(0), max_requests: max_queued });
        tokio::spawn(batch_loop(rx, writer, clock, slots.clone(), load.clone(), queue.clone()));
        Proposer { tx, slots, queue, load }
    }

    /// Waits until every entry in flight is answered and keeps new ones
    /// from being proposed until the hold is dropped.
    pub async fn hold(&self) -> Option<Hold> {
        let permits = self.slots.clone().acquire_many_owned(MAX_IN_FLIGHT as u32).await.ok()?;
        Some(Hold { _slots: permits })
    }

    /// Appends a command to the log and answers once it is durable and
    /// applied.
    pub async fn propose(&self, command: Command) -> Result<Outcome, ProposeError> {
        self.propose_logged(command).await.map(|(_, outcome)| outcome)
    }

    /// [`Proposer::propose`], also naming the log entry the command was
    /// applied in (the simulation checks it against what was applied).
    pub async fn propose_logged(&self, command: Command) -> Result<Logged, ProposeError> {
        let bytes = command.approx_bytes();
        let waiting = self.queue.requests.fetch_add(1, Ordering::AcqRel);
        let waiting_bytes = self.queue.bytes.fetch_add(bytes, Ordering::AcqRel);
        if waiting >= self.queue.max_requests || waiting_bytes + bytes > PROPOSER_QUEUE_BYTES_MAX {
            self.queue.requests.fetch_sub(1, Ordering::AcqRel);
            self.queue.bytes.fetch_sub(bytes, Ordering::AcqRel);
            return Err(ProposeError::Overloaded(format!(
                "{waiting} requests ({waiting_bytes} bytes) already wait for the log (at most {} and \
                 {PROPOSER_QUEUE_BYTES_MAX} bytes)",
                self.queue.max_requests
            )));
        }
        let (done, answer) = oneshot::channel();
        self.tx
            .send(Proposal { command, bytes, done })
            .map_err(|_| ProposeError::Unknown("the node is stopping".into()))?;
        match tokio::time::timeout(ANSWER_TIMEOUT, answer).await {
            Ok(answered) => answered.map_err(|_| ProposeError::Unknown("the node stopped before answering".into()))?,
            Err(_) => Err(ProposeError::Unknown(format!(
                "the write was not committed within {ANSWER_TIMEOUT:?}; it may still be applied"
            ))),
        }
    }
}

async fn batch_loop(
    mut rx: mpsc::UnboundedReceiver<Proposal>,
    writer: LogWriter,
    clock: Arc<LeaderClock>,
    slots: Arc<Semaphore>,
    load: Arc<Written>,
    queue: Arc<Queue>,
) {
    loop {
        // Wait for a request, then for a free slot: everything that arrives
        // meanwhile joins the next entry. (A slot is not taken while idle,
        // so a hold can take them all.)
        let Some(first) = rx.recv().await else { return };
        let Ok(slot) = slots.clone().acquire_owned().await else { return };
        let mut bytes = first.bytes;
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH_COMMANDS && bytes < MAX_BATCH_BYTES {
            let Ok(next) = rx.try_recv() else { break };
            bytes += next.bytes;
            batch.push(next);
        }
        queue.requests.fetch_sub(batch.len(), Ordering::AcqRel);
        queue.bytes.fetch_sub(bytes, Ordering::AcqRel);
        let (task_writer, now_ms) = (writer.clone(), clock.stamp());
        load.commands.fetch_add(batch.len() as u64, Ordering::Relaxed);
        let appended_before = writer.log.appended().0;
        let (answered, finished) = oneshot::channel::<()>();
        tokio::spawn(async move {
            task_writer.answer(batch, now_ms).await;
            drop(slot);
            drop(answered);
        });
        // The next entry is formed once this one is durable here (or was
        // answered without being: refused, failed): an entry proposed while
        // another waits for its fsync would wait behind it with the few
        // requests that had arrived, and everything after would wait for
        // both. Measured on a disk whose fsync took ~2 ms: push batch 1
        // 4,000 -> 13,400 msg/s (docs/benchmarks.md).
        tokio::select! {
            () = writer.log.flushed_past(appended_before) => {}
            _ = finished => {}
        }
    }
}

/// Where the proposer's entries go, and who waits for them.
#[derive(Clone)]
struct LogWriter {
    raft: Raft,
    log: LogStore,
    waiting: Arc<Waiting>,
}

impl LogWriter {
    /// Writes one entry for the batch and hands every request its outcome:
    /// from the apply itself when this node's state machine answers its
    /// tickets (`waiting`), else from openraft's answer.
    async fn answer(&self, batch: Vec<Proposal>, now_ms: u64) {
        let waiting = &self.waiting;
        let (command, waiters) = if batch.len() == 1 {
            let p = batch.into_iter().next().expect("one proposal");
            (p.command, Waiters::One(p.done))
        } else {
            let (commands, dones): (Vec<Command>, Vec<_>) = batch.into_iter().map(|p| (p.command, p.done)).unzip();
            (Command::Batch(commands), Waiters::Batch(dones))
        };
        let entry = Entry { now_ms, command };
        match waiting.register(waiters) {
            Ok(ticket) => {
                let written = self.write(Proposed { entry, ticket: Ticket(Some(ticket)) }).await;
                // Not taken by the apply (a failure, or the entry was read
                // back from the WAL without its ticket): answered from here.
                if let Some(waiters) = waiting.take(ticket) {
                    waiters.answer(written);
                }
            }
            Err(waiters) => waiters.answer(self.write(entry.into()).await),
        }
    }

    async fn write(&self, entry: Proposed) -> Result<Logged, ProposeError> {
        match self.raft.client_write(entry).await {
            Ok(resp) => Ok((resp.log_id, resp.data)),
            // Either refused before it was appended, or appended and then cut
            // from this node's log by a new leader's: never committed.
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_))) => Err(ProposeError::NoLeader),
            Err(RaftError::APIError(e)) => Err(ProposeError::Unknown(e.to_string())),
            Err(RaftError::Fatal(f)) => match self.log.poisoned() {
                Some(why) => Err(ProposeError::Storage(why)),
                None => Err(ProposeError::Unknown(f.to_string())),
            },
        }
    }
}

/// The requests of one entry, waiting for its outcome.
enum Waiters {
    One(oneshot::Sender<Result<Logged, ProposeError>>),
    /// A `Command::Batch`'s requests, in its order.
    Batch(Vec<oneshot::Sender<Result<Logged, ProposeError>>>),
}

impl Waiters {
    fn answer(self, written: Result<Logged, ProposeError>) {
        match (self, written) {
            (Waiters::One(done), written) => drop(done.send(written)),
            (Waiters::Batch(dones), Ok((log_id, Outcome::Batch(outcomes)))) => {
                assert_eq!(outcomes.len(), dones.len(), "a batch answers once per command");
                for (done, outcome) in dones.into_iter().zip(outcomes) {
                    let _ = done.send(Ok((log_id, outcome)));
                }
            }
            (Waiters::Batch(dones), Ok((_, other))) => {
                let e = ProposeError::Unknown(format!("a batch was answered with {other:?}"));
                dones.into_iter().for_each(|d| drop(d.send(Err(e.clone()))));
            }
            (Waiters::Batch(dones), Err(e)) => dones.into_iter().for_each(|d| drop(d.send(Err(e.clone())))),
        }
    }
}

/// The entries this node proposed whose requests still wait, by ticket
/// (`regina_consensus::answers`). Whoever takes an entry's waiters answers
/// them: the state machine once it applied the entry, or the proposal's
/// task once openraft answered.
#[derive(Default)]
pub(crate) struct Waiting {
    /// Tickets are handed out only when the state machine answers them.
    active: AtomicBool,
    waiters: Mutex<HashMap<NonZeroU64, Waiters>>,
}

impl Waiting {
    /// Registers `waiters` under a fresh ticket; gives them back unless
    /// the state machine delivers (then their proposer answers them).
    fn register(&self, waiters: Waiters) -> Result<NonZeroU64, Waiters> {
        if !self.active.load(Ordering::Acquire) {
            return Err(waiters);
        }
        let ticket = Ticket::fresh();
        self.waiters.lock().insert(ticket, waiters);
        Ok(ticket)
    }

    fn take(&self, ticket: NonZeroU64) -> Option<Waiters> {
        self.waiters.lock().remove(&ticket)
    }
}

impl Deliver for Waiting {
    fn deliver(&self, ticket: NonZeroU64, log_id: LogId, outcome: Outcome) -> Option<Outcome> {
        let Some(waiters) = self.take(ticket) else { return Some(outcome) };
        waiters.answer(Ok((log_id, outcome)));
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;

    fn log_id(index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(1, 1), index)
    }

    /// Waiters no state machine will deliver to come back to their
    /// proposer: dropped, their requests would hear "stopped" instead of
    /// their outcome.
    #[test]
    fn waiters_are_given_back_when_the_state_machine_does_not_deliver() {
        let waiting = Waiting::default();
        let (done, mut answer) = oneshot::channel();
        let Err(waiters) = waiting.register(Waiters::One(done)) else { panic!("registered while inactive") };
        waiters.answer(Ok((log_id(3), Outcome::Done)));
        assert!(matches!(answer.try_recv(), Ok(Ok((id, Outcome::Done))) if id == log_id(3)));
    }

    /// The state machine's delivery and the proposer's own answer race for
    /// the registration: exactly one of them answers.
    #[test]
    fn a_registration_is_answered_once() {
        let waiting = Waiting::default();
        waiting.active.store(true, Ordering::Release);
        let (first, mut first_answer) = oneshot::channel();
        let (second, mut second_answer) = oneshot::channel();
        let Ok(ticket) = waiting.register(Waiters::Batch(vec![first, second])) else { panic!("not registered") };
        let outcome = Outcome::Batch(vec![Outcome::Found(true), Outcome::Found(false)]);
        assert!(waiting.deliver(ticket, log_id(5), outcome).is_none(), "delivered");
        assert!(matches!(first_answer.try_recv(), Ok(Ok((_, Outcome::Found(true))))));
        assert!(matches!(second_answer.try_recv(), Ok(Ok((_, Outcome::Found(false))))));
        assert!(waiting.take(ticket).is_none(), "the proposer finds nothing left to answer");
        let again = waiting.deliver(ticket, log_id(5), Outcome::Done);
        assert!(matches!(again, Some(Outcome::Done)), "a second delivery is given back");
    }
}

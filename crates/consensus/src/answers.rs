//! Answers that leave from the apply.
//!
//! A request waits for its entry's outcome. Through openraft, that outcome
//! goes from the state machine's task to the Raft core's task and from
//! there to the `client_write` caller: two hand-offs after the apply, each
//! a task wake that costs tens of microseconds on a loaded machine (67 us
//! of a batch-1 push's ~700 us round trip, docs/benchmarks.md, item 36).
//!
//! So the node that proposes an entry tags it with a [`Ticket`] and
//! registers its waiting requests under it ([`Deliver`]); the state machine,
//! having applied the entry, hands the outcome straight to them. The ticket
//! lives in memory only (never encoded): an entry a follower received, one
//! a restart re-applies, or one read back from the WAL after the log's
//! cache let it go carries none, and its outcome goes through openraft as
//! before. Either way an outcome is delivered once: whoever takes the
//! registration answers.

use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};

use regina_state::{Entry, Outcome};
use serde::{Deserialize, Serialize};

use openraft::EntryPayload;

use crate::types::{LogId, RaftEntry};

/// Where an entry's outcome is awaited on the node that proposed it.
/// Compares equal to any other ticket: it is not part of what the entry
/// says, only of where its answer goes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ticket(pub Option<NonZeroU64>);

impl Ticket {
    /// A ticket no other entry of this process carries. Unique across the
    /// process, not per proposer: an entry handed to another node's Raft
    /// in memory (as the simulation's network does) keeps its ticket, and
    /// that node must not find a waiter of its own under it.
    pub fn fresh() -> NonZeroU64 {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        NonZeroU64::new(NEXT.fetch_add(1, Ordering::Relaxed)).expect("a counter from 1")
    }

    /// Takes the ticket out of a log entry about to be applied (none for a
    /// membership or blank entry, or one that never had one).
    pub fn take(entry: &mut RaftEntry) -> Ticket {
        match &mut entry.payload {
            EntryPayload::Normal(proposed) => std::mem::take(&mut proposed.ticket),
            _ => Ticket::default(),
        }
    }
}

impl PartialEq for Ticket {
    fn eq(&self, _: &Ticket) -> bool {
        true
    }
}

/// The data of one Raft log entry: the entry, plus its ticket on the node
/// that proposed it. Encoded exactly as the bare entry (the ticket is
/// skipped), so the log's format does not change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Proposed {
    pub entry: Entry,
    #[serde(skip)]
    pub ticket: Ticket,
}

impl From<Entry> for Proposed {
    fn from(entry: Entry) -> Proposed {
        Proposed { entry, ticket: Ticket::default() }
    }
}

/// Takes applied outcomes to the requests that wait for them.
pub trait Deliver: Send + Sync {
    /// Answers the requests registered under `ticket` with the outcome of
    /// the entry applied at `log_id`. Gives the outcome back if nothing is
    /// registered there any more (then it goes through openraft).
    fn deliver(&self, ticket: NonZeroU64, log_id: LogId, outcome: Outcome) -> Option<Outcome>;
}

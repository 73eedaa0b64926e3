//! Outcomes handed from the apply to the requests that wait for them
//! (`regina_consensus::answers`): an entry whose ticket is registered is
//! answered by the state machine and openraft carries a placeholder; any
//! other entry's outcome goes through openraft unchanged. The ticket never
//! reaches the log's bytes.

// Tests unwrap (a failure names its line).
#![allow(clippy::unwrap_used)]

use std::num::NonZeroU64;
use std::sync::Arc;

use openraft::storage::RaftStateMachine;
use openraft::{CommittedLeaderId, EntryPayload};
use parking_lot::Mutex;
use regina_consensus::answers::{Deliver, Proposed, Ticket};
use regina_consensus::state_machine::StateMachineStore;
use regina_consensus::types::{LogId, RaftEntry};
use regina_state::command::PushItem;
use regina_state::{Command, Entry, Outcome};

/// Answers ticket 1 only, and keeps what it answered.
#[derive(Default)]
struct Recorder {
    answered: Mutex<Vec<(NonZeroU64, LogId, Outcome)>>,
}

impl Deliver for Recorder {
    fn deliver(&self, ticket: NonZeroU64, log_id: LogId, outcome: Outcome) -> Option<Outcome> {
        if ticket.get() != 1 {
            return Some(outcome);
        }
        self.answered.lock().push((ticket, log_id, outcome));
        None
    }
}

fn item(n: u8) -> PushItem {
    PushItem {
        queue: "orders".into(),
        partition: format!("p{n}"),
        transaction_id: format!("tx-{n}"),
        trace_id: None,
        message_id: [n; 16],
        payload: vec![b'x'; 40],
    }
}

fn entry(index: u64, ticket: Option<u64>) -> RaftEntry {
    let entry = Entry { now_ms: 1_700_000_000_000 + index, command: Command::push(vec![item(index as u8)]) };
    let ticket = Ticket(ticket.and_then(NonZeroU64::new));
    RaftEntry { log_id: log_id(index), payload: EntryPayload::Normal(Proposed { entry, ticket }) }
}

fn log_id(index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(1, 1), index)
}

#[tokio::test]
async fn a_registered_ticket_is_answered_by_the_apply_and_the_rest_by_openraft() {
    let dir = tempfile::tempdir().unwrap();
    let mut sm = StateMachineStore::open(dir.path()).unwrap();
    let recorder = Arc::new(Recorder::default());
    assert!(sm.shared().answer_applied_through(recorder.clone()));
    assert!(!sm.shared().answer_applied_through(recorder.clone()), "one deliverer per state machine");

    // Ticket 1 is registered, ticket 2 is not (its waiters were answered
    // elsewhere), the third entry has none (a follower's, a replay's).
    let out = sm.apply(vec![entry(1, Some(1)), entry(2, Some(2)), entry(3, None)]).await.unwrap();

    assert_eq!(out.len(), 3);
    assert!(matches!(out[0], Outcome::Done), "openraft carries a placeholder: {:?}", out[0]);
    assert!(matches!(&out[1], Outcome::Push(r) if r.len() == 1), "{:?}", out[1]);
    assert!(matches!(&out[2], Outcome::Push(r) if r.len() == 1), "{:?}", out[2]);
    let answered = recorder.answered.lock();
    assert_eq!(answered.len(), 1);
    assert_eq!((answered[0].0.get(), answered[0].1), (1, log_id(1)));
    assert!(matches!(&answered[0].2, Outcome::Push(r) if r.len() == 1), "{:?}", answered[0].2);
    assert_eq!(sm.shared().machine.read().last_applied, Some(log_id(3)));
}

#[tokio::test]
async fn without_a_deliverer_every_outcome_goes_through_openraft() {
    let dir = tempfile::tempdir().unwrap();
    let mut sm = StateMachineStore::open(dir.path()).unwrap();
    let out = sm.apply(vec![entry(1, Some(1))]).await.unwrap();
    assert!(matches!(&out[0], Outcome::Push(r) if r.len() == 1), "{:?}", out[0]);
}

#[test]
fn a_ticket_is_not_encoded() {
    let bare = Entry { now_ms: 7, command: Command::push(vec![item(9)]) };
    let tagged = Proposed { entry: bare.clone(), ticket: Ticket(NonZeroU64::new(42)) };
    let bytes = bincode::serialize(&tagged).unwrap();
    assert_eq!(bytes, bincode::serialize(&bare).unwrap(), "a proposed entry encodes as the bare entry");
    let back: Proposed = bincode::deserialize(&bytes).unwrap();
    assert_eq!(back.ticket.0, None, "decoded entries carry no ticket");
    assert_eq!(back.entry, bare);
}

#[test]
fn taking_a_ticket_leaves_none_behind() {
    let mut tagged = entry(1, Some(7));
    assert_eq!(Ticket::take(&mut tagged).0, NonZeroU64::new(7));
    assert_eq!(Ticket::take(&mut tagged).0, None, "a ticket is taken once");
    let mut untagged = entry(2, None);
    assert_eq!(Ticket::take(&mut untagged).0, None);
    let mut blank = RaftEntry { log_id: log_id(3), payload: EntryPayload::Blank };
    assert_eq!(Ticket::take(&mut blank).0, None);
}

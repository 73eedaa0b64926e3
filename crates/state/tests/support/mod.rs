//! Builders shared by the state machine's tests.
#![allow(dead_code)]

use regina_state::command::*;
use regina_state::outcome::*;
use regina_state::{Command, Entry, Outcome, State};

pub const QM: &str = "__QUEUE_MODE__";

pub struct Harness {
    pub state: State,
    pub now: u64,
    seq: u64,
}

impl Harness {
    pub fn new() -> Self {
        Harness { state: State::new(), now: 1_000_000, seq: 0 }
    }

    pub fn apply(&mut self, command: Command) -> Outcome {
        let out = self.state.apply(&Entry { now_ms: self.now, command });
        self.state.check_invariants().expect("invariants hold after every entry");
        out.outcome
    }

    pub fn id(&mut self) -> [u8; 16] {
        self.seq += 1;
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.seq.to_le_bytes());
        b
    }

    pub fn push(&mut self, queue: &str, partition: &str, txn: &str) -> PushResult {
        let item = self.item(queue, partition, txn);
        match self.apply(Command::push(vec![item])) {
            Outcome::Push(mut r) => r.remove(0),
            o => panic!("push answered {o:?}"),
        }
    }

    pub fn item(&mut self, queue: &str, partition: &str, txn: &str) -> PushItem {
        PushItem {
            queue: queue.into(),
            partition: partition.into(),
            transaction_id: txn.into(),
            trace_id: None,
            message_id: self.id(),
            payload: format!("\"{txn}\"").into_bytes(),
        }
    }

    pub fn pop(&mut self, queue: &str, group: &str, batch: u32, sub: Subscription) -> PopResult {
        self.seq += 1;
        let cmd = PopCmd {
            target: PopTarget::Queue { queue: queue.into(), partition: None },
            group: group.into(),
            batch,
            max_partitions: 1,
            lease_id: format!("lease-{}", self.seq),
            lease_ms: None,
            auto_ack: false,
            subscription: sub,
            conflation: false,
        };
        self.pop_cmd(cmd)
    }

    pub fn pop_cmd(&mut self, cmd: PopCmd) -> PopResult {
        match self.apply(Command::Pop(cmd)) {
            Outcome::Pop(r) => r,
            o => panic!("pop answered {o:?}"),
        }
    }

    pub fn ack(&mut self, group: &str, items: Vec<AckItem>) -> Vec<AckResult> {
        match self.apply(Command::Ack(AckCmd { group: group.into(), items })) {
            Outcome::Ack(r) => r,
            o => panic!("ack answered {o:?}"),
        }
    }
}

pub fn ack_item(pid: u64, txn: &str, status: AckStatus, lease: &str) -> AckItem {
    AckItem {
        partition_id: pid,
        transaction_id: txn.into(),
        status,
        error: Some("boom".into()),
        lease_id: Some(lease.into()),
    }
}

pub fn offsets(r: &PopResult) -> Vec<u64> {
    r.claims.iter().flat_map(|c| c.messages.iter().map(|d| d.offset)).collect()
}

/// Applies one KV call.
pub fn call(h: &mut Harness, ops: Vec<KvOp>) -> KvOutcome {
    match h.apply(Command::Kv(KvCmd { ops })) {
        Outcome::Kv(o) => o,
        o => panic!("kv answered {o:?}"),
    }
}

/// Applies one KV operation that must not be refused, and answers its result.
pub fn one(h: &mut Harness, op: KvOp) -> KvResult {
    match call(h, vec![op]) {
        KvOutcome::Done(mut r) => r.remove(0),
        KvOutcome::Refused(r) => panic!("refused: {r:?}"),
    }
}

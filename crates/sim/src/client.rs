//! Clients: each request is a task that calls `client_write` on the Raft of
//! its group on the node the simulator believes leads that group, with a
//! deadline, and records the answer.
//!
//! Only an `Ok` is an acknowledgement. Every other end (a timeout, a node
//! that stopped leading, a crash) leaves the request's fate unknown: it may
//! still commit, so nothing is concluded from it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use regina_consensus::types::LogId;
use regina_consensus::SharedState;
use regina_state::{BodyRecord, Command, Entry, Outcome};

use crate::network::Peer;
use crate::NodeId;

/// How long a client waits for its answer (virtual time).
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Debug, Clone)]
pub enum Reply {
    Acked {
        log_id: LogId,
        outcome: Outcome,
        /// For a pop: the body of each delivered message, by
        /// (partition id, offset), as the answering node read it.
        bodies: Vec<(u64, u64, Option<BodyRecord>)>,
    },
    Unknown(String),
}

#[derive(Debug, Clone)]
pub struct Op {
    pub id: u64,
    pub step: u32,
    pub node: NodeId,
    /// The Raft group it was sent to.
    pub group: u16,
    pub label: String,
    pub entry: Entry,
    pub reply: Option<Reply>,
}

#[derive(Default)]
pub struct Clients {
    pub ops: BTreeMap<u64, Op>,
    /// Ops answered since the simulator last looked, in answer order.
    finished: Vec<u64>,
    next: u64,
}

impl Clients {
    pub fn take_finished(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.finished)
    }

    pub fn in_flight(&self) -> usize {
        self.ops.values().filter(|o| o.reply.is_none()).count()
    }
}

/// The bodies of the messages a pop delivered.
fn pop_bodies(shared: &SharedState, outcome: &Outcome) -> Vec<(u64, u64, Option<BodyRecord>)> {
    let Outcome::Pop(p) = outcome else { return Vec::new() };
    let mut out = Vec::new();
    for c in &p.claims {
        for m in &c.messages {
            let body = shared.read_body(m.pos, m.len).ok().and_then(|b| BodyRecord::decode(&b));
            out.push((c.partition_id, m.offset, body));
        }
    }
    out
}

/// Starts a request; its answer shows up in `clients` when it ends.
pub fn submit(
    clients: &Arc<Mutex<Clients>>,
    peer: Peer,
    (node, group): (NodeId, u16),
    step: u32,
    label: String,
    command: Command,
) -> u64 {
    // The time is the leader's: known once the entry is applied.
    let entry = Entry { now_ms: 0, command: command.clone() };
    let id = {
        let mut c = clients.lock();
        c.next += 1;
        let id = c.next;
        c.ops.insert(id, Op { id, step, node, group, label, entry: entry.clone(), reply: None });
        id
    };
    let clients = clients.clone();
    tokio::spawn(async move {
        let proposer = peer.proposer.clone().expect("a client's peer has a proposer");
        let answer = tokio::time::timeout(CLIENT_TIMEOUT, proposer.propose_logged(command)).await;
        let reply = match answer {
            Ok(Ok((log_id, outcome))) => {
                let bodies = pop_bodies(&peer.shared, &outcome);
                Reply::Acked { log_id, outcome, bodies }
            }
            Ok(Err(e)) => Reply::Unknown(short(&e.to_string())),
            Err(_) => Reply::Unknown("timed out".into()),
        };
        drop(peer);
        let mut c = clients.lock();
        if let Some(op) = c.ops.get_mut(&id) {
            op.reply = Some(reply);
        }
        c.finished.push(id);
    });
    id
}

fn short(s: &str) -> String {
    s.chars().take(80).collect()
}

/// A short account of an outcome for the trace.
pub fn summary(outcome: &regina_state::Outcome) -> String {
    use regina_state::outcome::LockResult;
    use regina_state::Outcome as O;
    match outcome {
        O::Push(rs) => {
            rs.iter().map(|r| format!("{:?}@{}:{}", r.status, r.partition_id, r.offset)).collect::<Vec<_>>().join(" ")
        }
        O::Pop(p) => format!(
            "claimed {}",
            p.claims
                .iter()
                .map(|c| format!("{}:{:?}", c.partition_id, c.messages.iter().map(|m| m.offset).collect::<Vec<_>>()))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        O::Ack(rs) => format!("acks {:?}", rs.iter().map(|r| r.success).collect::<Vec<_>>()),
        O::Locks(rs) => rs
            .iter()
            .map(|r| match r {
                LockResult::Acquired { token, already, .. } => {
                    format!("acquired token {token}{}", if *already { " (already)" } else { "" })
                }
                LockResult::Held { holders } => {
                    format!("held by {:?}", holders.iter().map(|h| h.token).collect::<Vec<_>>())
                }
                LockResult::Renewed { token, .. } => format!("renewed token {token}"),
                LockResult::Released { .. } => "released".into(),
                LockResult::Lost { .. } => "lost".into(),
                LockResult::Holders(h) => format!("{} holders", h.len()),
            })
            .collect::<Vec<_>>()
            .join(" "),
        O::Batch(os) => format!("batch[{}]", os.iter().map(summary).collect::<Vec<_>>().join("; ")),
        O::Extend(e) => format!("extended {}", e.renewed),
        O::Jobs(regina_state::jobs::apply::JobsOutcome::Done(rs)) => {
            use regina_state::jobs::apply::JobResult as J;
            let one = |r: &J| match r {
                J::Claimed(Some(c)) => format!("claimed {}/{} token {}", c.scope, c.id, c.token),
                J::Claimed(None) => "nothing to claim".into(),
                J::Renewed(c) => format!("renewed token {}", c.token),
                J::Applied { job, .. } => format!("applied ({:?})", job.as_ref().map(|j| j.state)),
                J::Refused { code, .. } => code.as_str().into(),
                other => format!("{other:?}").chars().take(40).collect(),
            };
            format!("jobs [{}]", rs.iter().map(one).collect::<Vec<_>>().join(", "))
        }
        other => format!("{other:?}").chars().take(40).collect(),
    }
}

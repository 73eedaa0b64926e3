//! What the clients of one Raft group ask for, seeded: pushes with transaction ids to a few
//! partitions of one queue (and retries of pushes whose answer was lost),
//! pops under one consumer group with short leases, acks and extensions of
//! those leases, lock acquire, renew and release, job-queue calls (enqueue,
//! claim, renew, complete, fail, release over one queue and two scopes),
//! and now and then several requests batched into one entry as the
//! proposer does.
//!
//! The workload remembers what acknowledged answers handed out (leases,
//! lock tokens, job claims) so that later requests can use them, like a
//! real client; now and then it proves a job lease it already spent, as a
//! worker that missed its lease's end would.
//!
//! Each group has a workload of its own, and everything it names (queues,
//! transaction, lease and request ids) carries the group's tag, so an entry
//! of one group cannot pass for another group's.

use std::collections::BTreeMap;

use regina_state::command::{AckCmd, AckItem, AckStatus, LockOp, LocksCmd, PopCmd, PopTarget, PushItem, Subscription};
use regina_state::jobs::apply::{JobResult, JobsOutcome};
use regina_state::jobs::view::ClaimView;
use regina_state::jobs::{Availability, JobOp, JobTarget, JobsCmd, LeaseProof};
use regina_state::outcome::LockResult;
use regina_state::timers::{ScheduleOp, TimerOp};
use regina_state::{Command, Entry, Outcome};

use crate::client::Reply;
use crate::invariants::flatten;
use crate::rng::Rng;

/// The group's tag, in everything its workload names.
pub fn tag(group: u16) -> String {
    format!("g{group}")
}

/// How the names of a group's queues start.
pub fn queue_prefix(group: u16) -> String {
    format!("sim.{}.", tag(group))
}

/// How the ids of a group's pop leases start.
pub fn lease_prefix(tag: &str) -> String {
    format!("{tag}L")
}

/// The queue's name, after the group's tag.
pub const QUEUE: &str = "work.orders";
pub const GROUP: &str = "workers";
pub const PARTITIONS: u64 = 4;
const LOCKS: u64 = 2;
const OWNERS: u64 = 3;
/// Pushes kept for a retry after an unknown outcome.
const RETRY_POOL_MAX: usize = 32;
pub const JOB_QUEUE: &str = "jobs";
/// Each scope has its own fencing tokens.
pub const JOB_SCOPES: [&str; 2] = ["", "east"];
const JOB_IDS: u64 = 6;
/// Job claims kept to prove later, live or spent.
const JOB_CLAIMS_MAX: usize = 12;

struct Lease {
    id: String,
    /// (partition id, transaction id) of each delivered message, in order.
    items: Vec<(u64, String)>,
}

pub struct Workload {
    rng: Rng,
    /// `g{group}`: in every name and id.
    tag: String,
    queue: String,
    job_queue: String,
    next: u64,
    retry: Vec<PushItem>,
    leases: Vec<Lease>,
    /// Lock name to (owner, token) of the permit a client believes it holds.
    locks: BTreeMap<String, (String, u64)>,
    /// Job leases handed out, newest last; kept after use, so some proofs
    /// are stale.
    claims: Vec<ClaimView>,
    /// Request ids of claims sent, some to be sent again.
    claim_requests: Vec<String>,
}

/// A request about to be sent.
pub struct Planned {
    pub label: String,
    pub command: Command,
}

impl Workload {
    pub fn new(rng: Rng, group: u16) -> Workload {
        let tag = tag(group);
        Workload {
            rng,
            queue: format!("{}{QUEUE}", queue_prefix(group)),
            job_queue: format!("{}{JOB_QUEUE}", queue_prefix(group)),
            tag,
            next: 0,
            retry: Vec::new(),
            leases: Vec::new(),
            locks: BTreeMap::new(),
            claims: Vec::new(),
            claim_requests: Vec::new(),
        }
    }

    fn mint(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    fn push_item(&mut self) -> (PushItem, String) {
        if !self.retry.is_empty() && self.rng.chance(150) {
            let i = self.rng.below(self.retry.len() as u64) as usize;
            let item = self.retry.swap_remove(i);
            let label = format!("retry {}/{}", item.partition, item.transaction_id);
            return (item, label);
        }
        let n = self.mint();
        let partition = format!("p{}", self.rng.below(PARTITIONS));
        let txn = format!("{}t{n}", self.tag);
        let mut message_id = [0u8; 16];
        message_id[..8].copy_from_slice(&n.to_le_bytes());
        let item = PushItem {
            queue: self.queue.clone(),
            partition: partition.clone(),
            transaction_id: txn.clone(),
            trace_id: None,
            message_id,
            payload: format!("{{\"n\":{n}}}").into_bytes(),
        };
        (item, format!("{partition}/{txn}"))
    }

    fn push(&mut self) -> Planned {
        let count = if self.rng.chance(200) { 2 } else { 1 };
        let (items, labels): (Vec<PushItem>, Vec<String>) = (0..count).map(|_| self.push_item()).unzip();
        Planned { label: format!("push {}", labels.join(" ")), command: Command::push(items) }
    }

    fn pop(&mut self) -> Planned {
        let n = self.mint();
        let partition = self.rng.chance(300).then(|| format!("p{}", self.rng.below(PARTITIONS)));
        let batch = self.rng.range(1, 4) as u32;
        let lease_ms = self.rng.range(200, 3000);
        let lease_id = format!("{}{n}", lease_prefix(&self.tag));
        let label = format!("pop {} b{batch} lease {lease_id} {lease_ms}ms", partition.as_deref().unwrap_or("*"));
        let cmd = PopCmd {
            target: PopTarget::Queue { queue: self.queue.clone(), partition },
            group: GROUP.into(),
            batch,
            max_partitions: self.rng.range(1, 3) as u32,
            lease_id,
            lease_ms: Some(lease_ms),
            auto_ack: false,
            subscription: Subscription::All,
            conflation: false,
        };
        Planned { label, command: Command::Pop(cmd) }
    }

    fn ack(&mut self) -> Option<Planned> {
        if self.leases.is_empty() {
            return None;
        }
        let i = self.rng.below(self.leases.len() as u64) as usize;
        let lease = self.leases.swap_remove(i);
        let status = match self.rng.below(10) {
            0 => AckStatus::Failed,
            1 => AckStatus::Retry,
            _ => AckStatus::Completed,
        };
        // Acking the last delivered message of a partition settles the
        // ones before it; sometimes ack every item on its own instead.
        let each = self.rng.chance(300);
        let mut items = Vec::new();
        for (k, (pid, txn)) in lease.items.iter().enumerate() {
            let last_of_partition = lease.items[k + 1..].iter().all(|(p, _)| p != pid);
            if each || last_of_partition {
                items.push(AckItem {
                    partition_id: *pid,
                    transaction_id: txn.clone(),
                    status,
                    error: (status != AckStatus::Completed).then(|| "simulated failure".into()),
                    lease_id: Some(lease.id.clone()),
                });
            }
        }
        let label = format!("ack {} {status:?} x{}", lease.id, items.len());
        Some(Planned { label, command: Command::Ack(AckCmd { group: GROUP.into(), items }) })
    }

    fn extend(&mut self) -> Option<Planned> {
        let lease = &self.leases.get(self.rng.below(self.leases.len().max(1) as u64) as usize)?;
        let id = lease.id.clone();
        Some(Planned { label: format!("extend {id}"), command: Command::ExtendLease { lease_id: id } })
    }

    fn lock_op(&mut self) -> Planned {
        let name = format!("lock{}", self.rng.below(LOCKS));
        let held = self.locks.get(&name).cloned();
        let op = match held {
            Some((owner, token)) if self.rng.chance(600) => {
                if self.rng.chance(500) {
                    LockOp::Release { name: name.clone(), token, slot: 0 }
                } else {
                    let ttl_seconds = self.rng.range(1, 4);
                    LockOp::Renew { name: name.clone(), token, ttl_seconds, slot: 0, owner: Some(owner) }
                }
            }
            _ => {
                let owner = format!("c{}", self.rng.below(OWNERS));
                let ttl_seconds = self.rng.range(1, 4);
                LockOp::Acquire { name: name.clone(), ttl_seconds, owner: Some(owner), limit: 1 }
            }
        };
        let label = match &op {
            LockOp::Acquire { owner, ttl_seconds, .. } => {
                format!("acquire {name} by {} ttl {ttl_seconds}s", owner.as_deref().unwrap_or("-"))
            }
            LockOp::Renew { token, .. } => format!("renew {name} token {token}"),
            LockOp::Release { token, .. } => format!("release {name} token {token}"),
            LockOp::Get { .. } => format!("get {name}"),
        };
        Planned { label, command: Command::Locks(LocksCmd { ops: vec![op] }) }
    }

    /// One job operation: mostly enqueues and claims, and a proof of a
    /// lease the workload was handed (its latest use of it, or an older one).
    fn job_one(&mut self) -> (JobOp, String) {
        let roll = self.rng.below(100);
        if roll < 30 || (roll >= 55 && self.claims.is_empty()) {
            let scope = JOB_SCOPES[self.rng.below(2) as usize];
            let id = format!("job{}", self.rng.below(JOB_IDS));
            let n = self.mint();
            let when = match self.rng.below(4) {
                0 => Availability::AfterMs(self.rng.range(100, 1500)),
                _ => Availability::Now,
            };
            let replace = self.rng.chance(400);
            let label = format!("enqueue {scope}/{id}{}", if replace { " replace" } else { "" });
            let op = JobOp::Enqueue {
                at: self.job_target(scope),
                id,
                payload: format!("{{\"n\":{n}}}").into_bytes(),
                when,
                replace,
                required: self.rng.chance(100),
            };
            return (op, label);
        }
        if roll < 55 {
            let scope = JOB_SCOPES[self.rng.below(2) as usize];
            let owner = format!("c{}", self.rng.below(OWNERS));
            let lease_ms = self.rng.range(300, 2500);
            let request_id = match self.rng.below(10) {
                0 if !self.claim_requests.is_empty() => Some(self.rng.pick(&self.claim_requests).clone()),
                0..=2 => {
                    let n = self.mint();
                    let r = format!("{}cr{n}", self.tag);
                    if self.claim_requests.len() < 8 {
                        self.claim_requests.push(r.clone());
                    } else {
                        let i = self.rng.below(8) as usize;
                        self.claim_requests[i] = r.clone();
                    }
                    Some(r)
                }
                _ => None,
            };
            let label = format!("claim {scope} by {owner} {lease_ms}ms {}", request_id.as_deref().unwrap_or(""));
            let op = JobOp::Claim { at: self.job_target(scope), owner, lease_ms: Some(lease_ms), request_id };
            return (op, label);
        }
        // The newest claim most of the time; any one now and then.
        let i = if self.rng.chance(700) {
            self.claims.len() - 1
        } else {
            self.rng.below(self.claims.len() as u64) as usize
        };
        let c = self.claims[i].clone();
        let at = self.job_target(&c.scope);
        let proof = LeaseProof { id: c.id.clone(), owner: c.owner.clone(), token: c.token };
        let required = self.rng.chance(100);
        let (op, what) = match roll {
            55..=64 => (JobOp::Renew { at, proof, lease_ms: Some(self.rng.range(300, 2500)), required }, "renew"),
            65..=84 => {
                let result = format!("{{\"by\":\"{}\"}}", c.owner).into_bytes();
                (JobOp::Complete { at, proof, result, required }, "complete")
            }
            85..=94 => {
                let error = b"{\"error\":\"simulated\"}".to_vec();
                let retry = !self.rng.chance(200);
                let delay_ms = self.rng.chance(300).then(|| self.rng.range(0, 800));
                (JobOp::Fail { at, proof, error, retry, delay_ms, required }, "fail")
            }
            _ => (JobOp::Release { at, proof, delay_ms: self.rng.chance(300).then_some(200), required }, "release"),
        };
        (op, format!("{what} {}/{} token {}", c.scope, c.id, c.token))
    }

    /// A job-queue call of one to three operations.
    fn jobs(&mut self) -> Planned {
        let (ops, labels): (Vec<JobOp>, Vec<String>) =
            (0..if self.rng.chance(200) { self.rng.range(2, 4) } else { 1 }).map(|_| self.job_one()).unzip();
        Planned { label: format!("jobs[{}]", labels.join("; ")), command: Command::Jobs(JobsCmd { ops }) }
    }

    /// The next request.
    pub fn request(&mut self) -> Planned {
        let roll = self.rng.below(100);
        match roll {
            0..=31 => self.push(),
            32..=43 => self.pop(),
            44..=55 => self.ack().unwrap_or_else(|| self.push()),
            56..=58 => self.extend().unwrap_or_else(|| self.pop()),
            59..=70 => self.lock_op(),
            71..=87 => self.jobs(),
            88..=95 => {
                let parts: Vec<Planned> = (0..self.rng.range(2, 4))
                    .map(|_| match self.rng.below(3) {
                        0 => self.push(),
                        1 => self.lock_op(),
                        _ => self.jobs(),
                    })
                    .collect();
                let label = format!("batch[{}]", parts.iter().map(|p| p.label.as_str()).collect::<Vec<_>>().join("; "));
                Planned { label, command: Command::Batch(parts.into_iter().map(|p| p.command).collect()) }
            }
            96..=98 => self.timer(),
            _ => Planned { label: "noop".into(), command: Command::Noop },
        }
    }

    /// A timer due within 1.5 s into one of the group's partitions: the
    /// leader's driver must fire it once, whoever leads by then.
    fn timer(&mut self) -> Planned {
        let n = self.mint();
        let txn = format!("{}T{n}", self.tag);
        let mut message_id = [0u8; 16];
        message_id[..8].copy_from_slice(&n.to_le_bytes());
        let delay_ms = self.rng.range(0, 1_500) as i64;
        let op = ScheduleOp {
            queue: self.queue.clone(),
            timer_key: format!("{}k{n}", self.tag),
            partition: format!("p{}", self.rng.below(PARTITIONS)),
            txn: txn.clone(),
            message_id,
            payload: format!("{{\"timer\":{n}}}").into_bytes(),
            delay_ms,
        };
        Planned {
            label: format!("timer {txn} in {delay_ms} ms"),
            command: Command::Timers(vec![TimerOp::Schedule(op)]),
        }
    }

    /// Learns from an answered request: leases to ack, lock tokens, pushes
    /// to retry.
    pub fn learn(&mut self, entry: &Entry, reply: &Reply) {
        match reply {
            Reply::Unknown(_) => {
                let mut unknown = Vec::new();
                collect_pushes(&entry.command, &mut unknown);
                for item in unknown {
                    if self.retry.len() < RETRY_POOL_MAX {
                        self.retry.push(item);
                    }
                }
            }
            Reply::Acked { outcome, bodies, .. } => {
                flatten(&entry.command, outcome, &mut |cmd, out| self.learn_one(cmd, out, bodies));
            }
        }
    }

    fn learn_one(&mut self, cmd: &Command, out: &Outcome, bodies: &[(u64, u64, Option<regina_state::BodyRecord>)]) {
        match (cmd, out) {
            (Command::Pop(p), Outcome::Pop(r)) if !r.claims.is_empty() => {
                let items = bodies
                    .iter()
                    .filter_map(|(pid, _, b)| b.as_ref().map(|b| (*pid, b.transaction_id.clone())))
                    .collect::<Vec<_>>();
                if !items.is_empty() {
                    self.leases.push(Lease { id: p.lease_id.clone(), items });
                }
            }
            (Command::Jobs(j), Outcome::Jobs(JobsOutcome::Done(rs))) => {
                for (op, r) in j.ops.iter().zip(rs) {
                    self.learn_job(op, r);
                }
            }
            (Command::Locks(l), Outcome::Locks(rs)) => {
                for (op, r) in l.ops.iter().zip(rs) {
                    match (op, r) {
                        (LockOp::Acquire { name, owner: Some(o), .. }, LockResult::Acquired { token, .. }) => {
                            self.locks.insert(name.clone(), (o.clone(), *token));
                        }
                        (LockOp::Renew { name, owner: Some(o), .. }, LockResult::Renewed { token, .. }) => {
                            self.locks.insert(name.clone(), (o.clone(), *token));
                        }
                        (LockOp::Release { name, .. }, _) | (LockOp::Renew { name, .. }, LockResult::Lost { .. }) => {
                            self.locks.remove(name);
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
}

impl Workload {
    /// Keeps the leases claims and renews hand out, up to a few.
    fn learn_job(&mut self, op: &JobOp, r: &JobResult) {
        let c = match (op, r) {
            (JobOp::Claim { .. }, JobResult::Claimed(Some(c))) | (JobOp::Renew { .. }, JobResult::Renewed(c)) => c,
            _ => return,
        };
        if let Some(known) = self.claims.iter_mut().find(|k| k.scope == c.scope && k.token == c.token) {
            *known = c.clone();
            return;
        }
        if self.claims.len() == JOB_CLAIMS_MAX {
            self.claims.remove(0);
        }
        self.claims.push(c.clone());
    }
}

impl Workload {
    fn job_target(&self, scope: &str) -> JobTarget {
        JobTarget { queue: self.job_queue.clone(), scope: scope.into() }
    }
}

fn collect_pushes(cmd: &Command, out: &mut Vec<PushItem>) {
    match cmd {
        Command::Push(p) => out.extend(p.items.iter().cloned()),
        Command::Batch(cs) => cs.iter().for_each(|c| collect_pushes(c, out)),
        _ => {}
    }
}

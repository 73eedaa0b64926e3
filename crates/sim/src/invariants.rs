//! The properties a run must keep. Each check returns the first violation
//! as text; the simulator adds the seed and the step.
//!
//! - After every applied entry, on every node: `State::check_invariants`
//!   and at most one live lease per (partition, consumer group).
//! - After every step, per node: its applied point is in the common history,
//!   two nodes at the same index hold equal states, nothing regresses within
//!   one process (applied index, partition ends, cursors), and every
//!   acknowledged push it has applied past is in its state at its offset.
//! - Over the common history: offsets of a partition are handed out without
//!   gaps, locks are exclusive with rising fencing tokens, and job leases
//!   keep their fencing rules (see `jobs`).
//! - At the end: the three nodes agree byte for byte and every
//!   acknowledged push is there exactly once, body included.
//! - Across groups, after every step: a group's state names only its own
//!   queues and leases (every name carries the group's tag, see
//!   `workload`); and every client entry a group applies or recovers from
//!   the WAL was sent to that group (see `history::Registry`).

use regina_state::timers::{TimerOp, TimerOutcome};
use std::collections::BTreeMap;

use regina_consensus::types::LogId;
use regina_state::command::LockOp;
use regina_state::hash::txn_hash;
use regina_state::outcome::{LockResult, PushStatus};
use regina_state::partition::Partition;
use regina_state::{BodyRecord, Command, Outcome, State};

use crate::canon::{canonical, fnv};
use crate::history::History;
use crate::jobs::{JobFigures, JobLedger};
use crate::NodeId;

/// Calls `f` on every (command, outcome) pair, looking inside batches.
pub fn flatten<'a>(cmd: &'a Command, out: &'a Outcome, f: &mut dyn FnMut(&'a Command, &'a Outcome)) {
    match (cmd, out) {
        (Command::Batch(cs), Outcome::Batch(os)) => {
            for (c, o) in cs.iter().zip(os) {
                flatten(c, o, f);
            }
        }
        _ => f(cmd, out),
    }
}

/// What must hold in any state after any entry.
pub fn state_invariants(state: &State) -> Result<(), String> {
    state.check_invariants()?;
    leases_exclusive(state)
}

/// At most one live lease per (queue, partition, group), and the cursor's
/// lease slot agrees with the lease table.
fn leases_exclusive(state: &State) -> Result<(), String> {
    let now = state.now_ms;
    let mut holder: BTreeMap<(u32, u32, u32), &str> = BTreeMap::new();
    let mut ids: Vec<&String> = state.leases.keys().collect();
    ids.sort();
    for id in ids {
        let e = &state.leases[id];
        if e.expires_ms <= now {
            continue;
        }
        for claim in &e.claims {
            if let Some(other) = holder.insert(*claim, id) {
                return Err(format!(
                    "two live leases ({other} and {id}) on (queue {}, partition {}, group {})",
                    claim.0, claim.1, claim.2
                ));
            }
        }
    }
    let mut qids: Vec<&u32> = state.queues.keys().collect();
    qids.sort();
    for qid in qids {
        let q = &state.queues[qid];
        for (pidx, p) in q.partitions.iter().enumerate() {
            for (gid, c) in p.cursors.iter().enumerate() {
                let Some(l) = c.as_ref().and_then(|c| c.live_lease(now)) else { continue };
                let claim = (*qid, pidx as u32, gid as u32);
                if holder.get(&claim) != Some(&l.id.as_str()) {
                    return Err(format!(
                        "partition {} holds live lease {} for group {gid} but the lease table says {:?}",
                        p.id,
                        l.id,
                        holder.get(&claim)
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Nothing of another group got into group `group`'s state: its queues and
/// pop leases all carry the group's tag.
pub fn own_names(state: &State, group: u16) -> Result<(), String> {
    let queue = crate::workload::queue_prefix(group);
    if let Some(name) = state.queue_names.keys().find(|n| !n.starts_with(&queue)) {
        return Err(format!("holds queue {name}, which is not one of group {group}'s: groups mixed up"));
    }
    let lease = crate::workload::lease_prefix(&crate::workload::tag(group));
    let mut foreign: Vec<&String> = state.leases.keys().filter(|id| !id.starts_with(&lease)).collect();
    foreign.sort();
    if let Some(id) = foreign.first() {
        return Err(format!("holds lease {id}, which is not one of group {group}'s: groups mixed up"));
    }
    Ok(())
}

pub fn partition(state: &State, pid: u64) -> Option<&Partition> {
    let (qid, pidx) = state.partition_ids.get(&pid)?;
    state.queues.get(qid)?.partitions.get(*pidx as usize).map(|p| &**p)
}

/// An acknowledged push, as the client was answered.
#[derive(Debug, Clone)]
pub struct AckedPush {
    pub index: u64,
    pub partition_id: u64,
    pub offset: u64,
    pub pos: u64,
    pub len: u32,
    pub txn: String,
    pub payload: Vec<u8>,
}

/// The pushes an acknowledged answer confirms.
pub fn acked_pushes(index: u64, cmd: &Command, out: &Outcome) -> Vec<AckedPush> {
    let mut found = Vec::new();
    flatten(cmd, out, &mut |c, o| {
        if let (Command::Push(p), Outcome::Push(rs)) = (c, o) {
            for (item, r) in p.items.iter().zip(rs) {
                if matches!(r.status, PushStatus::Queued | PushStatus::Duplicate) {
                    found.push(AckedPush {
                        index,
                        partition_id: r.partition_id,
                        offset: r.offset,
                        pos: r.pos,
                        len: r.len,
                        txn: item.transaction_id.clone(),
                        payload: item.payload.clone(),
                    });
                }
            }
        }
    });
    found
}

/// The timers an acknowledged command scheduled, with their due times.
pub fn acked_timers(cmd: &Command, out: &Outcome) -> Vec<crate::drivers::AckedTimer> {
    let mut found = Vec::new();
    flatten(cmd, out, &mut |c, o| {
        if let (Command::Timers(ops), Outcome::Timers(rs)) = (c, o) {
            for (op, r) in ops.iter().zip(rs) {
                if let (TimerOp::Schedule(s), TimerOutcome::Scheduled { deliver_at_ms, .. }) = (op, r) {
                    found.push(crate::drivers::AckedTimer {
                        queue: s.queue.clone(),
                        partition: s.partition.clone(),
                        txn: s.txn.clone(),
                        due_ms: *deliver_at_ms,
                    });
                }
            }
        }
    });
    found
}

/// Whether `state` holds the push at its offset.
pub fn holds(state: &State, push: &AckedPush) -> Result<(), String> {
    let p = partition(state, push.partition_id).ok_or_else(|| format!("partition {} is missing", push.partition_id))?;
    match p.meta(push.offset) {
        Some(m) if m.txn() == txn_hash(&push.txn) => Ok(()),
        Some(_) => Err(format!("offset {} of partition {} holds another message", push.offset, p.id)),
        None => Err(format!("partition {} has no offset {} (it ends at {})", p.id, push.offset, p.next_offset())),
    }
}

/// What the checker remembers of a node between steps.
struct Seen {
    incarnation: u32,
    applied: Option<u64>,
    ends: BTreeMap<u64, u64>,
    cursors: BTreeMap<(u64, usize), u64>,
}

/// Cross-step checks.
#[derive(Default)]
pub struct Checker {
    seen: BTreeMap<NodeId, Seen>,
    /// Digest of the state at each applied index any node was seen at.
    digests: BTreeMap<u64, (LogId, u64, NodeId)>,
}

impl Checker {
    /// Checks one running node's current state.
    pub fn node(
        &mut self,
        node: NodeId,
        incarnation: u32,
        applied: Option<LogId>,
        state: &State,
        history: &History,
        acked: &[AckedPush],
    ) -> Result<u64, String> {
        let bytes = canonical(state);
        let digest = fnv(&bytes);
        if let Some(at) = applied {
            if let Some(known) = history.log_id_at(at.index) {
                if known != at {
                    return Err(format!("node {node} stands at {at}, but the history has {known} at that index"));
                }
            }
            match self.digests.get(&at.index) {
                Some((id, d, by)) if *id != at || *d != digest => {
                    return Err(format!(
                        "node {node} at {at} holds a state (digest {digest:016x}) unlike node {by}'s at {id} \
                         (digest {d:016x})"
                    ));
                }
                Some(_) => {}
                None => {
                    self.digests.insert(at.index, (at, digest, node));
                }
            }
        }
        let mut ends = BTreeMap::new();
        let mut cursors = BTreeMap::new();
        for q in state.queues.values() {
            for p in &q.partitions {
                ends.insert(p.id, p.next_offset());
                for (gid, c) in p.cursors.iter().enumerate() {
                    if let Some(c) = c {
                        cursors.insert((p.id, gid), c.next);
                    }
                }
            }
        }
        if let Some(prev) = self.seen.get(&node).filter(|s| s.incarnation == incarnation) {
            let now = applied.map(|a| a.index);
            if now < prev.applied {
                return Err(format!("node {node} went back from applied index {:?} to {now:?}", prev.applied));
            }
            for (pid, end) in &prev.ends {
                let cur = ends.get(pid).copied().unwrap_or(0);
                if cur < *end {
                    return Err(format!("node {node}: partition {pid} shrank from offset {end} to {cur}"));
                }
            }
            for (key, next) in &prev.cursors {
                let cur = cursors.get(key).copied().unwrap_or(0);
                if cur < *next {
                    return Err(format!(
                        "node {node}: the cursor of group {} in partition {} went back from {next} to {cur}",
                        key.1, key.0
                    ));
                }
            }
        }
        let upto = applied.map(|a| a.index);
        for push in acked.iter().filter(|p| Some(p.index) <= upto) {
            holds(state, push).map_err(|e| {
                format!(
                    "acknowledged push {} (log index {}, offset {}) is not in node {node}'s state at {upto:?}: {e}",
                    push.txn, push.index, push.offset
                )
            })?;
        }
        self.seen.insert(node, Seen { incarnation, applied: upto, ends, cursors });
        Ok(digest)
    }
}

/// Checks the common history from index 0 up to its first gap: partitions
/// hand out offsets one after another, a lock has one live holder at a
/// time with tokens that only rise, and job leases are fenced. Answers what
/// the job rules were checked on.
pub fn history_invariants(history: &History) -> Result<JobFigures, String> {
    let mut jobs = JobLedger::default();
    let mut next_offset: BTreeMap<u64, u64> = BTreeMap::new();
    // A `FireTimers` entry pushes without saying where (its outcome is
    // `Done`): a partition's next offset may then have moved on by the
    // time a client push next lands there, never back.
    let mut last_fire = None;
    let mut counted_at: BTreeMap<u64, u64> = BTreeMap::new();
    let mut tokens: BTreeMap<String, u64> = BTreeMap::new();
    let mut holders: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut now = 0u64;
    let mut problem = None;
    for (expect, (index, applied)) in history.entries.iter().enumerate() {
        if *index != expect as u64 {
            break;
        }
        let Some(entry) = &applied.entry else { continue };
        now = now.max(entry.now_ms);
        flatten(&entry.command, &applied.outcome, &mut |cmd, out| {
            if problem.is_some() {
                return;
            }
            if let Err(e) = jobs.entry(cmd, out, now) {
                problem = Some(format!("index {index}: {e}"));
                return;
            }
            match (cmd, out) {
                (Command::FireTimers, _) => last_fire = Some(*index),
                (Command::Push(_), Outcome::Push(rs)) => {
                    for r in rs {
                        let next = next_offset.entry(r.partition_id).or_insert(0);
                        if r.status == PushStatus::Queued {
                            // Only a queued push tells where the partition ends.
                            let counted = counted_at.insert(r.partition_id, *index);
                            if last_fire.is_some_and(|f| counted.is_none_or(|c| c <= f)) && r.offset > *next {
                                // Timers pushed here since it was last counted.
                                *next = r.offset;
                            }
                        }
                        match r.status {
                            PushStatus::Queued if r.offset != *next => {
                                problem = Some(format!(
                                    "index {index}: partition {} queued at offset {} but its next offset was {next}",
                                    r.partition_id, r.offset
                                ));
                            }
                            PushStatus::Queued => *next += 1,
                            PushStatus::Duplicate if r.offset >= *next => {
                                problem = Some(format!(
                                    "index {index}: a duplicate in partition {} points at offset {}, never handed out",
                                    r.partition_id, r.offset
                                ));
                            }
                            _ => {}
                        }
                    }
                }
                (Command::Locks(l), Outcome::Locks(rs)) => {
                    for (op, r) in l.ops.iter().zip(rs) {
                        if let Err(e) = lock_step(op, r, now, &mut tokens, &mut holders) {
                            problem = Some(format!("index {index}: {e}"));
                        }
                    }
                }
                _ => {}
            }
        });
        if let Some(p) = problem {
            return Err(p);
        }
    }
    Ok(jobs.figures)
}

fn lock_step(
    op: &LockOp,
    r: &LockResult,
    now: u64,
    tokens: &mut BTreeMap<String, u64>,
    holders: &mut BTreeMap<String, (u64, u64)>,
) -> Result<(), String> {
    let mut rise = |name: &str, token: u64| {
        let last = tokens.entry(name.to_string()).or_insert(0);
        if token <= *last {
            return Err(format!("lock {name}: token {token} does not rise above {last}"));
        }
        *last = token;
        Ok(())
    };
    match (op, r) {
        (LockOp::Acquire { name, ttl_seconds, .. }, LockResult::Acquired { token, already: false, .. }) => {
            if let Some((held, until)) = holders.get(name) {
                if *until > now {
                    return Err(format!(
                        "lock {name}: a second holder got token {token} while token {held} was live until {until} \
                         (now {now})"
                    ));
                }
            }
            rise(name, *token)?;
            holders.insert(name.clone(), (*token, now + ttl_seconds * 1000));
        }
        (LockOp::Renew { name, ttl_seconds, .. }, LockResult::Renewed { token, .. }) => {
            rise(name, *token)?;
            holders.insert(name.clone(), (*token, now + ttl_seconds * 1000));
        }
        (LockOp::Release { name, .. }, LockResult::Released { .. }) => {
            holders.remove(name);
        }
        _ => {}
    }
    Ok(())
}

/// The final word on one node's state against every acknowledged push:
/// present at its offset exactly once, and its body readable and intact.
pub fn final_pushes(
    node: NodeId,
    state: &State,
    read_body: &dyn Fn(u64, u32) -> std::io::Result<Vec<u8>>,
    acked: &[AckedPush],
) -> Result<(), String> {
    for push in acked {
        holds(state, push).map_err(|e| format!("node {node} lost acknowledged push {}: {e}", push.txn))?;
        let p = partition(state, push.partition_id).expect("checked by holds");
        let hash = txn_hash(&push.txn);
        let copies = p.msgs.iter().filter(|m| m.txn() == hash).count();
        if copies != 1 {
            return Err(format!(
                "node {node}: acknowledged push {} is in partition {} {copies} times",
                push.txn, push.partition_id
            ));
        }
        let body = read_body(push.pos, push.len)
            .map_err(|e| format!("node {node}: the body of push {} cannot be read: {e}", push.txn))?;
        match BodyRecord::decode(&body) {
            Some(b) if b.transaction_id == push.txn && b.payload == push.payload => {}
            Some(b) => {
                return Err(format!(
                    "node {node}: the body at {} for push {} holds {} / {:?}",
                    push.pos,
                    push.txn,
                    b.transaction_id,
                    String::from_utf8_lossy(&b.payload)
                ))
            }
            None => return Err(format!("node {node}: the body of push {} does not decode", push.txn)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_of_another_group_is_caught() {
        let mut state = State::default();
        state.queue_names.insert(format!("{}work.orders", crate::workload::queue_prefix(1)), 0);
        assert!(own_names(&state, 1).is_ok());
        let caught = own_names(&state, 0).expect_err("group 1's queue in group 0's state");
        assert!(caught.contains("groups mixed up"), "{caught}");
        // g1 is no prefix of g10's names.
        assert!(own_names(&state, 10).is_err());
    }
}

//! A cycle: the state changes, the sink pushes and the source ack of one
//! step of a stream, applied as one entry, all or nothing.
//!
//! Every check runs before anything is written, in this order: the query
//! and its source partition; the ack (its lease must still be held by the
//! cycle's group on that partition, and the message it names must lie
//! inside the lease, not yet committed; it commits through that message, or
//! through `count` messages from the cursor if that reaches further within
//! the lease); the sink pushes (a transaction id
//! already stored in its dedup window, or a queue at `maxSize`, refuses the
//! cycle); the rows the partition would hold after the state changes. Only
//! then are the pushes stored, the cursor committed (and the lease released
//! or kept) and the state changed.
//!
//! A cycle equal to the last one committed on its partition (same digest)
//! is a resend whose answer was lost: it answers committed and changes
//! nothing. A resend of a cycle that released its lease is refused by the
//! fence anyway.

use serde::{Deserialize, Serialize};

use super::{CycleAck, CycleCmd, PartitionState, Row, StateOp};
use crate::body::BodyWrite;
use crate::command::{PushCmd, PushItem};
use crate::hash::txn_hash;
use crate::outcome::PushResult;
use crate::state::State;
use regina_types::limits::STREAM_STATE_ROWS_PER_PARTITION_MAX;

/// Why a cycle was refused. Nothing of it was applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CycleRefusal {
    NoSuchQuery,
    /// The partition id names no partition of the query's source queue.
    NotSourcePartition,
    /// The ack's lease is not (or no longer) held by the group.
    Lease,
    /// The ack names a message the lease does not hold.
    Unresolvable,
    /// The ack names a message already committed for the group.
    AlreadyCommitted,
    /// A sink push repeats a transaction id stored in its dedup window.
    Duplicate,
    /// A sink push would take its queue past `maxSize`.
    QueueFull,
    /// The partition would hold more state rows than the limit.
    TooManyRows,
}

impl CycleRefusal {
    pub fn as_str(self) -> &'static str {
        match self {
            CycleRefusal::NoSuchQuery => "no_such_query",
            CycleRefusal::NotSourcePartition => "not_source_partition",
            CycleRefusal::Lease => "invalid_lease",
            CycleRefusal::Unresolvable => "unresolvable",
            CycleRefusal::AlreadyCommitted => "already_committed",
            CycleRefusal::Duplicate => "duplicate",
            CycleRefusal::QueueFull => "queue_full",
            CycleRefusal::TooManyRows => "too_many_state_rows",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CycleAckResult {
    /// Source messages the ack committed.
    pub count: u64,
    pub lease_released: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CycleOutcome {
    Committed {
        source_queue: String,
        state_ops_applied: usize,
        pushes: Vec<PushResult>,
        ack: Option<CycleAckResult>,
        /// A resend of the last cycle committed here: nothing was applied.
        duplicate: bool,
    },
    Refused {
        reason: CycleRefusal,
        error: String,
    },
}

fn refused(reason: CycleRefusal, error: String) -> CycleOutcome {
    CycleOutcome::Refused { reason, error }
}

/// What the ack will do, judged before anything is written.
struct AckPlan {
    slot: (u32, u32, u32),
    lease_id: String,
    /// Commit every offset below this.
    commit_to: Option<u64>,
    release: bool,
    count: u64,
}

impl State {
    pub(crate) fn stream_cycle(&mut self, cmd: &CycleCmd, writes: &mut Vec<BodyWrite>) -> CycleOutcome {
        let Some(query) = self.streams.queries.get(&cmd.query_id) else {
            return refused(CycleRefusal::NoSuchQuery, format!("no stream query has id {}", cmd.query_id));
        };
        let source_queue = query.source_queue.clone();
        let held = query.partitions.get(&cmd.partition_id);
        if held.and_then(|p| p.last_cycle) == Some(cmd.digest) {
            return CycleOutcome::Committed {
                source_queue,
                state_ops_applied: 0,
                pushes: Vec::new(),
                ack: None,
                duplicate: true,
            };
        }
        let rows_after = rows_after(held, &cmd.state_ops);
        let Some(&(qid, pidx)) = self.partition_ids.get(&cmd.partition_id) else {
            return not_source(cmd.partition_id, &source_queue);
        };
        if self.queues[&qid].name != source_queue {
            return not_source(cmd.partition_id, &source_queue);
        }
        let plan = match &cmd.ack {
            None => None,
            Some(ack) => match self.plan_cycle_ack(qid, pidx, &cmd.group, ack, cmd.release_lease) {
                Ok(plan) => Some(plan),
                Err(r) => return r,
            },
        };
        if let Some(r) = self.judge_sink_pushes(&cmd.pushes) {
            return r;
        }
        if rows_after > STREAM_STATE_ROWS_PER_PARTITION_MAX {
            return refused(
                CycleRefusal::TooManyRows,
                format!(
                    "the cycle would leave {rows_after} state rows on partition {}; the limit is \
                     {STREAM_STATE_ROWS_PER_PARTITION_MAX} (STREAM_STATE_ROWS_PER_PARTITION_MAX)",
                    cmd.partition_id
                ),
            );
        }
        // Judged whole: from here on everything applies.
        let pushes = self.push(&PushCmd { items: cmd.pushes.clone() }, writes);
        let ack = plan.map(|p| self.commit_cycle_ack(p));
        let fenced = ack.as_ref().is_some_and(|a| a.lease_released);
        let now = self.now_ms;
        let query = self.streams.queries.get_mut(&cmd.query_id).expect("judged above");
        let p = query.partitions.entry(cmd.partition_id).or_default();
        apply_state_ops(p, &cmd.state_ops, now);
        p.last_cycle = Some(cmd.digest);
        if p.rows.is_empty() && fenced {
            query.partitions.remove(&cmd.partition_id);
        }
        query.updated_ms = now;
        CycleOutcome::Committed { source_queue, state_ops_applied: cmd.state_ops.len(), pushes, ack, duplicate: false }
    }

    fn plan_cycle_ack(
        &self,
        qid: u32,
        pidx: u32,
        group: &str,
        ack: &CycleAck,
        release_lease: bool,
    ) -> Result<AckPlan, CycleOutcome> {
        let lease_gone = || {
            refused(
                CycleRefusal::Lease,
                format!("invalid or expired lease: {} is not held by group {group} on this partition", ack.lease_id),
            )
        };
        let q = &self.queues[&qid];
        let Some(&gid) = q.group_index.get(group) else { return Err(lease_gone()) };
        let p = &q.partitions[pidx as usize];
        let Some(c) = p.cursor(gid) else { return Err(lease_gone()) };
        let Some(lease) = c.live_lease(self.now_ms).filter(|l| l.id == ack.lease_id) else {
            return Err(lease_gone());
        };
        let mut plan =
            AckPlan { slot: (qid, pidx, gid), lease_id: lease.id.clone(), commit_to: None, release: true, count: 0 };
        if !ack.ok {
            // A nack hands the batch back: the lease goes, the cursor stays.
            return Ok(plan);
        }
        plan.release = release_lease;
        if ack.transaction_id.is_empty() {
            return Ok(plan);
        }
        let range = lease.start.min(c.next)..lease.end;
        let Some(offset) =
            p.find_txn(q.txn_indexes.get(pidx), txn_hash(&ack.transaction_id), range).filter(|o| *o < lease.end)
        else {
            return Err(refused(
                CycleRefusal::Unresolvable,
                format!("the ack names {}, which lease {} does not hold", ack.transaction_id, ack.lease_id),
            ));
        };
        if offset < c.next {
            return Err(refused(
                CycleRefusal::AlreadyCommitted,
                format!("the ack names {}, already committed for group {group}", ack.transaction_id),
            ));
        }
        // The clients count the messages they settle from the cursor and
        // name the last of them; whichever reaches further commits (capped
        // by the lease), so a batch whose ids sort out of offset order is
        // still settled whole.
        let counted = c.next.saturating_add(ack.count).min(lease.end);
        let to = (offset + 1).max(counted);
        plan.commit_to = Some(to);
        plan.count = to - c.next;
        Ok(plan)
    }

    fn commit_cycle_ack(&mut self, plan: AckPlan) -> super::cycle::CycleAckResult {
        let (qid, pidx, gid) = plan.slot;
        if let Some(to) = plan.commit_to {
            let c = self.queues.get_mut(&qid).and_then(|q| q.partition_mut(pidx).and_then(|p| p.cursor_mut(gid)));
            if let Some(c) = c {
                c.commit_to(to);
            }
        }
        if plan.release {
            self.lease_release(&plan.lease_id, plan.slot);
        }
        CycleAckResult { count: plan.count, lease_released: plan.release }
    }

    /// The refusal of the first sink push that is a stored duplicate or
    /// would overflow its queue.
    fn judge_sink_pushes(&self, pushes: &[PushItem]) -> Option<CycleOutcome> {
        let mut added: std::collections::BTreeMap<&str, u64> = Default::default();
        for (i, item) in pushes.iter().enumerate() {
            if let Some(offset) = self.stored_duplicate_offset(item) {
                return Some(refused(
                    CycleRefusal::Duplicate,
                    format!(
                        "push_items[{i}] to {}/{} repeats transaction id {} (stored at offset {offset})",
                        item.queue, item.partition, item.transaction_id
                    ),
                ));
            }
            let n = added.entry(item.queue.as_str()).or_insert(0);
            *n += 1;
            if let Some(q) = self.queue(&item.queue) {
                if q.options.max_size > 0 && q.kept + *n > q.options.max_size {
                    return Some(refused(
                        CycleRefusal::QueueFull,
                        format!("push_items[{i}] would take {} past its maxSize of {}", item.queue, q.options.max_size),
                    ));
                }
            }
        }
        None
    }
}

fn not_source(partition_id: u64, source: &str) -> CycleOutcome {
    refused(
        CycleRefusal::NotSourcePartition,
        format!("partition_id {partition_id} is not a partition of the query's source queue {source}"),
    )
}

/// How many rows the partition holds once `ops` are applied.
fn rows_after(held: Option<&PartitionState>, ops: &[StateOp]) -> usize {
    let mut added = std::collections::BTreeMap::<&str, bool>::new();
    let exists = |k: &str| held.is_some_and(|p| p.rows.contains_key(k));
    for op in ops {
        added.insert(op.key(), matches!(op, StateOp::Upsert { .. }));
    }
    let base = held.map_or(0, |p| p.rows.len());
    added.iter().fold(base, |n, (k, present)| match (exists(k), present) {
        (false, true) => n + 1,
        (true, false) => n - 1,
        _ => n,
    })
}

fn apply_state_ops(p: &mut PartitionState, ops: &[StateOp], now: u64) {
    for op in ops {
        match op {
            StateOp::Upsert { key, value, window_end } => {
                p.rows.insert(key.clone(), Row { value: value.clone(), window_end: *window_end, updated_ms: now });
                p.updated_ms = now;
            }
            StateOp::Delete { key } => {
                p.rows.remove(key);
            }
        }
    }
}

//! Acks as cursor commits. A `completed` ack of offset N commits every
//! offset up to N for the group; a `failed` or `retry` item hands the batch
//! back from its offset and clamps the rest of that partition's items in
//! the same call (they are redelivered, never lost); `dlq` files the message
//! to the dead-letter list at once.
//!
//! Acks are judged in two steps. [`State::plan_acks`] works on copies of the
//! cursors it touches and changes nothing; [`State::commit_acks`] writes the
//! plan back. A plain ack call commits its plan whatever the refusals (each
//! item stands alone); a transaction commits only a plan without refusals,
//! which is what makes its acks all-or-nothing.

use crate::command::{AckCmd, AckItem, AckStatus};
use crate::cursor::Cursor;
use crate::hash::txn_hash;
use crate::outcome::{AckResult, ERR_LEASE, ERR_UNRESOLVABLE};
use crate::queue::DlqEntry;
use crate::state::State;

/// (queue id, partition index, group id)
type Slot = (u32, u32, u32);

/// What a set of acks would do, computed without changing the state.
#[derive(Debug, Default)]
pub struct AckPlan {
    pub results: Vec<AckResult>,
    cursors: Vec<(Slot, Cursor)>,
    dlq: Vec<(u32, DlqEntry)>,
    releases: Vec<(String, Slot)>,
    clamped: Vec<Slot>,
}

impl AckPlan {
    pub fn refused(&self) -> Option<(usize, &AckResult)> {
        self.results.iter().enumerate().find(|(_, r)| !r.success)
    }
}

/// The plan's copy of a cursor, taken from the state on first use.
fn planned_cursor<'a>(cursors: &'a mut Vec<(Slot, Cursor)>, state: &State, slot: Slot) -> Option<&'a mut Cursor> {
    if let Some(i) = cursors.iter().position(|(s, _)| *s == slot) {
        return Some(&mut cursors[i].1);
    }
    let c = state.queues.get(&slot.0)?.partitions.get(slot.1 as usize)?.cursor(slot.2)?.clone();
    cursors.push((slot, c));
    cursors.last_mut().map(|(_, c)| c)
}

impl State {
    pub(crate) fn ack(&mut self, cmd: &AckCmd) -> Vec<AckResult> {
        let items: Vec<(&str, &AckItem)> = cmd.items.iter().map(|i| (cmd.group.as_str(), i)).collect();
        let plan = self.plan_acks(&items);
        self.commit_acks(plan)
    }

    /// Judges acks in order, each seeing the effect of the ones before it.
    pub fn plan_acks(&self, items: &[(&str, &AckItem)]) -> AckPlan {
        let mut plan = AckPlan::default();
        for (group, item) in items {
            let r = self.plan_one(group, item, &mut plan);
            plan.results.push(r);
        }
        plan
    }

    /// Writes a plan back: cursors, dead letters, released leases.
    pub fn commit_acks(&mut self, plan: AckPlan) -> Vec<AckResult> {
        for ((qid, pidx, gid), c) in plan.cursors {
            if let Some(p) = self.queues.get_mut(&qid).and_then(|q| q.partition_mut(pidx)) {
                assert!(p.cursor(gid).is_none_or(|old| old.next <= c.next), "a cursor moved back");
                if let Some(slot) = p.cursors.get_mut(gid as usize) {
                    *slot = Some(c);
                }
            }
        }
        for (qid, e) in plan.dlq {
            if let Some(q) = self.queues.get_mut(&qid) {
                q.dlq.push(e);
            }
        }
        for (lease, slot) in plan.releases {
            self.lease_release(&lease, slot);
        }
        plan.results
    }

    fn plan_one(&self, group: &str, item: &AckItem, plan: &mut AckPlan) -> AckResult {
        let now = self.now_ms;
        let Some(&(qid, pidx)) = self.partition_ids.get(&item.partition_id) else {
            return AckResult::refused(ERR_UNRESOLVABLE);
        };
        let q = &self.queues[&qid];
        let Some(&gid) = q.group_index.get(group) else {
            return AckResult::refused(ERR_UNRESOLVABLE);
        };
        let slot = (qid, pidx, gid);
        let p = &q.partitions[pidx as usize];
        let (retry_limit, to_dlq) = (q.options.retry_limit, q.options.dead_letters());
        let Some(c) = planned_cursor(&mut plan.cursors, self, slot) else {
            return AckResult::refused(ERR_UNRESOLVABLE);
        };
        let lease_range = c.live_lease(now).map(|l| l.start..l.end).unwrap_or(0..0);
        let Some(offset) = p.find_txn(q.txn_indexes.get(pidx), txn_hash(&item.transaction_id), lease_range) else {
            return AckResult::refused(ERR_UNRESOLVABLE);
        };
        if offset < c.next {
            return if item.status == AckStatus::Completed {
                AckResult { success: true, noop: true, ..Default::default() }
            } else {
                AckResult::refused(ERR_UNRESOLVABLE)
            };
        }
        if plan.clamped.contains(&slot) {
            // An earlier nack in this call handed the batch back from its
            // offset; this item will be redelivered, so it commits nothing.
            return AckResult { success: true, ..Default::default() };
        }
        // An ack naming a lease is fenced by it; an ack naming none skips the
        // check, so a handler that outran its claim can still commit.
        let lease = c.live_lease(now).cloned();
        if let Some(id) = &item.lease_id {
            if !lease.as_ref().is_some_and(|l| offset < l.end && l.id == *id) {
                return AckResult::refused(ERR_LEASE);
            }
        }
        let meta = *p.meta(offset).expect("offsets inside a lease are kept");
        let mut result = AckResult { success: true, ..Default::default() };
        let settled = settle(c, item.status, offset, retry_limit, to_dlq);
        if settled.clamps {
            plan.clamped.push(slot);
        }
        // A completion (or a dead-lettering) releases the lease once the
        // cursor passes its end; a nack always hands the batch back.
        let release = settled.clamps || lease.as_ref().is_some_and(|l| c.next >= l.end);
        let dead = settled.dead;
        if let Some(l) = lease.filter(|_| release) {
            c.lease = None;
            plan.releases.push((l.id, slot));
            result.lease_released = true;
        }
        if let Some(attempts) = dead {
            result.dlq = true;
            plan.dlq.push((
                qid,
                DlqEntry {
                    partition_id: item.partition_id,
                    partition: p.name.to_string(),
                    offset,
                    pos: meta.pos,
                    len: meta.len,
                    group: group.to_string(),
                    error: item.error.clone(),
                    attempts,
                    failed_ms: now,
                },
            ));
        }
        result
    }
}

/// What one ack did to its cursor.
struct Settled {
    /// The partition's later items in this call are handed back with it.
    clamps: bool,
    /// The message is dead-lettered after this many attempts.
    dead: Option<u32>,
}

/// Moves the cursor for an ack of `offset`: a completion or a dead-letter
/// commits past it; a nack commits up to it (so it is redelivered), counts
/// the failure and, past the retry limit, gives the message up.
fn settle(c: &mut Cursor, status: AckStatus, offset: u64, retry_limit: u32, to_dlq: bool) -> Settled {
    match status {
        AckStatus::Completed => {
            c.commit_to(offset + 1);
            Settled { clamps: false, dead: None }
        }
        AckStatus::Retry => {
            c.commit_to(offset);
            Settled { clamps: true, dead: None }
        }
        AckStatus::Failed => {
            c.commit_to(offset);
            if c.fail_offset == offset {
                c.failures += 1;
            } else {
                c.fail_offset = offset;
                c.failures = 1;
            }
            let mut dead = None;
            if c.failures > retry_limit {
                let attempts = c.failures;
                c.commit_to(offset + 1);
                dead = to_dlq.then_some(attempts);
            }
            Settled { clamps: true, dead }
        }
        AckStatus::Dlq => {
            let attempts = c.attempt_of(offset);
            c.commit_to(offset + 1);
            Settled { clamps: false, dead: Some(attempts) }
        }
    }
}

//! Pop: claim the next ready messages of one or more partitions for a
//! consumer group, under one lease (or committed at delivery).

use crate::command::{PopCmd, PopTarget};
use crate::cursor::LeaseSlot;
use crate::outcome::{Claim, Delivered, PopResult};
use crate::queue::Queue;
use crate::ready_set::ReadySet;
use crate::state::State;

impl State {
    pub(crate) fn pop(&mut self, cmd: &PopCmd) -> PopResult {
        let mut result = PopResult::default();
        match &cmd.target {
            PopTarget::Queue { queue, partition } => {
                if let Some(qid) = self.queue_names.get(queue).copied() {
                    self.pop_queue(qid, partition.as_deref(), cmd, &mut result);
                }
            }
            PopTarget::Discovery { namespace, task } => {
                for qid in self.discover(namespace.as_deref(), task.as_deref()) {
                    self.pop_queue(qid, None, cmd, &mut result);
                    if !result.claims.is_empty() {
                        break;
                    }
                }
            }
        }
        if !result.claims.is_empty() && !cmd.auto_ack {
            result.lease_id = cmd.lease_id.clone();
        }
        result
    }

    /// Queues matching the labels, highest priority first, then by name.
    fn discover(&self, namespace: Option<&str>, task: Option<&str>) -> Vec<u32> {
        let mut found: Vec<(i64, &str, u32)> = self
            .queue_names
            .iter()
            .filter_map(|(name, id)| {
                let q = &self.queues[id];
                let ns_ok = namespace.is_none_or(|n| q.namespace.as_deref() == Some(n));
                let task_ok = task.is_none_or(|t| q.task.as_deref() == Some(t));
                (ns_ok && task_ok).then_some((-q.options.priority, name.as_str(), *id))
            })
            .collect();
        found.sort();
        found.into_iter().map(|(_, _, id)| id).collect()
    }

    fn pop_queue(&mut self, qid: u32, partition: Option<&str>, cmd: &PopCmd, out: &mut PopResult) {
        let now = self.now_ms;
        let q = self.queues.get_mut(&qid).expect("queue id from the index");
        let gid = q.group_id_with(&cmd.group, cmd.subscription, cmd.conflation, now);
        let conflate = q.groups[gid as usize].conflate;
        if cmd.conflation {
            out.conflation = Some(conflate);
        }
        let lease_ms = cmd.lease_ms.unwrap_or(q.options.lease_time.saturating_mul(1000)).max(1);
        let vis = Visibility::of(&q.options);
        let mut order = match partition {
            Some(name) => Order::Named(q.partition_by_name(name)),
            None => Order::Ready(ReadyWalk::from(q.groups[gid as usize].next_try)),
        };
        let mut claimed = Vec::new();
        loop {
            let taken = out.message_count() as u32;
            if taken >= cmd.batch || out.claims.len() as u32 >= cmd.max_partitions {
                break;
            }
            let Some(pidx) = order.next(&q.groups[gid as usize].ready) else { break };
            let budget = cmd.batch - taken;
            let how = Claiming { gid, budget, now, vis, lease_ms, conflate };
            let claim = claim_partition(q, pidx, &how, cmd);
            // Keep the ready set exact enough: a claimed partition waits for
            // its lease to end (which marks it again); one with nothing
            // past the cursor waits for a push. One whose messages are
            // only not visible yet stays.
            if !q.has_work(gid, pidx, now) {
                q.groups[gid as usize].ready.remove(pidx);
            }
            if let Some(claim) = claim {
                out.claims.push(claim);
                claimed.push(pidx);
            }
        }
        if let Some(last) = claimed.last() {
            q.groups[gid as usize].next_try = last + 1;
        }
        if cmd.auto_ack {
            return;
        }
        for pidx in claimed {
            self.lease_add_claim(&cmd.lease_id, (qid, pidx, gid), now + lease_ms);
            out.lease_expires_ms = Some(now + lease_ms);
        }
    }
}

/// The partitions a pop tries, in order.
enum Order {
    /// Only the partition the request named (if it exists).
    Named(Option<u32>),
    /// The group's ready set, round-robin from where the last pop ended.
    Ready(ReadyWalk),
}

impl Order {
    fn next(&mut self, ready: &ReadySet) -> Option<u32> {
        match self {
            Order::Named(p) => p.take(),
            Order::Ready(walk) => walk.next(ready),
        }
    }
}

/// One lap over a set that may shrink while it is walked: from `start` to
/// the end, then from 0 up to `start`, each member at most once.
struct ReadyWalk {
    start: u32,
    at: u32,
    wrapped: bool,
}

impl ReadyWalk {
    fn from(start: u32) -> Self {
        ReadyWalk { start, at: start, wrapped: false }
    }

    fn next(&mut self, ready: &ReadySet) -> Option<u32> {
        loop {
            match ready.first_from(self.at) {
                Some(p) if self.wrapped && p >= self.start => return None,
                Some(p) => {
                    self.at = p.checked_add(1)?;
                    return Some(p);
                }
                None if !self.wrapped && self.start > 0 => {
                    self.wrapped = true;
                    self.at = 0;
                }
                None => return None,
            }
        }
    }
}

/// When a message may be delivered: `delayedProcessing` hides each message
/// for a while after its push; `windowBuffer` holds a partition back until
/// it has been quiet that long, so bursts are delivered together.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Visibility {
    delay_ms: u64,
    window_ms: u64,
}

impl Visibility {
    pub(crate) fn of(o: &crate::options::QueueOptions) -> Self {
        Visibility {
            delay_ms: o.delayed_processing.saturating_mul(1000),
            window_ms: o.window_buffer.saturating_mul(1000),
        }
    }

    /// One past the last offset from `start` that may be delivered at `now`.
    pub(crate) fn end(&self, p: &crate::partition::Partition, start: u64, now: u64) -> u64 {
        if p.last_write_ms.saturating_add(self.window_ms) > now {
            return start;
        }
        // Creation times never decrease along a partition (the state's
        // clock never goes back), so the visible messages are a prefix.
        let visible = p.msgs.partition_point(|m| m.created_ms.saturating_add(self.delay_ms) <= now);
        (p.base + visible as u64).max(start.min(p.next_offset()))
    }
}

/// The settings of one claim.
struct Claiming {
    gid: u32,
    budget: u32,
    now: u64,
    vis: Visibility,
    lease_ms: u64,
    conflate: bool,
}

/// Hands out up to `budget` visible messages of one partition, if the group
/// holds no live lease on it. A conflating group gets only the newest
/// visible message; the older ones are committed (retired) for it.
fn claim_partition(q: &mut Queue, pidx: u32, how: &Claiming, cmd: &PopCmd) -> Option<Claim> {
    let (gid, now) = (how.gid, how.now);
    let seed = q.seed_for(gid, pidx);
    let p = q.partition_mut(pidx).expect("a claimed partition exists");
    let c = p.ensure_cursor(gid, seed).clone();
    if c.live_lease(now).is_some() || c.next >= p.next_offset() {
        return None;
    }
    let mut start = c.next.max(p.base);
    let visible_end = how.vis.end(p, start, now);
    if visible_end <= start {
        return None;
    }
    if how.conflate {
        start = visible_end - 1;
    }
    let end = visible_end.min(start + how.budget as u64);
    let messages: Vec<Delivered> = (start..end)
        .map(|off| {
            let m = p.meta(off).expect("visible offsets are kept");
            Delivered { offset: off, pos: m.pos, len: m.len, attempt: c.attempt_of(off) }
        })
        .collect();
    let c = p.cursor_mut(gid).expect("ensured above");
    if cmd.auto_ack {
        c.commit_to(end);
        c.lease = None;
    } else {
        c.commit_to(start);
        c.lease = Some(LeaseSlot {
            id: cmd.lease_id.clone(),
            start,
            end,
            expires_ms: now + how.lease_ms,
            duration_ms: how.lease_ms,
        });
    }
    let (partition, partition_id) = (p.name.to_string(), p.id);
    Some(Claim { queue: q.name.clone(), partition, partition_id, messages })
}

impl State {
    /// Whether a pop for this target and group would change anything at
    /// `now`: claim a message, or register the group on a queue it has not
    /// met (its subscription is seeded at first contact). Read-only, so a
    /// long poll can wait without writing a log entry per check.
    pub fn pop_would_act(&self, target: &PopTarget, group: &str, now: u64) -> bool {
        let qids: Vec<u32> = match target {
            PopTarget::Queue { queue, .. } => self.queue_names.get(queue).copied().into_iter().collect(),
            PopTarget::Discovery { namespace, task } => self.discover(namespace.as_deref(), task.as_deref()),
        };
        let named = match target {
            PopTarget::Queue { partition, .. } => partition.as_deref(),
            PopTarget::Discovery { .. } => None,
        };
        qids.into_iter().any(|qid| {
            let q = &self.queues[&qid];
            let Some(&gid) = q.group_index.get(group) else {
                return true;
            };
            let vis = Visibility::of(&q.options);
            let visible = |pidx: u32| {
                let p = &q.partitions[pidx as usize];
                q.unleased_next(gid, pidx, now).is_some_and(|next| vis.end(p, next, now) > next)
            };
            match named {
                Some(name) => q.partition_by_name(name).is_some_and(visible),
                None => {
                    // Leases lapsed by `now` are released (and their
                    // partitions marked ready) only by the next entry.
                    let lapsed = self.lease_expiry.iter().take_while(|(at, _)| *at <= now);
                    let freed = lapsed
                        .filter_map(|(_, id)| self.leases.get(id))
                        .flat_map(|e| e.claims.iter())
                        .any(|&(cq, pidx, cg)| cq == qid && cg == gid && visible(pidx));
                    freed || q.groups[gid as usize].ready.iter().any(visible)
                }
            }
        })
    }
}

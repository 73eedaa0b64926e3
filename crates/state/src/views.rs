//! Read-only questions about the state, asked by the administration and
//! observability routes. Nothing here changes the state or reads a clock:
//! callers pass `now_ms`, because a lease stays live until its expiry even
//! when no entry has been applied since. Answers come out in a fixed order
//! (queues by name, partitions in creation order, groups in registration
//! order), never in hash-map order.
//!
//! Vocabulary:
//! - A group's *position* in a partition is the first offset it has not
//!   settled: its cursor (never below the partition's base), or, where it
//!   has no cursor yet, where its cursor would be seeded.
//! - *Depth* is the positions left to settle, leased ones included:
//!   `next_offset - position`. A queue-level depth is the slowest group's
//!   (every kept message while no group has registered), because the
//!   slowest reader decides when a message is done with.
//! - A kept message has exactly one *status*: dead letter (a DLQ row names
//!   its offset), completed (every registered group is past it), processing
//!   (a live lease covers it) or pending. [`StatusCounts`] counts by status,
//!   so its four figures add up to `total`.

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;

use crate::cursor::LeaseSlot;
use crate::hash::txn_hash;
use crate::partition::{MsgMeta, Partition};
use crate::queue::{Group, Queue};
use crate::state::State;

/// Groups that still have a name: a group deleted with its metadata keeps
/// its slot (group numbers index every partition's cursors) but not its name.
pub fn groups(q: &Queue) -> impl Iterator<Item = (u32, &Group)> {
    q.groups.iter().enumerate().filter(|(_, g)| !g.name.is_empty()).map(|(i, g)| (i as u32, g))
}

/// Where group `gid` stands in partition `pidx` (see the module header).
pub fn position(q: &Queue, pidx: u32, gid: u32) -> u64 {
    let p = &q.partitions[pidx as usize];
    match p.cursor(gid) {
        Some(c) => c.next.max(p.base),
        None if (gid as usize) < q.groups.len() => q.seed_for(gid, pidx).max(p.base),
        None => p.base,
    }
}

/// The slowest registered group's position, or `None` with no group.
pub fn slowest(q: &Queue, pidx: u32) -> Option<u64> {
    groups(q).map(|(g, _)| position(q, pidx, g)).min()
}

/// Queue-level depth of one partition (see the module header).
pub fn depth(q: &Queue, pidx: u32) -> u64 {
    let p = &q.partitions[pidx as usize];
    let from = slowest(q, pidx).unwrap_or(p.base);
    p.next_offset().saturating_sub(from)
}

/// Depth of one partition for the group named `group`. A name that never
/// registered owes every kept message.
pub fn group_depth(q: &Queue, pidx: u32, group: &str) -> u64 {
    let p = &q.partitions[pidx as usize];
    let from = q.group_index.get(group).map_or(p.base, |&g| position(q, pidx, g));
    p.next_offset().saturating_sub(from)
}

/// The lease group `gid` holds on the partition while it is live, with the
/// offsets it covers that the group has not settled yet.
pub fn live_lease(q: &Queue, pidx: u32, gid: u32, now_ms: u64) -> Option<(&LeaseSlot, Range<u64>)> {
    let p = &q.partitions[pidx as usize];
    let lease = p.cursor(gid)?.live_lease(now_ms)?;
    let start = lease.start.max(position(q, pidx, gid));
    Some((lease, start..lease.end.min(p.next_offset()).max(start)))
}

/// Creation time of the message at `offset`, when it is kept.
pub fn created_at(p: &Partition, offset: u64) -> Option<u64> {
    p.meta(offset).map(|m| m.created_ms)
}

/// Body bytes of the kept messages of a partition.
pub fn kept_bytes(p: &Partition) -> u64 {
    p.msgs.iter().map(|m| m.len as u64).sum()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageStatus {
    Pending,
    Processing,
    Completed,
    DeadLetter,
}

impl MessageStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            MessageStatus::Pending => "pending",
            MessageStatus::Processing => "processing",
            MessageStatus::Completed => "completed",
            MessageStatus::DeadLetter => "dead_letter",
        }
    }

    pub fn parse(s: &str) -> Option<MessageStatus> {
        [Self::Pending, Self::Processing, Self::Completed, Self::DeadLetter]
            .into_iter()
            .find(|st| st.as_str() == s || (s == "dlq" && *st == Self::DeadLetter))
    }
}

/// Kept messages by status; `pending + processing + completed + dead_letter
/// == total`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatusCounts {
    pub total: u64,
    pub pending: u64,
    pub processing: u64,
    pub completed: u64,
    pub dead_letter: u64,
}

impl StatusCounts {
    pub fn add(&mut self, o: StatusCounts) {
        self.total += o.total;
        self.pending += o.pending;
        self.processing += o.processing;
        self.completed += o.completed;
        self.dead_letter += o.dead_letter;
    }
}

/// One queue, with its dead-letter offsets indexed by partition, for
/// answering many questions about its messages in one pass.
pub struct QueueView<'a> {
    pub q: &'a Queue,
    pub now_ms: u64,
    dead: HashMap<u64, BTreeSet<u64>>,
}

impl<'a> QueueView<'a> {
    pub fn new(q: &'a Queue, now_ms: u64) -> Self {
        let mut dead: HashMap<u64, BTreeSet<u64>> = HashMap::new();
        for e in &q.dlq {
            dead.entry(e.partition_id).or_default().insert(e.offset);
        }
        QueueView { q, now_ms, dead }
    }

    /// What deciding a status in one partition needs, worked out once.
    pub fn lens(&self, pidx: u32) -> PartitionLens<'_> {
        let p = &self.q.partitions[pidx as usize];
        let done = slowest(self.q, pidx).unwrap_or(p.base);
        let mut spans: Vec<Range<u64>> = groups(self.q)
            .filter_map(|(g, _)| live_lease(self.q, pidx, g, self.now_ms))
            .map(|(_, r)| r.start.max(done)..r.end)
            .filter(|r| r.start < r.end)
            .collect();
        spans.sort_by_key(|r| r.start);
        let mut leased: Vec<Range<u64>> = Vec::new();
        for r in spans {
            match leased.last_mut() {
                Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
                _ => leased.push(r),
            }
        }
        PartitionLens { p, done, leased, dead: self.dead.get(&p.id) }
    }

    /// Offsets of kept messages filed to the DLQ by any group.
    pub fn dead_offsets(&self, pidx: u32) -> Vec<u64> {
        let p = &self.q.partitions[pidx as usize];
        self.dead.get(&p.id).map_or(Vec::new(), |s| s.range(p.base..p.next_offset()).copied().collect())
    }

    pub fn status(&self, pidx: u32, offset: u64) -> MessageStatus {
        self.lens(pidx).status(offset)
    }

    pub fn partition_counts(&self, pidx: u32) -> StatusCounts {
        let l = self.lens(pidx);
        let (base, end) = (l.p.base, l.p.next_offset());
        let leased_len: u64 = l.leased.iter().map(|r| r.end - r.start).sum();
        let mut c = StatusCounts {
            total: end - base,
            pending: end - l.done - leased_len,
            processing: leased_len,
            completed: l.done - base,
            dead_letter: 0,
        };
        for off in l.dead.into_iter().flat_map(|s| s.range(base..end)) {
            c.dead_letter += 1;
            match l.status_alive(*off) {
                MessageStatus::Completed => c.completed -= 1,
                MessageStatus::Processing => c.processing -= 1,
                _ => c.pending -= 1,
            }
        }
        c
    }

    pub fn totals(&self) -> StatusCounts {
        let mut t = StatusCounts::default();
        for pidx in 0..self.q.partitions.len() as u32 {
            t.add(self.partition_counts(pidx));
        }
        t
    }
}

/// One partition's status boundaries: below `done` every group is past;
/// `leased` are the live leased offsets at or above it.
pub struct PartitionLens<'a> {
    pub p: &'a Partition,
    pub done: u64,
    pub leased: Vec<Range<u64>>,
    dead: Option<&'a BTreeSet<u64>>,
}

impl PartitionLens<'_> {
    pub fn status(&self, offset: u64) -> MessageStatus {
        if self.dead.is_some_and(|s| s.contains(&offset)) {
            MessageStatus::DeadLetter
        } else {
            self.status_alive(offset)
        }
    }

    /// The status the message would have if no DLQ row named it.
    fn status_alive(&self, offset: u64) -> MessageStatus {
        if offset < self.done {
            MessageStatus::Completed
        } else if self.leased.iter().any(|r| r.contains(&offset)) {
            MessageStatus::Processing
        } else {
            MessageStatus::Pending
        }
    }
}

/// One group as a message sees it, for the groups with a cursor in the
/// message's partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOnMessage {
    pub name: String,
    /// The last settled offset (-1 when none).
    pub committed: i64,
    pub consumed: bool,
    /// Expiry of the live lease covering the message, if one does.
    pub lease_expires_ms: Option<u64>,
    /// Failed deliveries counted against the message.
    pub failures: u32,
}

pub fn groups_on_message(q: &Queue, pidx: u32, offset: u64, now_ms: u64) -> Vec<GroupOnMessage> {
    let p = &q.partitions[pidx as usize];
    groups(q)
        .filter_map(|(g, group)| {
            let c = p.cursor(g)?;
            let pos = position(q, pidx, g);
            let lease = live_lease(q, pidx, g, now_ms).filter(|(_, r)| r.contains(&offset));
            Some(GroupOnMessage {
                name: group.name.clone(),
                committed: pos as i64 - 1,
                consumed: offset < pos,
                lease_expires_ms: lease.map(|(l, _)| l.expires_ms),
                failures: if c.fail_offset == offset { c.failures } else { 0 },
            })
        })
        .collect()
}

/// A kept message found by partition id and transaction id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Located {
    pub queue_id: u32,
    pub pidx: u32,
    pub offset: u64,
    pub meta: MsgMeta,
}

/// The kept message with this transaction id, by its 128-bit hash (the
/// caller confirms the id against the body it reads).
pub fn locate(state: &State, partition_id: u64, transaction_id: &str) -> Option<Located> {
    let &(queue_id, pidx) = state.partition_ids.get(&partition_id)?;
    let p = state.queues.get(&queue_id)?.partitions.get(pidx as usize)?;
    let offset = p.find_txn(txn_hash(transaction_id), p.base..p.next_offset())?;
    let meta = *p.meta(offset)?;
    Some(Located { queue_id, pidx, offset, meta })
}

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

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};
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
    p.kept_bytes()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
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
    let (p, index) = state.queues.get(&queue_id)?.partition_with_index(pidx)?;
    let offset = p.find_txn(index, txn_hash(transaction_id), p.base..p.next_offset())?;
    let meta = *p.meta(offset)?;
    Some(Located { queue_id, pidx, offset, meta })
}

/// Queues by name, narrowed to one name and to labels.
fn queues_where<'a>(
    state: &'a State,
    name: Option<&'a str>,
    namespace: Option<&'a str>,
    task: Option<&'a str>,
) -> impl Iterator<Item = &'a Queue> {
    state
        .queue_names
        .iter()
        .filter(move |(n, _)| name.is_none_or(|x| x == n.as_str()))
        .filter_map(|(_, id)| state.queues.get(id))
        .filter(move |q| namespace.is_none_or(|n| q.namespace.as_deref() == Some(n)))
        .filter(move |q| task.is_none_or(|t| q.task.as_deref() == Some(t)))
}

/// What a page of messages is narrowed by; `None` keeps everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct MessageFilter<'a> {
    pub queue: Option<&'a str>,
    pub partition: Option<&'a str>,
    pub namespace: Option<&'a str>,
    pub task: Option<&'a str>,
    pub status: Option<MessageStatus>,
    /// Created at or after this instant (ms).
    pub from_ms: Option<u64>,
    /// Created before this instant (ms).
    pub to_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageRow {
    pub queue: String,
    pub partition: String,
    pub partition_id: u64,
    pub namespace: Option<String>,
    pub task: Option<String>,
    pub offset: u64,
    pub meta: MsgMeta,
    pub status: MessageStatus,
}

/// A page of kept messages, newest first (ties: queue name, partition
/// creation order, then the higher offset). Creation times never go down
/// along a partition, so each partition is read backwards from its tail,
/// and only until it can no longer beat the `skip + limit` best kept so far.
pub fn messages(state: &State, f: &MessageFilter, skip: usize, limit: usize, now_ms: u64) -> Vec<MessageRow> {
    let need = skip.saturating_add(limit);
    // Smaller is newer; the heap's top is the worst of the best `need`.
    type Key<'a> = (Reverse<u64>, &'a str, u32, Reverse<u64>);
    let mut best: BinaryHeap<(Key, MessageStatus)> = BinaryHeap::new();
    if need == 0 {
        return Vec::new();
    }
    for q in queues_where(state, f.queue, f.namespace, f.task) {
        let view = QueueView::new(q, now_ms);
        for (pidx, p) in q.partitions.iter().enumerate() {
            if f.partition.is_some_and(|n| n != &*p.name) {
                continue;
            }
            let lens = view.lens(pidx as u32);
            let lo = f.from_ms.map_or(p.base, |t| p.first_at_or_after(t));
            let hi = f.to_ms.map_or(p.next_offset(), |t| p.first_at_or_after(t));
            for off in (lo..hi).rev() {
                let created = p.meta(off).map_or(0, |m| m.created_ms);
                let key = (Reverse(created), q.name.as_str(), pidx as u32, Reverse(off));
                if best.len() >= need && best.peek().is_some_and(|(worst, _)| key >= *worst) {
                    break;
                }
                let st = lens.status(off);
                if f.status.is_some_and(|s| s != st) {
                    continue;
                }
                best.push((key, st));
                if best.len() > need {
                    best.pop();
                }
            }
        }
    }
    best.into_sorted_vec()
        .into_iter()
        .skip(skip)
        .filter_map(|((Reverse(_), qname, pidx, Reverse(offset)), status)| {
            let q = state.queue(qname)?;
            let p = &q.partitions[pidx as usize];
            Some(MessageRow {
                queue: q.name.clone(),
                partition: p.name.to_string(),
                partition_id: p.id,
                namespace: q.namespace.clone(),
                task: q.task.clone(),
                offset,
                meta: *p.meta(offset)?,
                status,
            })
        })
        .collect()
}

/// Whether queue mode reads the queues named (all with `None`), and how many
/// distinct named groups do.
pub fn reader_mix(state: &State, queue: Option<&str>) -> (bool, usize) {
    let mut queue_mode = false;
    let mut named = BTreeSet::new();
    for q in queues_where(state, queue, None, None) {
        for (_, g) in groups(q) {
            if g.name == regina_types::QUEUE_MODE_GROUP {
                queue_mode = true;
            } else {
                named.insert(g.name.as_str());
            }
        }
    }
    (queue_mode, named.len())
}

/// Rounded seconds from `since_ms` to `now_ms`.
pub fn lag_seconds(now_ms: u64, since_ms: u64) -> u64 {
    (now_ms.saturating_sub(since_ms) + 500) / 1000
}

/// One group in one partition where it has a cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lane {
    pub queue: String,
    pub partition: String,
    pub partition_id: u64,
    pub group: String,
    pub position: u64,
    pub depth: u64,
    /// The live lease: its id, expiry, and the unsettled offsets it covers.
    pub lease: Option<(String, u64, u64)>,
    /// Creation time of the oldest message the group has not settled.
    pub oldest_unsettled_ms: Option<u64>,
}

/// Every lane (queues by name, partitions in creation order, groups in
/// registration order); `only` keeps one group name.
pub fn lanes(state: &State, only: Option<&str>, now_ms: u64) -> Vec<Lane> {
    let mut out = Vec::new();
    for q in queues_where(state, None, None, None) {
        for (pidx, p) in q.partitions.iter().enumerate() {
            let pidx = pidx as u32;
            for (g, group) in groups(q) {
                if only.is_some_and(|o| o != group.name) || p.cursor(g).is_none() {
                    continue;
                }
                let pos = position(q, pidx, g);
                out.push(Lane {
                    queue: q.name.clone(),
                    partition: p.name.to_string(),
                    partition_id: p.id,
                    group: group.name.clone(),
                    position: pos,
                    depth: p.next_offset().saturating_sub(pos),
                    lease: live_lease(q, pidx, g, now_ms).map(|(l, r)| (l.id.clone(), l.expires_ms, r.end - r.start)),
                    oldest_unsettled_ms: created_at(p, pos),
                });
            }
        }
    }
    out
}

/// What every lane adds up to, per group name: [`lanes`] summed without
/// building a row per lane (10,000,000 partitions made as many rows, four
/// strings each, for a handful of sums).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaneTotals {
    /// Every lane's position, summed.
    pub positions: u64,
    /// Per group name: (depth summed, the oldest unsettled age in seconds
    /// among its lanes with depth).
    pub by_group: BTreeMap<String, (u64, u64)>,
    /// The oldest unsettled age in seconds of any lane with depth.
    pub oldest_seconds: u64,
}

/// [`lanes`] of every group, summed ([`LaneTotals`]).
pub fn lane_totals(state: &State, now_ms: u64) -> LaneTotals {
    let mut totals = LaneTotals::default();
    for q in queues_where(state, None, None, None) {
        // One running sum per group of the queue, named once at the end.
        // (depth, oldest age, whether the group has a lane here at all).
        let mut sums = vec![(0u64, 0u64, false); q.groups.len()];
        for (pidx, p) in q.partitions.iter().enumerate() {
            for (g, _) in groups(q) {
                if p.cursor(g).is_none() {
                    continue;
                }
                sums[g as usize].2 = true;
                let pos = position(q, pidx as u32, g);
                totals.positions += pos;
                let depth = p.next_offset().saturating_sub(pos);
                if depth == 0 {
                    continue;
                }
                let age = created_at(p, pos).map_or(0, |t| lag_seconds(now_ms, t));
                let sum = &mut sums[g as usize];
                sum.0 += depth;
                sum.1 = sum.1.max(age);
                totals.oldest_seconds = totals.oldest_seconds.max(age);
            }
        }
        for (g, group) in groups(q) {
            let (depth, age, has_lane) = sums[g as usize];
            if has_lane {
                let e = totals.by_group.entry(group.name.clone()).or_default();
                e.0 += depth;
                e.1 = e.1.max(age);
            }
        }
    }
    totals
}

/// Lanes whose oldest unsettled message is at least `min_lag_s` old, oldest
/// first, each with that age in seconds.
pub fn lagging(state: &State, min_lag_s: u64, now_ms: u64) -> Vec<(Lane, u64)> {
    let mut rows: Vec<(Lane, u64)> = lanes(state, None, now_ms)
        .into_iter()
        .filter_map(|l| {
            let lag = lag_seconds(now_ms, l.oldest_unsettled_ms?);
            (lag >= min_lag_s).then_some((l, lag))
        })
        .collect();
    rows.sort_by_key(|r| Reverse(r.1));
    rows
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRow {
    pub queue: String,
    pub name: String,
    pub id: u64,
    pub depth: u64,
    pub counts: StatusCounts,
    /// Creation time of the oldest message the slowest reader has not settled.
    pub oldest_unsettled_ms: Option<u64>,
    pub created_ms: u64,
    pub last_write_ms: u64,
    pub base: u64,
    pub next_offset: u64,
}

pub fn partition_row(view: &QueueView, pidx: u32) -> PartitionRow {
    let (q, p) = (view.q, &view.q.partitions[pidx as usize]);
    PartitionRow {
        queue: q.name.clone(),
        name: p.name.to_string(),
        id: p.id,
        depth: depth(q, pidx),
        counts: view.partition_counts(pidx),
        oldest_unsettled_ms: created_at(p, slowest(q, pidx).unwrap_or(p.base)),
        created_ms: p.created_ms,
        last_write_ms: p.last_write_ms,
        base: p.base,
        next_offset: p.next_offset(),
    }
}

/// Partitions deepest first (ties: queue name, then creation order), of one
/// queue or of all, at most `limit`.
pub fn ranked_partitions(state: &State, queue: Option<&str>, limit: usize, now_ms: u64) -> Vec<PartitionRow> {
    let mut rows = Vec::new();
    for q in queues_where(state, queue, None, None) {
        let view = QueueView::new(q, now_ms);
        rows.extend((0..q.partitions.len() as u32).map(|i| partition_row(&view, i)));
    }
    // A stable sort keeps the name-then-creation order among equals.
    rows.sort_by_key(|r| Reverse(r.depth));
    rows.truncate(limit);
    rows
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSummary {
    pub id: u32,
    pub name: String,
    pub namespace: Option<String>,
    pub task: Option<String>,
    pub priority: i64,
    pub created_ms: u64,
    pub partitions: u64,
    pub counts: StatusCounts,
    /// Sum of the partitions' queue-level depths.
    pub depth: u64,
    /// Body bytes of the kept messages.
    pub bytes: u64,
    /// Rows in the dead-letter list, kept message or not.
    pub dlq_rows: u64,
    pub groups: u64,
    pub last_write_ms: Option<u64>,
}

pub fn queue_summary(q: &Queue, now_ms: u64) -> QueueSummary {
    let view = QueueView::new(q, now_ms);
    QueueSummary {
        id: q.id,
        name: q.name.clone(),
        namespace: q.namespace.clone(),
        task: q.task.clone(),
        priority: q.options.priority,
        created_ms: q.created_ms,
        partitions: q.partitions.len() as u64,
        counts: view.totals(),
        depth: (0..q.partitions.len() as u32).map(|i| depth(q, i)).sum(),
        bytes: q.kept_bytes,
        dlq_rows: q.dlq.len() as u64,
        groups: groups(q).count() as u64,
        last_write_ms: q.partitions.iter().map(|p| p.last_write_ms).max(),
    }
}

/// Every queue's summary, by name.
pub fn queue_summaries(state: &State, now_ms: u64) -> Vec<QueueSummary> {
    queues_where(state, None, None, None).map(|q| queue_summary(q, now_ms)).collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchError {
    UnknownQueue,
    OutOfRange,
}

/// What a read by offset of one partition returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchPlan {
    pub high_watermark: u64,
    pub log_start: u64,
    pub records: Vec<(u64, MsgMeta)>,
    pub error: Option<FetchError>,
}

/// Records of `queue`/`partition` from `offset`, within `entry_bytes` of
/// body bytes and what is left of the call's `call_bytes` (which it
/// spends), at most `records_max`. The first record is returned even when
/// it alone is over the entry's budget, so a large message cannot stall a
/// reader; an entry gets nothing once the call's budget is spent. A
/// partition never written of an existing queue is an empty log.
pub fn plan_fetch(
    state: &State,
    queue: &str,
    partition: &str,
    offset: u64,
    entry_bytes: u64,
    call_bytes: &mut u64,
    records_max: usize,
) -> FetchPlan {
    let Some(q) = state.queue(queue) else {
        return FetchPlan { error: Some(FetchError::UnknownQueue), ..Default::default() };
    };
    let Some(p) = q.partition_by_name(partition).map(|i| &q.partitions[i as usize]) else {
        return FetchPlan::default();
    };
    let mut plan = FetchPlan { high_watermark: p.next_offset(), log_start: p.base, ..Default::default() };
    if offset < p.base || offset > p.next_offset() {
        plan.error = Some(FetchError::OutOfRange);
        return plan;
    }
    let mut used = 0u64;
    for off in offset..p.next_offset() {
        let Some(m) = p.meta(off) else { break };
        let weight = (m.len as u64).max(1);
        let over = used + weight > entry_bytes || weight > *call_bytes;
        if *call_bytes == 0 || plan.records.len() >= records_max || (!plan.records.is_empty() && over) {
            break;
        }
        used += weight;
        *call_bytes = call_bytes.saturating_sub(weight);
        plan.records.push((off, *m));
    }
    plan
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedRow {
    pub name: String,
    pub id: u64,
    /// Offset of the last message written (retention may have dropped it
    /// since); -1 when the partition was never written.
    pub last_offset: i64,
    pub log_start: u64,
    pub last_write_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedPage {
    pub rows: Vec<ChangedRow>,
    /// Where the next page starts (a partition's creation index) when this
    /// one filled; `None` ends the pass.
    pub next: Option<usize>,
}

/// Partitions of `q` in creation order from index `start`, written at or
/// after `since_ms` when given, at most `limit`.
pub fn changed(q: &Queue, since_ms: Option<u64>, start: usize, limit: usize) -> ChangedPage {
    let mut rows = Vec::new();
    let mut next = None;
    for (i, p) in q.partitions.iter_from(start).enumerate().map(|(n, p)| (start + n, p)) {
        if since_ms.is_some_and(|s| p.last_write_ms < s) {
            continue;
        }
        rows.push(ChangedRow {
            name: p.name.to_string(),
            id: p.id,
            last_offset: p.next_offset() as i64 - 1,
            log_start: p.base,
            last_write_ms: p.last_write_ms,
        });
        if rows.len() >= limit {
            next = Some(i + 1);
            break;
        }
    }
    ChangedPage { rows, next }
}

/// Per time bucket, from `from_ms` in `buckets` steps of `bucket_ms`: kept
/// messages created in it, and dead-letter rows filed in it, of one queue or
/// of all. The state holds no history, so messages retention has dropped are
/// not counted.
pub fn activity(state: &State, queue: Option<&str>, from_ms: u64, bucket_ms: u64, buckets: usize) -> Vec<(u64, u64)> {
    let bucket_ms = bucket_ms.max(1);
    let edge = |i: usize| from_ms.saturating_add(bucket_ms.saturating_mul(i as u64));
    let mut out = vec![(0u64, 0u64); buckets];
    for q in queues_where(state, queue, None, None) {
        for p in &q.partitions {
            let mut lo = p.first_at_or_after(edge(0));
            for (i, slot) in out.iter_mut().enumerate() {
                let hi = p.first_at_or_after(edge(i + 1));
                slot.0 += hi - lo;
                lo = hi;
            }
        }
        for e in &q.dlq {
            if e.failed_ms >= from_ms {
                let i = ((e.failed_ms - from_ms) / bucket_ms) as usize;
                if let Some(slot) = out.get_mut(i) {
                    slot.1 += 1;
                }
            }
        }
    }
    out
}

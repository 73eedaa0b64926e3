//! Push: append messages to partitions, deduplicating by transaction id.

use crate::body::{encode_body, place, BodyWrite};
use crate::command::{PushCmd, PushItem};
use crate::hash::{txn_hash, FastSet};
use crate::options::QueueOptions;
use crate::outcome::{PushResult, PushStatus};
use crate::partition::{MsgMeta, Partition};
use crate::partitions::PArc;
use crate::state::State;
use crate::txn_index::TxnIndex;

/// Transaction ids are remembered at least this long, so late acks still
/// resolve even on a queue with a short dedup window.
const TXN_MEMORY_MS_MIN: u64 = 900_000;

impl State {
    pub(crate) fn push(&mut self, cmd: &PushCmd, writes: &mut Vec<BodyWrite>) -> Vec<PushResult> {
        let now = self.now_ms;
        let mut results = Vec::with_capacity(cmd.items.len());
        // (partition id, txn hash) stored by this entry into a queue whose
        // dedup window is zero: repeats inside one request collapse onto
        // the first whatever the window. Under any other window a message
        // stored by this entry (created now) is inside it anyway, so the
        // set is not kept: its insert per message was a measurable share of
        // a push's cost.
        let mut this_entry: FastSet<(u64, u128)> = FastSet::default();
        // A client's push names one partition for all its items: a run of
        // items in one partition resolves its names once and forgets old
        // transaction ids once (a second pass with the same cutoff finds
        // nothing more: what this entry appends was created now).
        let mut previous: Option<(&str, &str, u32, u32)> = None;
        for item in &cmd.items {
            let (qid, pidx, same_partition) = match previous {
                Some((queue, partition, qid, pidx)) if queue == item.queue && partition == item.partition => {
                    (qid, pidx, true)
                }
                _ => {
                    let (qid, pidx) = self.partition_or_create(&item.queue, &item.partition);
                    previous = Some((&item.queue, &item.partition, qid, pidx));
                    (qid, pidx, false)
                }
            };
            let q = self.queues.get_mut(&qid).expect("just created");
            let window_ms = q.options.dedup_window_seconds.saturating_mul(1000);
            if !same_partition {
                let keep_ms = window_ms.max(TXN_MEMORY_MS_MIN);
                let (p, index) = q.partition_and_index_mut(pidx).expect("just created");
                p.forget_txns_before(index, now.saturating_sub(keep_ms));
            }
            let (p, index) = q.partition_with_index(pidx).expect("just created");
            let hash = txn_hash(&item.transaction_id);
            let in_request = window_ms == 0 && this_entry.contains(&(p.id, hash));
            if let Some(dup) = duplicate_of(p, index, hash, now, window_ms, in_request) {
                results.push(dup);
                continue;
            }
            let pid = p.id;
            if q.options.max_size > 0 && q.kept >= q.options.max_size {
                results.push(PushResult {
                    status: PushStatus::Full,
                    partition_id: pid,
                    offset: 0,
                    pos: 0,
                    len: 0,
                    message_id: None,
                });
                continue;
            }
            let r = self.append_at(qid, pidx, hash, item, writes);
            if window_ms == 0 {
                this_entry.insert((r.partition_id, hash));
            }
            results.push(r);
        }
        // Ids of in-request duplicates are known: copy them from the winner.
        for i in 0..results.len() {
            if results[i].status == PushStatus::Duplicate && results[i].message_id.is_none() {
                let (pid, off) = (results[i].partition_id, results[i].offset);
                results[i].message_id = results[..i]
                    .iter()
                    .find(|r| r.status == PushStatus::Queued && r.partition_id == pid && r.offset == off)
                    .and_then(|r| r.message_id);
            }
        }
        results
    }

    /// The offset of a stored message whose transaction id makes this push a
    /// duplicate (inside its queue's dedup window).
    pub(crate) fn stored_duplicate_offset(&self, item: &PushItem) -> Option<u64> {
        let q = self.queue(&item.queue)?;
        let pidx = q.partition_by_name(&item.partition)?;
        let window_ms = q.options.dedup_window_seconds.saturating_mul(1000);
        let (p, index) = q.partition_with_index(pidx)?;
        duplicate_of(p, index, txn_hash(&item.transaction_id), self.now_ms, window_ms, false).map(|d| d.offset)
    }

    /// Stores one message at the end of its partition, without a dedup
    /// check (the caller made it), and places its body.
    pub(crate) fn append(&mut self, item: &PushItem, writes: &mut Vec<BodyWrite>) -> PushResult {
        let (qid, pidx) = self.partition_or_create(&item.queue, &item.partition);
        self.append_at(qid, pidx, txn_hash(&item.transaction_id), item, writes)
    }

    /// [`State::append`] into partition `pidx` of queue `qid`, the item's
    /// names and transaction-id hash already resolved by the caller.
    fn append_at(
        &mut self,
        qid: u32,
        pidx: u32,
        hash: u128,
        item: &PushItem,
        writes: &mut Vec<BodyWrite>,
    ) -> PushResult {
        let now = self.now_ms;
        let bytes = encode_body(item.message_id, now, item.trace_id, &item.transaction_id, &item.payload);
        let pos = place(self.next_body_pos, bytes.len() as u64);
        self.next_body_pos = pos + bytes.len() as u64;
        let len = bytes.len() as u32;
        let q = self.queues.get_mut(&qid).expect("just created");
        q.kept += 1;
        q.kept_bytes += u64::from(len);
        let (offset, partition_id) = q.push_meta(pidx, MsgMeta::new(pos, len, now, hash));
        q.mark_ready(pidx);
        writes.push(BodyWrite { pos, bytes });
        PushResult { status: PushStatus::Queued, partition_id, offset, pos, len, message_id: Some(item.message_id) }
    }

    /// The (queue id, partition index) for a push, creating either.
    pub(crate) fn partition_or_create(&mut self, queue: &str, partition: &str) -> (u32, u32) {
        let now = self.now_ms;
        let next_pid = self.next_partition_id;
        let (q, _) = self.queue_or_create(queue, QueueOptions::pushed_defaults());
        if let Some(i) = q.partition_by_name(partition) {
            return (q.id, i);
        }
        let idx = q.partitions.len() as u32;
        q.partitions.push(PArc::new(Partition::new(next_pid, partition.to_string(), now)));
        q.partition_index.insert(idx, &q.partitions);
        let qid = q.id;
        self.partition_ids.insert(next_pid, (qid, idx));
        self.next_partition_id += 1;
        (qid, idx)
    }
}

/// The answer for a transaction id already stored, if it still counts as a
/// duplicate: within the window, or pushed in this same entry.
fn duplicate_of(
    p: &Partition,
    index: Option<&TxnIndex>,
    hash: u128,
    now: u64,
    window_ms: u64,
    in_request: bool,
) -> Option<PushResult> {
    let offset = p.remembered_txn(index, hash)?;
    let meta = p.meta(offset)?;
    if !in_request && meta.created_ms.saturating_add(window_ms) <= now {
        return None;
    }
    Some(PushResult {
        status: PushStatus::Duplicate,
        partition_id: p.id,
        offset,
        pos: meta.pos,
        len: meta.len,
        message_id: None,
    })
}

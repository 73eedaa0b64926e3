//! Consumer-group maintenance an operator asks for: forget a group, move its
//! cursors (seek), re-seed its subscription, and handle dead-letter rows.

use crate::command::SeekTarget;
use crate::hash::txn_hash;
use crate::queue::DlqEntry;
use crate::state::State;

impl State {
    /// Queue ids to act on: one named queue, or every queue.
    fn queue_ids(&self, queue: Option<&str>) -> Vec<u32> {
        match queue {
            Some(name) => self.queue_names.get(name).copied().into_iter().collect(),
            None => self.queue_names.values().copied().collect(),
        }
    }

    /// Releases every lease the group holds on a queue.
    fn release_group_leases(&mut self, qid: u32, gid: u32) {
        let held: Vec<(String, u32)> = self.queues[&qid]
            .partitions
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.cursor(gid).and_then(|c| c.lease.as_ref()).map(|l| (l.id.clone(), i as u32)))
            .collect();
        for (lease, pidx) in held {
            self.lease_release(&lease, (qid, pidx, gid));
        }
    }

    pub(crate) fn delete_group(&mut self, group: &str, queue: Option<&str>, delete_metadata: bool) -> u64 {
        let mut changed = 0;
        for qid in self.queue_ids(queue) {
            let Some(&gid) = self.queues[&qid].group_index.get(group) else { continue };
            self.release_group_leases(qid, gid);
            let q = self.queues.get_mut(&qid).expect("listed above");
            for p in q.partitions_mut() {
                if let Some(slot) = p.cursors.get_mut(gid as usize) {
                    changed += slot.take().is_some() as u64;
                }
            }
            if delete_metadata {
                // The slot stays (group numbers index every partition's
                // cursors); only the name lets go of it.
                q.group_index.remove(group);
                q.groups[gid as usize].name.clear();
                q.groups[gid as usize].ready.clear();
            } else {
                q.refill_ready(gid);
            }
        }
        changed
    }

    pub(crate) fn seek(&mut self, group: &str, queue: &str, target: SeekTarget) -> u64 {
        let Some(qid) = self.queue_names.get(queue).copied() else { return 0 };
        let now = self.now_ms;
        let gid = self.queues.get_mut(&qid).expect("indexed").group_id(group, crate::command::Subscription::All, now);
        self.release_group_leases(qid, gid);
        let q = self.queues.get_mut(&qid).expect("indexed");
        let mut changed = 0;
        for p in q.partitions_mut() {
            let to = match target {
                SeekTarget::End => p.next_offset(),
                SeekTarget::Time(ms) => p.first_at_or_after(ms),
            };
            let to = to.max(p.base);
            p.ensure_cursor(gid, to).reset_to(to);
            changed += 1;
        }
        q.refill_ready(gid);
        changed
    }

    /// Moves one partition's cursor of `group`; answers 1 when the
    /// partition exists, 0 when it does not (nothing changes then).
    pub(crate) fn seek_partition(&mut self, group: &str, queue: &str, partition: &str, target: SeekTarget) -> u64 {
        let Some(qid) = self.queue_names.get(queue).copied() else { return 0 };
        let Some(pidx) = self.queues[&qid].partition_by_name(partition).map(|i| i as usize) else { return 0 };
        let now = self.now_ms;
        let gid = self.queues.get_mut(&qid).expect("indexed").group_id(group, crate::command::Subscription::All, now);
        let held = self.queues[&qid].partitions[pidx].cursor(gid).and_then(|c| c.lease.as_ref()).map(|l| l.id.clone());
        if let Some(lease) = held {
            self.lease_release(&lease, (qid, pidx as u32, gid));
        }
        let q = self.queues.get_mut(&qid).expect("indexed");
        let p = q.partition_mut(pidx as u32).expect("indexed");
        let to = match target {
            SeekTarget::End => p.next_offset(),
            SeekTarget::Time(ms) => p.first_at_or_after(ms),
        };
        let to = to.max(p.base);
        p.ensure_cursor(gid, to).reset_to(to);
        q.refill_ready(gid);
        1
    }

    pub(crate) fn set_subscription(&mut self, group: &str, from_ms: u64) -> u64 {
        let mut changed = 0;
        for qid in self.queue_ids(None) {
            let Some(&gid) = self.queues[&qid].group_index.get(group) else { continue };
            self.release_group_leases(qid, gid);
            let q = self.queues.get_mut(&qid).expect("listed above");
            q.groups[gid as usize].seed_from_ms = Some(from_ms);
            for p in q.partitions_mut() {
                let to = p.first_at_or_after(from_ms).max(p.base);
                if let Some(Some(c)) = p.cursors.get_mut(gid as usize) {
                    c.reset_to(to);
                    changed += 1;
                }
            }
            q.refill_ready(gid);
        }
        changed
    }

    /// Removes and returns the newest dead-letter row for a message.
    pub(crate) fn take_dead_letter(&mut self, partition_id: u64, transaction_id: &str) -> Option<DlqEntry> {
        let &(qid, pidx) = self.partition_ids.get(&partition_id)?;
        let hash = txn_hash(transaction_id);
        let q = self.queues.get_mut(&qid)?;
        let p = &q.partitions[pidx as usize];
        let i = q.dlq.iter().rposition(|e| e.partition_id == partition_id && p.holds_txn(e.offset, hash))?;
        Some(q.dlq.remove(i))
    }

    /// The dead-letter row for a message, if any (for replay, which needs
    /// its body).
    pub fn dead_letter(&self, partition_id: u64, transaction_id: &str) -> Option<&DlqEntry> {
        let &(qid, pidx) = self.partition_ids.get(&partition_id)?;
        let hash = txn_hash(transaction_id);
        let q = self.queues.get(&qid)?;
        let p = &q.partitions[pidx as usize];
        q.dlq.iter().rev().find(|e| e.partition_id == partition_id && p.holds_txn(e.offset, hash))
    }
}

//! Acks as cursor commits. A `completed` ack of offset N commits every
//! offset up to N for the group; a `failed` or `retry` item hands the batch
//! back from its offset and clamps the rest of that partition's items in
//! the same call (they are redelivered, never lost); `dlq` files the message
//! to the dead-letter list at once.

use crate::command::{AckCmd, AckItem, AckStatus};
use crate::hash::txn_hash;
use crate::outcome::{AckResult, ERR_LEASE, ERR_UNRESOLVABLE};
use crate::queue::DlqEntry;
use crate::state::State;

impl State {
    pub(crate) fn ack(&mut self, cmd: &AckCmd) -> Vec<AckResult> {
        let mut clamped: Vec<u64> = Vec::new();
        cmd.items
            .iter()
            .map(|item| self.ack_one(&cmd.group, item, &mut clamped))
            .collect()
    }

    fn ack_one(&mut self, group: &str, item: &AckItem, clamped: &mut Vec<u64>) -> AckResult {
        let now = self.now_ms;
        let Some(&(qid, pidx)) = self.partition_ids.get(&item.partition_id) else {
            return AckResult::refused(ERR_UNRESOLVABLE);
        };
        let q = self
            .queues
            .get_mut(&qid)
            .expect("partition index is consistent");
        let Some(&gid) = q.group_index.get(group) else {
            return AckResult::refused(ERR_UNRESOLVABLE);
        };
        let retry_limit = q.options.retry_limit;
        let to_dlq = q.options.dlq_after_max_retries;
        let p = &mut q.partitions[pidx as usize];
        let Some(c) = p.cursor(gid) else {
            return AckResult::refused(ERR_UNRESOLVABLE);
        };
        let lease_range = c.live_lease(now).map(|l| l.start..l.end).unwrap_or(0..0);
        let Some(offset) = p.find_txn(txn_hash(&item.transaction_id), lease_range) else {
            return AckResult::refused(ERR_UNRESOLVABLE);
        };
        let c = p.cursor(gid).expect("checked above");
        if offset < c.next {
            return if item.status == AckStatus::Completed {
                AckResult {
                    success: true,
                    noop: true,
                    ..Default::default()
                }
            } else {
                AckResult::refused(ERR_UNRESOLVABLE)
            };
        }
        if clamped.contains(&item.partition_id) {
            // An earlier nack in this call handed the batch back from its
            // offset; this item will be redelivered, so it commits nothing.
            return AckResult {
                success: true,
                ..Default::default()
            };
        }
        let lease = match c.live_lease(now) {
            Some(l) if offset < l.end && item.lease_id.as_ref().is_none_or(|id| *id == l.id) => {
                l.clone()
            }
            _ => return AckResult::refused(ERR_LEASE),
        };
        let meta = *p.meta(offset).expect("offset in the lease range is kept");
        let partition_name = p.name.clone();
        let c = p.cursor_mut(gid).expect("checked above");
        let mut result = AckResult {
            success: true,
            ..Default::default()
        };
        let release = match item.status {
            AckStatus::Completed => {
                c.commit_to(offset + 1);
                c.next >= lease.end
            }
            AckStatus::Retry => {
                c.commit_to(offset);
                clamped.push(item.partition_id);
                true
            }
            AckStatus::Failed => {
                c.commit_to(offset);
                clamped.push(item.partition_id);
                if c.fail_offset == offset {
                    c.failures += 1;
                } else {
                    c.fail_offset = offset;
                    c.failures = 1;
                }
                if c.failures > retry_limit {
                    let attempts = c.failures;
                    c.commit_to(offset + 1);
                    if to_dlq {
                        result.dlq = true;
                        q.dlq.push(dlq_entry(
                            item,
                            &partition_name,
                            offset,
                            meta,
                            group,
                            attempts,
                            now,
                        ));
                    }
                }
                true
            }
            AckStatus::Dlq => {
                let attempts = c.attempt_of(offset);
                c.commit_to(offset + 1);
                result.dlq = true;
                q.dlq.push(dlq_entry(
                    item,
                    &partition_name,
                    offset,
                    meta,
                    group,
                    attempts,
                    now,
                ));
                let p = &q.partitions[pidx as usize];
                p.cursor(gid).is_some_and(|c| c.next >= lease.end)
            }
        };
        if release {
            self.lease_release(&lease.id, (qid, pidx, gid));
            result.lease_released = true;
        }
        result
    }
}

fn dlq_entry(
    item: &AckItem,
    partition: &str,
    offset: u64,
    meta: crate::partition::MsgMeta,
    group: &str,
    attempts: u32,
    now: u64,
) -> DlqEntry {
    DlqEntry {
        partition_id: item.partition_id,
        partition: partition.to_string(),
        offset,
        pos: meta.pos,
        len: meta.len,
        group: group.to_string(),
        error: item.error.clone(),
        attempts,
        failed_ms: now,
    }
}

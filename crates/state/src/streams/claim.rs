//! Claims: a lease with an empty batch on idle partitions of a query's
//! source, for its group. A runner closes a processing-time window when its
//! time comes even if the partition gets no more messages: it claims the
//! partition, reads the state, and commits a cycle that acks the empty
//! batch (`count: 0`). The claim is granted only when nobody holds the
//! partition and the group has committed all of it, so the close cannot
//! race a cycle over new messages; the cycle is refused whole once the
//! lease is gone, so two runners never close one window.

use serde::{Deserialize, Serialize};

use super::ClaimCmd;
use crate::cursor::LeaseSlot;
use crate::state::State;

/// One partition's answer to a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClaimStatus {
    /// Leased with an empty batch.
    Claimed,
    /// The group holds a live lease on it.
    Busy,
    /// Messages wait for the group: its next pop delivers them.
    Backlog,
    /// Not a partition of the source queue, or one the group never met.
    Missing,
}

impl ClaimStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimStatus::Claimed => "claimed",
            ClaimStatus::Busy => "busy",
            ClaimStatus::Backlog => "backlog",
            ClaimStatus::Missing => "missing",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimedPartition {
    pub partition_id: u64,
    /// The partition's name (empty when missing).
    pub partition: String,
    pub status: ClaimStatus,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClaimOutcome {
    NoSuchQuery,
    Done {
        /// Set when at least one partition was claimed.
        lease_id: Option<String>,
        expires_ms: u64,
        /// The entry's time: processing-time windows close on it.
        now_ms: u64,
        partitions: Vec<ClaimedPartition>,
    },
}

impl State {
    pub(crate) fn stream_claim(&mut self, cmd: &ClaimCmd) -> ClaimOutcome {
        let Some(query) = self.streams.queries.get(&cmd.query_id) else { return ClaimOutcome::NoSuchQuery };
        let group = cmd.group.clone().unwrap_or_else(|| query.default_group());
        let source = query.source_queue.clone();
        let now = self.now_ms;
        let expires_ms = now + cmd.lease_ms;
        let mut partitions = Vec::with_capacity(cmd.partition_ids.len());
        let mut claimed_any = false;
        for &partition_id in &cmd.partition_ids {
            let (status, name, slot) = self.claim_one(partition_id, &source, &group, cmd, expires_ms);
            if let Some(slot) = slot {
                self.lease_add_claim(&cmd.lease_id, slot, expires_ms);
                claimed_any = true;
            }
            partitions.push(ClaimedPartition { partition_id, partition: name, status });
        }
        ClaimOutcome::Done { lease_id: claimed_any.then(|| cmd.lease_id.clone()), expires_ms, now_ms: now, partitions }
    }

    fn claim_one(
        &mut self,
        partition_id: u64,
        source: &str,
        group: &str,
        cmd: &ClaimCmd,
        expires_ms: u64,
    ) -> (ClaimStatus, String, Option<(u32, u32, u32)>) {
        let now = self.now_ms;
        let Some(&(qid, pidx)) = self.partition_ids.get(&partition_id) else {
            return (ClaimStatus::Missing, String::new(), None);
        };
        let q = self.queues.get_mut(&qid).expect("partition index is consistent");
        if q.name != source {
            return (ClaimStatus::Missing, String::new(), None);
        }
        let name = q.partitions[pidx as usize].name.to_string();
        let Some(&gid) = q.group_index.get(group) else { return (ClaimStatus::Missing, name, None) };
        let p = q.partition_mut(pidx).expect("checked above");
        let end = p.next_offset();
        let Some(c) = p.cursor_mut(gid) else { return (ClaimStatus::Missing, name, None) };
        if c.live_lease(now).is_some() {
            return (ClaimStatus::Busy, name, None);
        }
        if c.next < end {
            return (ClaimStatus::Backlog, name, None);
        }
        c.lease = Some(LeaseSlot {
            id: cmd.lease_id.clone(),
            start: c.next,
            end: c.next,
            expires_ms,
            duration_ms: cmd.lease_ms,
        });
        (ClaimStatus::Claimed, name, Some((qid, pidx, gid)))
    }
}

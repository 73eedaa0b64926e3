//! How a [`State`] encodes, and the copy a snapshot encodes.
//!
//! A snapshot takes its copy under the apply lock and encodes it outside
//! (`regina_consensus`'s `build_snapshot`), so the copy must cost little
//! however large the state. Its partitions are shared in chunks
//! ([`crate::partitions`]); what would still be copied row by row is the
//! two indexes over every partition: the queue's name index and the
//! state's partition-id index (each tens of millions of bytes at
//! 10,000,000 partitions). Both say nothing the partitions do not, so the
//! encoding writes them from the partitions, field for field where the
//! derived encoding wrote the maps, and the copy leaves them empty. The
//! bytes are what the derived encoding wrote (maps in another order: the
//! queues in id order, each map in partition order), so the format is
//! unchanged.

use std::collections::{BTreeMap, BTreeSet};

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use crate::hash::FastMap;
use crate::queue::Queue;
use crate::state::{LeaseEntry, State};

#[derive(Serialize)]
#[serde(rename = "State")]
struct StateOut<'a> {
    now_ms: u64,
    queue_names: &'a BTreeMap<String, u32>,
    queues: QueuesInOrder<'a>,
    next_queue_id: u32,
    partition_ids: PartitionIdsOf<'a>,
    next_partition_id: u64,
    leases: &'a FastMap<String, LeaseEntry>,
    lease_expiry: &'a BTreeSet<(u64, String)>,
    next_body_pos: u64,
    applied_entries: u64,
    traces: &'a crate::traces::Traces,
    kv: &'a crate::kv::KvStore,
    timers: &'a crate::timers::Timers,
    jobs: &'a crate::jobs::JobStore,
    tenants: &'a BTreeMap<String, State>,
    streams: &'a crate::streams::StreamStore,
}

/// The queues, encoded as their map.
struct QueuesInOrder<'a>(&'a [(&'a u32, &'a Queue)]);

impl Serialize for QueuesInOrder<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().copied())
    }
}

/// Every partition's id and place, encoded as the partition-id index's map.
struct PartitionIdsOf<'a>(&'a [(&'a u32, &'a Queue)]);

impl Serialize for PartitionIdsOf<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let len = self.0.iter().map(|(_, q)| q.partitions.len()).sum();
        let mut map = s.serialize_map(Some(len))?;
        for (qid, q) in self.0 {
            for (pidx, p) in q.partitions.iter().enumerate() {
                map.serialize_entry(&p.id, &(**qid, pidx as u32))?;
            }
        }
        map.end()
    }
}

impl Serialize for State {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // In id order, so a state and its copy (or two replicas) encode
        // to the same bytes whatever their maps' histories.
        let mut queues: Vec<(&u32, &Queue)> = self.queues.iter().collect();
        queues.sort_unstable_by_key(|(id, _)| **id);
        StateOut {
            now_ms: self.now_ms,
            queue_names: &self.queue_names,
            queues: QueuesInOrder(&queues),
            next_queue_id: self.next_queue_id,
            partition_ids: PartitionIdsOf(&queues),
            next_partition_id: self.next_partition_id,
            leases: &self.leases,
            lease_expiry: &self.lease_expiry,
            next_body_pos: self.next_body_pos,
            applied_entries: self.applied_entries,
            traces: &self.traces,
            kv: &self.kv,
            timers: &self.timers,
            jobs: &self.jobs,
            tenants: &self.tenants,
            streams: &self.streams,
        }
        .serialize(s)
    }
}

impl State {
    /// A copy of the queues alone (as [`State::copy_to_encode`] copies
    /// them: a count per chunk of partitions) with their names and the
    /// time, to walk outside the apply lock: a view over every partition
    /// held the lock for over a second at 10,000,000 partitions.
    pub fn copy_of_queues(&self) -> State {
        State {
            now_ms: self.now_ms,
            queue_names: self.queue_names.clone(),
            queues: self.queues.iter().map(|(id, q)| (*id, q.copy_to_encode())).collect(),
            ..State::new()
        }
    }

    /// A copy to encode ([`State::encode_holed`]), taken under the apply lock:
    /// partitions shared, the indexes the encoding writes from them left
    /// empty ([`Queue::copy_to_encode`]). Nothing but the encoding may use
    /// it: its indexes answer nothing.
    pub fn copy_to_encode(&self) -> State {
        State {
            now_ms: self.now_ms,
            queue_names: self.queue_names.clone(),
            queues: self.queues.iter().map(|(id, q)| (*id, q.copy_to_encode())).collect(),
            next_queue_id: self.next_queue_id,
            partition_ids: crate::partition_ids::PartitionIds::default(),
            next_partition_id: self.next_partition_id,
            leases: self.leases.clone(),
            lease_expiry: self.lease_expiry.clone(),
            next_body_pos: self.next_body_pos,
            applied_entries: self.applied_entries,
            traces: self.traces.clone(),
            kv: self.kv.clone(),
            timers: self.timers.clone(),
            jobs: self.jobs.clone(),
            tenants: self.tenants.iter().map(|(name, t)| (name.clone(), t.copy_to_encode())).collect(),
            streams: self.streams.clone(),
        }
    }
}

//! The state as format 5 (`RGNSTAT5`) laid it out: everything of today's
//! [`State`] but stream queries. A snapshot written before streams existed
//! decodes through this mirror and comes out with no stream queries.
//! bincode carries no field names, so the mirror lists the fields in the
//! old order, tenants (whose states had the old layout too) included.

use std::collections::{BTreeMap, BTreeSet};

use crate::hash::FastMap as HashMap;

use serde::Deserialize;

use crate::queue::Queue;
use crate::state::{LeaseEntry, State};

/// Tag of a format-5 state.
pub const FORMAT: &[u8; 8] = b"RGNSTAT5";

#[derive(Deserialize)]
struct StateV5 {
    now_ms: u64,
    queue_names: BTreeMap<String, u32>,
    queues: HashMap<u32, Queue>,
    next_queue_id: u32,
    partition_ids: crate::partition_ids::PartitionIds,
    next_partition_id: u64,
    leases: HashMap<String, LeaseEntry>,
    lease_expiry: BTreeSet<(u64, String)>,
    next_body_pos: u64,
    applied_entries: u64,
    traces: crate::traces::Traces,
    kv: crate::kv::KvStore,
    timers: crate::timers::Timers,
    jobs: crate::jobs::JobStore,
    tenants: BTreeMap<String, StateV5>,
}

impl From<StateV5> for State {
    fn from(s: StateV5) -> State {
        State {
            now_ms: s.now_ms,
            queue_names: s.queue_names,
            queues: s.queues,
            next_queue_id: s.next_queue_id,
            partition_ids: s.partition_ids,
            next_partition_id: s.next_partition_id,
            leases: s.leases,
            lease_expiry: s.lease_expiry,
            next_body_pos: s.next_body_pos,
            applied_entries: s.applied_entries,
            traces: s.traces,
            kv: s.kv,
            timers: s.timers,
            jobs: s.jobs,
            tenants: s.tenants.into_iter().map(|(k, v)| (k, State::from(v))).collect(),
            streams: Default::default(),
        }
    }
}

/// Decodes the body of a format-5 state (after its tag).
pub fn decode(body: &[u8]) -> Result<State, String> {
    let mut state = bincode::deserialize::<StateV5>(body)
        .map(State::from)
        .map_err(|e| format!("undecodable state snapshot (format 5): {e}"))?;
    state.rebuild_name_indexes()?;
    Ok(state)
}

/// Encodes `state` as format 5 would have: for the tests that prove old
/// snapshots still load. Stream queries have no place in it.
pub fn encode_for_test(state: &State) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Ref<'a> {
        now_ms: u64,
        queue_names: &'a BTreeMap<String, u32>,
        queues: &'a HashMap<u32, Queue>,
        next_queue_id: u32,
        partition_ids: crate::hash::IdMap<(u32, u32)>,
        next_partition_id: u64,
        leases: &'a HashMap<String, LeaseEntry>,
        lease_expiry: &'a BTreeSet<(u64, String)>,
        next_body_pos: u64,
        applied_entries: u64,
        traces: &'a crate::traces::Traces,
        kv: &'a crate::kv::KvStore,
        timers: &'a crate::timers::Timers,
        jobs: &'a crate::jobs::JobStore,
        tenants: BTreeMap<&'a String, Ref<'a>>,
    }
    fn of(s: &State) -> Ref<'_> {
        Ref {
            now_ms: s.now_ms,
            queue_names: &s.queue_names,
            queues: &s.queues,
            next_queue_id: s.next_queue_id,
            partition_ids: s.partition_ids.iter().map(|(id, place)| (id, *place)).collect(),
            next_partition_id: s.next_partition_id,
            leases: &s.leases,
            lease_expiry: &s.lease_expiry,
            next_body_pos: s.next_body_pos,
            applied_entries: s.applied_entries,
            traces: &s.traces,
            kv: &s.kv,
            timers: &s.timers,
            jobs: &s.jobs,
            tenants: s.tenants.iter().map(|(k, v)| (k, of(v))).collect(),
        }
    }
    let mut out = FORMAT.to_vec();
    bincode::serialize_into(&mut out, &of(state)).expect("state always encodes");
    out
}

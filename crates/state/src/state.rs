//! The state and its one entry point, [`State::apply`].

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;

use crate::hash::FastMap;

use serde::{Deserialize, Serialize};

use crate::body::BodyWrite;
use crate::command::{Command, Entry};
use crate::length_checked::{BytesLeft, LengthChecked};
use crate::options::QueueOptions;
use crate::outcome::Outcome;
use crate::queue::Queue;

/// Which partitions a live lease holds, for extension and expiry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseEntry {
    /// (queue id, partition index, group id)
    pub claims: Vec<(u32, u32, u32)>,
    pub expires_ms: u64,
}

/// Encoded by hand (`state_encode`): the indexes over every partition are
/// written from the partitions, so a copy taken to be encoded need not
/// copy them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct State {
    /// The latest time stamped into an applied entry; never goes back,
    /// even if a new leader's clock is behind the old one's.
    pub now_ms: u64,
    /// Queue name to queue id. A BTreeMap: discovery iterates it.
    pub queue_names: BTreeMap<String, u32>,
    pub queues: FastMap<u32, Queue>,
    pub next_queue_id: u32,
    /// Partition id to (queue id, partition index): every partition of
    /// every queue, and nothing else (the encoding writes it from them).
    pub partition_ids: crate::partition_ids::PartitionIds,
    pub next_partition_id: u64,
    pub leases: FastMap<String, LeaseEntry>,
    pub lease_expiry: BTreeSet<(u64, String)>,
    /// Next free byte in the body segment files.
    pub next_body_pos: u64,
    /// Entries applied; a cheap fingerprint for replicas and tests.
    pub applied_entries: u64,
    pub traces: crate::traces::Traces,
    /// KV rows, lock permits among them.
    pub kv: crate::kv::KvStore,
    pub timers: crate::timers::Timers,
    /// Job queues by id.
    pub jobs: crate::jobs::JobStore,
    /// Named tenants' own states (see `tenants`); this state is the
    /// default tenant's.
    pub tenants: BTreeMap<String, State>,
    /// Stream queries and their state rows (format 6 on).
    pub streams: crate::streams::StreamStore,
}

/// Tag in front of every encoded state. Bump it whenever a field of the
/// state (or of anything it holds) changes: 2 added the groups' ready sets
/// and the partitions' lazy transaction-id index, 3 boxed that index, 4
/// added tenants, 5 added job queues, KV lifetimes and timer failures, 6
/// added stream queries. A state of format 5 still decodes
/// ([`crate::state_v5`]).
pub const STATE_FORMAT: &[u8; 8] = b"RGNSTAT6";

/// Messages per other row from which a snapshot copies the state rather
/// than encoding it under the lock ([`State::copy_is_cheaper`]): a message
/// encodes to 36-60 bytes, a partition or row copies at least a name.
const COPY_FROM_MESSAGES_PER_ROW: u64 = 4;

/// The result of applying one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub outcome: Outcome,
    /// Bodies to write before the outcome is answered.
    pub writes: Vec<BodyWrite>,
}

/// The formats of state a snapshot may hold.
enum Format {
    /// [`STATE_FORMAT`].
    Current,
    /// Format 5, read through a mirror of its layout (`state_v5`).
    V5,
}

impl Format {
    /// The format `marker` (a state's first bytes) names, or why it is
    /// refused.
    fn of(marker: &[u8]) -> Result<Format, String> {
        if marker == STATE_FORMAT.as_slice() {
            Ok(Format::Current)
        } else if marker == crate::state_v5::FORMAT.as_slice() {
            Ok(Format::V5)
        } else {
            Err(format!(
                "the snapshot's state is not in format {} (written by another Regina version); \
                 this version cannot read it",
                String::from_utf8_lossy(STATE_FORMAT)
            ))
        }
    }
}

fn undecodable(e: impl std::fmt::Display) -> String {
    format!("undecodable state snapshot: {e}")
}

impl State {
    pub fn new() -> Self {
        State { next_partition_id: 1, next_queue_id: 1, ..Default::default() }
    }

    pub fn apply(&mut self, entry: &Entry) -> Applied {
        self.now_ms = self.now_ms.max(entry.now_ms);
        self.applied_entries += 1;
        self.expire_leases();
        let mut writes = Vec::new();
        let outcome = self.apply_command(&entry.command, &mut writes);
        Applied { outcome, writes }
    }

    pub(crate) fn apply_command(&mut self, command: &Command, writes: &mut Vec<BodyWrite>) -> Outcome {
        match command {
            Command::Noop => Outcome::Done,
            Command::Push(cmd) => Outcome::Push(self.push(cmd, writes)),
            Command::Pop(cmd) => Outcome::Pop(self.pop(cmd)),
            Command::Ack(cmd) => Outcome::Ack(self.ack(cmd)),
            Command::ExtendLease { lease_id } => Outcome::Extend(self.extend_lease(lease_id, None)),
            Command::ExtendLeaseFor { lease_id, duration_ms } => {
                Outcome::Extend(self.extend_lease(lease_id, Some(*duration_ms)))
            }
            Command::Configure(cmd) => self.configure(cmd),
            Command::DeleteQueue { queue } => self.delete_queue(queue),
            Command::Transaction(cmd) => Outcome::Txn(self.transaction(cmd, &[], writes)),
            Command::Step { txn, jobs } => Outcome::Txn(self.transaction(txn, jobs, writes)),
            Command::Jobs(cmd) => Outcome::Jobs(self.jobs.call(&cmd.ops, self.now_ms)),
            Command::DeleteGroup { group, queue, delete_metadata } => {
                Outcome::Changed { count: self.delete_group(group, queue.as_deref(), *delete_metadata) }
            }
            Command::Seek { group, queue, target } => Outcome::Changed { count: self.seek(group, queue, *target) },
            Command::SeekPartition { group, queue, partition, target } => {
                Outcome::Changed { count: self.seek_partition(group, queue, partition, *target) }
            }
            Command::SetSubscription { group, from_ms } => {
                Outcome::Changed { count: self.set_subscription(group, *from_ms) }
            }
            Command::DeleteDeadLetter { partition_id, transaction_id } => {
                Outcome::Found(self.take_dead_letter(*partition_id, transaction_id).is_some())
            }
            Command::RetryDeadLetter { partition_id, transaction_id, item } => {
                match self.take_dead_letter(*partition_id, transaction_id) {
                    None => Outcome::Found(false),
                    Some(_) => Outcome::Push(vec![self.append(item, writes)]),
                }
            }
            Command::RecordTrace(event) => {
                self.traces.record(event.clone());
                Outcome::Done
            }
            Command::Sweep => {
                let sweep = |s: &mut State, _: &mut Vec<BodyWrite>| {
                    s.sweep();
                    s.kv.sweep(s.now_ms, crate::kv::KV_SWEEP_ROWS_MAX);
                    s.jobs.sweep(s.now_ms, regina_types::limits::JOB_SWEEP_ROWS_MAX);
                };
                sweep(self, writes);
                self.for_each_tenant(writes, sweep);
                Outcome::Done
            }
            Command::Kv(cmd) => Outcome::Kv(self.kv_call(cmd)),
            Command::Locks(cmd) => Outcome::Locks(self.locks_call(cmd)),
            Command::Timers(ops) => Outcome::Timers(ops.iter().map(|op| self.timers.apply(op, self.now_ms)).collect()),
            Command::FireTimers => {
                self.fire_timers(writes);
                self.for_each_tenant(writes, |s, w| s.fire_timers(w));
                Outcome::Done
            }
            Command::ForTenant { tenant, command } => self.apply_for_tenant(tenant, command, writes),
            Command::ConfigureTimerPolicy { queue, policy } => {
                let (q, _) = self.queue_or_create(queue, QueueOptions::configured_defaults());
                q.options.apply_timer_policy(policy);
                Outcome::Done
            }
            Command::Stream(cmd) => Outcome::Stream(self.stream_call(cmd, writes)),
            Command::Batch(commands) => {
                Outcome::Batch(commands.iter().map(|c| self.apply_command(c, writes)).collect())
            }
        }
    }

    pub fn queue(&self, name: &str) -> Option<&Queue> {
        self.queue_names.get(name).and_then(|id| self.queues.get(id))
    }

    /// The queue named `name`, created with `options` if it does not exist.
    pub(crate) fn queue_or_create(&mut self, name: &str, options: QueueOptions) -> (&mut Queue, bool) {
        if let Some(id) = self.queue_names.get(name).copied() {
            return (self.queues.get_mut(&id).expect("queue index is consistent"), false);
        }
        let id = self.next_queue_id;
        self.next_queue_id += 1;
        self.queue_names.insert(name.to_string(), id);
        let mut q = Queue::new(id, name.to_string(), options, self.now_ms);
        // `namespace.task.name` declares the labels without a configure call.
        let parts: Vec<&str> = name.splitn(3, '.').collect();
        if parts.len() == 3 && parts.iter().all(|p| !p.is_empty()) {
            q.namespace = Some(parts[0].to_string());
            q.task = Some(parts[1].to_string());
        }
        (self.queues.entry(id).or_insert(q), true)
    }

    /// Encodes the whole state for a snapshot, behind [`STATE_FORMAT`].
    pub fn encode(&self) -> Vec<u8> {
        self.encode_into(Vec::new())
    }

    /// Whether a snapshot should copy this state under the lock and encode
    /// the copy outside it ([`State::copy_to_encode`]), rather than encode
    /// it under the lock. The copy shares the partitions and their messages
    /// (a count per chunk of partitions) but copies the other rows (KV
    /// rows, jobs, timers, leases, dead letters), so it is far cheaper than
    /// the encode only where partitions and messages outnumber those rows.
    /// Where they do not (a million jobs, say) the copy takes nearly as
    /// long as the encode and holds a second copy of every row meanwhile.
    pub fn copy_is_cheaper(&self) -> bool {
        let (shared, rows) = self.weight();
        shared >= COPY_FROM_MESSAGES_PER_ROW * rows.max(1)
    }

    /// (partitions and messages kept, other rows) of this state and its
    /// tenants'.
    fn weight(&self) -> (u64, u64) {
        let mut messages = 0;
        let mut rows = (self.kv.len() + self.jobs.len() + self.timers.len() + self.leases.len()) as u64;
        for q in self.queues.values() {
            messages += q.kept + q.partitions.len() as u64;
            // A ready set copies as bits (1.25 MB at 10 M partitions), at
            // memory speed: not a row.
            rows += q.dlq.len() as u64;
        }
        for t in self.tenants.values() {
            let (m, r) = t.weight();
            messages += m;
            rows += r;
        }
        (messages, rows)
    }

    /// The length of [`State::encode`]'s bytes, counted without writing
    /// them: a snapshot's buffer is allocated once at its size instead of
    /// growing (and copying) by doubling.
    pub fn encoded_len(&self) -> usize {
        let body = bincode::serialized_size(self).expect("state always encodes");
        STATE_FORMAT.len() + usize::try_from(body).expect("a state fits in memory")
    }

    /// [`State::encode`] into `out` (cleared first; its capacity is kept).
    pub fn encode_into(&self, mut out: Vec<u8>) -> Vec<u8> {
        out.clear();
        out.extend_from_slice(STATE_FORMAT);
        bincode::serialize_into(&mut out, self).expect("state always encodes");
        out
    }

    /// [`State::encode`] written into `out` as it is encoded: exactly
    /// [`State::encoded_len`] bytes. Small writes gather in a short buffer
    /// first, so `out` sees few calls however many fields there are.
    pub fn encode_to(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        let mut out = std::io::BufWriter::with_capacity(64 * 1024, out);
        out.write_all(STATE_FORMAT)?;
        bincode::serialize_into(&mut out, self).map_err(|e| match *e {
            bincode::ErrorKind::Io(e) => e,
            other => std::io::Error::other(format!("the state did not encode: {other}")),
        })?;
        out.flush()
    }

    /// Decodes a snapshot's state and checks its invariants. A state of
    /// another format is refused
    /// with a message rather than read: bincode has no field names, so an
    /// older layout would otherwise be misread.
    pub fn decode(bytes: &[u8]) -> Result<State, String> {
        let format = bytes.get(..STATE_FORMAT.len()).unwrap_or(bytes);
        let body = &bytes[format.len()..];
        let state = match Format::of(format)? {
            Format::V5 => return crate::state_v5::decode(body).map(State::indexed),
            Format::Current => bincode::deserialize::<State>(body),
        };
        state.map_err(undecodable)?.checked()
    }

    /// [`State::decode`] of what `reader` has left (a snapshot file's data,
    /// streamed), decoded as it is read. No length inside may claim more
    /// than the bytes left: a damaged one is refused before it is
    /// allocated ([`crate::length_checked`]). Bytes after the state are
    /// left unread, for the caller to count.
    pub fn decode_from<R: BytesLeft>(reader: &mut R) -> Result<State, String> {
        let mut format = [0u8; STATE_FORMAT.len()];
        reader.read_exact(&mut format).map_err(undecodable)?;
        match Format::of(&format)? {
            Format::V5 => {
                let mut body = Vec::new();
                let left = reader.bytes_left();
                std::io::Read::read_to_end(&mut std::io::Read::take(&mut *reader, left), &mut body)
                    .map_err(undecodable)?;
                crate::state_v5::decode(&body).map(State::indexed)
            }
            Format::Current => {
                use bincode::Options;
                // What `bincode::deserialize` reads: no limit counted per
                // field, the lengths checked by the source instead.
                let options = bincode::DefaultOptions::new().with_fixint_encoding().allow_trailing_bytes();
                let mut decoder = bincode::Deserializer::with_bincode_read(LengthChecked::new(reader), options);
                State::deserialize(&mut decoder).map_err(undecodable)?.checked()
            }
        }
    }

    /// A state just decoded in the current format, its indexes built and
    /// its invariants checked: a snapshot read at recovery or sent by a
    /// leader is checked before anything is served from it.
    fn checked(mut self) -> Result<State, String> {
        self.rebuild_name_indexes().map_err(|e| format!("the snapshot's state breaks an invariant: {e}"))?;
        self.check_invariants().map_err(|e| format!("the snapshot's state breaks an invariant: {e}"))?;
        Ok(self.indexed())
    }

    /// A decoded state with its transaction-id indexes built.
    fn indexed(mut self) -> State {
        self.rebuild_txn_indexes();
        self
    }

    /// Builds the partition-name index of every queue, this state's and its
    /// tenants': a decoded state has none ([`crate::name_index`]).
    pub(crate) fn rebuild_name_indexes(&mut self) -> Result<(), String> {
        for q in self.queues.values_mut() {
            q.rebuild_name_index().map_err(|e| format!("queue {}: {e}", q.name))?;
        }
        for (name, t) in self.tenants.iter_mut() {
            t.rebuild_name_indexes().map_err(|e| format!("tenant {name}: {e}"))?;
        }
        Ok(())
    }

    /// Builds the transaction-id indexes of every queue, this state's and
    /// its tenants': a decoded state has none ([`crate::txn_index`]).
    fn rebuild_txn_indexes(&mut self) {
        for q in self.queues.values_mut() {
            q.rebuild_txn_indexes();
            q.rebuild_kept_bytes();
        }
        for t in self.tenants.values_mut() {
            t.rebuild_txn_indexes();
        }
    }

    /// Total messages kept, across queues.
    pub fn message_count(&self) -> u64 {
        self.queues.values().map(|q| q.message_count()).sum()
    }

    /// Checks the invariants that every transition must keep; used by tests
    /// and after recovery.
    pub fn check_invariants(&self) -> Result<(), String> {
        // The partition-id index must hold exactly every partition's place.
        // Looking each one up costs a cache miss per partition (2 s at 10 M
        // partitions, twice per restart), so both sides are summed instead,
        // each walked in its own order: equal lengths and equal sums of a
        // 64-bit mix of every entry.
        let mut places = 0u64;
        for (name, id) in &self.queue_names {
            let q = self.queues.get(id).ok_or(format!("queue {name} indexed but missing"))?;
            // Each group's ready set is walked beside the partitions, in
            // order, rather than searched once per partition: with millions
            // of partitions the searches made this check take seconds.
            let mut ready: Vec<_> = q.groups.iter().map(|g| g.ready.iter().peekable()).collect();
            // The encoding writes the name index from the partitions
            // (`state_encode`), so it must hold them and nothing else.
            q.partitions.check().map_err(|e| format!("queue {name}: {e}"))?;
            if q.partition_index.len() != q.partitions.len() {
                return Err(format!(
                    "queue {name}: {} partitions, {} names",
                    q.partitions.len(),
                    q.partition_index.len()
                ));
            }
            // A member past the last partition would be read as one.
            let end = u32::try_from(q.partitions.len()).unwrap_or(u32::MAX);
            if let Some(g) = q.groups.iter().find(|g| g.ready.first_from(end).is_some()) {
                return Err(format!("queue {name}: group {} holds a partition past the end ready", g.name));
            }
            for (i, p) in q.partitions.iter().enumerate() {
                let i = i as u32;
                places = places.wrapping_add(place_print(p.id, *id, i));
                for (gid, g) in q.groups.iter().enumerate() {
                    let in_ready = &mut ready[gid];
                    while in_ready.next_if(|r| *r < i).is_some() {}
                    if g.name.is_empty() {
                        continue;
                    }
                    if q.has_work(gid as u32, i, self.now_ms) && in_ready.peek() != Some(&i) {
                        return Err(format!(
                            "partition {} has work for group {} but is not in its ready set",
                            p.id, g.name
                        ));
                    }
                }
                for c in p.cursors.iter().flatten() {
                    if c.next > p.next_offset() {
                        return Err(format!("cursor past the end in partition {}", p.id));
                    }
                    if let Some(l) = &c.lease {
                        if l.start < c.next.min(l.start) || l.end > p.next_offset() || l.start > l.end {
                            return Err(format!("lease range broken in partition {}", p.id));
                        }
                    }
                }
            }
        }
        if self.queues.len() != self.queue_names.len() {
            return Err("queue map and name index disagree".into());
        }
        let partitions: usize = self.queues.values().map(|q| q.partitions.len()).sum();
        self.partition_ids.check()?;
        if self.partition_ids.len() != partitions {
            return Err(format!("{partitions} partitions, {} in the id index", self.partition_ids.len()));
        }
        let indexed = self
            .partition_ids
            .iter()
            .fold(0u64, |sum, (pid, (qid, pidx))| sum.wrapping_add(place_print(pid, *qid, *pidx)));
        if indexed != places {
            return Err("the partition-id index disagrees with the partitions' places".into());
        }
        for (name, t) in &self.tenants {
            t.check_invariants().map_err(|e| format!("tenant {name}: {e}"))?;
            if !t.tenants.is_empty() {
                return Err(format!("tenant {name} holds tenants of its own"));
            }
        }
        self.timers.check()?;
        self.kv.check()?;
        self.streams.check()?;
        self.jobs.check()
    }
}

/// A 64-bit mix of a partition's id and place: one term of the sums
/// [`State::check_invariants`] compares (a wrong, missing or extra entry
/// changes its side's sum but for a 2^-64 chance).
fn place_print(pid: u64, qid: u32, pidx: u32) -> u64 {
    let mut x = pid ^ (u64::from(qid) << 32 | u64::from(pidx)).rotate_left(17).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // splitmix64's finaliser.
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

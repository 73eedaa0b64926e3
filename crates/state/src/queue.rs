//! A queue: its options and labels, its partitions, its consumer groups and
//! its dead-letter list.

use crate::hash::FastMap;
use crate::name_index::NameIndex;

use serde::{Deserialize, Serialize};

use crate::command::Subscription;
use crate::options::QueueOptions;
use crate::partition::{MsgMeta, Partition};
use crate::partitions::{PArc, Partitions};
use crate::ready_set::ReadySet;
use crate::txn_index::{TxnIndex, TxnIndexes};

/// A consumer group's registration on one queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    pub name: String,
    /// Where a cursor starts in a partition it meets after registering.
    pub seed_from_ms: Option<u64>,
    /// The partition index a wildcard pop tries first, for fairness.
    pub next_try: u32,
    pub registered_ms: u64,
    /// Last-value delivery: only the newest visible message of a partition
    /// is delivered; older ones are retired.
    #[serde(default)]
    pub conflate: bool,
    /// Partitions that may hold something this group can be handed: every
    /// partition with an unleased cursor short of its end is in here (it
    /// may also hold some that turn out to have nothing, which a pop
    /// drops). Wildcard pops walk this set instead of every partition, so
    /// their cost follows the partitions with work, not the partition count.
    pub ready: ReadySet,
}

/// A message filed to the dead-letter list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DlqEntry {
    pub partition_id: u64,
    pub partition: String,
    pub offset: u64,
    pub pos: u64,
    pub len: u32,
    pub group: String,
    pub error: Option<String>,
    pub attempts: u32,
    pub failed_ms: u64,
}

/// Encoded by hand ([`QueueOut`]): its name index is written from the
/// partitions, so a copy taken to be encoded need not copy it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Queue {
    pub id: u32,
    pub name: String,
    pub namespace: Option<String>,
    pub task: Option<String>,
    pub options: QueueOptions,
    pub partitions: Partitions,
    /// Partition name to place: always every partition, and nothing else.
    /// The encoding writes it from the partitions, and a decode rebuilds
    /// it from them ([`Queue::rebuild_name_index`]).
    #[serde(deserialize_with = "crate::name_index::skip_encoded")]
    pub partition_index: NameIndex,
    pub groups: Vec<Group>,
    pub group_index: FastMap<String, u32>,
    pub dlq: Vec<DlqEntry>,
    pub created_ms: u64,
    /// Messages kept across partitions (what `maxSize` bounds).
    #[serde(default)]
    pub kept: u64,
    /// Body bytes of those messages: kept beside the count, not summed over
    /// every message when asked (the dashboard's sampler read 2.6 GB of
    /// message metadata every 10 s at 66 M messages, docs/benchmarks.md
    /// item 40). Not stored: a decode sums it once ([`Queue::rebuild_kept_bytes`]).
    #[serde(skip)]
    pub kept_bytes: u64,
    /// The partitions' transaction-id indexes: a cache, neither copied nor
    /// stored ([`crate::txn_index`]).
    #[serde(skip)]
    pub txn_indexes: TxnIndexes,
}

/// How a [`Queue`] encodes: field for field what its derived encoding
/// wrote, with the name index written from the partitions (in partition
/// order) instead of read from the map.
#[derive(Serialize)]
#[serde(rename = "Queue")]
struct QueueOut<'a> {
    id: u32,
    name: &'a str,
    namespace: &'a Option<String>,
    task: &'a Option<String>,
    options: &'a QueueOptions,
    partitions: &'a Partitions,
    partition_index: NamesOf<'a>,
    groups: &'a [Group],
    group_index: &'a FastMap<String, u32>,
    dlq: &'a [DlqEntry],
    created_ms: u64,
    kept: u64,
}

/// Every partition's name and place, encoded as the name index's map.
struct NamesOf<'a>(&'a Partitions);

impl Serialize for NamesOf<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (i, p) in self.0.iter().enumerate() {
            map.serialize_entry(&*p.name, &(i as u32))?;
        }
        map.end()
    }
}

impl Serialize for Queue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        QueueOut {
            id: self.id,
            name: &self.name,
            namespace: &self.namespace,
            task: &self.task,
            options: &self.options,
            partitions: &self.partitions,
            partition_index: NamesOf(&self.partitions),
            groups: &self.groups,
            group_index: &self.group_index,
            dlq: &self.dlq,
            created_ms: self.created_ms,
            kept: self.kept,
        }
        .serialize(s)
    }
}

impl Queue {
    pub fn new(id: u32, name: String, options: QueueOptions, now_ms: u64) -> Self {
        Queue {
            id,
            name,
            namespace: None,
            task: None,
            options,
            partitions: Partitions::new(),
            partition_index: NameIndex::default(),
            groups: Vec::new(),
            group_index: FastMap::default(),
            dlq: Vec::new(),
            created_ms: now_ms,
            kept: 0,
            kept_bytes: 0,
            txn_indexes: TxnIndexes::default(),
        }
    }

    /// A copy to encode, taken under the apply lock: it shares the
    /// partitions (a count per chunk of them) and leaves out what the
    /// encoding does not read (the name index, written from the partitions)
    /// or does not hold (the transaction-id indexes). Nothing but the
    /// encoding may use it.
    pub fn copy_to_encode(&self) -> Queue {
        Queue {
            id: self.id,
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            task: self.task.clone(),
            options: self.options.clone(),
            partitions: self.partitions.clone(),
            partition_index: NameIndex::default(),
            groups: self.groups.clone(),
            group_index: self.group_index.clone(),
            dlq: self.dlq.clone(),
            created_ms: self.created_ms,
            kept: self.kept,
            kept_bytes: self.kept_bytes,
            txn_indexes: TxnIndexes::default(),
        }
    }

    /// Partition `pidx` with its transaction-id index, if it has one.
    pub fn partition_with_index(&self, pidx: u32) -> Option<(&Partition, Option<&TxnIndex>)> {
        let p = self.partitions.get(pidx as usize)?;
        Some((p, self.txn_indexes.get(pidx)))
    }

    /// Partition `pidx` to change (see [`Queue::partition_mut`]), with its
    /// transaction-id index if it has one.
    pub fn partition_and_index_mut(&mut self, pidx: u32) -> Option<(&mut Partition, Option<&mut TxnIndex>)> {
        let p = self.partitions.get_mut(pidx as usize).map(PArc::make_mut)?;
        Some((p, self.txn_indexes.get_mut(pidx)))
    }

    /// Appends a message's metadata to partition `pidx`, remembers its
    /// transaction id and notes the write's time (its `created_ms`);
    /// returns its offset and the partition's id. One unsharing of the
    /// partition for all three.
    pub fn push_meta(&mut self, pidx: u32, meta: MsgMeta) -> (u64, u64) {
        let p = PArc::make_mut(self.partitions.get_mut(pidx as usize).expect("a partition of this queue"));
        let offset = p.push_meta(meta);
        p.last_write_ms = meta.created_ms;
        self.txn_indexes.appended(pidx, p, &meta, offset);
        (offset, p.id)
    }

    /// Builds the name index from the partitions: after decoding. Refuses
    /// two partitions of one name.
    pub fn rebuild_name_index(&mut self) -> Result<(), String> {
        self.partition_index = NameIndex::of(&self.partitions)?;
        Ok(())
    }

    /// Builds every partition's index that wants one: after decoding.
    pub fn rebuild_txn_indexes(&mut self) {
        self.txn_indexes.rebuild(self.partitions.iter().map(|p| p.as_ref()));
    }

    /// Sums [`Queue::kept_bytes`] from the messages (a decoded queue has
    /// none).
    pub fn rebuild_kept_bytes(&mut self) {
        self.kept_bytes = self.partitions.iter().map(|p| p.kept_bytes()).sum();
    }

    /// A partition to change. Partitions may be shared with a snapshot
    /// being encoded, and every write goes through here (or
    /// [`Queue::partitions_mut`]): a shared partition is copied first
    /// (`PArc::make_mut`), so the snapshot keeps what it took.
    pub fn partition_mut(&mut self, pidx: u32) -> Option<&mut Partition> {
        self.partitions.get_mut(pidx as usize).map(PArc::make_mut)
    }

    /// Every partition, to change (see [`Queue::partition_mut`]).
    pub fn partitions_mut(&mut self) -> impl Iterator<Item = &mut Partition> {
        self.partitions.iter_mut().map(PArc::make_mut)
    }

    pub fn partition_by_name(&self, name: &str) -> Option<u32> {
        self.partition_index.get(name, &self.partitions)
    }

    /// The group's number, registering it on first contact. A group that
    /// subscribes `New` gets a cursor at the current end of every existing
    /// partition; partitions created later are new to it, so it reads them
    /// from their start.
    pub fn group_id(&mut self, name: &str, sub: Subscription, now_ms: u64) -> u32 {
        self.group_id_with(name, sub, false, now_ms)
    }

    /// As [`Queue::group_id`], storing the conflation policy of a new group.
    pub fn group_id_with(&mut self, name: &str, sub: Subscription, conflate: bool, now_ms: u64) -> u32 {
        if let Some(g) = self.group_index.get(name) {
            return *g;
        }
        let gid = self.groups.len() as u32;
        let seed_from_ms = match sub {
            Subscription::From(ms) => Some(ms),
            _ => None,
        };
        let ready = ReadySet::new();
        let group = Group { name: name.to_string(), seed_from_ms, next_try: 0, registered_ms: now_ms, conflate, ready };
        self.groups.push(group);
        self.group_index.insert(name.to_string(), gid);
        if sub == Subscription::New {
            for p in self.partitions_mut() {
                let end = p.next_offset();
                p.ensure_cursor(gid, end);
            }
        } else {
            self.refill_ready(gid);
        }
        gid
    }

    /// Notes that partition `pidx` may have work for every group (a push
    /// landed in it).
    pub fn mark_ready(&mut self, pidx: u32) {
        for g in self.groups.iter_mut().filter(|g| !g.name.is_empty()) {
            g.ready.insert(pidx);
        }
    }

    /// Notes that partition `pidx` may have work for group `gid` (its lease
    /// there ended).
    pub fn mark_ready_for(&mut self, gid: u32, pidx: u32) {
        if let Some(g) = self.groups.get_mut(gid as usize).filter(|g| !g.name.is_empty()) {
            g.ready.insert(pidx);
        }
    }

    /// Puts every partition that holds messages in the group's ready set:
    /// after its cursors were moved or forgotten wholesale.
    ///
    /// The queue-mode group (no name) keeps no ready set, so it costs
    /// nothing (a walk of every partition, 0.2 s at 10,000,000).
    pub fn refill_ready(&mut self, gid: u32) {
        let Some(g) = self.groups.get_mut(gid as usize).filter(|g| !g.name.is_empty()) else {
            return;
        };
        for (i, p) in self.partitions.iter().enumerate() {
            if !p.msgs.is_empty() {
                g.ready.insert(i as u32);
            }
        }
    }

    /// The next offset group `gid` would be handed from partition `pidx`
    /// at `now`: its cursor, or the seed of a cursor not made yet; `None`
    /// while the group holds a live lease there.
    pub fn unleased_next(&self, gid: u32, pidx: u32, now_ms: u64) -> Option<u64> {
        let p = &self.partitions[pidx as usize];
        match p.cursor(gid) {
            Some(c) if c.live_lease(now_ms).is_some() => None,
            Some(c) => Some(c.next.max(p.base)),
            None => Some(self.seed_for(gid, pidx)),
        }
    }

    /// Whether group `gid` could be handed something of partition `pidx`
    /// at `now` were visibility rules aside.
    pub fn has_work(&self, gid: u32, pidx: u32, now_ms: u64) -> bool {
        let end = self.partitions[pidx as usize].next_offset();
        self.unleased_next(gid, pidx, now_ms).is_some_and(|next| next < end)
    }

    /// Where a new cursor of `gid` starts in partition `pidx`.
    pub fn seed_for(&self, gid: u32, pidx: u32) -> u64 {
        let p = &self.partitions[pidx as usize];
        match self.groups[gid as usize].seed_from_ms {
            Some(ms) => p.first_at_or_after(ms),
            None => p.base,
        }
    }

    /// Total messages kept across partitions.
    pub fn message_count(&self) -> u64 {
        self.partitions.iter().map(|p| p.msgs.len() as u64).sum()
    }
}

//! The transaction-id indexes of a queue's partitions: hash of a message's
//! transaction id to its newest remembered offset, for dedup and for
//! resolving an ack.
//!
//! An index is a cache over its partition's message table, not state: it is
//! kept beside the partitions ([`TxnIndexes`]), never copied and never
//! stored. A partition shared with a snapshot (`Arc`) is copied on its next
//! write, and an index inside it made that copy more than twice as large;
//! a snapshot stored every index too. Now a copy of the state (a snapshot's)
//! starts without indexes, lookups there scan the messages, and a decoded
//! state rebuilds its indexes in one pass ([`TxnIndexes::rebuild`]).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::hash::FastMap;
use crate::partition::{MsgMeta, Partition};
use crate::txn_table::TxnTable;

/// A transaction-id hash as two words: a `u128` would align `MsgMeta` to
/// 16 bytes and cost 8 more per message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnKey([u64; 2]);

impl std::hash::Hash for TxnKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Already a hash: one word is plenty for a table.
        state.write_u64(self.0[0]);
    }
}

impl From<u128> for TxnKey {
    fn from(h: u128) -> Self {
        TxnKey([h as u64, (h >> 64) as u64])
    }
}

impl From<TxnKey> for u128 {
    fn from(k: TxnKey) -> Self {
        (k.0[0] as u128) | ((k.0[1] as u128) << 64)
    }
}

/// Hashes a [`TxnKey`], which is already a hash: SipHash over these keys
/// was a measurable share of push time.
#[derive(Default)]
pub struct PreHashed(u64);

impl Hasher for PreHashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not reached by `TxnKey`; correct for anything else all the same.
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Transaction-id hash to offset, as format 6 stored it inside each
/// partition: read from an old snapshot only to be dropped ([`RetiredIndex`]).
pub type TxnMap = HashMap<TxnKey, u64, BuildHasherDefault<PreHashed>>;

/// One partition's index: its remembered ids, and the time of its oldest
/// remembered message.
///
/// Every push first ages out the ids older than the partition's memory
/// (`Partition::forget_txns_before`), which reads the oldest remembered
/// message's time. That message is the coldest in the table: in a long
/// push it was a cache miss on every message, 3.0-3.8 % of the broker's
/// samples late in a 300 s run (docs/benchmarks.md, item 24). Its time sits
/// here instead, beside the table this push looks up anyway.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TxnIndex {
    pub ids: TxnTable,
    /// `(offset, created_ms)` of the oldest remembered message when last
    /// read; it holds only while that offset is still the oldest remembered
    /// one (a message's creation time never changes).
    pub oldest: Option<(u64, u64)>,
}

/// The indexes of one queue's partitions, by partition index; a partition
/// has one from [`crate::partition::INDEX_FROM`] messages on (below that a
/// lookup scans, which is cheaper than a table).
///
/// A clone is empty and every clone is equal: the indexes are a cache that
/// a copy of the state (a snapshot being encoded) neither needs nor should
/// pay for. Where a partition that wants an index has none, lookups scan and
/// its next push builds it, so answers never depend on the cache.
#[derive(Default)]
pub struct TxnIndexes(FastMap<u32, TxnIndex>);

impl Clone for TxnIndexes {
    fn clone(&self) -> Self {
        TxnIndexes::default()
    }
}

impl PartialEq for TxnIndexes {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for TxnIndexes {}

impl std::fmt::Debug for TxnIndexes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TxnIndexes({} built)", self.0.len())
    }
}

impl TxnIndexes {
    pub fn get(&self, pidx: u32) -> Option<&TxnIndex> {
        self.0.get(&pidx)
    }

    pub fn get_mut(&mut self, pidx: u32) -> Option<&mut TxnIndex> {
        self.0.get_mut(&pidx)
    }

    /// Notes `meta`, which `p` just stored at `offset`, building the
    /// partition's index if it now wants one and has none.
    pub fn appended(&mut self, pidx: u32, p: &Partition, meta: &MsgMeta, offset: u64) {
        if let Some(index) = self.0.get_mut(&pidx) {
            let hash = meta.txn();
            if index.ids.insert(hash, offset, |o| p.holds_txn(o, hash)).is_err() {
                // Offsets have run 2^32 past the table's origin: start it
                // again from the oldest remembered one.
                match p.build_txn_index() {
                    Some(rebuilt) => *index = rebuilt,
                    None => {
                        self.0.remove(&pidx);
                    }
                }
            }
        } else if p.wants_txn_index() {
            if let Some(index) = p.build_txn_index() {
                self.0.insert(pidx, index);
            }
        }
    }

    /// Builds the index of every partition that wants one, in one pass
    /// over the message tables: after a state is decoded, so that no
    /// lookup scans a large partition.
    pub fn rebuild<'a>(&mut self, partitions: impl Iterator<Item = &'a Partition>) {
        self.0.clear();
        for (pidx, p) in partitions.enumerate() {
            if let Some(index) = p.wants_txn_index().then(|| p.build_txn_index()).flatten() {
                self.0.insert(pidx as u32, index);
            }
        }
    }
}

/// The place in a partition's encoding where format 6 kept its index
/// (`Option<Box<TxnMap>>`): written as `None`, so the format and its
/// readers are unchanged; an index read from an older snapshot is dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetiredIndex;

impl Serialize for RetiredIndex {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_none()
    }
}

impl<'de> Deserialize<'de> for RetiredIndex {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Option::<TxnMap>::deserialize(d).map(|_| RetiredIndex)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One partition with its index slot, driven by the same operations as
    /// the queue's.
    struct Lane {
        p: Partition,
        indexes: TxnIndexes,
        /// Build the index from the first message (the reference).
        eager: bool,
        /// Never build one: every lookup and every forget scans the table.
        never: bool,
    }

    impl Lane {
        fn new(eager: bool) -> Self {
            Lane { p: Partition::new(1, "p".into(), 0), indexes: TxnIndexes::default(), eager, never: false }
        }

        fn scanning() -> Self {
            Lane { never: true, ..Lane::new(false) }
        }

        fn push(&mut self, meta: MsgMeta) -> u64 {
            let offset = self.p.push_meta(meta);
            if self.never {
                return offset;
            }
            if self.eager && self.indexes.get(0).is_none() {
                self.indexes.0.insert(0, self.p.build_txn_index().expect("a narrow span"));
            } else {
                self.indexes.appended(0, &self.p, &meta, offset);
            }
            offset
        }
    }

    #[test]
    fn scanning_indexing_and_cold_copies_remember_the_same_ids() {
        for seed in 1..=40u64 {
            let (mut small, mut reference, mut plain) = (Lane::new(false), Lane::new(true), Lane::scanning());
            let mut x = seed;
            let mut rand = move |n: u64| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (x >> 33) % n
            };
            let mut now = 0;
            for _ in 0..300 {
                now += rand(3);
                match rand(12) {
                    0 => {
                        let cutoff = now.saturating_sub(rand(20));
                        for lane in [&mut small, &mut reference, &mut plain] {
                            lane.p.forget_txns_before(lane.indexes.get_mut(0), cutoff);
                        }
                    }
                    1 => {
                        let to = small.p.base + rand(4);
                        for lane in [&mut small, &mut reference, &mut plain] {
                            lane.p.drop_before(lane.indexes.get_mut(0), to);
                        }
                    }
                    // A copy of the state: the indexes start cold.
                    2 => small.indexes = small.indexes.clone(),
                    _ => {
                        let meta = MsgMeta::new(now, 1, now, rand(12) as u128 * 0x1_0000_0001);
                        let offset = small.push(meta);
                        assert_eq!(offset, reference.push(meta));
                        assert_eq!(offset, plain.push(meta));
                    }
                }
                assert_eq!(small.p.txn_forgotten.max(small.p.base), plain.p.txn_forgotten.max(plain.p.base));
                assert_eq!(reference.p.txn_forgotten.max(reference.p.base), plain.p.txn_forgotten.max(plain.p.base));
                for h in 0..12u128 {
                    let h = h * 0x1_0000_0001;
                    let scanned = plain.p.remembered_txn(None, h);
                    assert_eq!(small.p.remembered_txn(small.indexes.get(0), h), scanned, "seed {seed}, hash {h}");
                    assert_eq!(
                        reference.p.remembered_txn(reference.indexes.get(0), h),
                        scanned,
                        "seed {seed}, hash {h}"
                    );
                }
                let mut rebuilt = TxnIndexes::default();
                rebuilt.rebuild(std::iter::once(&small.p));
                if let (Some(built), Some(kept)) = (rebuilt.get(0), small.indexes.get(0)) {
                    let sorted = |i: &TxnIndex| {
                        let mut e: Vec<(u32, u64)> = i.ids.entries().collect();
                        e.sort_unstable();
                        e
                    };
                    assert_eq!(sorted(built), sorted(kept), "seed {seed}: a rebuilt index differs from the kept one");
                }
                for lane in [&small, &reference] {
                    if let Some((off, ms)) = lane.indexes.get(0).and_then(|i| i.oldest) {
                        if off == lane.p.txn_forgotten.max(lane.p.base) {
                            let meta = lane.p.meta(off).expect("the oldest remembered message is kept");
                            assert_eq!(meta.created_ms, ms, "seed {seed}: a stale oldest time");
                        }
                    }
                }
            }
        }
    }

    /// Offsets 2^32 past an index's origin do not fit its slots: the index
    /// starts again from the oldest remembered offset and keeps answering.
    #[test]
    fn an_index_whose_offsets_outrun_its_slots_is_rebuilt() {
        let mut lane = Lane::new(false);
        for i in 0..10u64 {
            lane.push(MsgMeta::new(i, 1, i, u128::from(i) + 100));
        }
        assert!(lane.indexes.get(0).is_some(), "ten messages want an index");
        // Retention took every message, and the partition's offsets went on
        // past what the index's 32-bit slots reach from its origin (0).
        lane.p.drop_before(lane.indexes.get_mut(0), 10);
        lane.p.base = 1 << 33;
        for i in 0..10u64 {
            let offset = lane.push(MsgMeta::new(i, 1, 50 + i, u128::from(i) + 500));
            assert_eq!(offset, (1 << 33) + i);
        }
        let index = lane.indexes.get(0).expect("rebuilt, not dropped");
        assert!(index.ids.entries().all(|(_, o)| o >= 1 << 33));
        for i in 0..10u64 {
            assert_eq!(lane.p.remembered_txn(Some(index), u128::from(i) + 500), Some((1 << 33) + i));
            assert_eq!(lane.p.remembered_txn(Some(index), u128::from(i) + 100), None);
        }
    }

    #[test]
    fn the_retired_field_reads_an_old_index_and_writes_none() {
        let mut old = TxnMap::default();
        old.insert(TxnKey::from(7u128), 3);
        let old_bytes = bincode::serialize(&Some(Box::new(old))).unwrap();
        let _: RetiredIndex = bincode::deserialize(&old_bytes).unwrap();
        assert_eq!(bincode::serialize(&RetiredIndex).unwrap(), bincode::serialize(&None::<Box<TxnMap>>).unwrap());
    }
}

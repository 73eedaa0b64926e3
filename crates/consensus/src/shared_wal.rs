//! One WAL under several Raft groups.
//!
//! Every group of a node appends to the same `Wal`, so its writer covers
//! appends from all groups with one fdatasync (group commit across groups).
//! Each group keeps its own index of where its entries lie, its own vote and
//! purge point (its own meta file), and reads back only its own records.
//!
//! At open the records are split by the group they name; a record or meta
//! file of a group the caller did not ask for stops the open, because
//! ignoring it would let the segments holding that group's entries be
//! released by the others' purges.
//!
//! A segment is released once no group keeps an entry in it: everything
//! before the oldest kept entry over all groups that keep any.

use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;
use regina_storage::{Io, RecordPos, Wal, WalOptions};
use regina_types::limits::RAFT_GROUPS_MAX;

use crate::committed_file::CommittedFile;
use crate::log_index::{LogIndex, Oldest};
use crate::meta_file::{Meta, MetaFile};
use crate::wal_record::{self, RecordHead};

/// What one group keeps beside the shared WAL.
pub(crate) struct Group {
    /// Its own `Arc` so that append completions, which run on the WAL's
    /// writer thread, hold the index but never the WAL: dropping the last
    /// handle to the WAL there would make the writer join itself.
    pub index: Arc<Mutex<LogIndex>>,
    pub meta_file: MetaFile,
    pub meta: Mutex<Meta>,
    /// The last committed log id, a restart's shortcut.
    pub committed: CommittedFile,
    /// Entries and record bytes appended for this group since the WAL was
    /// opened (the group's write load; only ever rise).
    pub appended: [std::sync::atomic::AtomicU64; 2],
    /// Entries whose append finished (durable, or failed); its own `Arc`
    /// for the same reason as `index`.
    pub flushed: Arc<Flushed>,
    /// Entries decoded ahead of a restart's re-apply.
    pub read_ahead: crate::read_ahead::Slot,
}

/// Appended entries whose WAL write has returned, and a signal raised each
/// time more have: the leader's proposer forms its next entry once the
/// last one is durable (`LogStore::flushed_past`).
#[derive(Default)]
pub(crate) struct Flushed {
    pub entries: std::sync::atomic::AtomicU64,
    pub signal: tokio::sync::Notify,
}

impl Flushed {
    pub fn add(&self, n: u64) {
        self.entries.fetch_add(n, std::sync::atomic::Ordering::AcqRel);
        self.signal.notify_waiters();
    }
}

pub(crate) struct SharedWal {
    pub wal: Wal,
    groups: Vec<Group>,
}

impl SharedWal {
    /// Opens (or creates) the log of `groups` groups under `dir`: meta files
    /// in `dir` (written through `meta_io`), the WAL in `dir/wal` (through
    /// `io`).
    pub fn open(
        dir: &Path,
        groups: u16,
        options: WalOptions,
        io: Arc<dyn Io>,
        meta_io: Arc<dyn Io>,
    ) -> Result<SharedWal, String> {
        if groups == 0 || groups > RAFT_GROUPS_MAX {
            return Err(format!("a log holds 1 to {RAFT_GROUPS_MAX} Raft groups, not {groups}"));
        }
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let listed = MetaFile::groups_in(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        if let Some(&g) = listed.iter().find(|g| **g >= groups) {
            let file = MetaFile::for_group(dir, g);
            return Err(too_few_groups(dir, groups, g, &format!("its vote file {}", file.path().display())));
        }
        let mut metas = Vec::with_capacity(usize::from(groups));
        let mut indexes = Vec::with_capacity(usize::from(groups));
        for g in 0..groups {
            let meta_file = MetaFile::for_group(dir, g).with_io(meta_io.clone());
            let meta = meta_file.load().map_err(|e| e.to_string())?;
            let mut index = LogIndex::with_cache_share(usize::from(groups));
            if let Some(p) = meta.last_purged {
                index.purge(p);
            }
            metas.push((meta_file, meta));
            indexes.push(index);
        }
        let opening = std::time::Instant::now();
        let mut records = 0u64;
        let wal = Wal::open_visiting(dir.join("wal"), options, io, &mut |pos, bytes| {
            records += 1;
            // Only the head: replay decodes the entry when it applies it.
            let (g, record) =
                wal_record::decode_head(bytes).map_err(|e| format!("undecodable WAL record at {pos:?}: {e}"))?;
            let Some(index) = indexes.get_mut(usize::from(g)) else {
                let what = format!("a WAL record in segment {} at offset {}", pos.segment, pos.offset);
                return Err(too_few_groups(dir, groups, g, &what));
            };
            match record {
                RecordHead::Entry(log_id) => {
                    index.replay(log_id, pos).map_err(|e| format!("WAL has a gap in Raft group {g}: {e}"))
                }
                RecordHead::Truncate { since } => {
                    index.truncate(since);
                    Ok(())
                }
            }
        })
        .map_err(|e| e.to_string())?;
        // With the snapshot's, a restart's longest wait: what it took.
        tracing::info!(records, open_ms = opening.elapsed().as_millis() as u64, "log opened");
        let groups = metas
            .into_iter()
            .zip(indexes)
            .enumerate()
            .map(|(g, ((meta_file, meta), index))| Group {
                index: Arc::new(Mutex::new(index)),
                meta_file,
                meta: Mutex::new(meta),
                committed: CommittedFile::open(dir, g as u16),
                appended: Default::default(),
                flushed: Default::default(),
                read_ahead: Default::default(),
            })
            .collect();
        Ok(SharedWal { wal, groups })
    }

    pub fn group(&self, group: u16) -> &Group {
        &self.groups[usize::from(group)]
    }

    /// Releases the WAL segments that no group needs any more: those wholly
    /// before the oldest entry any group keeps. A group that keeps no entry
    /// imposes nothing. Their files are deleted in the background
    /// ([`Wal::release_segments_before`]). Returns how many were released.
    pub fn release_unneeded_segments(&self) -> usize {
        // Read before looking at any group: whatever a group appends after
        // we looked at it lands in this segment or a later one.
        let mut keep_from = RecordPos { segment: self.wal.current_segment(), offset: 0 };
        for group in &self.groups {
            match group.index.lock().oldest() {
                Oldest::Nothing => {}
                // Not placed yet, so no bound is known; a later purge
                // releases what this one leaves.
                Oldest::Unwritten => return 0,
                Oldest::At(pos) => keep_from = keep_from.min(pos),
            }
        }
        self.wal.release_segments_before(keep_from)
    }
}

fn too_few_groups(dir: &Path, opened: u16, found: u16, what: &str) -> String {
    format!(
        "the log in {} holds Raft group {found} ({what}), but it was opened with {opened} group(s); \
         start the node with at least {} groups",
        dir.display(),
        u32::from(found) + 1
    )
}

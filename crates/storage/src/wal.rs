//! The write-ahead log: opaque byte records, group-committed to a directory
//! of preallocated segment files.
//!
//! * `frame`: the on-disk record format.
//! * `segment`: segment files (naming, preallocation, reading one record).
//! * `open`: opening the directory and starting the threads.
//! * `recovery`: scanning segments at open and cutting a torn tail.
//! * `writer`: the thread that batches appends and fsyncs them.
//! * `preparer`: the thread that zero-fills the next segment ahead of time.
//! * `deleter`: the thread that deletes released segments.

mod deleter;
mod frame;
mod open;
mod preparer;
mod recovery;
mod segment;
mod writer;

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, OnceLock};
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex, RwLock};

use crate::error::WalError;
use crate::io::Io;
use crate::space::SpaceWait;
pub use frame::HEADER_LEN;
pub use recovery::{scan_segment, Damage, SegmentScan};

/// Where a record starts: its segment's sequence number and the byte offset
/// of its header in that segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RecordPos {
    pub segment: u64,
    pub offset: u64,
}

/// Tuning for [`Wal::open`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalOptions {
    /// Size new segments are preallocated to. A record that does not fit an
    /// empty segment gets a segment grown to fit it.
    pub segment_bytes: u64,
    /// Upper bound on the framed bytes of one group commit. A single append
    /// larger than this still goes out, alone.
    pub max_batch_bytes: u64,
    /// Largest payload `append` accepts (at most `u32::MAX`, the framing
    /// limit).
    pub max_record_bytes: u64,
    /// Whether a group commit waits for `fdatasync`. Off only for measuring
    /// what durability costs: an answered write may then be lost by a
    /// machine crash (a process crash still loses nothing, the page cache
    /// keeps it).
    pub fsync: bool,
}

/// Smallest segment size accepted; below this nearly every record would
/// need a segment of its own.
pub const MIN_SEGMENT_BYTES: u64 = 64;

impl Default for WalOptions {
    fn default() -> Self {
        WalOptions { segment_bytes: 64 << 20, max_batch_bytes: 8 << 20, max_record_bytes: 256 << 20, fsync: true }
    }
}

impl WalOptions {
    fn validate(&self) -> Result<(), WalError> {
        if self.segment_bytes < MIN_SEGMENT_BYTES {
            return Err(WalError::InvalidOptions(format!(
                "segment_bytes {} is below the minimum of {MIN_SEGMENT_BYTES}",
                self.segment_bytes
            )));
        }
        if self.max_batch_bytes == 0 {
            return Err(WalError::InvalidOptions("max_batch_bytes is 0".into()));
        }
        if self.max_record_bytes > u64::from(u32::MAX) {
            return Err(WalError::InvalidOptions(format!(
                "max_record_bytes {} exceeds the u32 length field",
                self.max_record_bytes
            )));
        }
        Ok(())
    }
}

/// See [`Wal::unfinished_appends_in_process`].
static UNFINISHED_IN_PROCESS: AtomicU64 = AtomicU64::new(0);

/// What [`Wal::open_visiting`] hands each recovered record to: its place
/// and its bytes (borrowed); an `Err` refuses it and stops the open.
pub type RecordVisitor<'a> = dyn FnMut(RecordPos, &[u8]) -> Result<(), String> + 'a;

/// Completion callback of [`Wal::append`].
pub type AppendDone = Box<dyn FnOnce(Result<Vec<RecordPos>, WalError>) + Send>;

struct Request {
    records: Vec<Vec<u8>>,
    /// Framed size, for the batch cap.
    bytes: u64,
    done: AppendDone,
}

struct Queue {
    pending: VecDeque<Request>,
    shutdown: bool,
}

/// State shared by the `Wal` handle and its writer thread.
struct Shared {
    io: Arc<dyn Io>,
    options: WalOptions,
    queue: Mutex<Queue>,
    wake: Condvar,
    /// Set once, by the first failed write or fsync; never cleared.
    poison: OnceLock<String>,
    /// The writer and preparer waiting for space (never poisoning for it).
    space: Arc<SpaceWait>,
    bytes_written: AtomicU64,
    /// Appends queued whose completion has not returned yet.
    unfinished: Arc<AtomicU64>,
    /// Segments that may hold records (the active one and older), for reads
    /// and release. Spares are added when the writer moves into them.
    segments: RwLock<BTreeMap<u64, Arc<File>>>,
    current_segment: AtomicU64,
}

/// A group-committed write-ahead log. See the crate docs for the format.
pub struct Wal {
    dir: PathBuf,
    shared: Arc<Shared>,
    writer: Option<JoinHandle<()>>,
    preparer: Option<JoinHandle<()>>,
    preparer_stop: Arc<AtomicBool>,
    deleter: deleter::Deleter,
}

impl Wal {
    /// Queues `records` to be appended in order and returns at once.
    ///
    /// `done` is called exactly once: with the records' positions after they
    /// are durable, or with the error. Completions run on the writer thread
    /// in submission order, so keep them short. An append refused up front
    /// (poisoned log, record too large) completes on the calling thread
    /// before `append` returns.
    pub fn append(&self, records: Vec<Vec<u8>>, done: AppendDone) {
        if let Some(reason) = self.shared.poison.get() {
            return done(Err(WalError::Poisoned(reason.clone())));
        }
        let max = self.shared.options.max_record_bytes;
        if let Some(big) = records.iter().find(|r| r.len() as u64 > max) {
            let len = big.len() as u64;
            return done(Err(WalError::TooLarge { len, max }));
        }
        let bytes = records.iter().map(|r| frame::framed_len(r.len())).sum();
        let mut queue = self.shared.queue.lock();
        if queue.shutdown {
            drop(queue);
            return done(Err(WalError::Closed));
        }
        let unfinished = Arc::clone(&self.shared.unfinished);
        unfinished.fetch_add(1, Ordering::AcqRel);
        UNFINISHED_IN_PROCESS.fetch_add(1, Ordering::AcqRel);
        let done: AppendDone = Box::new(move |result| {
            done(result);
            unfinished.fetch_sub(1, Ordering::AcqRel);
            UNFINISHED_IN_PROCESS.fetch_sub(1, Ordering::AcqRel);
        });
        queue.pending.push_back(Request { records, bytes, done });
        drop(queue);
        self.shared.wake.notify_one();
    }

    /// Appends queued whose completion has not returned yet.
    pub fn unfinished_appends(&self) -> u64 {
        self.shared.unfinished.load(Ordering::Acquire)
    }

    /// Appends queued to any WAL of this process whose completion has not
    /// returned yet. A runtime on a paused clock waits for this to reach
    /// zero before it lets time jump, so a write takes no virtual time.
    pub fn unfinished_appends_in_process() -> u64 {
        UNFINISHED_IN_PROCESS.load(Ordering::Acquire)
    }

    /// [`Wal::append`], blocking until the records are durable.
    ///
    /// Never call this from an append completion: those run on the writer
    /// thread, which would then wait for itself.
    pub fn append_sync(&self, records: Vec<Vec<u8>>) -> Result<Vec<RecordPos>, WalError> {
        let (tx, rx) = mpsc::channel();
        self.append(
            records,
            Box::new(move |result| {
                // The receiver only goes away if this caller is gone.
                let _ = tx.send(result);
            }),
        );
        rx.recv().unwrap_or(Err(WalError::Closed))
    }

    /// Reads back the record that starts at `pos`, checking its checksum.
    /// Safe to call while appends are in flight.
    pub fn read(&self, pos: RecordPos) -> Result<Vec<u8>, WalError> {
        let file = self.shared.segments.read().get(&pos.segment).cloned();
        let file = file.ok_or_else(|| WalError::NoRecord {
            segment: pos.segment,
            offset: pos.offset,
            reason: "no such segment (released, or not written yet)".into(),
        })?;
        segment::read_record(&file, pos)
    }

    /// Releases the segments that lie entirely before `pos.segment`, never
    /// the one being written: they stop being readable at once, and their
    /// files are deleted on the log's delete thread (see `deleter`).
    /// Returns how many were released.
    pub fn release_segments_before(&self, pos: RecordPos) -> usize {
        let current = self.shared.current_segment.load(Ordering::SeqCst);
        let limit = pos.segment.min(current);
        let doomed: deleter::Doomed = {
            let mut segments = self.shared.segments.write();
            let kept = segments.split_off(&limit);
            std::mem::replace(&mut *segments, kept)
                .into_iter()
                .map(|(seq, file)| (self.dir.join(segment::file_name(seq)), file))
                .collect()
        };
        let released = doomed.len();
        self.deleter.delete(doomed);
        released
    }

    /// Blocks until the files of every segment released so far are deleted
    /// and the deletions made durable.
    pub fn wait_for_released_deletions(&self) {
        self.deleter.wait();
    }

    /// Why the log refuses appends, if it does.
    pub fn poisoned(&self) -> Option<String> {
        self.shared.poison.get().cloned()
    }

    /// Why appends are held up, if the writer is waiting for space to write
    /// or prepare a segment. They complete once space is back.
    pub fn waiting_for_space(&self) -> Option<String> {
        self.shared.space.waiting()
    }

    /// Framed bytes made durable since open.
    pub fn bytes_written(&self) -> u64 {
        self.shared.bytes_written.load(Ordering::Relaxed)
    }

    /// The segment currently being appended to.
    pub fn current_segment(&self) -> u64 {
        self.shared.current_segment.load(Ordering::SeqCst)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Wal {
    /// Lets the writer finish everything already queued, then stops both
    /// threads.
    fn drop(&mut self) {
        self.shared.queue.lock().shutdown = true;
        // A writer waiting for space gives up: nothing it holds was answered.
        self.shared.space.close();
        self.shared.wake.notify_all();
        if let Some(writer) = self.writer.take() {
            if writer.join().is_err() {
                tracing::error!("the wal writer thread panicked");
            }
        }
        // Only now: the writer may have needed a spare while draining.
        self.preparer_stop.store(true, Ordering::SeqCst);
        if let Some(preparer) = self.preparer.take() {
            if preparer.join().is_err() {
                tracing::error!("the wal segment preparer thread panicked");
            }
        }
    }
}

//! Message body segments.
//!
//! Bodies live outside the log so the log stays small and snapshots need not
//! copy them. A body's address is a global byte position chosen by the
//! caller (deterministically, so every replica and every replay picks the
//! same one): segment `pos / segment_bytes`, offset `pos % segment_bytes`.
//! A body never spans two segments; [`place`] says where one fits.
//!
//! Writes are plain pwrites without fsync. The log is the durable record;
//! replaying it after a crash rewrites any body that did not reach the disk.
//! [`BodyStore::sync_all`] makes them durable before a snapshot lets the log
//! be released.
//!
//! A write refused for lack of space is not an error of the entry that
//! carried it: the body is kept in memory (reads are served from there),
//! [`BodyStore::retry_unwritten`] writes it once space is back, and
//! `sync_all` fails (for lack of space) until it has. Only entries in flight
//! can be caught so: the node refuses new writes that grow storage while
//! [`BodyStore::unwritten`] says any body waits.
//!
//! The newest bodies written ([`RECENT_BODY_BYTES`] by default) are also
//! kept in memory and read from there (`crate::recent_bodies`).
//!
//! A segment the writes have moved past is handed to [`Io::forget_cached`]
//! twice: at once, which starts its writeback, and again once
//! [`KEEP_CACHED_BYTES`] of newer segments follow it, which drops it from
//! the page cache. A backlog older than that is read from disk. The
//! segment being written starts its writeback every
//! [`WRITEBACK_STEP_BYTES`] ([`Io::start_writeback`]), so neither that
//! first advice nor the fsync before a snapshot finds a whole segment dirty.
//!
//! Recovery holds both back ([`BodyStore::hold_writeback`]): the bodies
//! that replay rewrites are written back only once the node is up, in
//! paced steps ([`HELD_WRITEBACK_PAUSE`]). Kicked as replay wrote them,
//! their writeback sat in front of the new leader's first fdatasync for
//! most of a second (docs/benchmarks.md, item 31).
//!
//! Segments the writes have left far behind are fsynced now and then, off the
//! writer's path ([`BodyStore::sync_finished`]), and the durable mark
//! (`crate::durable_mark`) records how far that reached: a restart keeps
//! the segments below it, and while writeback is held (the replay) the
//! bodies below it are not written again.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::durable_mark::DurableMark;
use crate::error::io_context;
use crate::io::{Io, RealIo};
use crate::recent_bodies::{RecentBodies, RECENT_BODY_BYTES};
use crate::space::is_out_of_space;

/// Open handles kept for reads and writes. Beyond this the least recently
/// used clean handle is closed; handles with unsynced writes stay open until
/// the next `sync_all`.
const MAX_OPEN_FILES: usize = 64;
/// How many bytes of the newest bodies stay in the page cache, for the
/// consumers that read them soon after their push; older complete
/// segments are dropped from it (see [`crate::page_cache`]).
pub const KEEP_CACHED_BYTES: u64 = 512 * 1024 * 1024;
/// How many bytes written into a segment start their writeback together.
/// Small enough that the WAL's fdatasync never waits long behind them (it
/// waits for the step in the disk's queue: about 15 ms behind 4 MiB, 2 ms
/// behind 256 KiB, docs/benchmarks.md, item 32); large enough that the
/// advice costs little (one call per step).
pub const WRITEBACK_STEP_BYTES: u64 = 256 * 1024;
/// The pause after each [`WRITEBACK_STEP_BYTES`] of the bodies written
/// while writeback was held ([`BodyStore::release_writeback`]): at most
/// 50 MiB/s, a fifth of what the disks measured write, so the WAL's
/// fdatasyncs seldom find a step of them in the disk's queue, and a
/// restart's few hundred megabytes are written back within seconds.
pub const HELD_WRITEBACK_PAUSE: std::time::Duration = std::time::Duration::from_millis(5);
/// How far behind the newest segment a segment must lie before
/// [`BodyStore::sync_finished`] fsyncs it: as far as it lies when it leaves
/// the page cache. Its writeback, started when the writes moved past it,
/// has run by then, so the fsync finds nothing to write and never queues
/// in front of the WAL's fdatasyncs. With segments fsynced as soon as the
/// writes moved past them, a sustained push gave 306-394 k msg/s against
/// 307-440 k without (docs/benchmarks.md, item 43): a cost not told apart
/// from the machine's noise, so not risked.
pub const SYNC_BEHIND_BYTES: u64 = KEEP_CACHED_BYTES;
const SUFFIX: &str = ".body";
/// A cut segment waiting to be deleted (see [`BodyStore::truncate_from`]).
const DOOMED_SUFFIX: &str = ".body.deleting";

/// Where a body of `len` bytes should start, given the first free position:
/// `next_free` itself if the body fits in the rest of its segment, otherwise
/// the start of the next segment.
///
/// A body longer than `segment_bytes` fits nowhere; callers must cap body
/// size (the result is then the next segment start, which
/// [`BodyStore::write_at`] rejects). Panics if `segment_bytes` is 0.
pub fn place(next_free: u64, len: u64, segment_bytes: u64) -> u64 {
    let offset = next_free % segment_bytes;
    if offset + len <= segment_bytes {
        next_free
    } else {
        next_free - offset + segment_bytes
    }
}

/// A directory of `{segment:020}.body` files.
pub struct BodyStore {
    dir: PathBuf,
    segment_bytes: u64,
    /// Body writes and their fsyncs (file creation and cuts use `std`).
    io: Arc<dyn Io>,
    handles: Mutex<Handles>,
    /// Bodies whose write found no space, by position, with why.
    unwritten: Mutex<Unwritten>,
    /// Whether `unwritten` holds any body: reads and applies look here
    /// without taking its lock, which only a full disk ever fills.
    any_unwritten: AtomicBool,
    /// The newest bodies written, served without a read of their file.
    recent: RecentBodies,
    /// Below it every segment is durable. Held while it moves, and by a
    /// cut, so that neither races the other.
    mark: Mutex<DurableMark>,
    /// Writes ending at or below this are skipped: the durable mark while
    /// writeback is held (the replay rewrites what the mark covers), else
    /// 0.
    skip_below: AtomicU64,
    /// How far behind the newest segment's start `sync_finished` stops.
    sync_behind: u64,
}

#[derive(Default)]
struct Unwritten {
    bodies: std::collections::BTreeMap<u64, Vec<u8>>,
    reason: String,
}

#[derive(Default)]
struct Handles {
    /// Segment -> (handle, last use), bounded by `MAX_OPEN_FILES`.
    open: HashMap<u64, (Arc<File>, u64)>,
    clock: u64,
    /// Handles written through since the last sync.
    dirty: HashMap<u64, Arc<File>>,
    /// A file was created or deleted since the last sync.
    dir_dirty: bool,
    /// After a failed fsync the written pages may be gone; no later sync
    /// may claim otherwise.
    sync_failure: Option<String>,
    /// The highest segment written since the store opened or was cut.
    newest: Option<u64>,
    /// Where the last writeback started by the writes ended (a position).
    written_back_to: Option<u64>,
    /// What was written while writeback is held, if it is.
    held: Option<Held>,
}

/// The writes whose writeback waits for [`BodyStore::release_writeback`].
#[derive(Default)]
struct Held {
    /// Segment -> the offsets written in it, from the first to the end
    /// of the last.
    written: std::collections::BTreeMap<u64, std::ops::Range<u64>>,
    /// The segments the writes moved past, whose advice was not given.
    finished: Vec<u64>,
}

impl BodyStore {
    pub fn open(dir: impl AsRef<Path>, segment_bytes: u64) -> io::Result<BodyStore> {
        Self::open_with_io(dir, segment_bytes, Arc::new(RealIo))
    }

    /// [`BodyStore::open`], writing and syncing bodies through `io` (a
    /// simulated disk that forgets unsynced writes at a crash, in tests).
    pub fn open_with_io(dir: impl AsRef<Path>, segment_bytes: u64, io: Arc<dyn Io>) -> io::Result<BodyStore> {
        if segment_bytes == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "body segment_bytes must be positive"));
        }
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(|e| io_context(format!("creating {}", dir.display()), e))?;
        // Cut segments a crash kept from being deleted.
        let doomed = names_in(&dir)?.into_iter().filter(|n| n.ends_with(DOOMED_SUFFIX)).map(|n| dir.join(n));
        delete_in_background(doomed.collect());
        let mark = Mutex::new(DurableMark::load(&dir));
        Ok(BodyStore {
            dir,
            segment_bytes,
            io,
            handles: Mutex::new(Handles::default()),
            unwritten: Mutex::default(),
            any_unwritten: AtomicBool::new(false),
            recent: RecentBodies::new(RECENT_BODY_BYTES, segment_bytes),
            mark,
            skip_below: AtomicU64::new(0),
            sync_behind: SYNC_BEHIND_BYTES,
        })
    }

    /// The store keeping the newest `bytes` of bodies in memory for reads
    /// (0: every read goes to its file).
    pub fn keeping_recent(mut self, bytes: usize) -> Self {
        self.recent = RecentBodies::new(bytes, self.segment_bytes);
        self
    }

    /// The store whose [`BodyStore::sync_finished`] makes durable the
    /// segments lying `bytes` or more behind the newest one's start
    /// ([`SYNC_BEHIND_BYTES`] unless told).
    pub fn syncing_behind(mut self, bytes: u64) -> Self {
        self.sync_behind = bytes;
        self
    }

    pub fn segment_bytes(&self) -> u64 {
        self.segment_bytes
    }

    /// Writes a body at `pos`. No fsync; see the module docs. A write that
    /// finds no space is kept for [`BodyStore::retry_unwritten`] and
    /// counts as done.
    pub fn write_at(&self, pos: u64, body: &[u8]) -> io::Result<()> {
        if self.skipped(pos, body) {
            return Ok(());
        }
        match self.write_now(pos, body) {
            Err(e) if is_out_of_space(&e) => {
                tracing::warn!(error = %e, "no space for a message body; it is kept in memory until space is back");
                let mut unwritten = self.unwritten.lock();
                unwritten.reason = e.to_string();
                unwritten.bodies.insert(pos, body.to_vec());
                self.any_unwritten.store(true, Ordering::Release);
                Ok(())
            }
            other => other,
        }
    }

    /// Writes bodies in order, as [`BodyStore::write_at`] would one by one,
    /// with one write per run of bodies that follow each other inside one
    /// segment. A push places its bodies back to back, so an entry of
    /// many messages costs one system call, not one per message. A run that
    /// finds no space is written body by body (each kept in memory as
    /// `write_at` keeps it).
    pub fn write_many(&self, bodies: &[(u64, &[u8])]) -> io::Result<()> {
        // A replay's bodies come in position order: those the durable mark
        // covers come first.
        let bodies = &bodies[bodies.iter().take_while(|(pos, body)| self.skipped(*pos, body)).count()..];
        let mut parts = Vec::new();
        let mut start = 0;
        while start < bodies.len() {
            let end = start + self.run_len(&bodies[start..]);
            let run = &bodies[start..end];
            if let [(pos, body)] = run {
                self.write_at(*pos, body)?;
            } else {
                parts.clear();
                parts.extend(run.iter().map(|(_, body)| *body));
                match self.write_parts_now(run[0].0, &parts) {
                    Err(e) if is_out_of_space(&e) => {
                        for (pos, body) in run {
                            self.write_at(*pos, body)?;
                        }
                    }
                    other => other?,
                }
            }
            start = end;
        }
        Ok(())
    }

    /// Whether the body at `pos` is one a replay need not write: the
    /// durable mark covers it (see [`BodyStore::hold_writeback`]).
    fn skipped(&self, pos: u64, body: &[u8]) -> bool {
        pos.saturating_add(body.len() as u64) <= self.skip_below.load(Ordering::Acquire)
    }

    /// How many of `bodies` (at least one) lie back to back in the first
    /// one's segment.
    fn run_len(&self, bodies: &[(u64, &[u8])]) -> usize {
        let segment = bodies[0].0 / self.segment_bytes;
        let mut end = bodies[0].0 + bodies[0].1.len() as u64;
        let mut n = 1;
        for (pos, body) in &bodies[1..] {
            if *pos != end || pos / self.segment_bytes != segment {
                break;
            }
            end += body.len() as u64;
            n += 1;
        }
        n
    }

    fn write_now(&self, pos: u64, body: &[u8]) -> io::Result<()> {
        self.write_parts_now(pos, &[body])
    }

    /// Writes bodies that lie back to back from `pos`, in one call.
    fn write_parts_now(&self, pos: u64, parts: &[&[u8]]) -> io::Result<()> {
        let len = parts.iter().map(|p| p.len() as u64).sum();
        let (segment, offset) = self.locate(pos, len)?;
        let file = self.handle(segment, true)?;
        let written = match parts {
            [body] => self.io.write_at(&file, body, offset),
            _ => self.io.write_parts_at(&file, parts, offset),
        };
        if let Err(e) = written {
            self.recent.missed(pos, len);
            return Err(io_context(format!("writing {} bytes of bodies at {pos}", len), e));
        }
        self.recent.wrote(pos, parts);
        let segment_start = segment * self.segment_bytes;
        let (finished, write_back) = {
            let mut handles = self.handles.lock();
            handles.dirty.insert(segment, file.clone());
            let finished = handles.move_newest_to(segment);
            if let Some(held) = &mut handles.held {
                let (from, to) = (pos - segment_start, pos - segment_start + len);
                let range = held.written.entry(segment).or_insert(from..to);
                *range = range.start.min(from)..range.end.max(to);
                held.finished.extend(finished);
                return Ok(());
            }
            (finished, handles.write_back_due(segment_start, pos + len))
        };
        if let Some(range) = write_back {
            self.io.start_writeback(&file, range.start - segment_start, range.end - range.start);
        }
        for done in finished {
            self.leave_page_cache(done);
        }
        Ok(())
    }

    /// Segment `done` will not be written again: start its writeback now,
    /// and drop from the page cache the segment that has just fallen
    /// [`KEEP_CACHED_BYTES`] behind it.
    fn leave_page_cache(&self, done: u64) {
        self.io.forget_cached(&self.path(done));
        if let Some(old) = self.fallen_out_of_cache(done) {
            self.io.forget_cached(&self.path(old));
        }
    }

    /// The segment that falls [`KEEP_CACHED_BYTES`] behind once `done` is
    /// finished, if there is one.
    fn fallen_out_of_cache(&self, done: u64) -> Option<u64> {
        done.checked_sub((KEEP_CACHED_BYTES / self.segment_bytes).max(1))
    }

    /// From now until [`BodyStore::release_writeback`], writes start no
    /// writeback and give no page cache advice: the kernel's flusher is
    /// the only one to write them back meanwhile. For recovery, whose
    /// rewritten bodies need not reach the disk soon (the log covers them)
    /// and must not stand in front of the log's fdatasyncs.
    ///
    /// Meanwhile the bodies the durable mark covers are not written at
    /// all: the replay that holds it rewrites the entries applied before
    /// the restart, whose bodies are already there, fsynced.
    pub fn hold_writeback(&self) {
        let mark = self.mark.lock();
        self.handles.lock().held.get_or_insert_default();
        self.skip_below.store(mark.pos(), Ordering::Release);
    }

    /// Ends [`BodyStore::hold_writeback`]. What was written meanwhile is
    /// written back in steps of [`WRITEBACK_STEP_BYTES`], one each
    /// [`HELD_WRITEBACK_PAUSE`], on a thread of its own; then the segments
    /// that fell [`KEEP_CACHED_BYTES`] behind the ones finished meanwhile
    /// leave the page cache, as they would have. Writes from now on step
    /// their writeback from where the held ones end.
    ///
    /// `next_free` is where the replayed state places its next body. A
    /// durable mark above it (a log that replayed less than the bodies
    /// before the restart held) comes down to its segment's start: what
    /// lies beyond was never this state's, and later writes there are not
    /// yet durable.
    pub fn release_writeback(&self, next_free: u64) -> io::Result<()> {
        self.skip_below.store(0, Ordering::Release);
        {
            let mut mark = self.mark.lock();
            let floor = next_free - next_free % self.segment_bytes;
            if mark.pos() > floor {
                tracing::warn!(
                    mark = mark.pos(),
                    next_free,
                    "the body store's durable mark lies past the replayed bodies; lowered"
                );
                mark.set(floor, &self.io)?;
            }
        }
        let held = {
            let mut handles = self.handles.lock();
            let Some(held) = handles.held.take() else { return Ok(()) };
            if let Some((segment, written)) = held.written.last_key_value() {
                handles.written_back_to = Some(segment * self.segment_bytes + written.end);
            }
            held
        };
        let written: Vec<(PathBuf, std::ops::Range<u64>)> =
            held.written.into_iter().map(|(segment, range)| (self.path(segment), range)).collect();
        let forget: Vec<PathBuf> =
            held.finished.iter().filter_map(|&done| self.fallen_out_of_cache(done)).map(|old| self.path(old)).collect();
        if written.is_empty() && forget.is_empty() {
            return Ok(());
        }
        let bytes: u64 = written.iter().map(|(_, range)| range.end - range.start).sum();
        tracing::info!(
            bytes,
            segments = written.len(),
            "bodies written while their writeback was held: written back in paced steps"
        );
        let io = Arc::clone(&self.io);
        let write_back = move || {
            for (path, range) in written {
                // A segment cut or released meanwhile needs no writeback.
                let Ok(file) = File::open(&path) else { continue };
                for at in range.clone().step_by(WRITEBACK_STEP_BYTES as usize) {
                    io.start_writeback(&file, at, WRITEBACK_STEP_BYTES.min(range.end - at));
                    std::thread::sleep(HELD_WRITEBACK_PAUSE);
                }
            }
            for path in forget {
                io.forget_cached(&path);
            }
        };
        // Without a thread, the kernel's flusher writes them back on its own
        // schedule, and the old segments stay cached until evicted.
        if let Err(e) = std::thread::Builder::new().name("regina-held-wb".into()).spawn(write_back) {
            tracing::warn!(error = %e, "held body writeback left to the kernel");
        }
        Ok(())
    }

    /// Why bodies wait in memory for space, if any do: `(count, reason)`.
    pub fn unwritten(&self) -> Option<(usize, String)> {
        if !self.any_unwritten.load(Ordering::Acquire) {
            return None;
        }
        let unwritten = self.unwritten.lock();
        (!unwritten.bodies.is_empty()).then(|| (unwritten.bodies.len(), unwritten.reason.clone()))
    }

    /// Writes the bodies that waited for space, in order, stopping at the
    /// first that still finds none. Returns how many still wait.
    pub fn retry_unwritten(&self) -> io::Result<usize> {
        if !self.any_unwritten.load(Ordering::Acquire) {
            return Ok(0);
        }
        let mut unwritten = self.unwritten.lock();
        while let Some((&pos, body)) = unwritten.bodies.first_key_value() {
            match self.write_now(pos, body) {
                Ok(()) => {
                    unwritten.bodies.remove(&pos);
                }
                Err(e) if is_out_of_space(&e) => break,
                Err(e) => return Err(e),
            }
        }
        self.any_unwritten.store(!unwritten.bodies.is_empty(), Ordering::Release);
        if unwritten.bodies.is_empty() && !unwritten.reason.is_empty() {
            unwritten.reason.clear();
            tracing::info!("space is back; every message body kept in memory is written");
        }
        Ok(unwritten.bodies.len())
    }

    /// Reads the `len` bytes of the body at `pos`.
    pub fn read(&self, pos: u64, len: u64) -> io::Result<Vec<u8>> {
        if self.any_unwritten.load(Ordering::Acquire) {
            if let Some(body) = self.unwritten.lock().bodies.get(&pos).filter(|b| b.len() as u64 == len) {
                return Ok(body.clone());
            }
        }
        if let Some(body) = self.recent.read(pos, len) {
            return Ok(body);
        }
        let (segment, offset) = self.locate(pos, len)?;
        let file = self.handle(segment, false)?;
        let mut body = vec![0u8; len as usize];
        file.read_exact_at(&mut body, offset)
            .map_err(|e| io_context(format!("reading {len} body bytes at {pos}"), e))?;
        Ok(body)
    }

    /// Makes every body written since the last call durable. Fails for
    /// lack of space while a body waits for it.
    pub fn sync_all(&self) -> io::Result<()> {
        let waiting = self.retry_unwritten()?;
        if waiting > 0 {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                format!("{waiting} message bodies wait for space to be written"),
            ));
        }
        let (dirty, dir_dirty) = {
            let mut handles = self.handles.lock();
            if let Some(reason) = &handles.sync_failure {
                return Err(io::Error::other(format!("an earlier body fsync failed: {reason}")));
            }
            let dirty = std::mem::take(&mut handles.dirty);
            (dirty, std::mem::replace(&mut handles.dir_dirty, false))
        };
        self.sync_files(dirty, dir_dirty)
    }

    /// Fsyncs `files` (segment, handle) and, with `dir_dirty`, the
    /// directory. A failed fsync is remembered: no later sync succeeds.
    fn sync_files(&self, files: impl IntoIterator<Item = (u64, Arc<File>)>, dir_dirty: bool) -> io::Result<()> {
        for (segment, file) in files {
            if let Err(e) = self.io.sync_data(&file) {
                let e = io_context(format!("fdatasync of body segment {segment}"), e);
                self.handles.lock().sync_failure = Some(e.to_string());
                return Err(e);
            }
        }
        if dir_dirty {
            self.sync_dir()?;
        }
        Ok(())
    }

    /// Below this every body written is durable (the durable mark).
    pub fn durable_before(&self) -> u64 {
        self.mark.lock().pos()
    }

    /// Makes durable the segments the writes have left
    /// [`SYNC_BEHIND_BYTES`] behind (those that leave the page cache) and
    /// raises the durable mark to the end of the last of them. For a
    /// driver to call now and then, off the writer's path. Does nothing
    /// while writeback is held, while a
    /// body below the newest segment waits for space, or while another
    /// call or a cut holds the mark.
    pub fn sync_finished(&self) -> io::Result<()> {
        let Some(mut mark) = self.mark.try_lock() else { return Ok(()) };
        let target = {
            let handles = self.handles.lock();
            if let Some(reason) = &handles.sync_failure {
                return Err(io::Error::other(format!("an earlier body fsync failed: {reason}")));
            }
            match handles.newest {
                Some(newest) if handles.held.is_none() => {
                    let target = (newest * self.segment_bytes).saturating_sub(self.sync_behind);
                    target - target % self.segment_bytes
                }
                _ => return Ok(()),
            }
        };
        // Checked outside the handles' lock, which a retry takes inside the
        // waiting bodies' own. A body that fails from now on lies at or past
        // the newest segment, so at or past `target`.
        let waiting_below = self.any_unwritten.load(Ordering::Acquire)
            && self.unwritten.lock().bodies.first_key_value().is_some_and(|(pos, _)| *pos < target);
        if target <= mark.pos() || waiting_below {
            return Ok(());
        }
        let (files, dir_dirty) = {
            let mut handles = self.handles.lock();
            let done: Vec<u64> = handles.dirty.keys().copied().filter(|s| s * self.segment_bytes < target).collect();
            let files: Vec<(u64, Arc<File>)> =
                done.into_iter().filter_map(|s| handles.dirty.remove(&s).map(|f| (s, f))).collect();
            (files, std::mem::replace(&mut handles.dir_dirty, false))
        };
        self.sync_files(files, dir_dirty)?;
        mark.set(target, &self.io)
    }

    /// Where a restart cuts the store, its state loaded: where that state
    /// places its next body (`next_free`), or the durable mark if it lies
    /// above (the replay then writes only what lies past it:
    /// [`BodyStore::hold_writeback`]). A mark some of whose segments are
    /// missing is first lowered to `next_free`.
    pub fn recovery_cut(&self, next_free: u64) -> io::Result<u64> {
        let mut mark = self.mark.lock();
        if mark.pos() > next_free {
            let have: std::collections::HashSet<u64> = self.list()?.into_iter().collect();
            let covered = next_free / self.segment_bytes..=(mark.pos() - 1) / self.segment_bytes;
            if let Some(missing) = covered.clone().find(|s| !have.contains(s)) {
                tracing::warn!(
                    mark = mark.pos(),
                    missing,
                    "a body segment below the durable mark is missing; mark lowered"
                );
                mark.set(next_free, &self.io)?;
            }
        }
        Ok(mark.pos().max(next_free))
    }

    /// Cuts the store at `pos`: the segment holding `pos` is truncated there
    /// and every later segment is deleted. Used at recovery so that replay
    /// rewrites the tail instead of trusting unsynced bytes.
    ///
    /// A durable mark above `pos` comes down to it first.
    pub fn truncate_from(&self, pos: u64) -> io::Result<()> {
        let mut mark = self.mark.lock();
        if mark.pos() > pos {
            mark.set(pos, &self.io)?;
        }
        let (keep, cut) = (pos / self.segment_bytes, pos % self.segment_bytes);
        self.recent.forget_from(pos);
        let mut unwritten = self.unwritten.lock();
        unwritten.bodies.retain(|&at, _| at < pos);
        self.any_unwritten.store(!unwritten.bodies.is_empty(), Ordering::Release);
        drop(unwritten);
        let mut handles = self.handles.lock();
        handles.newest = None;
        handles.written_back_to = None;
        // Renamed now, deleted later: freeing a segment's blocks took 50 to
        // 240 ms each, a second for the segments a 10,000,000-partition
        // restart replays. Renamed, a cut segment is out of the store's
        // sight at once (and never read again); a crash before its deletion
        // leaves it to the next open.
        let mut doomed = Vec::new();
        for segment in self.list()? {
            if segment > keep {
                handles.forget(segment);
                doomed.push(self.doom(segment)?);
            }
        }
        let path = self.path(keep);
        match OpenOptions::new().write(true).open(&path) {
            Ok(file) => {
                let ctx = || format!("truncating {} to {cut} bytes", path.display());
                file.set_len(cut).map_err(|e| io_context(ctx(), e))?;
                file.sync_all().map_err(|e| io_context(ctx(), e))?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_context(format!("opening {}", path.display()), e)),
        }
        drop(handles);
        self.sync_dir()?;
        delete_in_background(doomed);
        Ok(())
    }

    /// Deletes the segments that lie wholly before `pos`. Returns how many.
    pub fn release_before(&self, pos: u64) -> io::Result<usize> {
        let first_kept = pos / self.segment_bytes;
        let mut handles = self.handles.lock();
        let mut released = 0;
        for segment in self.list()? {
            if segment < first_kept {
                handles.forget(segment);
                self.remove(segment)?;
                released += 1;
            }
        }
        drop(handles);
        if released > 0 {
            self.sync_dir()?;
        }
        Ok(released)
    }

    /// The segment numbers on disk, ascending.
    pub fn segments(&self) -> io::Result<Vec<u64>> {
        let mut segments = self.list()?;
        segments.sort_unstable();
        Ok(segments)
    }

    /// The whole content of one segment file, for a follower that catches
    /// up from a snapshot and needs the bodies its state points at.
    pub fn read_segment(&self, segment: u64) -> io::Result<Vec<u8>> {
        let path = self.path(segment);
        fs::read(&path).map_err(|e| io_context(format!("reading {}", path.display()), e))
    }

    /// Writes `bytes` as segment `segment` of the store rooted at `dir`
    /// (a staging directory), durably. Used while receiving a snapshot.
    /// Written with `std`, not this store's `Io`: the simulation's disk
    /// names a file by its inode, and a staged segment can reuse the inode
    /// of a deleted segment whose writes it still holds.
    pub fn stage_segment(&self, dir: &Path, segment: u64, bytes: &[u8]) -> io::Result<()> {
        fs::create_dir_all(dir).map_err(|e| io_context(format!("creating {}", dir.display()), e))?;
        let path = dir.join(format!("{segment:020}{SUFFIX}"));
        let ctx = |e| io_context(format!("writing {}", path.display()), e);
        let mut file = File::create(&path).map_err(ctx)?;
        io::Write::write_all(&mut file, bytes).map_err(ctx)?;
        file.sync_all().map_err(ctx)
    }

    /// Replaces every segment with the ones staged in `staged` (moved, not
    /// copied), then removes `staged`. The caller then cuts the store at
    /// the installed state's first free position.
    pub fn adopt(&self, staged: &Path) -> io::Result<()> {
        // Nothing of ours stays: the mark trusts none of it from now on.
        self.mark.lock().set(0, &self.io)?;
        // The staged segments replace every body, those kept in memory too.
        self.recent.forget_all();
        *self.unwritten.lock() = Unwritten::default();
        self.any_unwritten.store(false, Ordering::Release);
        let mut handles = self.handles.lock();
        handles.newest = None;
        handles.written_back_to = None;
        for segment in self.list()? {
            handles.forget(segment);
            self.remove(segment)?;
        }
        let ctx = |e| io_context(format!("listing {}", staged.display()), e);
        for entry in fs::read_dir(staged).map_err(ctx)? {
            let entry = entry.map_err(ctx)?;
            let name = entry.file_name();
            if name.to_str().is_some_and(|n| n.ends_with(SUFFIX)) {
                let to = self.dir.join(&name);
                fs::rename(entry.path(), &to).map_err(|e| io_context(format!("moving into {}", to.display()), e))?;
            }
        }
        drop(handles);
        self.sync_dir()?;
        fs::remove_dir_all(staged).map_err(|e| io_context(format!("removing {}", staged.display()), e))
    }

    /// Splits `pos` into (segment, offset), refusing a body that would cross
    /// a segment boundary.
    fn locate(&self, pos: u64, len: u64) -> io::Result<(u64, u64)> {
        let (segment, offset) = (pos / self.segment_bytes, pos % self.segment_bytes);
        if offset.checked_add(len).is_none_or(|end| end > self.segment_bytes) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a body of {len} bytes at {pos} would cross the end of its {}-byte segment",
                    self.segment_bytes
                ),
            ));
        }
        Ok((segment, offset))
    }

    /// The cached handle of `segment`, opening (and with `create`, creating)
    /// the file on a miss.
    fn handle(&self, segment: u64, create: bool) -> io::Result<Arc<File>> {
        let mut handles = self.handles.lock();
        handles.clock += 1;
        let now = handles.clock;
        if let Some((file, used)) = handles.open.get_mut(&segment) {
            *used = now;
            return Ok(Arc::clone(file));
        }
        let file = match handles.dirty.get(&segment) {
            Some(file) => Arc::clone(file),
            None => Arc::new(self.open_file(segment, create, &mut handles)?),
        };
        handles.open.insert(segment, (Arc::clone(&file), now));
        handles.evict_beyond(MAX_OPEN_FILES);
        Ok(file)
    }

    fn open_file(&self, segment: u64, create: bool, handles: &mut Handles) -> io::Result<File> {
        let path = self.path(segment);
        let ctx = |e| io_context(format!("opening {}", path.display()), e);
        match OpenOptions::new().read(true).write(true).open(&path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
                let file = OpenOptions::new().read(true).write(true).create_new(true).open(&path).map_err(ctx)?;
                handles.dir_dirty = true;
                Ok(file)
            }
            other => other.map_err(ctx),
        }
    }

    fn list(&self) -> io::Result<Vec<u64>> {
        let names = names_in(&self.dir)?;
        Ok(names.iter().filter_map(|n| n.strip_suffix(SUFFIX)?.parse().ok()).collect())
    }

    fn remove(&self, segment: u64) -> io::Result<()> {
        let path = self.path(segment);
        fs::remove_file(&path).map_err(|e| io_context(format!("deleting {}", path.display()), e))
    }

    /// Renames `segment` to its doomed name, where [`BodyStore::list`]
    /// no longer sees it. Returns the new path.
    fn doom(&self, segment: u64) -> io::Result<PathBuf> {
        let (from, to) = (self.path(segment), self.dir.join(format!("{segment:020}{DOOMED_SUFFIX}")));
        fs::rename(&from, &to)
            .map_err(|e| io_context(format!("renaming {} to {}", from.display(), to.display()), e))?;
        Ok(to)
    }

    fn sync_dir(&self) -> io::Result<()> {
        File::open(&self.dir)
            .and_then(|dir| dir.sync_all())
            .map_err(|e| io_context(format!("syncing {}", self.dir.display()), e))
    }

    fn path(&self, segment: u64) -> PathBuf {
        self.dir.join(format!("{segment:020}{SUFFIX}"))
    }
}

/// The names of the files in `dir` that are UTF-8 (every name the store
/// writes is).
fn names_in(dir: &Path) -> io::Result<Vec<String>> {
    let ctx = |e| io_context(format!("listing {}", dir.display()), e);
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).map_err(ctx)? {
        if let Ok(name) = entry.map_err(ctx)?.file_name().into_string() {
            names.push(name);
        }
    }
    Ok(names)
}

/// Deletes `paths` on a thread of their own: what is deleted is no longer
/// any segment's, so nothing waits for it. A failure only leaves a file
/// for the next open to delete.
fn delete_in_background(paths: Vec<PathBuf>) {
    if paths.is_empty() {
        return;
    }
    let spawned = std::thread::Builder::new().name("regina-body-delete".into()).spawn({
        let paths = paths.clone();
        move || delete_now(&paths)
    });
    // Without a thread, the caller deletes them itself.
    if spawned.is_err() {
        delete_now(&paths);
    }
}

fn delete_now(paths: &[PathBuf]) {
    for path in paths {
        if let Err(e) = fs::remove_file(path) {
            if e.kind() != io::ErrorKind::NotFound {
                tracing::warn!(file = %path.display(), error = %e, "cannot delete a cut body segment");
            }
        }
    }
}

impl Handles {
    /// Records a write into `segment`; returns the segments the writes
    /// have just moved past (none on the first write, or on a write behind
    /// the newest, as a retried body is).
    fn move_newest_to(&mut self, segment: u64) -> std::ops::Range<u64> {
        let newest = self.newest.get_or_insert(segment);
        let moved_past = *newest..segment.max(*newest);
        *newest = moved_past.end;
        moved_past
    }

    /// Records a write ending at `end` in the segment starting at
    /// `segment_start`; returns the range whose writeback is due, once
    /// [`WRITEBACK_STEP_BYTES`] of the segment have been written since the
    /// last. A write behind the last range (a retried body) starts none.
    fn write_back_due(&mut self, segment_start: u64, end: u64) -> Option<std::ops::Range<u64>> {
        let from = self.written_back_to.filter(|at| *at >= segment_start).unwrap_or(segment_start);
        if end < from.saturating_add(WRITEBACK_STEP_BYTES) {
            self.written_back_to = Some(from);
            return None;
        }
        self.written_back_to = Some(end);
        Some(from..end)
    }

    fn forget(&mut self, segment: u64) {
        self.open.remove(&segment);
        self.dirty.remove(&segment);
        self.dir_dirty = true;
    }

    fn evict_beyond(&mut self, limit: usize) {
        while self.open.len() > limit {
            let oldest = self.open.iter().min_by_key(|(_, (_, used))| *used).map(|(s, _)| *s);
            match oldest {
                Some(segment) => self.open.remove(&segment),
                None => return,
            };
        }
    }
}

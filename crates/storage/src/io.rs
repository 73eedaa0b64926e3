//! The seam between the stores' data writes and the disk.
//!
//! The calls whose failure or loss the node must survive correctly go
//! through [`Io`]: writing the log's framed records, message bodies and
//! snapshots, and making them durable. Tests swap in [`FaultyIo`] (or their
//! own wrapper) to prove that a failed fsync poisons the log instead of
//! being retried (one refused for lack of space is retried, see
//! [`crate::space`]), to count how many fsyncs a workload costs, and, in the
//! simulation, to drop what no fsync covered at a crash. The deletion of a
//! released WAL segment goes through it too, so a test can hold one back.
//! File creation, preallocation, renames, cuts and recovery use `std`
//! directly; their failures surface as ordinary errors.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Positioned writes and data syncs on an already open file.
pub trait Io: Send + Sync + 'static {
    /// Writes all of `buf` at byte `pos` of `file` (pwrite, no seek).
    fn write_at(&self, file: &File, buf: &[u8], pos: u64) -> io::Result<()>;
    /// Writes `parts` back to back from byte `pos` of `file`, as one
    /// [`Io::write_at`] of their concatenation (which this default does,
    /// so a wrapper that only watches `write_at` sees the same write).
    fn write_parts_at(&self, file: &File, parts: &[&[u8]], pos: u64) -> io::Result<()> {
        self.write_at(file, &parts.concat(), pos)
    }
    /// Makes earlier writes to `file` durable (fdatasync).
    fn sync_data(&self, file: &File) -> io::Result<()>;
    /// The WAL's writer has run every completion callback of a batch and
    /// returned from them. The simulation waits for it so that whatever a
    /// callback does after its first wake-up (another wake-up, a counter)
    /// lands before the runtime moves on, at the same point of every replay.
    fn completions_returned(&self) {}
    /// The file at `path` is complete, or old: its pages may leave the page
    /// cache once written back (see [`crate::page_cache`]). Only a hint;
    /// this default takes none (a simulated disk has no page cache).
    fn forget_cached(&self, path: &Path) {
        let _ = path;
    }
    /// `len` bytes were just written at `offset` of `file`: their writeback
    /// may start now (see [`crate::page_cache::write_back_in_background`]).
    /// Only a hint; durability stays with [`Io::sync_data`]. This default
    /// takes none.
    fn start_writeback(&self, file: &File, offset: u64, len: u64) {
        let _ = (file, offset, len);
    }
    /// A second handle on `path` whose writes pass the page cache by
    /// (see [`crate::direct`]), for a large file written once; `None` where
    /// the file system refuses it, and in this default (a simulated disk
    /// has no page cache). Its writes go through [`Io::write_at`] like any
    /// other, aligned to [`crate::direct::DIRECT_ALIGN`]; durability stays
    /// with [`Io::sync_data`] on either handle.
    fn open_direct(&self, path: &Path) -> Option<File> {
        let _ = path;
        None
    }
    /// Deletes the file at `path` (a WAL segment every group has released).
    fn delete_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
}

/// The real thing: `pwrite` and `fdatasync`.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealIo;

impl Io for RealIo {
    fn write_at(&self, file: &File, buf: &[u8], pos: u64) -> io::Result<()> {
        file.write_all_at(buf, pos)
    }

    /// `pwritev`, so the parts are never copied into one buffer first: an
    /// entry's message bodies, joined, cost a growing buffer's copies and
    /// its fresh pages (zeroed by the kernel) on every apply.
    fn write_parts_at(&self, file: &File, parts: &[&[u8]], mut pos: u64) -> io::Result<()> {
        let mut rest: Vec<&[u8]> = parts.iter().copied().filter(|p| !p.is_empty()).collect();
        let mut first = 0;
        while first < rest.len() {
            let window = &rest[first..rest.len().min(first + MAX_PARTS_PER_WRITE)];
            let slices: Vec<io::IoSlice<'_>> = window.iter().map(|p| io::IoSlice::new(p)).collect();
            let mut written = match rustix::io::pwritev(file, &slices, pos) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "pwritev wrote nothing")),
                Ok(n) => n,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            };
            pos += written as u64;
            // Skips what was written: whole parts, then into a part.
            while written > 0 {
                let part = rest[first];
                if written >= part.len() {
                    written -= part.len();
                    first += 1;
                } else {
                    rest[first] = &part[written..];
                    written = 0;
                }
            }
        }
        Ok(())
    }

    fn sync_data(&self, file: &File) -> io::Result<()> {
        file.sync_data()
    }

    fn forget_cached(&self, path: &Path) {
        crate::page_cache::forget_in_background(path.to_path_buf());
    }

    fn start_writeback(&self, file: &File, offset: u64, len: u64) {
        crate::page_cache::write_back_in_background(file, offset, len);
    }

    fn open_direct(&self, path: &Path) -> Option<File> {
        crate::direct::open_direct(path)
    }
}

/// Parts per `pwritev` call: Linux's `IOV_MAX`.
const MAX_PARTS_PER_WRITE: usize = 1024;

/// A window `[from, until)` of call numbers that fail. Two atomics rather
/// than a lock so the hot path stays a pair of loads.
#[derive(Debug)]
struct FailWindow {
    from: AtomicU64,
    until: AtomicU64,
}

impl FailWindow {
    fn never() -> Self {
        FailWindow { from: AtomicU64::new(u64::MAX), until: AtomicU64::new(u64::MAX) }
    }

    fn set(&self, from: u64, until: u64) {
        // Close the window first so a concurrent call never sees a window
        // wider than either the old or the new one.
        self.from.store(u64::MAX, Ordering::SeqCst);
        self.until.store(until, Ordering::SeqCst);
        self.from.store(from, Ordering::SeqCst);
    }

    fn hits(&self, call: u64) -> bool {
        call >= self.from.load(Ordering::SeqCst) && call < self.until.load(Ordering::SeqCst)
    }
}

/// [`RealIo`] that can be told to fail chosen writes or syncs with an
/// `io::Error`. Public so that tests of crates built on the log can inject
/// the same faults.
///
/// Calls are numbered from 0 in the order they reach this value, separately
/// for writes and syncs.
#[derive(Debug)]
pub struct FaultyIo {
    inner: RealIo,
    syncs: AtomicU64,
    writes: AtomicU64,
    failing_syncs: FailWindow,
    failing_writes: FailWindow,
    /// Writes and syncs that fail for lack of space (ENOSPC), by number.
    full_writes: FailWindow,
    full_syncs: FailWindow,
}

/// The text of an injected sync failure, so tests can look for it.
pub const INJECTED_SYNC_ERROR: &str = "injected fdatasync failure";
/// The text of an injected write failure, so tests can look for it.
pub const INJECTED_WRITE_ERROR: &str = "injected pwrite failure";
/// The text of an injected lack of space.
pub const INJECTED_NO_SPACE: &str = "injected ENOSPC: no space left on device";

impl Default for FaultyIo {
    fn default() -> Self {
        Self::new()
    }
}

impl FaultyIo {
    /// A `FaultyIo` that fails nothing until told to.
    pub fn new() -> Self {
        FaultyIo {
            inner: RealIo,
            syncs: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            failing_syncs: FailWindow::never(),
            failing_writes: FailWindow::never(),
            full_writes: FailWindow::never(),
            full_syncs: FailWindow::never(),
        }
    }

    /// Fails sync number `n` and every sync after it.
    pub fn fail_syncs_from(&self, n: u64) {
        self.failing_syncs.set(n, u64::MAX);
    }

    /// Fails exactly the next sync; later ones succeed again.
    pub fn fail_next_sync(&self) {
        let next = self.syncs.load(Ordering::SeqCst);
        self.failing_syncs.set(next, next + 1);
    }

    /// Fails write number `n` and every write after it.
    pub fn fail_writes_from(&self, n: u64) {
        self.failing_writes.set(n, u64::MAX);
    }

    /// Fails exactly the next write; later ones succeed again.
    pub fn fail_next_write(&self) {
        let next = self.writes.load(Ordering::SeqCst);
        self.failing_writes.set(next, next + 1);
    }

    /// From now on, every write fails as on a full disk (ENOSPC) until
    /// [`FaultyIo::heal`].
    pub fn fill_disk_for_writes(&self) {
        self.full_writes.set(self.writes.load(Ordering::SeqCst), u64::MAX);
    }

    /// From now on, every sync fails as on a full disk (ENOSPC) until
    /// [`FaultyIo::heal`].
    pub fn fill_disk_for_syncs(&self) {
        self.full_syncs.set(self.syncs.load(Ordering::SeqCst), u64::MAX);
    }

    /// Stops injecting failures.
    pub fn heal(&self) {
        self.failing_syncs.set(u64::MAX, u64::MAX);
        self.failing_writes.set(u64::MAX, u64::MAX);
        self.full_writes.set(u64::MAX, u64::MAX);
        self.full_syncs.set(u64::MAX, u64::MAX);
    }

    /// How many syncs have been attempted (failed ones included).
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::SeqCst)
    }

    /// How many writes have been attempted (failed ones included).
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }
}

impl Io for FaultyIo {
    fn write_at(&self, file: &File, buf: &[u8], pos: u64) -> io::Result<()> {
        let call = self.writes.fetch_add(1, Ordering::SeqCst);
        if self.failing_writes.hits(call) {
            return Err(io::Error::other(INJECTED_WRITE_ERROR));
        }
        if self.full_writes.hits(call) {
            return Err(io::Error::new(io::ErrorKind::StorageFull, INJECTED_NO_SPACE));
        }
        self.inner.write_at(file, buf, pos)
    }

    fn sync_data(&self, file: &File) -> io::Result<()> {
        let call = self.syncs.fetch_add(1, Ordering::SeqCst);
        if self.failing_syncs.hits(call) {
            return Err(io::Error::other(INJECTED_SYNC_ERROR));
        }
        if self.full_syncs.hits(call) {
            return Err(io::Error::new(io::ErrorKind::StorageFull, INJECTED_NO_SPACE));
        }
        self.inner.sync_data(file)
    }

    fn forget_cached(&self, path: &Path) {
        self.inner.forget_cached(path)
    }

    fn start_writeback(&self, file: &File, offset: u64, len: u64) {
        self.inner.start_writeback(file, offset, len)
    }

    fn open_direct(&self, path: &Path) -> Option<File> {
        self.inner.open_direct(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More parts than one `pwritev` takes, some empty, land back to back
    /// exactly as their concatenation would.
    #[test]
    fn parts_are_written_as_their_concatenation() -> io::Result<()> {
        let owned: Vec<Vec<u8>> = (0..3 * MAX_PARTS_PER_WRITE + 7).map(|i| vec![(i % 251) as u8; i % 5 * 97]).collect();
        let parts: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
        let file = tempfile::tempfile()?;
        RealIo.write_at(&file, b"head", 0)?;
        RealIo.write_parts_at(&file, &parts, 4)?;
        let mut read = Vec::new();
        std::io::Read::read_to_end(&mut &file, &mut read)?;
        assert_eq!(read, [&b"head"[..], &parts.concat()].concat());
        Ok(())
    }

    #[test]
    fn faulty_io_fails_only_the_chosen_syncs() -> io::Result<()> {
        let file = tempfile::tempfile()?;
        let io = FaultyIo::new();
        io.sync_data(&file)?;
        io.fail_next_sync();
        assert!(io.sync_data(&file).is_err());
        io.sync_data(&file)?;
        io.fail_syncs_from(4);
        io.sync_data(&file)?;
        assert!(io.sync_data(&file).is_err());
        assert!(io.sync_data(&file).is_err());
        io.heal();
        io.sync_data(&file)?;
        assert_eq!(io.syncs(), 7);
        Ok(())
    }

    #[test]
    fn faulty_io_fails_chosen_writes() -> io::Result<()> {
        let file = tempfile::tempfile()?;
        let io = FaultyIo::new();
        io.fail_next_write();
        let err = io.write_at(&file, b"abc", 0).unwrap_err();
        assert!(err.to_string().contains(INJECTED_WRITE_ERROR));
        io.write_at(&file, b"abc", 0)?;
        let mut back = [0u8; 3];
        file.read_exact_at(&mut back, 0)?;
        assert_eq!(&back, b"abc");
        Ok(())
    }
}

//! Dropping written files from the page cache, and starting the writeback
//! of what is being written, off the writer's path.
//!
//! Message bodies are written once and, past the newest few segments,
//! seldom read soon again. Left in the page cache they make it grow by
//! every byte pushed (gigabytes a minute under a sustained push), and on
//! the machines measured a page cache growing into memory it has not used
//! before made the kernel's copy of each write several times dearer than
//! a reused page (docs/benchmarks.md, items 15 and 16).
//!
//! `POSIX_FADV_DONTNEED` starts the writeback of a file's dirty pages and
//! drops its clean ones. It loses nothing and leaves alone the error state
//! a later fdatasync reports, so durability stays with the fsyncs. As it
//! drops only clean pages, a caller advises a file twice: once it is
//! complete (its writeback starts early) and again later (it is dropped,
//! written back by then). See [`crate::BodyStore`].
//!
//! A file still being written (a body segment, a snapshot) has its newest
//! range advised as it goes ([`write_back_in_background`]), so its dirty
//! pages go to disk in steps of a few megabytes instead of all at once.
//!
//! The advice runs on one thread for the whole process: a large file's
//! writeback is queued in the call, which would otherwise stall a writer
//! for milliseconds.

use std::fs::File;
use std::num::NonZeroU64;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::OnceLock;

use rustix::fs::{fadvise, Advice};

/// Asks, in the background, that the page cache drop `path`'s clean pages
/// and start writing back its dirty ones. A file gone by then (a segment
/// released meanwhile) is skipped; nothing waits for the advice.
pub fn forget_in_background(path: PathBuf) {
    advise(Advise::Forget(path));
}

/// Asks, in the background, that the `len` bytes written at `offset` of
/// `file` start their writeback now, not when the kernel's dirty limits or
/// an fsync force it. A file written through in steps so never holds much
/// that is dirty: the fsync that makes it durable (a snapshot's, a body
/// segment's) and the writeback of a finished file stay short, and the
/// WAL's fdatasyncs never queue behind tens of megabytes of it (a whole
/// body segment's writeback stopped an e2e run's deliveries for ~100 ms:
/// docs/benchmarks.md, item 22). The same advice as
/// [`forget_in_background`] on that range only: its pages are dirty when
/// asked about, so they are written back and stay cached.
///
/// At most [`MAX_PENDING_WRITEBACKS`] wait for the thread at once (each
/// holds a file handle); past that an advice is skipped, and the kernel
/// writes those pages back on its own schedule.
pub fn write_back_in_background(file: &File, offset: u64, len: u64) {
    let Some(pending) = Pending::take() else { return };
    // A duplicate handle: the caller may close its own first.
    if let Ok(file) = file.try_clone() {
        advise(Advise::WriteBack { file, offset, len, _pending: pending });
    }
}

/// Writeback advice that may wait for the thread at once: a disk slower
/// than the writes must not pile up open file handles.
pub const MAX_PENDING_WRITEBACKS: usize = 64;
static PENDING_WRITEBACKS: AtomicUsize = AtomicUsize::new(0);

/// One of the [`MAX_PENDING_WRITEBACKS`] places, given back when the advice
/// holding it is dropped: taken, refused or never sent.
struct Pending;

impl Pending {
    fn take() -> Option<Pending> {
        // Counted at once: past the bound the token made here drops at
        // the end of this call and gives the place back.
        let pending = Pending;
        (PENDING_WRITEBACKS.fetch_add(1, Ordering::AcqRel) < MAX_PENDING_WRITEBACKS).then_some(pending)
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        PENDING_WRITEBACKS.fetch_sub(1, Ordering::AcqRel);
    }
}

enum Advise {
    Forget(PathBuf),
    WriteBack { file: File, offset: u64, len: u64, _pending: Pending },
}

fn advise(advice: Advise) {
    static ADVISER: OnceLock<Option<Sender<Advise>>> = OnceLock::new();
    let adviser = ADVISER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Advise>();
        let spawned = std::thread::Builder::new().name("page-cache-advice".into()).spawn(move || {
            for advice in rx {
                let taken = match &advice {
                    Advise::Forget(path) => forget_now(path),
                    Advise::WriteBack { file, offset, len, .. } => {
                        fadvise(file, *offset, NonZeroU64::new(*len), Advice::DontNeed).map_err(Into::into)
                    }
                };
                if let Err(e) = taken {
                    tracing::debug!(error = %e, "page cache advice not taken");
                }
            }
        });
        // Without the thread files simply stay cached, as they would
        // without this module.
        spawned.ok().map(|_| tx)
    });
    if let Some(tx) = adviser {
        let _ = tx.send(advice);
    }
}

/// [`forget_in_background`], now, on this thread.
fn forget_now(path: &std::path::Path) -> std::io::Result<()> {
    let file = File::open(path)?;
    fadvise(&file, 0, None, Advice::DontNeed)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The advice keeps every byte: what was written reads back whole, and
    /// a file that is gone is no error of the caller's.
    #[test]
    fn advice_keeps_the_data() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes)?;
        forget_now(&path)?;
        forget_in_background(path.clone());
        forget_in_background(dir.path().join("gone"));
        let file = File::open(&path)?;
        for _ in 0..2 * MAX_PENDING_WRITEBACKS {
            write_back_in_background(&file, 4096, 100_000);
        }
        drop(file);
        // Every advice handed over, or skipped, is counted done again.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while PENDING_WRITEBACKS.load(Ordering::Acquire) > 0 {
            assert!(std::time::Instant::now() < deadline, "writeback advice still counted as waiting");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(std::fs::read(&path)?, bytes);
        assert_eq!(forget_now(&dir.path().join("gone")).map_err(|e| e.kind()), Err(std::io::ErrorKind::NotFound));
        Ok(())
    }
}

//! Dropping written files from the page cache, off the writer's path.
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
//! The advice runs on one thread for the whole process: a large file's
//! writeback is queued in the call, which would otherwise stall a writer
//! for milliseconds.

use std::fs::File;
use std::path::PathBuf;
use std::sync::mpsc::{self, Sender};
use std::sync::OnceLock;

use rustix::fs::{fadvise, Advice};

/// Asks, in the background, that the page cache drop `path`'s clean pages
/// and start writing back its dirty ones. A file gone by then (a segment
/// released meanwhile) is skipped; nothing waits for the advice.
pub fn forget_in_background(path: PathBuf) {
    static ADVISER: OnceLock<Option<Sender<PathBuf>>> = OnceLock::new();
    let adviser = ADVISER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<PathBuf>();
        let spawned = std::thread::Builder::new().name("page-cache-advice".into()).spawn(move || {
            for path in rx {
                if let Err(e) = forget_now(&path) {
                    tracing::debug!(path = %path.display(), error = %e, "page cache advice not taken");
                }
            }
        });
        // Without the thread files simply stay cached, as they would
        // without this module.
        spawned.ok().map(|_| tx)
    });
    if let Some(tx) = adviser {
        let _ = tx.send(path);
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
        assert_eq!(std::fs::read(&path)?, bytes);
        assert_eq!(forget_now(&dir.path().join("gone")).map_err(|e| e.kind()), Err(std::io::ErrorKind::NotFound));
        Ok(())
    }
}

//! Deleting released segments on a thread of the log's own.
//!
//! A release runs inside Raft's purge, which the Raft core awaits before
//! its next command. Unlinking a 64 MiB preallocated segment took 13-212 ms
//! on a file system mounted with `discard` (docs/benchmarks.md, items 32
//! and 33),
//! and a snapshot's purge releases dozens: done in place, pushes stopped for
//! seconds. The release only takes the segments out of the readable map;
//! this thread unlinks the files and syncs the directory.
//!
//! Nothing depends on the unlink having happened: a released segment holds
//! only records every group has purged, and a segment whose deletion a
//! crash interrupted is recovered as an old segment, its records below the
//! purge point skipped, and released again by the next purge.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use super::segment;
use crate::io::Io;

/// One release's segments: their paths, and the handles the readable map
/// held, closed here after the unlink so no reader's thread closes the last
/// handle of an unlinked file (which is when the file system frees it).
pub(super) type Doomed = Vec<(PathBuf, Arc<File>)>;

pub(super) struct Deleter {
    dir: PathBuf,
    io: Arc<dyn Io>,
    queue: Option<mpsc::Sender<Doomed>>,
    outstanding: Arc<Outstanding>,
    thread: Option<JoinHandle<()>>,
}

/// Releases queued and not yet deleted, for [`Deleter::wait`].
#[derive(Default)]
struct Outstanding {
    count: Mutex<usize>,
    done: Condvar,
}

impl Deleter {
    pub(super) fn start(dir: PathBuf, io: Arc<dyn Io>) -> io::Result<Deleter> {
        let (tx, rx) = mpsc::channel::<Doomed>();
        let outstanding = Arc::new(Outstanding::default());
        let thread = std::thread::Builder::new().name("regina-wal-delete".into()).spawn({
            let (dir, io, outstanding) = (dir.clone(), Arc::clone(&io), Arc::clone(&outstanding));
            move || {
                for doomed in rx {
                    delete(&dir, &*io, doomed);
                    *outstanding.count.lock() -= 1;
                    outstanding.done.notify_all();
                }
            }
        })?;
        Ok(Deleter { dir, io, queue: Some(tx), outstanding, thread: Some(thread) })
    }

    /// Queues `doomed` for deletion and returns at once.
    pub(super) fn delete(&self, doomed: Doomed) {
        if doomed.is_empty() {
            return;
        }
        let Some(queue) = &self.queue else { return self.delete_in_place(doomed) };
        *self.outstanding.count.lock() += 1;
        // The thread only ends early if it panicked: then the caller
        // deletes them itself, as before there was a thread.
        if let Err(mpsc::SendError(doomed)) = queue.send(doomed) {
            *self.outstanding.count.lock() -= 1;
            tracing::error!("the wal delete thread is gone; deleting released segments in place");
            self.delete_in_place(doomed);
        }
    }

    fn delete_in_place(&self, doomed: Doomed) {
        delete(&self.dir, &*self.io, doomed);
    }

    /// Blocks until every release queued so far is deleted and the
    /// directory synced.
    pub(super) fn wait(&self) {
        let mut count = self.outstanding.count.lock();
        // Checked again now and then: a thread that died never counts down.
        while *count > 0 && self.thread.as_ref().is_some_and(|t| !t.is_finished()) {
            self.outstanding.done.wait_for(&mut count, std::time::Duration::from_millis(100));
        }
    }
}

impl Drop for Deleter {
    /// Finishes the deletions queued, so a log reopened in this process
    /// never lists a file that is about to vanish.
    fn drop(&mut self) {
        drop(self.queue.take());
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("the wal delete thread panicked");
            }
        }
    }
}

/// A failure is only logged: the file stays, for the next open to recover
/// and a release after it to delete.
fn delete(dir: &Path, io: &dyn Io, doomed: Doomed) {
    for (path, file) in doomed {
        match io.delete_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(file = %path.display(), error = %e, "cannot delete a released wal segment"),
        }
        drop(file);
    }
    if let Err(e) = segment::sync_dir(dir) {
        tracing::warn!(dir = %dir.display(), error = %e, "cannot sync the wal directory after deleting segments");
    }
}

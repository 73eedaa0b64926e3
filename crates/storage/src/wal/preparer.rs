//! The preparer thread keeps one zeroed segment ready ahead of the writer.
//!
//! Zero-filling a 64 MiB segment takes long enough that doing it when the
//! active segment fills up would stall every append in that batch. The
//! preparer builds the next segment in the background and hands it over on a
//! rendezvous channel, so at most one spare exists beyond what the writer has
//! taken. A spare left over at shutdown is an empty segment that the next
//! open hands back here, so restarts do not pile up spare files.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::SyncSender;
use std::sync::Arc;

use super::segment;
use super::writer::Spare;
use crate::space::SpaceWait;

pub struct Preparer {
    pub dir: PathBuf,
    /// Empty segments found at open; handed over before creating new ones.
    pub spares: VecDeque<Spare>,
    pub next_seq: u64,
    pub segment_bytes: u64,
    /// Raised at shutdown so a half-written spare is abandoned promptly.
    pub stop: Arc<AtomicBool>,
    /// Shared with the writer: a segment that finds no space is retried.
    pub space: Arc<SpaceWait>,
    pub out: SyncSender<Result<Spare, String>>,
}

impl Preparer {
    pub fn run(mut self) {
        while let Some(spare) = self.spares.pop_front() {
            if self.out.send(Ok(spare)).is_err() {
                return;
            }
        }
        loop {
            let seq = self.next_seq;
            let what = || format!("preparing wal segment {}", segment::file_name(seq));
            match self.space.retry(what, || segment::create(&self.dir, seq, self.segment_bytes, &self.stop)) {
                Ok(Some(file)) => {
                    let spare = Spare { seq, file, len: self.segment_bytes };
                    // Blocks until the writer needs it; fails once the
                    // writer has exited.
                    if self.out.send(Ok(spare)).is_err() {
                        return;
                    }
                    self.next_seq += 1;
                }
                Ok(None) => return,
                Err(e) => {
                    let reason = format!("preparing wal segment {} failed: {e}", segment::file_name(seq));
                    tracing::error!(%reason, "cannot prepare the next wal segment");
                    // The writer poisons the log if and when it needs this
                    // segment; until then the current one keeps working.
                    let _ = self.out.send(Err(reason));
                    return;
                }
            }
        }
    }
}

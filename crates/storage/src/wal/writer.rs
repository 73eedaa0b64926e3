//! The writer thread: group commit and segment rollover.
//!
//! One thread owns the write position. It takes the oldest pending append,
//! adds whatever else is pending up to a byte cap, frames the whole batch
//! into one buffer per segment, writes it and covers it with one fsync per
//! touched segment. Only after the fsync does it report positions, in
//! submission order. A write or fsync refused for lack of space is retried,
//! the whole buffer rewritten before the fsync is asked again (see
//! [`crate::space`]). Any other write or fsync failure poisons the log:
//! after a failed fsync the kernel may have dropped the dirty pages, so a
//! retry that "succeeds" would be a lie.

use std::fs::File;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::Arc;

use super::frame::{framed_len, header, HEADER_LEN};
use super::{segment, RecordPos, Request, Shared};
use crate::error::WalError;
use crate::space::SpaceWait;

/// A segment the writer can move into: zeroed from `len` down to 0.
#[derive(Debug)]
pub struct Spare {
    pub seq: u64,
    pub file: File,
    pub len: u64,
}

/// The segment currently being appended to.
pub struct Active {
    pub seq: u64,
    pub file: Arc<File>,
    pub len: u64,
    pub offset: u64,
}

pub struct Writer {
    pub shared: Arc<Shared>,
    pub dir: std::path::PathBuf,
    pub active: Active,
    /// Empty segments from the preparer thread.
    pub prepared: Receiver<Result<Spare, String>>,
}

impl Writer {
    pub fn run(mut self) {
        while let Some(batch) = self.next_batch() {
            if let Some(reason) = self.shared.poison.get() {
                fail_all(batch, reason);
            } else {
                match self.write_batch(&batch) {
                    Ok(positions) => {
                        for (request, pos) in batch.into_iter().zip(positions) {
                            finish(request, Ok(pos));
                        }
                    }
                    Err(reason) => {
                        tracing::error!(%reason, "wal write failed; the log is now poisoned");
                        let reason = self.shared.poison.get_or_init(|| reason);
                        fail_all(batch, reason);
                    }
                }
            }
            self.shared.io.completions_returned();
        }
    }

    /// Waits for work and takes the oldest request plus everything else
    /// pending that fits the batch cap. `None` once shut down and drained.
    fn next_batch(&self) -> Option<Vec<Request>> {
        let mut queue = self.shared.queue.lock();
        while queue.pending.is_empty() && !queue.shutdown {
            self.shared.wake.wait(&mut queue);
        }
        let first = queue.pending.pop_front()?;
        let cap = self.shared.options.max_batch_bytes;
        let mut total = first.bytes;
        let mut batch = vec![first];
        while let Some(next) = queue.pending.front() {
            if total + next.bytes > cap {
                break;
            }
            total += next.bytes;
            batch.extend(queue.pending.pop_front());
        }
        Some(batch)
    }

    /// Frames, writes and syncs one batch, returning each request's
    /// positions. A batch that crosses into a new segment is written and
    /// synced segment by segment, in order, so that a later segment never
    /// holds records while an earlier one is incomplete.
    fn write_batch(&mut self, batch: &[Request]) -> Result<Vec<Vec<RecordPos>>, String> {
        let mut framed = Vec::with_capacity(batch.iter().map(|r| r.records.len()).sum());
        let mut framed_at = self.active.offset;
        let mut positions = Vec::with_capacity(batch.len());
        for request in batch {
            let mut request_positions = Vec::with_capacity(request.records.len());
            for record in &request.records {
                let need = framed_len(record.len());
                if self.active.offset + need > self.active.len {
                    self.flush(&mut framed, framed_at)?;
                    self.make_room(need)?;
                    framed_at = self.active.offset;
                }
                request_positions.push(RecordPos { segment: self.active.seq, offset: self.active.offset });
                framed.push((header(record), record.as_slice()));
                self.active.offset += need;
            }
            positions.push(request_positions);
        }
        self.flush(&mut framed, framed_at)?;
        Ok(positions)
    }

    /// Writes `framed` records (header, payload) back to back at `at` in
    /// the active segment, in one vectored write from where they lie (no
    /// batch buffer to copy every byte into), and fsyncs it.
    fn flush(&self, framed: &mut Vec<([u8; HEADER_LEN as usize], &[u8])>, at: u64) -> Result<(), String> {
        if framed.is_empty() {
            return Ok(());
        }
        let parts: Vec<&[u8]> = framed.iter().flat_map(|(head, record)| [head.as_slice(), record]).collect();
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let name = segment::file_name(self.active.seq);
        let (io, fsync) = (&self.shared.io, self.shared.options.fsync);
        let what = || format!("writing {len} bytes at offset {at} of wal segment {name}");
        // Rewriting the records before every fsync retried: pages whose
        // writeback failed for space may have been dropped clean.
        self.shared
            .space
            .retry(what, || {
                io.write_parts_at(&self.active.file, &parts, at)?;
                if fsync {
                    io.sync_data(&self.active.file)?;
                }
                Ok(())
            })
            .map_err(|e| format!("writing and syncing {len} bytes at offset {at} of wal segment {name} failed: {e}"))?;
        self.shared.bytes_written.fetch_add(len as u64, Ordering::Relaxed);
        drop(parts);
        framed.clear();
        Ok(())
    }

    /// Makes the active segment able to take a record of `need` framed
    /// bytes: an untouched segment grows to fit it, otherwise the writer
    /// moves on to the next segment (grown too if the record is oversized).
    fn make_room(&mut self, need: u64) -> Result<(), String> {
        if self.active.offset == 0 {
            grow(&self.shared.space, &self.active.file, self.active.seq, self.active.len, need)?;
            self.active.len = need;
            return Ok(());
        }
        let mut next = self.next_spare()?;
        if next.len < need {
            grow(&self.shared.space, &next.file, next.seq, next.len, need)?;
            next.len = need;
        }
        let file = Arc::new(next.file);
        self.shared.segments.write().insert(next.seq, Arc::clone(&file));
        self.shared.current_segment.store(next.seq, Ordering::SeqCst);
        let full = std::mem::replace(&mut self.active, Active { seq: next.seq, file, len: next.len, offset: 0 });
        // A full segment is read back only by a follower far behind or at
        // recovery (recent entries are served from memory): it need not
        // grow the page cache (see `crate::page_cache`).
        self.shared.io.forget_cached(&self.dir.join(segment::file_name(full.seq)));
        Ok(())
    }

    fn next_spare(&mut self) -> Result<Spare, String> {
        match self.prepared.recv() {
            Ok(result) => result,
            Err(_) => Err("the wal segment preparer stopped unexpectedly".to_string()),
        }
    }
}

/// Extends a zeroed segment from `len` to `need` bytes with real zeros, so
/// an oversized record still overwrites allocated space.
fn grow(space: &SpaceWait, file: &File, seq: u64, len: u64, need: u64) -> Result<(), String> {
    let what = || format!("growing wal segment {} to {need} bytes", segment::file_name(seq));
    space.retry(what, || segment::zero_and_sync(file, len, need)).map_err(|e| format!("{} failed: {e}", what()))
}

fn fail_all(batch: Vec<Request>, reason: &str) {
    for request in batch {
        finish(request, Err(WalError::Poisoned(reason.to_string())));
    }
}

/// Runs a completion callback. A panicking callback must not take the writer
/// thread down with it: every later append would then wait forever.
fn finish(request: Request, result: Result<Vec<RecordPos>, WalError>) {
    let done = request.done;
    if catch_unwind(AssertUnwindSafe(move || done(result))).is_err() {
        tracing::error!("a wal append completion callback panicked");
    }
}

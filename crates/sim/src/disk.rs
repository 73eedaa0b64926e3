//! A disk that forgets what was not fsynced when the machine crashes.
//!
//! The WAL writes and syncs through the `Io` seam; this implementation of it
//! does the write for real (the page cache, as the process sees it) and
//! remembers, per file, every write no sync has covered yet, with the bytes
//! it replaced. A crash then decides, write by write, what reached the
//! platter: nothing, a prefix (a torn write), some sectors in any order, or
//! all of it, and puts the old bytes back over the rest. Recovery must cope
//! with every one of those outcomes, and nothing a sync covered may be lost.
//!
//! `fdatasync` itself is not called: the process never really dies, so the
//! page cache is as durable as this model needs, and a real sync per
//! simulated one would make the simulation slow for nothing.
//!
//! The WAL goes through `Io` with a [`Gate`], which orders its calls
//! against the rest of the run. Message bodies and snapshots go through a
//! second, ungated `SimIo` of the same incarnation ([`SimIo::ungated`]),
//! the Raft meta files (votes) through a third: bodies are never synced but
//! before a snapshot, so a crash drops (or tears) the bodies of every entry
//! applied since the last snapshot, and replay must write them again.
//! Staged snapshot segments, file creation, renames and cuts use `std` and
//! survive a crash as done. A file is named by its inode; writes of a file
//! deleted since are dropped, as a real crash drops them.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::sync::Arc;

use parking_lot::Mutex;
use regina_storage::Io;

use crate::gate::{Gate, IoCall, Verdict};
use crate::rng::Rng;

type FileKey = (u64, u64);

/// A write no sync has covered yet, and what it replaced.
struct Unsynced {
    key: FileKey,
    pos: u64,
    /// The bytes that were there before (shorter if the write grew the file).
    old: Vec<u8>,
    len: usize,
    file_len_before: u64,
}

#[derive(Default)]
struct Pending {
    /// A handle on every file with unsynced writes, so they can be undone
    /// after the WAL that owned the file is gone.
    files: BTreeMap<FileKey, File>,
    writes: Vec<Unsynced>,
}

/// What a crash did to the unsynced writes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Loss {
    pub writes: usize,
    pub bytes_lost: u64,
    pub bytes_kept: u64,
    /// Of `bytes_lost`, those of message bodies and snapshots.
    pub body_bytes_lost: u64,
}

pub struct SimIo {
    /// `None`: calls go straight to the disk (bodies and snapshots, whose
    /// writes happen while an entry is applied, not as a WAL batch).
    gate: Option<Arc<Gate>>,
    /// A broken disk for the checker's own test: syncs are acknowledged but
    /// cover nothing, so a crash loses acknowledged writes.
    forget_syncs: bool,
    pending: Mutex<Pending>,
}

fn key_of(file: &File) -> io::Result<FileKey> {
    let m = file.metadata()?;
    Ok((m.dev(), m.ino()))
}

/// Whether no name points at the file any more.
fn is_deleted(file: &File) -> bool {
    file.metadata().map_or(true, |m| m.nlink() == 0)
}

fn crash_error() -> io::Error {
    io::Error::other("simulated crash: the machine died before this reached the disk")
}

/// Reads as much of `buf.len()` bytes at `pos` as the file holds.
fn read_upto(file: &File, buf: &mut [u8], pos: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], pos + done as u64)? {
            0 => break,
            n => done += n,
        }
    }
    Ok(done)
}

impl SimIo {
    pub fn new(gate: Arc<Gate>, forget_syncs: bool) -> Arc<SimIo> {
        Arc::new(SimIo { gate: Some(gate), forget_syncs, pending: Mutex::new(Pending::default()) })
    }

    /// A `SimIo` whose calls are not ordered by a gate.
    pub fn ungated(forget_syncs: bool) -> Arc<SimIo> {
        Arc::new(SimIo { gate: None, forget_syncs, pending: Mutex::new(Pending::default()) })
    }

    fn write(&self, file: &File, buf: &[u8], pos: u64) -> io::Result<()> {
        let key = key_of(file)?;
        let file_len_before = file.metadata()?.len();
        let mut old = vec![0u8; buf.len()];
        let n = read_upto(file, &mut old, pos)?;
        old.truncate(n);
        file.write_all_at(buf, pos)?;
        let mut p = self.pending.lock();
        // A file is named by its inode, which a new file can reuse once the
        // old one is deleted: the deleted file's writes no longer matter
        // (a crash drops them too), and the handle must be the new file's.
        if p.files.get(&key).is_some_and(is_deleted) {
            p.writes.retain(|w| w.key != key);
            p.files.remove(&key);
        }
        if let std::collections::btree_map::Entry::Vacant(slot) = p.files.entry(key) {
            slot.insert(file.try_clone()?);
        }
        p.writes.push(Unsynced { key, pos, old, len: buf.len(), file_len_before });
        Ok(())
    }

    fn sync(&self, file: &File) -> io::Result<()> {
        if self.forget_syncs {
            return Ok(());
        }
        let key = key_of(file)?;
        let mut p = self.pending.lock();
        p.writes.retain(|w| w.key != key);
        p.files.remove(&key);
        Ok(())
    }

    /// Unsynced writes right now.
    pub fn unsynced(&self) -> usize {
        self.pending.lock().writes.len()
    }

    /// The machine died: decide, newest write first, what of each unsynced
    /// write reached the disk, and restore the old bytes over the rest.
    /// Call only once the WAL that used this disk is gone.
    pub fn crash(&self, rng: &mut Rng) -> io::Result<Loss> {
        let mut p = std::mem::take(&mut *self.pending.lock());
        // Writes to files deleted since are gone with them, whatever inode
        // numbers the file system handed out meanwhile.
        let deleted: Vec<FileKey> = p.files.iter().filter(|(_, f)| is_deleted(f)).map(|(k, _)| *k).collect();
        p.writes.retain(|w| !deleted.contains(&w.key));
        let mut loss = Loss::default();
        for w in p.writes.iter().rev() {
            let file = p.files.get(&w.key).expect("a handle for every pending file");
            loss.writes += 1;
            // `kept[i]`: byte i of the write survives.
            let kept: Vec<bool> = if self.forget_syncs {
                vec![false; w.len]
            } else {
                match rng.below(5) {
                    0 | 1 => vec![false; w.len],
                    2 => {
                        let k = rng.below(w.len as u64 + 1) as usize;
                        (0..w.len).map(|i| i < k).collect()
                    }
                    3 => {
                        let sectors = w.len.div_ceil(512);
                        let survive: Vec<bool> = (0..sectors).map(|_| rng.chance(500)).collect();
                        (0..w.len).map(|i| survive[i / 512]).collect()
                    }
                    _ => vec![true; w.len],
                }
            };
            let mut i = 0;
            while i < w.len {
                let run_kept = kept[i];
                let start = i;
                while i < w.len && kept[i] == run_kept {
                    i += 1;
                }
                if run_kept {
                    loss.bytes_kept += (i - start) as u64;
                    continue;
                }
                loss.bytes_lost += (i - start) as u64;
                let at = w.pos + start as u64;
                // What existed before goes back; what the write appended
                // past the old end becomes zeros (or is cut off below).
                let upto = i.min(w.old.len());
                if start < upto {
                    file.write_all_at(&w.old[start..upto], at)?;
                }
                if i > w.old.len().max(start) {
                    let from = w.old.len().max(start);
                    file.write_all_at(&vec![0u8; i - from], w.pos + from as u64)?;
                }
            }
            let end = w.pos + w.len as u64;
            if end > w.file_len_before && kept.iter().all(|k| !k) {
                file.set_len(w.file_len_before.max(w.pos))?;
            }
        }
        Ok(loss)
    }
}

impl Io for SimIo {
    fn write_at(&self, file: &File, buf: &[u8], pos: u64) -> io::Result<()> {
        let Some(gate) = &self.gate else { return self.write(file, buf, pos) };
        let result = match gate.pass(IoCall::Write, buf.len() as u64) {
            Verdict::Proceed => self.write(file, buf, pos),
            Verdict::Fail => Err(crash_error()),
        };
        gate.finished();
        result
    }

    fn sync_data(&self, file: &File) -> io::Result<()> {
        let Some(gate) = &self.gate else { return self.sync(file) };
        let result = match gate.pass(IoCall::Sync, 0) {
            Verdict::Proceed => self.sync(file),
            Verdict::Fail => Err(crash_error()),
        };
        gate.finished();
        result
    }

    fn completions_returned(&self) {
        if let Some(gate) = &self.gate {
            gate.completions_returned();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_gate() -> Arc<Gate> {
        let gate = Gate::new(1, Arc::default(), Rng::new(1));
        gate.close(); // calls fail unparked: drive the Io directly below
        gate
    }

    #[test]
    fn a_crash_undoes_only_what_no_sync_covered() -> io::Result<()> {
        let io = SimIo::new(open_gate(), false);
        // A named file: the disk drops the writes of files no name points at.
        let named = tempfile::NamedTempFile::new()?;
        let file = named.as_file().try_clone()?;
        file.set_len(64)?;
        io.write(&file, b"synced", 0)?;
        io.sync(&file)?;
        io.write(&file, b"unsynced", 16)?;
        assert_eq!(io.unsynced(), 1);
        // Try seeds until one loses the whole unsynced write.
        let mut seed = 0;
        loop {
            let mut probe = Rng::new(seed);
            if probe.below(5) <= 1 {
                break;
            }
            seed += 1;
        }
        let loss = io.crash(&mut Rng::new(seed))?;
        assert_eq!(loss.writes, 1);
        assert_eq!(loss.bytes_lost, 8);
        let mut back = [0u8; 24];
        file.read_exact_at(&mut back, 0)?;
        assert_eq!(&back[..6], b"synced");
        assert!(back[16..].iter().all(|&b| b == 0));
        Ok(())
    }

    #[test]
    fn a_disk_that_forgets_syncs_loses_acknowledged_writes() -> io::Result<()> {
        let io = SimIo::new(open_gate(), true);
        // A named file: the disk drops the writes of files no name points at.
        let named = tempfile::NamedTempFile::new()?;
        let file = named.as_file().try_clone()?;
        file.set_len(16)?;
        io.write(&file, b"acked", 0)?;
        io.sync(&file)?;
        let loss = io.crash(&mut Rng::new(1))?;
        assert_eq!(loss.bytes_lost, 5);
        let mut back = [1u8; 5];
        file.read_exact_at(&mut back, 0)?;
        assert_eq!(back, [0u8; 5]);
        Ok(())
    }
}

//! The body store's durable mark: a position below which every body
//! segment is on disk, fsynced.
//!
//! Bodies are not fsynced as they are written (the log holds every
//! payload), so a restart used to cut the segments back to what the
//! snapshot covers and rewrite every body the log replays. At 10,000,000
//! partitions that was a gigabyte or more of bodies copied again into
//! fresh page-cache pages, a third of the re-apply's thread
//! (docs/benchmarks.md, item 43). Complete segments are fsynced once the
//! writes have left them far behind (`BodyStore::sync_finished`), and this
//! mark records how far that reached, so a restart keeps them and its
//! replay skips the bodies below it: they are the same bytes at the same
//! places, written by the same entries before the crash.
//!
//! The file holds the position (u64, little-endian) and a CRC32C of those
//! eight bytes. A missing, short or damaged file reads as 0, which trusts
//! nothing: the replay then writes every body again, as before.
//!
//! The mark only rises past segments whose fsync returned, and it is
//! lowered (durably) before anything below it is cut or replaced.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::io_context;
use crate::io::Io;

/// The mark's file name, inside the body store's directory.
pub const MARK_FILE: &str = "durable.mark";
const MARK_BYTES: usize = 12;

/// The mark as held in memory, with the file it lives in.
pub(crate) struct DurableMark {
    path: PathBuf,
    pos: u64,
    file: Option<File>,
}

impl DurableMark {
    /// Reads the mark in `dir` (0 where there is none or it is damaged).
    pub fn load(dir: &Path) -> DurableMark {
        let path = dir.join(MARK_FILE);
        let pos = std::fs::read(&path).ok().and_then(|bytes| decode(&bytes)).unwrap_or(0);
        DurableMark { path, pos, file: None }
    }

    pub fn pos(&self) -> u64 {
        self.pos
    }

    /// Records `pos` durably: the file written and fsynced through `io`,
    /// and, the first time, its directory entry. On failure the mark is
    /// left where it was, and a caller lowering it must not cut.
    pub fn set(&mut self, pos: u64, io: &Arc<dyn Io>) -> io::Result<()> {
        if pos == self.pos {
            return Ok(());
        }
        let ctx = |e| io_context(format!("writing the durable mark {}", self.path.display()), e);
        let created = self.file.is_none() && !self.path.exists();
        if self.file.is_none() {
            let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&self.path);
            self.file = Some(file.map_err(ctx)?);
        }
        let file = self.file.as_ref().expect("just opened");
        let written = io.write_at(file, &encode(pos), 0).and_then(|()| io.sync_data(file));
        written.map_err(ctx)?;
        if created {
            let dir = self.path.parent().expect("the mark lies in the store's directory");
            File::open(dir).and_then(|d| d.sync_all()).map_err(ctx)?;
        }
        self.pos = pos;
        Ok(())
    }
}

fn encode(pos: u64) -> [u8; MARK_BYTES] {
    let mut out = [0u8; MARK_BYTES];
    out[..8].copy_from_slice(&pos.to_le_bytes());
    let crc = crc32c::crc32c(&out[..8]);
    out[8..].copy_from_slice(&crc.to_le_bytes());
    out
}

fn decode(bytes: &[u8]) -> Option<u64> {
    let bytes: &[u8; MARK_BYTES] = bytes.get(..MARK_BYTES)?.try_into().ok()?;
    let (pos, crc) = bytes.split_at(8);
    (crc32c::crc32c(pos).to_le_bytes() == crc).then(|| u64::from_le_bytes(pos.try_into().expect("eight bytes")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_reads_back_and_a_damaged_one_reads_as_zero() {
        let dir = tempfile::tempdir().unwrap();
        let io: Arc<dyn Io> = Arc::new(crate::RealIo);
        assert_eq!(DurableMark::load(dir.path()).pos(), 0);
        let mut mark = DurableMark::load(dir.path());
        mark.set(3 << 26, &io).unwrap();
        assert_eq!(DurableMark::load(dir.path()).pos(), 3 << 26);
        mark.set(1 << 26, &io).unwrap();
        assert_eq!(DurableMark::load(dir.path()).pos(), 1 << 26);
        let path = dir.path().join(MARK_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[2] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(DurableMark::load(dir.path()).pos(), 0, "a flipped bit");
        std::fs::write(&path, &bytes[..7]).unwrap();
        assert_eq!(DurableMark::load(dir.path()).pos(), 0, "a short file");
    }
}

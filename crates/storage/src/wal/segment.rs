//! Segment files on disk: naming, preallocation, zeroing and reading one
//! record back.
//!
//! A segment is created under a temporary name, filled with zeros, synced and
//! only then renamed into place. So a `.wal` file is always fully allocated
//! and zeroed; a crash halfway through preparing one leaves a `.wal.tmp` that
//! the next open deletes. Overwriting preallocated zeros lets `fdatasync`
//! skip the metadata update (the file size) that appends would need.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use super::frame::{record_crc, Header, HEADER_LEN};
use crate::error::WalError;
use crate::wal::RecordPos;

const SEGMENT_SUFFIX: &str = ".wal";
const TEMP_SUFFIX: &str = ".wal.tmp";
/// Zeros are written in chunks of this size so preparing a segment needs
/// little memory and can notice a shutdown between chunks.
const ZERO_CHUNK: usize = 256 << 10;
/// Zeros are synced every this many bytes: a segment's 64 MiB of zeros
/// synced at once queued ahead of the WAL's own fdatasyncs, and the
/// appends waiting on those stalled for tens of milliseconds
/// (docs/benchmarks.md, item 22). Synced every 4 MiB, each sync still held
/// them about 15 ms; every 256 KiB, push p99 at batch 100 halved (item 32).
const ZERO_SYNC_BYTES: u64 = 256 << 10;

pub fn file_name(seq: u64) -> String {
    format!("{seq:020}{SEGMENT_SUFFIX}")
}

fn parse_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(SEGMENT_SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Every segment in `dir`, sorted by sequence number.
pub fn list(dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(seq) = entry.file_name().to_str().and_then(parse_file_name) {
            found.push((seq, entry.path()));
        }
    }
    found.sort_unstable_by_key(|(seq, _)| *seq);
    Ok(found)
}

/// Deletes half-prepared segments left by a crash.
pub fn remove_temp_files(dir: &Path) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let is_temp = entry.file_name().to_str().is_some_and(|name| name.ends_with(TEMP_SUFFIX));
        if is_temp {
            fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

/// Makes creations, renames and deletions in `dir` durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

pub fn open_existing(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path)
}

/// Writes zeros over `[from, to)` of `file`, syncing them every
/// [`ZERO_SYNC_BYTES`], returning early (with `false`) if `stop` is raised
/// between chunks.
pub fn write_zeros(file: &File, from: u64, to: u64, stop: &AtomicBool) -> io::Result<bool> {
    let zeros = vec![0u8; ZERO_CHUNK];
    let mut at = from;
    while at < to {
        if stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let n = (to - at).min(ZERO_CHUNK as u64) as usize;
        file.write_all_at(&zeros[..n], at)?;
        at += n as u64;
        if (at - from).is_multiple_of(ZERO_SYNC_BYTES) {
            file.sync_data()?;
        }
    }
    Ok(true)
}

/// Zeros `[from, to)` and syncs, so stale bytes there can never be read
/// back as records. Syncs the whole inode because `to` may grow the file.
pub fn zero_and_sync(file: &File, from: u64, to: u64) -> io::Result<()> {
    write_zeros(file, from, to, &AtomicBool::new(false))?;
    file.sync_all()
}

/// Creates segment `seq` of `len` zeroed bytes. Returns `Ok(None)` if `stop`
/// was raised before it was complete (the temporary file is removed).
pub fn create(dir: &Path, seq: u64, len: u64, stop: &AtomicBool) -> io::Result<Option<File>> {
    let final_path = dir.join(file_name(seq));
    if final_path.exists() {
        // Renaming over it would destroy whatever it holds.
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("wal segment {} already exists", final_path.display()),
        ));
    }
    let temp_path = dir.join(format!("{seq:020}{TEMP_SUFFIX}"));
    let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&temp_path)?;
    let zeroed = match write_zeros(&file, 0, len, stop) {
        Ok(true) => file.sync_all().map(|()| true),
        other => other,
    };
    if !matches!(zeroed, Ok(true)) {
        // Stopped, or failed (on a full disk, say): a half-zeroed file
        // would only hold the space a retry needs.
        drop(file);
        let removed = fs::remove_file(&temp_path);
        return zeroed.and_then(|_| removed.map(|()| None));
    }
    fs::rename(&temp_path, &final_path)?;
    sync_dir(dir)?;
    Ok(Some(file))
}

/// Reads the record starting at `pos` from its segment `file`.
pub fn read_record(file: &File, pos: RecordPos) -> Result<Vec<u8>, WalError> {
    let context = || format!("reading wal record at {pos:?}");
    let file_len = file.metadata().map_err(|e| WalError::io(context(), e))?.len();
    let no_record = |reason: String| WalError::NoRecord { segment: pos.segment, offset: pos.offset, reason };
    if pos.offset.saturating_add(HEADER_LEN) > file_len {
        return Err(no_record(format!("segment is only {file_len} bytes long")));
    }
    let mut header = [0u8; HEADER_LEN as usize];
    file.read_exact_at(&mut header, pos.offset).map_err(|e| WalError::io(context(), e))?;
    let header = Header::decode(header);
    if header.is_end_marker() {
        return Err(no_record("zeroed space, nothing was written here".into()));
    }
    let payload_at = pos.offset + HEADER_LEN;
    if payload_at + u64::from(header.len) > file_len {
        return Err(WalError::Corrupt {
            segment: pos.segment,
            offset: pos.offset,
            reason: format!("record length {} runs past the segment end", header.len),
        });
    }
    let mut payload = vec![0u8; header.len as usize];
    file.read_exact_at(&mut payload, payload_at).map_err(|e| WalError::io(context(), e))?;
    let computed = record_crc(&payload);
    if computed != header.crc {
        return Err(WalError::Corrupt {
            segment: pos.segment,
            offset: pos.offset,
            reason: format!("checksum mismatch (stored {:08x}, computed {computed:08x})", header.crc),
        });
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_reject_strangers() {
        assert_eq!(file_name(7), "00000000000000000007.wal");
        assert_eq!(parse_file_name(&file_name(123_456)), Some(123_456));
        assert_eq!(parse_file_name("7.wal"), None);
        assert_eq!(parse_file_name("00000000000000000007.wal.tmp"), None);
        assert_eq!(parse_file_name("0000000000000000000x.wal"), None);
    }

    #[test]
    fn create_makes_a_zeroed_file_and_refuses_to_overwrite() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let stop = AtomicBool::new(false);
        let file = create(dir.path(), 3, 10_000, &stop)?.expect("not stopped");
        assert_eq!(file.metadata()?.len(), 10_000);
        let bytes = fs::read(dir.path().join(file_name(3)))?;
        assert!(bytes.iter().all(|&b| b == 0));
        assert!(create(dir.path(), 3, 10, &stop).is_err());
        assert_eq!(list(dir.path())?.len(), 1);
        Ok(())
    }

    #[test]
    fn stopped_creation_leaves_nothing_behind() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let stop = AtomicBool::new(true);
        assert!(create(dir.path(), 0, 4096, &stop)?.is_none());
        assert_eq!(fs::read_dir(dir.path())?.count(), 0);
        Ok(())
    }
}

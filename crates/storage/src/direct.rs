//! Writes that pass the page cache by (`O_DIRECT`), for a large file
//! written once and read again only at a restart: a snapshot.
//!
//! A buffered write copies every byte into a page-cache page the kernel
//! has just allocated, and on this project's virtual machines a fresh page
//! costs about ten times a reused one. Late in a long push, writing each
//! 2 GB snapshot that way took a quarter of the broker's CPU (the kernel's
//! `copy_folio_from_iter_atomic` on the snapshot's thread); `dd` of 2 GB
//! took 2.0-5.0 s of system time buffered, 0.18 s direct. A direct write
//! hands the device the caller's own buffer instead, so it must start at,
//! and span, multiples of [`DIRECT_ALIGN`] from memory aligned to it
//! ([`AlignedBuf`]).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// What a direct write's buffer address, file offset and length must be
/// multiples of: the page size, which covers every block size in use.
pub const DIRECT_ALIGN: usize = 4096;

/// A second, write-only handle on `path` whose writes pass the page cache
/// by, or `None` where the file system refuses `O_DIRECT` at open.
pub fn open_direct(path: &Path) -> Option<File> {
    OpenOptions::new().write(true).custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32).open(path).ok()
}

/// Whether a direct write failed for its form (alignment, or a file system
/// that takes `O_DIRECT` at open but not at write), not for the disk: the
/// writer then goes on through the page cache.
pub fn refused_as_direct(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error())
}

/// A fixed-capacity byte buffer whose start is aligned to [`DIRECT_ALIGN`]
/// and whose capacity is a multiple of it, so a full buffer is one direct
/// write.
pub struct AlignedBuf {
    storage: Vec<u8>,
    /// Where the aligned part of `storage` starts.
    start: usize,
    len: usize,
    capacity: usize,
}

impl AlignedBuf {
    /// A buffer of at least `capacity` bytes (at least one [`DIRECT_ALIGN`]),
    /// rounded up to a multiple of [`DIRECT_ALIGN`].
    pub fn with_capacity(capacity: usize) -> AlignedBuf {
        let capacity = capacity.max(1).div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN;
        let storage = vec![0u8; capacity + DIRECT_ALIGN];
        let start = storage.as_ptr().align_offset(DIRECT_ALIGN);
        assert!(start < DIRECT_ALIGN, "a byte buffer can be aligned within one alignment's slack");
        AlignedBuf { storage, start, len: 0, capacity }
    }

    /// Copies as much of `bytes` as fits; returns how much that was.
    pub fn fill_from(&mut self, bytes: &[u8]) -> usize {
        let n = bytes.len().min(self.capacity - self.len);
        let at = self.start + self.len;
        self.storage[at..at + n].copy_from_slice(&bytes[..n]);
        self.len += n;
        n
    }

    pub fn is_full(&self) -> bool {
        self.len == self.capacity
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }

    pub fn clear(&mut self) {
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_is_aligned_and_a_multiple_of_the_alignment() {
        for asked in [0, 1, 4095, 4096, 4097, 3 * 4096 + 5] {
            let mut buf = AlignedBuf::with_capacity(asked);
            assert!((buf.as_slice().as_ptr() as usize).is_multiple_of(DIRECT_ALIGN));
            let bytes = vec![7u8; asked + 9000];
            let taken = buf.fill_from(&bytes);
            assert!(taken >= asked && taken.is_multiple_of(DIRECT_ALIGN) && buf.is_full(), "{asked}: {taken}");
            assert_eq!(buf.fill_from(b"more"), 0);
            buf.clear();
            assert_eq!((buf.fill_from(b"ab"), buf.as_slice()), (2, &b"ab"[..]));
        }
    }

    /// Where the file system takes direct writes, an aligned buffer's
    /// bytes land and read back; an unaligned length is refused as
    /// direct, not as a disk error.
    #[test]
    fn a_direct_handle_writes_aligned_buffers() -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("f");
        File::create(&path)?;
        let Some(direct) = open_direct(&path) else { return Ok(()) };
        let mut buf = AlignedBuf::with_capacity(2 * DIRECT_ALIGN);
        let bytes: Vec<u8> = (0..2 * DIRECT_ALIGN).map(|i| (i % 251) as u8).collect();
        buf.fill_from(&bytes);
        match direct.write_all_at(buf.as_slice(), DIRECT_ALIGN as u64) {
            Err(e) if refused_as_direct(&e) => return Ok(()),
            other => other?,
        }
        assert_eq!(std::fs::read(&path)?[DIRECT_ALIGN..], bytes[..]);
        let unaligned = direct.write_all_at(&buf.as_slice()[..100], 0).unwrap_err();
        assert!(refused_as_direct(&unaligned), "{unaligned}");
        Ok(())
    }
}

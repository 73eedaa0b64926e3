//! Shared setup for the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use regina_storage::{RealIo, RecordPos, Wal, WalOptions};

pub type Recovered = Vec<(RecordPos, Vec<u8>)>;

/// A temporary directory, on tmpfs when there is one: tests that reopen the
/// log hundreds of times would otherwise spend their time in fsync.
pub fn fast_tempdir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::Builder::new().prefix("regina-wal-").tempdir_in(shm) {
            return dir;
        }
    }
    tempfile::tempdir().expect("create a temporary directory")
}

pub fn options(segment_bytes: u64) -> WalOptions {
    WalOptions { segment_bytes, ..WalOptions::default() }
}

pub fn open(dir: &Path, options: WalOptions) -> (Wal, Recovered) {
    Wal::open(dir, options, Arc::new(RealIo)).expect("open the wal")
}

pub fn payloads(recovered: &Recovered) -> Vec<Vec<u8>> {
    recovered.iter().map(|(_, payload)| payload.clone()).collect()
}

pub fn segment_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{seq:020}.wal"))
}

pub fn wal_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list the wal directory")
        .map(|e| e.expect("directory entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".wal"))
        .collect();
    names.sort();
    names
}

/// A small deterministic generator, so tests need no extra dependency and
/// failures reproduce.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// An `Io` that records which files are handed to the page cache advice,
/// and which ranges to an early writeback (offset, length).
#[derive(Default)]
pub struct AdviceLog {
    inner: regina_storage::RealIo,
    pub advised: parking_lot::Mutex<Vec<String>>,
    pub written_back: parking_lot::Mutex<Vec<(u64, u64)>>,
}

impl regina_storage::Io for AdviceLog {
    fn write_at(&self, file: &std::fs::File, buf: &[u8], pos: u64) -> std::io::Result<()> {
        self.inner.write_at(file, buf, pos)
    }
    fn sync_data(&self, file: &std::fs::File) -> std::io::Result<()> {
        self.inner.sync_data(file)
    }
    fn forget_cached(&self, path: &std::path::Path) {
        self.advised.lock().push(path.file_name().unwrap().to_string_lossy().into_owned());
        self.inner.forget_cached(path);
    }
    fn start_writeback(&self, file: &std::fs::File, offset: u64, len: u64) {
        self.written_back.lock().push((offset, len));
        self.inner.start_writeback(file, offset, len);
    }
}

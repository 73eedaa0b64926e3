//! Snapshot files.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::fs;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use regina_storage::{SnapshotStore, SnapshotStream};
use support::fast_tempdir;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// Counts warnings, to check that a skipped snapshot is reported.
struct WarningCounter(Arc<AtomicUsize>);

impl Subscriber for WarningCounter {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        if *event.metadata().level() == Level::WARN {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

type Loaded = std::io::Result<Option<(Vec<u8>, Vec<u8>)>>;

fn load_counting_warnings(store: &SnapshotStore) -> (Loaded, usize) {
    let warnings = Arc::new(AtomicUsize::new(0));
    let counter = WarningCounter(Arc::clone(&warnings));
    let loaded = tracing::subscriber::with_default(counter, || store.load_latest());
    (loaded, warnings.load(Ordering::SeqCst))
}

fn snap_files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn flip_byte(path: &std::path::Path, at: usize) {
    let mut bytes = fs::read(path).expect("read snapshot");
    bytes[at] ^= 0x20;
    fs::write(path, bytes).expect("write snapshot");
}

#[test]
fn save_then_load_keeps_only_the_newest() {
    let dir = fast_tempdir();
    let store = SnapshotStore::open(dir.path()).expect("open");
    assert_eq!(store.load_latest().expect("load"), None);
    store.save("0001", b"meta one", b"data one").expect("save");
    store.save("0002", b"meta two", &[7; 10_000]).expect("save");
    assert_eq!(snap_files(dir.path()), vec!["snapshot-0002.snap".to_string()]);
    let reopened = SnapshotStore::open(dir.path()).expect("reopen");
    let loaded = reopened.load_latest().expect("load");
    assert_eq!(loaded, Some((b"meta two".to_vec(), vec![7; 10_000])));
}

#[test]
fn a_corrupt_only_snapshot_loads_as_none_with_a_warning() {
    let dir = fast_tempdir();
    let store = SnapshotStore::open(dir.path()).expect("open");
    store.save("0001", b"meta", b"data").expect("save");
    flip_byte(&dir.path().join("snapshot-0001.snap"), 14);
    let (loaded, warnings) = load_counting_warnings(&store);
    assert_eq!(loaded.expect("load"), None);
    assert_eq!(warnings, 1);
}

#[test]
fn a_corrupt_newest_snapshot_falls_back_to_an_older_one() {
    let dir = fast_tempdir();
    let store = SnapshotStore::open(dir.path()).expect("open");
    store.save("0001", b"old meta", b"old data").expect("save");
    let old = fs::read(dir.path().join("snapshot-0001.snap")).expect("read");
    store.save("0002", b"new meta", b"new data").expect("save");
    // As if a crash hit between the rename and the deletion of the old one.
    fs::write(dir.path().join("snapshot-0001.snap"), old).expect("restore");
    let (loaded, warnings) = load_counting_warnings(&store);
    assert_eq!(loaded.expect("load"), Some((b"new meta".to_vec(), b"new data".to_vec())));
    assert_eq!(warnings, 0);

    flip_byte(&dir.path().join("snapshot-0002.snap"), 20);
    let (loaded, warnings) = load_counting_warnings(&store);
    assert_eq!(loaded.expect("load"), Some((b"old meta".to_vec(), b"old data".to_vec())));
    assert_eq!(warnings, 1);
}

#[test]
fn truncated_snapshot_is_skipped() {
    let dir = fast_tempdir();
    let store = SnapshotStore::open(dir.path()).expect("open");
    store.save("0001", b"meta", &[1; 100]).expect("save");
    let path = dir.path().join("snapshot-0001.snap");
    let bytes = fs::read(&path).expect("read");
    fs::write(&path, &bytes[..bytes.len() / 2]).expect("truncate");
    let (loaded, warnings) = load_counting_warnings(&store);
    assert_eq!(loaded.expect("load"), None);
    assert_eq!(warnings, 1);
}

#[test]
fn leftover_temporary_files_are_deleted_on_open() {
    let dir = fast_tempdir();
    fs::write(dir.path().join("snapshot-0003.tmp"), b"half written").expect("write");
    fs::write(dir.path().join("unrelated.txt"), b"keep me").expect("write");
    let store = SnapshotStore::open(dir.path()).expect("open");
    assert_eq!(snap_files(dir.path()), vec!["unrelated.txt".to_string()]);
    assert_eq!(store.load_latest().expect("load"), None);
}

#[test]
fn ids_that_are_not_plain_names_are_refused() {
    let dir = fast_tempdir();
    let store = SnapshotStore::open(dir.path()).expect("open");
    assert!(store.save("../escape", b"", b"").is_err());
    assert!(store.save("", b"", b"").is_err());
    assert!(snap_files(dir.path()).is_empty());
}

/// The file written in parts (head, data, checksum) is exactly the one
/// encoded whole, which backups carry and `decode` reads.
#[test]
fn a_saved_file_is_the_encoded_form() {
    let dir = fast_tempdir();
    let store = SnapshotStore::open(dir.path()).expect("open");
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 31 % 251) as u8).collect();
    store.save("0007", b"the meta", &data).expect("save");
    let on_disk = fs::read(dir.path().join("snapshot-0007.snap")).expect("read");
    assert_eq!(on_disk, regina_storage::snapshot::encode(b"the meta", &data).expect("encode"));
    assert_eq!(regina_storage::snapshot::decode(&on_disk).expect("decode"), (b"the meta".to_vec(), data.clone()));
    assert_eq!(store.load_latest().expect("load"), Some((b"the meta".to_vec(), data)));
}

/// Data of `len` bytes that differ from piece to piece, so a piece read
/// twice or skipped shows.
fn patterned(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8 ^ (i / 65_536) as u8).collect()
}

fn only_snapshot(store: &SnapshotStore) -> std::path::PathBuf {
    let paths = store.newest_first().unwrap();
    assert_eq!(paths.len(), 1, "{paths:?}");
    paths[0].clone()
}

#[test]
fn a_stream_reads_the_data_across_pieces_in_reads_of_any_size() {
    use std::io::Read;
    let dir = fast_tempdir();
    let store = SnapshotStore::open(dir.path()).unwrap();
    // Over two pieces and a part, so reads cross piece boundaries.
    let data = patterned(2 * regina_storage::snapshot_stream::STREAM_PIECE_BYTES + 12_345);
    store.save("00000000000000000007-0000000001", b"the meta", &data).unwrap();
    let mut stream = SnapshotStream::open(&only_snapshot(&store)).unwrap();
    assert_eq!(stream.meta(), b"the meta");
    assert_eq!(stream.data_len(), data.len() as u64);
    let mut read = Vec::with_capacity(data.len());
    let mut sizes = [1usize, 7, 8, 4096, 1 << 20, 3].iter().cycle();
    while read.len() < data.len() {
        let mut buf = vec![0u8; (*sizes.next().unwrap()).min(data.len() - read.len())];
        stream.read_exact(&mut buf).unwrap();
        read.extend_from_slice(&buf);
    }
    assert!(read == data, "the streamed data differs from the saved data");
    assert_eq!(stream.read(&mut [0u8; 16]).unwrap(), 0, "the data ends where its head says");
    assert_eq!(stream.finish(), Ok(0));
}

#[test]
fn a_stream_of_a_damaged_file_reports_it_at_the_finish() {
    use std::io::Read;
    let dir = fast_tempdir();
    let store = SnapshotStore::open(dir.path()).unwrap();
    let data = patterned(regina_storage::snapshot_stream::STREAM_PIECE_BYTES + 100);
    store.save("00000000000000000007-0000000001", b"m", &data).unwrap();
    let path = only_snapshot(&store);
    // A byte of the data, read as it lies: only the checksum can tell.
    flip_byte(&path, 40 + data.len() / 2);
    let mut stream = SnapshotStream::open(&path).unwrap();
    let mut first = vec![0u8; 1000];
    stream.read_exact(&mut first).unwrap();
    let finished = stream.finish();
    assert!(finished.as_ref().is_err_and(|e| e.contains("checksum mismatch")), "{finished:?}");
    // Read to the end, the damage shows as an error of the read itself.
    let mut stream = SnapshotStream::open(&path).unwrap();
    let read = stream.read_to_end(&mut Vec::new());
    assert!(read.is_err_and(|e| e.to_string().contains("checksum mismatch")));
}

#[test]
fn a_stream_counts_the_data_its_reader_left() {
    use std::io::Read;
    let dir = fast_tempdir();
    let store = SnapshotStore::open(dir.path()).unwrap();
    store.save("00000000000000000007-0000000001", b"m", &patterned(10_000)).unwrap();
    let mut stream = SnapshotStream::open(&only_snapshot(&store)).unwrap();
    stream.read_exact(&mut [0u8; 4_000]).unwrap();
    assert_eq!(stream.finish(), Ok(6_000));
}

#[test]
fn a_stream_refuses_a_file_whose_length_or_head_is_wrong() {
    let dir = fast_tempdir();
    let store = SnapshotStore::open(dir.path()).unwrap();
    store.save("00000000000000000007-0000000001", b"meta", &patterned(5_000)).unwrap();
    let path = only_snapshot(&store);
    let whole = fs::read(&path).unwrap();
    fs::write(&path, &whole[..whole.len() - 1]).unwrap();
    let cut = SnapshotStream::open(&path).err().unwrap();
    assert!(cut.contains("not the"), "{cut}");
    fs::write(&path, [whole.as_slice(), b"x"].concat()).unwrap();
    assert!(SnapshotStream::open(&path).is_err(), "a byte past the checksum");
    fs::write(&path, &whole[..10]).unwrap();
    assert!(SnapshotStream::open(&path).is_err(), "a head cut short");
    let mut bad_magic = whole.clone();
    bad_magic[0] ^= 1;
    fs::write(&path, bad_magic).unwrap();
    let magic = SnapshotStream::open(&path).err().unwrap();
    assert!(magic.contains("bad magic"), "{magic}");
    // A meta length past the end of the file is refused before any of it
    // is allocated.
    let mut long_meta = whole;
    long_meta[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    fs::write(&path, long_meta).unwrap();
    let meta = SnapshotStream::open(&path).err().unwrap();
    assert!(meta.contains("truncated"), "{meta}");
}

//! Holed snapshot files: data with holes that chunk packs fill, read back
//! as the flat data by every reader, each record written once across
//! snapshots, and damage anywhere (the file or a pack) refused.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::cell::RefCell;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use regina_storage::snapshot_holes::{HoledData, FRAME_BYTES_MAX};
use regina_storage::{SnapshotStore, SnapshotStream};
use support::fast_tempdir;

const RECORD: usize = 36_864;

/// One record of the encoding: its bytes and the token its last store gave.
struct Record {
    bytes: Vec<u8>,
    token: RefCell<u64>,
}

fn record(n: usize) -> Record {
    Record { bytes: (0..RECORD).map(|i| ((i * 31 + n * 7) % 253) as u8).collect(), token: RefCell::new(0) }
}

/// An encoding of runs of plain bytes between holes, as a state's is: the
/// flat bytes it stands for, and the encoder `save_holed` calls.
struct Encoding {
    runs: Vec<Vec<u8>>,
    /// After each run but the last, a hole: a record and the part of it.
    holes: Vec<(usize, std::ops::Range<usize>)>,
    records: Vec<Record>,
}

impl Encoding {
    fn new(records: usize, run: usize) -> Encoding {
        let records: Vec<Record> = (0..records).map(record).collect();
        let holes: Vec<_> =
            (0..records.len()).map(|i| (i, if i % 3 == 0 { 36 * (i % 100)..RECORD } else { 0..RECORD })).collect();
        let runs = (0..=holes.len()).map(|i| (0..(run * (i % 4))).map(|b| (b % 7 + i) as u8).collect()).collect();
        Encoding { runs, holes, records }
    }

    fn flat(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, run) in self.runs.iter().enumerate() {
            out.extend_from_slice(run);
            if let Some((r, range)) = self.holes.get(i) {
                out.extend_from_slice(&self.records[*r].bytes[range.clone()]);
            }
        }
        out
    }

    fn encode(&self, out: &mut HoledData<'_>) -> std::io::Result<()> {
        for (i, run) in self.runs.iter().enumerate() {
            // In small writes, as an encoder's fields are.
            for piece in run.chunks(13) {
                out.write_all(piece)?;
            }
            if let Some((r, range)) = self.holes.get(i) {
                let rec = &self.records[*r];
                let token = *rec.token.borrow();
                if let Some(t) = out.hole(token, RECORD, &|| rec.bytes.clone(), range.clone())? {
                    *rec.token.borrow_mut() = t;
                }
            }
        }
        Ok(())
    }
}

fn only_snapshot(store: &SnapshotStore) -> PathBuf {
    let paths = store.newest_first().unwrap();
    assert_eq!(paths.len(), 1, "{paths:?}");
    paths[0].clone()
}

fn packs(dir: &Path) -> Vec<(String, u64)> {
    let packs = regina_storage::chunk_packs::pack_files(&dir.join(regina_storage::snapshot::PACKS_DIR)).unwrap();
    packs.into_iter().map(|(path, len)| (path.file_name().unwrap().to_string_lossy().into_owned(), len)).collect()
}

fn streamed(path: &Path) -> Result<Vec<u8>, String> {
    let mut stream = SnapshotStream::open(path)?;
    let mut data = Vec::new();
    let read = stream.read_to_end(&mut data).map_err(|e| e.to_string());
    let finished = stream.finish();
    read?;
    finished?;
    Ok(data)
}

#[test]
fn holed_data_reads_back_flat_and_records_are_written_once() {
    let dir = fast_tempdir();
    let store = SnapshotStore::open(dir.path()).unwrap();
    // A run over a frame's size, and data over a stream piece, so both cut.
    let mut enc = Encoding::new(300, 1000);
    enc.runs[1] = (0..3 * FRAME_BYTES_MAX + 17).map(|i| (i % 241) as u8).collect();
    let saved = store.save_holed("00000000000000000001-0000000001", b"meta", &mut |out| enc.encode(out)).unwrap();
    let flat = enc.flat();
    assert!(flat.len() > regina_storage::snapshot_stream::STREAM_PIECE_BYTES);
    assert_eq!((saved.holes, saved.flat_bytes), (300, flat.len() as u64));
    assert_eq!(saved.pack_bytes, 300 * (RECORD as u64 + 8), "each record stored once");
    let path = only_snapshot(&store);
    assert_eq!(&fs::read(&path).unwrap()[4..8], &2u32.to_le_bytes(), "a holed file");
    let file_len = fs::metadata(&path).unwrap().len();
    assert!(file_len < flat.len() as u64 - 300 * 30_000, "{file_len} bytes for {} flat", flat.len());

    assert!(streamed(&path).unwrap() == flat, "the stream fills the holes");
    let (meta, data) = store.load_latest().unwrap().unwrap();
    assert_eq!(meta, b"meta");
    assert!(data == flat, "a whole read fills the holes");
    let first_packs = packs(dir.path());
    assert_eq!(first_packs.len(), 1);

    // The next snapshot names every record again; two are new, and the
    // runs between them changed.
    enc.records.push(record(1000));
    enc.records.push(record(1001));
    enc.holes.push((300, 0..RECORD));
    enc.holes.push((301, 36..RECORD));
    enc.runs.push(b"after".to_vec());
    enc.runs.push(b"the end".to_vec());
    enc.runs[0] = b"a new start".to_vec();
    let saved = store.save_holed("00000000000000000002-0000000001", b"meta2", &mut |out| enc.encode(out)).unwrap();
    assert_eq!(saved.pack_bytes, 2 * (RECORD as u64 + 8), "only the new records are written");
    assert_eq!(saved.holes, 302);
    let path = only_snapshot(&store);
    assert!(streamed(&path).unwrap() == enc.flat());
    assert_eq!(store.load_latest().unwrap().unwrap().1, enc.flat());
    assert_eq!(packs(dir.path())[0].1, first_packs[0].1 + 2 * (RECORD as u64 + 8), "appended to the one pack");

    // Reopened, the tokens of the run before are not trusted: everything
    // is written once more, into a new pack, and the old one goes.
    drop(store);
    let store = SnapshotStore::open(dir.path()).unwrap();
    assert!(streamed(&only_snapshot(&store)).unwrap() == enc.flat(), "a reopened store reads the packs");
    let saved = store.save_holed("00000000000000000003-0000000001", b"meta3", &mut |out| enc.encode(out)).unwrap();
    assert_eq!(saved.pack_bytes, 302 * (RECORD as u64 + 8));
    assert_eq!(packs(dir.path()).len(), 1);
    assert!(packs(dir.path())[0].0.ends_with("0000000002.chunks"), "{:?}", packs(dir.path()));
    assert_eq!(store.load_latest().unwrap().unwrap().1, enc.flat());

    // A plain save replaces it, and its packs go.
    store.save("00000000000000000004-0000000001", b"m", b"plain").unwrap();
    assert_eq!(packs(dir.path()), Vec::new());
    assert_eq!(store.load_latest().unwrap(), Some((b"m".to_vec(), b"plain".to_vec())));
}

#[test]
fn an_encoding_without_holes_is_a_plain_file() {
    let dir = fast_tempdir();
    let store = SnapshotStore::open(dir.path()).unwrap();
    let data = b"no holes at all".to_vec();
    let saved = store.save_holed("00000000000000000001-0000000001", b"meta", &mut |out| out.write_all(&data)).unwrap();
    assert_eq!((saved.holes, saved.pack_bytes, saved.data_bytes), (0, 0, data.len() as u64));
    let path = only_snapshot(&store);
    assert_eq!(fs::read(&path).unwrap(), regina_storage::snapshot::encode(b"meta", &data).unwrap());
    assert!(!dir.path().join("chunks").exists(), "no pack, no directory");
}

#[test]
fn damage_in_a_pack_or_the_frames_refuses_the_snapshot() {
    let dir = fast_tempdir();
    let store = SnapshotStore::open(dir.path()).unwrap();
    let enc = Encoding::new(20, 1000);
    store.save_holed("00000000000000000001-0000000001", b"meta", &mut |out| enc.encode(out)).unwrap();
    let path = only_snapshot(&store);
    let (pack, _) = packs(dir.path()).remove(0);
    let pack = dir.path().join("chunks").join(pack);
    let good = fs::read(&pack).unwrap();

    let mut bad = good.clone();
    bad[RECORD * 5] ^= 1;
    fs::write(&pack, &bad).unwrap();
    assert!(streamed(&path).unwrap_err().contains("checksum"), "a damaged record");
    assert_eq!(store.load_latest().unwrap(), None, "skipped as damaged");

    fs::write(&pack, &good[..good.len() / 2]).unwrap();
    assert!(streamed(&path).is_err(), "a pack cut short");
    fs::remove_file(&pack).unwrap();
    assert!(streamed(&path).unwrap_err().contains("cannot open"), "a pack gone");

    fs::write(&pack, &good).unwrap();
    assert!(streamed(&path).unwrap() == enc.flat());
    let file = fs::read(&path).unwrap();
    for at in [40, file.len() / 2, file.len() - 5] {
        let mut damaged = file.clone();
        damaged[at] ^= 0x10;
        fs::write(&path, &damaged).unwrap();
        assert!(streamed(&path).is_err(), "a flip at {at} of {}", file.len());
    }
}

/// A save whose packs were synced but whose snapshot file was not leaves
/// the snapshot before it whole, packs and all; what it appended is
/// durable, so the next save names it without writing it again.
#[test]
fn a_save_that_fails_after_its_packs_leaves_the_last_snapshot_whole() {
    use std::sync::Arc;
    let dir = fast_tempdir();
    let io = Arc::new(regina_storage::FaultyIo::new());
    let store = SnapshotStore::open_with_io(dir.path(), io.clone()).unwrap();
    let mut enc = Encoding::new(20, 1000);
    store.save_holed("00000000000000000001-0000000001", b"one", &mut |out| enc.encode(out)).unwrap();
    let first = enc.flat();

    enc.records.push(record(500));
    enc.holes.push((20, 0..RECORD));
    enc.runs.push(b"later".to_vec());
    // The save's first sync is its pack's, the second its file's.
    io.fail_syncs_from(io.syncs() + 1);
    let failed = store.save_holed("00000000000000000002-0000000001", b"two", &mut |out| enc.encode(out));
    assert!(failed.is_err(), "{failed:?}");
    io.heal();
    assert_eq!(store.load_latest().unwrap(), Some((b"one".to_vec(), first.clone())));
    let reopened = SnapshotStore::open(dir.path()).unwrap();
    assert_eq!(reopened.load_latest().unwrap(), Some((b"one".to_vec(), first)));
    drop(reopened);

    let saved = store.save_holed("00000000000000000003-0000000001", b"three", &mut |out| enc.encode(out)).unwrap();
    assert_eq!(saved.pack_bytes, 0, "the failed save's appends were synced, and are named again");
    assert_eq!(store.load_latest().unwrap(), Some((b"three".to_vec(), enc.flat())));
}

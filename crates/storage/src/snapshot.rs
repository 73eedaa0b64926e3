//! Snapshot files.
//!
//! A snapshot is written under a temporary name, fsynced, renamed into
//! place and the directory fsynced, so a `.snap` file is either complete or
//! absent; a crash mid-write leaves only a `.tmp` that the next open deletes.
//! Older snapshots are deleted once the new one is durable.
//!
//! Format, little-endian:
//! `"RSNP" | u32 version | u32 meta_len | meta | u64 data_len | data | u32 crc32c`
//! where the checksum covers every byte before it. Version 1 holds the
//! data as it is; version 2 holds it with holes that records in the
//! directory's chunk packs fill ([`crate::snapshot_holes`],
//! [`crate::chunk_packs`]), and every reader here fills them, so both read
//! back as the same flat data.
//!
//! Snapshots are ordered by id as a string, so ids must sort in the order
//! snapshots are taken (zero-padded numbers do).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::chunk_packs::ChunkPacks;
use crate::direct::AlignedBuf;
use crate::error::io_context;
use crate::io::{Io, RealIo};
use crate::snapshot_holes::HoledData;
use crate::snapshot_stream::SnapshotStream;

const MAGIC: &[u8; 4] = b"RSNP";
/// A file whose data is as it is.
const VERSION: u32 = 1;
/// A file whose data has holes filled from chunk packs.
pub(crate) const HOLED_VERSION: u32 = 2;
/// Where the chunk packs are, inside the snapshot directory.
pub const PACKS_DIR: &str = "chunks";
const PREFIX: &str = "snapshot-";
const SNAP_SUFFIX: &str = ".snap";
const TEMP_SUFFIX: &str = ".tmp";

/// A directory holding the latest snapshot.
pub struct SnapshotStore {
    dir: PathBuf,
    /// Snapshot writes and their fsyncs (renames and deletes use `std`).
    io: Arc<dyn Io>,
    /// Where holed snapshots keep the records they leave out.
    packs: ChunkPacks,
}

/// What a save wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Saved {
    /// The snapshot file's data bytes.
    pub data_bytes: u64,
    /// Bytes appended to chunk packs.
    pub pack_bytes: u64,
    /// The data's bytes with every hole filled.
    pub flat_bytes: u64,
    /// Holes the data has.
    pub holes: u64,
}

impl Saved {
    /// Everything this save wrote.
    pub fn written(&self) -> u64 {
        self.data_bytes + self.pack_bytes
    }
}

impl SnapshotStore {
    /// Opens (or creates) `dir` and deletes leftover temporary files.
    pub fn open(dir: impl AsRef<Path>) -> io::Result<SnapshotStore> {
        Self::open_with_io(dir, Arc::new(RealIo))
    }

    /// [`SnapshotStore::open`], writing and syncing through `io`.
    pub fn open_with_io(dir: impl AsRef<Path>, io: Arc<dyn Io>) -> io::Result<SnapshotStore> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(|e| io_context(format!("creating {}", dir.display()), e))?;
        let packs = ChunkPacks::open(dir.join(PACKS_DIR), io.clone())?;
        let store = SnapshotStore { dir, io, packs };
        for name in store.names_with(TEMP_SUFFIX)? {
            let path = store.dir.join(&name);
            fs::remove_file(&path).map_err(|e| io_context(format!("deleting {}", path.display()), e))?;
        }
        Ok(store)
    }

    /// Durably stores a snapshot under `id` and deletes all others.
    pub fn save(&self, id: &str, meta: &[u8], data: &[u8]) -> io::Result<()> {
        self.save_streamed(id, meta, data.len() as u64, &mut |out| out.write_all(data))
    }

    /// [`SnapshotStore::save`] of data that `write_data` writes into the
    /// file as it encodes it, `data_len` bytes (checked: a file whose data
    /// is not as long as its head says is refused before it is renamed into
    /// place). A large state is never held encoded in memory: the encoding
    /// passes through a fixed buffer ([`STREAM_BUFFER_BYTES`]) to the file.
    pub fn save_streamed(
        &self,
        id: &str,
        meta: &[u8],
        data_len: u64,
        write_data: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
    ) -> io::Result<()> {
        // Held for the save: no pack may be named by a snapshot saved
        // meanwhile. Nothing is appended, so its sync only says so.
        let mut session = self.packs.session();
        session.sync()?;
        self.save_file(id, VERSION, meta, data_len, write_data)?;
        // The packs named by the snapshot this replaced go with it.
        session.release()
    }

    /// Durably stores a snapshot whose data `encode` writes, with holes
    /// (`HoledData::hole`) filled from chunk packs: a record stored by an
    /// earlier snapshot, named by a token still good, is named again and
    /// not written. `encode` runs twice, and must write the same both
    /// times: once counting (the head needs the data's length), once
    /// writing. Without holes the file is a plain one (version 1).
    pub fn save_holed(
        &self,
        id: &str,
        meta: &[u8],
        encode: &mut dyn FnMut(&mut HoledData<'_>) -> io::Result<()>,
    ) -> io::Result<Saved> {
        let mut counting = HoledData::counting();
        encode(&mut counting)?;
        let (data_len, flat_len, holes) = counting.finish()?;
        let mut session = self.packs.session();
        if holes == 0 {
            session.sync()?;
            self.save_file(id, VERSION, meta, flat_len, &mut |out| {
                let mut plain = HoledData::plain(out);
                encode(&mut plain)?;
                plain.finish().map(drop)
            })?;
            session.release()?;
            return Ok(Saved { data_bytes: flat_len, pack_bytes: 0, flat_bytes: flat_len, holes: 0 });
        }
        self.save_file(id, HOLED_VERSION, meta, data_len, &mut |out| {
            let mut data = HoledData::frames(out, &mut session, flat_len)?;
            encode(&mut data)?;
            let (_, flat, _) = data.finish()?;
            if flat != flat_len {
                let e = format!("the snapshot's data came to {flat} flat bytes, not the {flat_len} counted");
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
            // Before the snapshot naming them is in place.
            session.sync()
        })?;
        let pack_bytes = session.appended();
        session.release()?;
        Ok(Saved { data_bytes: data_len, pack_bytes, flat_bytes: flat_len, holes })
    }

    /// Writes a snapshot file of `version` under a temporary name, renames
    /// it into place and deletes every other.
    fn save_file(
        &self,
        id: &str,
        version: u32,
        meta: &[u8],
        data_len: u64,
        write_data: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
    ) -> io::Result<()> {
        check_id(id)?;
        let temp = self.dir.join(format!("{PREFIX}{id}{TEMP_SUFFIX}"));
        let name = format!("{PREFIX}{id}{SNAP_SUFFIX}");
        let path = self.dir.join(&name);
        let ctx = |what: &str, p: &Path| format!("{what} {}", p.display());
        if let Err(e) = write_file(self.io.as_ref(), &temp, version, meta, data_len, write_data) {
            // A partial file would only hold the space a retry needs.
            let _ = fs::remove_file(&temp);
            return Err(io_context(ctx("writing", &temp), e));
        }
        fs::rename(&temp, &path).map_err(|e| io_context(ctx("renaming", &temp), e))?;
        self.sync_dir()?;
        for old in self.names_with(SNAP_SUFFIX)? {
            if old != name {
                let old = self.dir.join(old);
                fs::remove_file(&old).map_err(|e| io_context(ctx("deleting", &old), e))?;
            }
        }
        self.sync_dir()
    }

    /// The newest snapshot that passes its checks, as `(meta, data)`.
    /// Damaged snapshots are skipped with a warning and left on disk for
    /// inspection ([`SnapshotStore::newest_whole`]).
    pub fn load_latest(&self) -> io::Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.newest_whole(|path| {
            let bytes = fs::read(path).map_err(|e| io_context(format!("reading {}", path.display()), e))?;
            if bytes.get(4..8) == Some(&HOLED_VERSION.to_le_bytes()[..]) {
                // Its holes filled as it is read: the flat data.
                return Ok(read_filled(path));
            }
            Ok(decode_owned(bytes))
        })
    }

    /// What `read` makes of the newest snapshot file it finds whole. Each
    /// file, newest first, is handed to `read`: `Ok(Ok(_))` is the answer,
    /// `Ok(Err(reason))` says the file is damaged (its checksum, head or
    /// length), and it is then skipped with a warning and left on disk for
    /// inspection; `Err` stops the walk. The one policy for every reader of
    /// snapshots: whole in memory ([`SnapshotStore::load_latest`]) or
    /// streamed ([`SnapshotStream`]).
    ///
    /// [`SnapshotStream`]: crate::snapshot_stream::SnapshotStream
    pub fn newest_whole<T>(
        &self,
        mut read: impl FnMut(&Path) -> io::Result<Result<T, String>>,
    ) -> io::Result<Option<T>> {
        for path in self.newest_first()? {
            match read(&path)? {
                Ok(found) => return Ok(Some(found)),
                Err(reason) => tracing::warn!(file = %path.display(), %reason, "skipping a damaged snapshot"),
            }
        }
        Ok(None)
    }

    /// The snapshot files, newest first: what [`SnapshotStore::newest_whole`]
    /// tries in turn.
    pub fn newest_first(&self) -> io::Result<Vec<PathBuf>> {
        let mut names = self.names_with(SNAP_SUFFIX)?;
        names.sort_unstable_by(|a, b| b.cmp(a));
        Ok(names.into_iter().map(|name| self.dir.join(name)).collect())
    }

    /// File names in the directory that are snapshots with `suffix`.
    fn names_with(&self, suffix: &str) -> io::Result<Vec<String>> {
        let ctx = |e| io_context(format!("listing {}", self.dir.display()), e);
        let mut names = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(ctx)? {
            if let Ok(name) = entry.map_err(ctx)?.file_name().into_string() {
                if name.starts_with(PREFIX) && name.ends_with(suffix) {
                    names.push(name);
                }
            }
        }
        Ok(names)
    }

    fn sync_dir(&self) -> io::Result<()> {
        File::open(&self.dir)
            .and_then(|dir| dir.sync_all())
            .map_err(|e| io_context(format!("syncing {}", self.dir.display()), e))
    }
}

/// A holed file's meta and flat data, its holes filled as it is read, or
/// why it is damaged.
fn read_filled(path: &Path) -> Result<(Vec<u8>, Vec<u8>), String> {
    let mut stream = SnapshotStream::open(path)?;
    let mut data = Vec::with_capacity(usize::try_from(stream.data_len()).unwrap_or(0));
    io::Read::read_to_end(&mut stream, &mut data).map_err(|e| e.to_string())?;
    let meta = stream.meta().to_vec();
    stream.finish()?;
    Ok((meta, data))
}

/// Where the chunk packs of the snapshot file at `path` are.
pub(crate) fn packs_dir_of(path: &Path) -> PathBuf {
    path.parent().unwrap_or(Path::new(".")).join(PACKS_DIR)
}

/// Ids become file names, so they must not be able to name another file.
fn check_id(id: &str) -> io::Result<()> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if id.is_empty() || id.starts_with('.') || !id.chars().all(allowed) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("snapshot id {id:?} must be non-empty ASCII letters, digits, '-', '_' or '.'"),
        ));
    }
    Ok(())
}

/// How much of a snapshot's data is gathered before it is written: one
/// write, and while it is in the disk's queue every fdatasync of the WAL
/// waits behind it. With 4 MiB direct writes, a 10 M-partition node's
/// 1.6 GB snapshot held the WAL to about 70 fdatasyncs a second for the
/// six seconds it took (pushes fell from 30-50 k to 1-2 k msg/s); in
/// 256 KiB writes a 4 KiB append's fdatasync took about 2 ms, not 15,
/// while `dd` wrote 241 MB/s against 287 (docs/benchmarks.md, item 32).
pub const STREAM_BUFFER_BYTES: usize = 256 * 1024;

/// Writes a snapshot file as its three parts (head, data, checksum). The
/// data goes straight from its encoder to the file through one fixed
/// buffer: a 500 MB snapshot encoded into memory first faulted in a fresh
/// 500 MB (zeroed by the kernel) and wrote every byte twice. Each full
/// buffer is written past the page cache where the file system allows it
/// ([`crate::direct`]); the last, partial one through it.
fn write_file(
    io: &dyn Io,
    path: &Path,
    version: u32,
    meta: &[u8],
    data_len: u64,
    write_data: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let head = head(version, meta, data_len)?;
    // Readable too: a simulated disk reads what a write replaces.
    let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path)?;
    let file_len = (head.len() as u64).saturating_add(data_len).saturating_add(4);
    let mut out = DataWriter {
        io,
        file: &file,
        direct: io.open_direct(path),
        at: 0,
        buf: AlignedBuf::with_capacity(STREAM_BUFFER_BYTES.min(usize::try_from(file_len).unwrap_or(usize::MAX))),
        crc: 0,
        data_written: 0,
    };
    out.gather(&head)?;
    write_data(&mut out)?;
    if out.data_written != data_len {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the snapshot's data came to {} bytes, not the {data_len} its head promised", out.data_written),
        ));
    }
    let rest = out.buf.as_slice();
    let crc = crc32c::crc32c_append(out.crc, rest);
    io.write_parts_at(&file, &[rest, &crc.to_le_bytes()], out.at)?;
    io.sync_data(&file)
}

/// A snapshot file on its way to disk: gathered into `buf`, written at
/// `at` whenever the buffer is full, and summed into the running checksum.
struct DataWriter<'a> {
    io: &'a dyn Io,
    file: &'a File,
    /// The same file opened for direct writes, while they are taken.
    direct: Option<File>,
    /// Where `buf`'s first byte lands in the file: a multiple of the
    /// buffer's capacity, so every full buffer is an aligned write.
    at: u64,
    buf: AlignedBuf,
    /// The checksum of every byte written so far, head included.
    crc: u32,
    /// Data bytes the encoder has handed over (the head not counted).
    data_written: u64,
}

impl DataWriter<'_> {
    fn gather(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            let taken = self.buf.fill_from(bytes);
            bytes = &bytes[taken..];
            if self.buf.is_full() {
                self.write_full_buffer()?;
            }
        }
        Ok(())
    }

    /// Writes the full buffer at `at`: directly where that is taken,
    /// otherwise through the page cache, starting its writeback at once so
    /// the fsync at the end finds little dirty and the WAL's fdatasyncs
    /// meanwhile never wait behind the whole file's writeback.
    fn write_full_buffer(&mut self) -> io::Result<()> {
        let piece = self.buf.as_slice();
        let direct = match &self.direct {
            Some(direct) => match self.io.write_at(direct, piece, self.at) {
                Ok(()) => true,
                Err(e) if crate::direct::refused_as_direct(&e) => {
                    tracing::info!(error = %e, "direct writes refused; snapshots go through the page cache");
                    self.direct = None;
                    false
                }
                Err(e) => return Err(e),
            },
            None => false,
        };
        if !direct {
            self.io.write_at(self.file, piece, self.at)?;
            self.io.start_writeback(self.file, self.at, piece.len() as u64);
        }
        self.crc = crc32c::crc32c_append(self.crc, piece);
        self.at += piece.len() as u64;
        self.buf.clear();
        Ok(())
    }
}

impl Write for DataWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.gather(bytes)?;
        self.data_written += bytes.len() as u64;
        Ok(bytes.len())
    }

    /// Nothing to do: a partial buffer cannot be written directly, and
    /// [`write_file`] writes the last one with the checksum.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Everything of a snapshot file before its data.
fn head(version: u32, meta: &[u8], data_len: u64) -> io::Result<Vec<u8>> {
    let meta_len = u32::try_from(meta.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "snapshot meta exceeds 4 GiB"))?;
    let mut out = Vec::with_capacity(4 + 4 + 4 + meta.len() + 8);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&meta_len.to_le_bytes());
    out.extend_from_slice(meta);
    out.extend_from_slice(&data_len.to_le_bytes());
    Ok(out)
}

/// One snapshot file's bytes: what [`SnapshotStore::save`] writes and
/// [`decode`] reads (backups carry snapshots in this form).
pub fn encode(meta: &[u8], data: &[u8]) -> io::Result<Vec<u8>> {
    let mut out = head(VERSION, meta, data.len() as u64)?;
    let crc = checksum(&out, data);
    out.reserve_exact(data.len() + 4);
    out.extend_from_slice(data);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// The checksum a snapshot file ends with: over every byte before it.
fn checksum(head: &[u8], data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(head), data)
}

/// Parses a snapshot file, or says why it is not one.
pub fn decode(bytes: &[u8]) -> Result<(Vec<u8>, Vec<u8>), String> {
    let (meta, data) = parts(bytes)?;
    Ok((bytes[meta].to_vec(), bytes[data].to_vec()))
}

/// [`decode`] of a file read whole, keeping its buffer for the data (moved
/// to the front) instead of copying the data out: a restart would
/// otherwise hold the snapshot twice.
fn decode_owned(mut bytes: Vec<u8>) -> Result<(Vec<u8>, Vec<u8>), String> {
    let (meta, data) = parts(&bytes)?;
    let meta = bytes[meta].to_vec();
    bytes.truncate(data.end);
    bytes.drain(..data.start);
    Ok((meta, bytes))
}

/// Where a snapshot file's meta and data lie in it, checked.
fn parts(bytes: &[u8]) -> Result<(Range<usize>, Range<usize>), String> {
    let body_len = bytes.len().checked_sub(4).ok_or_else(|| format!("only {} bytes long", bytes.len()))?;
    let (body, stored) = bytes.split_at(body_len);
    let stored = u32::from_le_bytes(stored.try_into().map_err(|_| "short checksum")?);
    check_sum(stored, crc32c::crc32c(body))?;
    let mut cursor = Cursor { bytes: body, at: 0 };
    let (meta, data_len, version) = head_fields(&mut cursor)?;
    if version != VERSION {
        return Err(format!("version {version}: its data has holes that only its directory's packs fill"));
    }
    let data_len = usize::try_from(data_len).map_err(|_| "data length overflows".to_string())?;
    let data = cursor.span(data_len)?;
    if !cursor.bytes.is_empty() {
        return Err(format!("{} unexpected trailing bytes", cursor.bytes.len()));
    }
    Ok((meta, data))
}

/// Whether a file's stored checksum is the one computed over its bytes.
pub(crate) fn check_sum(stored: u32, computed: u32) -> Result<(), String> {
    match stored == computed {
        true => Ok(()),
        false => Err(format!("checksum mismatch (stored {stored:08x}, computed {computed:08x})")),
    }
}

/// The bytes of a snapshot file's head before its meta: magic, version
/// and the meta's length.
pub(crate) const FIXED_HEAD_BYTES: usize = 4 + 4 + 4;

/// Where the meta lies in `head` (a file's bytes up to its data), how
/// long the data is and the file's version, checked.
pub(crate) fn parse_head(head: &[u8]) -> Result<(Range<usize>, u64, u32), String> {
    let mut cursor = Cursor { bytes: head, at: 0 };
    let fields = head_fields(&mut cursor)?;
    match cursor.bytes.len() {
        0 => Ok(fields),
        n => Err(format!("{n} unexpected bytes after the head")),
    }
}

/// Reads a head's fields from `cursor`: the meta's place and the data's
/// length.
fn head_fields(cursor: &mut Cursor) -> Result<(Range<usize>, u64, u32), String> {
    if cursor.take(4)? != MAGIC {
        return Err("bad magic".into());
    }
    let version = u32::from_le_bytes(cursor.array()?);
    if version != VERSION && version != HOLED_VERSION {
        return Err(format!("unsupported version {version}"));
    }
    let meta_len = u32::from_le_bytes(cursor.array()?) as usize;
    let meta = cursor.span(meta_len)?;
    Ok((meta, u64::from_le_bytes(cursor.array()?), version))
}

struct Cursor<'a> {
    bytes: &'a [u8],
    /// How far into the file `bytes` starts.
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.bytes.len() {
            return Err(format!("truncated: wanted {n} bytes, {} left", self.bytes.len()));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        self.at += n;
        Ok(head)
    }

    /// Where the next `n` bytes lie in the file, taken.
    fn span(&mut self, n: usize) -> Result<Range<usize>, String> {
        let from = self.at;
        self.take(n)?;
        Ok(from..self.at)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let head = self.take(N)?;
        head.try_into().map_err(|_| "short field".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip() -> io::Result<()> {
        let bytes = encode(b"meta", b"data data")?;
        assert_eq!(&bytes[..4], MAGIC);
        assert_eq!(decode(&bytes), Ok((b"meta".to_vec(), b"data data".to_vec())));
        Ok(())
    }

    #[test]
    fn any_flipped_byte_is_detected() -> io::Result<()> {
        let bytes = encode(b"m", b"some data")?;
        for i in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 0x01;
            assert!(decode(&damaged).is_err(), "flip at {i} went unnoticed");
        }
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode(&[]).is_err());
        Ok(())
    }

    /// Data written in pieces of every size, across the buffer's edge,
    /// lands as the same file a save from memory writes.
    #[test]
    fn a_streamed_save_writes_the_file_a_save_from_memory_does() -> io::Result<()> {
        let data: Vec<u8> = (0..STREAM_BUFFER_BYTES * 2 + 12_345).map(|i| (i * 7 % 251) as u8).collect();
        let (streamed, whole) = (tempfile::tempdir()?, tempfile::tempdir()?);
        let store = SnapshotStore::open(streamed.path())?;
        store.save_streamed("0001", b"meta", data.len() as u64, &mut |out| {
            let mut rest = &data[..];
            let mut piece = 1;
            while !rest.is_empty() {
                let (now, later) = rest.split_at(piece.min(rest.len()));
                out.write_all(now)?;
                rest = later;
                piece = piece * 3 % (STREAM_BUFFER_BYTES + 17) + 1;
            }
            Ok(())
        })?;
        SnapshotStore::open(whole.path())?.save("0001", b"meta", &data)?;
        let name = "snapshot-0001.snap";
        let bytes = fs::read(streamed.path().join(name))?;
        assert_eq!(bytes, fs::read(whole.path().join(name))?);
        assert_eq!(bytes, encode(b"meta", &data)?);
        assert_eq!(store.load_latest()?, Some((b"meta".to_vec(), data)));
        Ok(())
    }

    /// Records which handle each write used: the one `open_direct` gave
    /// (an ordinary handle here, so the test runs on any file system) or
    /// the snapshot's own; refuses writes on the former if told to.
    struct WatchedIo {
        direct_fd: parking_lot::Mutex<Option<i32>>,
        refuse_direct: bool,
        writes: parking_lot::Mutex<Vec<(bool, u64, usize)>>,
    }

    impl Io for WatchedIo {
        fn write_at(&self, file: &File, buf: &[u8], pos: u64) -> io::Result<()> {
            use std::os::fd::AsRawFd;
            let direct = *self.direct_fd.lock() == Some(file.as_raw_fd());
            if direct && self.refuse_direct {
                return Err(io::Error::from_raw_os_error(rustix::io::Errno::INVAL.raw_os_error()));
            }
            self.writes.lock().push((direct, pos, buf.len()));
            RealIo.write_at(file, buf, pos)
        }

        fn sync_data(&self, file: &File) -> io::Result<()> {
            RealIo.sync_data(file)
        }

        fn open_direct(&self, path: &Path) -> Option<File> {
            use std::os::fd::AsRawFd;
            let file = OpenOptions::new().write(true).open(path).ok()?;
            *self.direct_fd.lock() = Some(file.as_raw_fd());
            Some(file)
        }
    }

    /// Every full buffer goes through the direct handle, at offsets and
    /// lengths aligned for it, and only the last, partial one (with the
    /// checksum) through the page cache; where direct writes are refused,
    /// all go through the page cache. The file is the same either way.
    #[test]
    fn full_buffers_are_written_directly_and_the_tail_through_the_cache() -> io::Result<()> {
        let data: Vec<u8> = (0..STREAM_BUFFER_BYTES * 2 + 12_345).map(|i| (i * 13 % 251) as u8).collect();
        let total = encode(b"meta", &data)?.len();
        let step = STREAM_BUFFER_BYTES as u64;
        for refuse_direct in [false, true] {
            let dir = tempfile::tempdir()?;
            let io = Arc::new(WatchedIo { direct_fd: Default::default(), refuse_direct, writes: Default::default() });
            let store = SnapshotStore::open_with_io(dir.path(), io.clone())?;
            store.save("0001", b"meta", &data)?;
            let tail = total - 2 * STREAM_BUFFER_BYTES;
            let expected = [
                (!refuse_direct, 0, STREAM_BUFFER_BYTES),
                (!refuse_direct, step, STREAM_BUFFER_BYTES),
                (false, 2 * step, tail),
            ];
            assert_eq!(*io.writes.lock(), expected, "refused: {refuse_direct}");
            assert_eq!(fs::read(dir.path().join("snapshot-0001.snap"))?, encode(b"meta", &data)?);
        }
        Ok(())
    }

    /// An encoder that writes more or less than it promised leaves no
    /// snapshot behind, and the one before it stands.
    #[test]
    fn data_of_another_length_than_promised_is_refused() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let store = SnapshotStore::open(dir.path())?;
        store.save("0001", b"m", b"kept")?;
        for (promised, written) in [(5u64, &b"four"[..]), (3, b"four")] {
            let err = store.save_streamed("0002", b"m", promised, &mut |out| out.write_all(written)).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
            assert!(err.to_string().contains("promised"), "{err}");
        }
        assert_eq!(store.load_latest()?, Some((b"m".to_vec(), b"kept".to_vec())));
        assert_eq!(store.names_with(TEMP_SUFFIX)?, Vec::<String>::new());
        Ok(())
    }

    #[test]
    fn ids_cannot_escape_the_directory() {
        assert!(check_id("00000000000000000042-7").is_ok());
        assert!(check_id("").is_err());
        assert!(check_id("../x").is_err());
        assert!(check_id("a/b").is_err());
        assert!(check_id("..").is_err());
    }
}

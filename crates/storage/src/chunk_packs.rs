//! Chunk packs: where holed snapshots keep the records they leave out,
//! each written once and named again by every later snapshot.
//!
//! A holed snapshot ([`crate::snapshot_holes`]) leaves out records that do
//! not change once written (a state's sealed message chunks) and names
//! where each lies instead: a pack file and an offset in it. A record a
//! snapshot already stored comes with the token the pack gave it, and the
//! next snapshot names the same place without writing it again, as long as
//! the token is still good ([`PackSession::place`]): its pack synced past
//! it and not retired.
//!
//! Files: `pack-{id:010}.chunks` in the snapshot directory's `chunks/`,
//! appended to, never rewritten. A record is `[u32 len][u32 crc32c(len ‖
//! payload)][payload]`, the WAL's framing. Ids only rise, also across
//! restarts (the next one follows the highest on disk), and a pack opened
//! by an earlier run is never appended to: two copies of one pack agree on
//! every byte either of them synced.
//!
//! Durability: a session's appends are synced (and a new pack's directory
//! entry with them) before the snapshot naming them is renamed into place;
//! a session dropped unfinished (its snapshot failed) leaves its pack's
//! unsynced part untrusted and the next session starts a new pack. Once a
//! snapshot is in place, every pack it does not name is deleted, and a
//! pack it names for less than half of its bytes is retired: the next
//! snapshot writes those records again, into the current pack, and the
//! retired one is deleted after it. So the packs hold at most about twice
//! what the newest snapshot names, plus the current pack.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use crate::error::io_context;
use crate::io::Io;

/// A pack is closed to appends once it holds this much: the grain at which
/// space comes back.
pub const PACK_BYTES: u64 = 64 * 1024 * 1024;
/// A record's framing: its length and checksum.
pub const RECORD_HEAD_BYTES: usize = 8;
/// Appends gather this much before they are written.
const WRITE_BUFFER_BYTES: usize = 1024 * 1024;
const PREFIX: &str = "pack-";
const SUFFIX: &str = ".chunks";

/// Where a record lies: its pack and the offset of its framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackLoc {
    pub pack: u32,
    pub offset: u32,
}

impl PackLoc {
    /// The token a record carries between snapshots (never 0: pack ids
    /// start at 1).
    pub fn token(self) -> u64 {
        (u64::from(self.pack) << 32) | u64::from(self.offset)
    }

    fn of_token(token: u64) -> Option<PackLoc> {
        let pack = (token >> 32) as u32;
        (pack != 0).then_some(PackLoc { pack, offset: token as u32 })
    }
}

/// The packs of one snapshot directory.
pub struct ChunkPacks {
    dir: PathBuf,
    io: Arc<dyn Io>,
    /// [`PACK_BYTES`], but in tests.
    pack_bytes: u64,
    packs: Mutex<Packs>,
}

struct Packs {
    next_id: u32,
    /// The pack appends go to, if one is open.
    current: Option<Current>,
    /// Packs whose records a token may name, with how many of their bytes
    /// are synced. A pack of an earlier run, or a retired one, is not here.
    trusted: BTreeMap<u32, u64>,
}

struct Current {
    id: u32,
    file: File,
    /// Bytes appended, written or still in the session's buffer.
    len: u64,
}

impl ChunkPacks {
    /// Opens `dir` (created with the first pack). Packs already there are
    /// read, never appended to; the first snapshot that names none of them
    /// deletes them.
    pub fn open(dir: PathBuf, io: Arc<dyn Io>) -> io::Result<ChunkPacks> {
        let highest = pack_ids(&dir)?.last().copied().unwrap_or(0);
        let next_id = highest.checked_add(1).ok_or_else(|| io::Error::other("chunk pack ids are exhausted"))?;
        let packs = Packs { next_id, current: None, trusted: BTreeMap::new() };
        Ok(ChunkPacks { dir, io, pack_bytes: PACK_BYTES, packs: Mutex::new(packs) })
    }

    /// [`ChunkPacks::open`] with packs closed at `pack_bytes` (tests).
    pub fn open_sized(dir: PathBuf, io: Arc<dyn Io>, pack_bytes: u64) -> io::Result<ChunkPacks> {
        Ok(ChunkPacks { pack_bytes, ..ChunkPacks::open(dir, io)? })
    }

    /// The directory the packs are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Starts placing the records of one snapshot. The session holds the
    /// packs until it is dropped: one snapshot's save at a time.
    pub fn session(&self) -> PackSession<'_> {
        let packs = self.packs.lock();
        // Appends go on where the open pack ends.
        let buf_at = packs.current.as_ref().map_or(0, |c| c.len);
        PackSession {
            store: self,
            packs,
            buf: Vec::new(),
            buf_at,
            touched: BTreeMap::new(),
            created: false,
            named: BTreeMap::new(),
            appended: 0,
            finished: false,
        }
    }
}

/// The placing of one snapshot's records.
pub struct PackSession<'a> {
    store: &'a ChunkPacks,
    packs: MutexGuard<'a, Packs>,
    /// Appends to the current pack not yet written, from `buf_at`.
    buf: Vec<u8>,
    buf_at: u64,
    /// Packs appended to in this session, with how long each now is.
    touched: BTreeMap<u32, (File, u64)>,
    /// Whether a pack was created (its directory entry needs a sync).
    created: bool,
    /// How many bytes of each pack this snapshot names.
    named: BTreeMap<u32, u64>,
    appended: u64,
    finished: bool,
}

impl PackSession<'_> {
    /// Where the record `token` names lies, if the token is still good;
    /// otherwise `record()` appended, and where. `len` is the record's
    /// payload length, which a good token's record has too.
    pub fn place(&mut self, token: u64, len: usize, record: &dyn Fn() -> Vec<u8>) -> io::Result<PackLoc> {
        let framed = (RECORD_HEAD_BYTES + len) as u64;
        let kept = PackLoc::of_token(token).filter(|loc| {
            self.packs.trusted.get(&loc.pack).is_some_and(|synced| u64::from(loc.offset) + framed <= *synced)
        });
        let loc = match kept {
            Some(loc) => loc,
            None => {
                let payload = record();
                if payload.len() != len {
                    return Err(io::Error::other(format!("a record of {} bytes, not {len}", payload.len())));
                }
                self.append(&payload)?
            }
        };
        *self.named.entry(loc.pack).or_default() += framed;
        Ok(loc)
    }

    fn append(&mut self, payload: &[u8]) -> io::Result<PackLoc> {
        let framed = (RECORD_HEAD_BYTES + payload.len()) as u64;
        if self.packs.current.as_ref().is_none_or(|c| c.len + framed > self.store.pack_bytes && c.len > 0) {
            self.roll()?;
        }
        let current = self.packs.current.as_mut().expect("a pack is open");
        let offset = u32::try_from(current.len).map_err(|_| io::Error::other("a chunk pack outgrew 4 GiB"))?;
        let loc = PackLoc { pack: current.id, offset };
        let len = u32::try_from(payload.len()).map_err(|_| io::Error::other("a chunk record outgrew 4 GiB"))?;
        let crc = crc32c::crc32c_append(crc32c::crc32c(&len.to_le_bytes()), payload);
        self.buf.extend_from_slice(&len.to_le_bytes());
        self.buf.extend_from_slice(&crc.to_le_bytes());
        self.buf.extend_from_slice(payload);
        current.len += framed;
        self.appended += framed;
        if self.buf.len() >= WRITE_BUFFER_BYTES {
            self.write_buffer()?;
        }
        Ok(loc)
    }

    /// Writes what the buffer gathered to the current pack, its writeback
    /// started at once so the sync at the end finds little dirty.
    fn write_buffer(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let current = self.packs.current.as_ref().expect("a buffer belongs to the open pack");
        self.store.io.write_at(&current.file, &self.buf, self.buf_at)?;
        self.store.io.start_writeback(&current.file, self.buf_at, self.buf.len() as u64);
        self.buf_at += self.buf.len() as u64;
        match self.touched.get_mut(&current.id) {
            Some(touched) => touched.1 = self.buf_at,
            None => {
                self.touched.insert(current.id, (current.file.try_clone()?, self.buf_at));
            }
        }
        self.buf.clear();
        Ok(())
    }

    /// Closes the current pack to appends (if one is open) and opens the
    /// next.
    fn roll(&mut self) -> io::Result<()> {
        self.write_buffer()?;
        let id = self.packs.next_id;
        self.packs.next_id = id.checked_add(1).ok_or_else(|| io::Error::other("chunk pack ids are exhausted"))?;
        let dir = &self.store.dir;
        if !dir.exists() {
            fs::create_dir_all(dir).map_err(|e| io_context(format!("creating {}", dir.display()), e))?;
            // The directory's own entry, synced now; the pack's with the
            // session's appends.
            sync_dir(dir.parent().unwrap_or(Path::new(".")))?;
        }
        let path = pack_path(dir, id);
        // Readable too: a simulated disk reads what a write replaces.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| io_context(format!("creating {}", path.display()), e))?;
        self.packs.current = Some(Current { id, file, len: 0 });
        self.buf_at = 0;
        self.created = true;
        Ok(())
    }

    /// Makes every append of this session durable, and trusts it: called
    /// before the snapshot naming the records is renamed into place.
    pub fn sync(&mut self) -> io::Result<()> {
        self.write_buffer()?;
        for (file, _) in self.touched.values() {
            self.store.io.sync_data(file)?;
        }
        if self.created {
            sync_dir(&self.store.dir)?;
            self.created = false;
        }
        for (id, (_, len)) in std::mem::take(&mut self.touched) {
            self.packs.trusted.insert(id, len);
            if self.packs.current.as_ref().is_none_or(|c| c.id != id) {
                // Closed to appends: its pages may leave the cache.
                self.store.io.forget_cached(&pack_path(&self.store.dir, id));
            }
        }
        self.finished = true;
        Ok(())
    }

    /// Bytes this session appended.
    pub fn appended(&self) -> u64 {
        self.appended
    }

    /// Once the snapshot naming this session's records is in place: deletes
    /// every pack it does not name, and retires every other closed pack it
    /// names for less than half of its bytes.
    pub fn release(mut self) -> io::Result<()> {
        assert!(self.finished, "a session's appends are synced before the snapshot naming them is saved");
        release(self.store, &mut self.packs, &self.named)
    }
}

impl Drop for PackSession<'_> {
    fn drop(&mut self) {
        if !self.finished {
            // The snapshot failed: what this session appended is not
            // trusted (nor anything past the last sync), and no later
            // session appends behind it.
            self.packs.current = None;
            self.buf.clear();
        }
    }
}

impl ChunkPacks {
    /// Once a snapshot that names no pack is in place: deletes them all.
    pub fn release_all(&self) -> io::Result<()> {
        release(self, &mut self.packs.lock(), &BTreeMap::new())
    }
}

fn release(store: &ChunkPacks, packs: &mut Packs, named: &BTreeMap<u32, u64>) -> io::Result<()> {
    let mut deleted = false;
    for id in pack_ids(&store.dir)? {
        if named.contains_key(&id) {
            continue;
        }
        if packs.current.as_ref().is_some_and(|c| c.id == id) {
            packs.current = None;
        }
        packs.trusted.remove(&id);
        store.io.delete_file(&pack_path(&store.dir, id))?;
        deleted = true;
    }
    let current = packs.current.as_ref().map(|c| c.id);
    let sparse: BTreeSet<u32> = packs
        .trusted
        .iter()
        .filter(|(id, synced)| Some(**id) != current && named.get(id).copied().unwrap_or(0) * 2 < **synced)
        .map(|(id, _)| *id)
        .collect();
    for id in sparse {
        packs.trusted.remove(&id);
    }
    if deleted {
        sync_dir(&store.dir)?;
    }
    Ok(())
}

/// Reads records out of packs by place, each checked against its checksum.
pub struct PackReader {
    dir: PathBuf,
    files: BTreeMap<u32, File>,
}

impl PackReader {
    pub fn new(dir: PathBuf) -> PackReader {
        PackReader { dir, files: BTreeMap::new() }
    }

    /// The payload of the record at `loc`, into `out` (replaced), or why
    /// it cannot be read.
    pub fn read(&mut self, loc: PackLoc, out: &mut Vec<u8>) -> Result<(), String> {
        let name = || format!("chunk pack {} at {}", loc.pack, loc.offset);
        let file = match self.files.entry(loc.pack) {
            std::collections::btree_map::Entry::Occupied(f) => f.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => {
                let path = pack_path(&self.dir, loc.pack);
                v.insert(File::open(&path).map_err(|e| format!("{}: cannot open: {e}", path.display()))?)
            }
        };
        let mut head = [0u8; RECORD_HEAD_BYTES];
        file.read_exact_at(&mut head, u64::from(loc.offset)).map_err(|e| format!("{}: {e}", name()))?;
        let len = u32::from_le_bytes(head[..4].try_into().expect("four bytes"));
        let stored = u32::from_le_bytes(head[4..].try_into().expect("four bytes"));
        if len as usize > PACK_BYTES as usize {
            return Err(format!("{}: a record of {len} bytes", name()));
        }
        out.clear();
        out.resize(len as usize, 0);
        file.read_exact_at(out, u64::from(loc.offset) + RECORD_HEAD_BYTES as u64)
            .map_err(|e| format!("{}: {e}", name()))?;
        let crc = crc32c::crc32c_append(crc32c::crc32c(&head[..4]), out);
        if crc != stored {
            return Err(format!("{}: checksum mismatch (stored {stored:08x}, computed {crc:08x})", name()));
        }
        Ok(())
    }
}

/// The packs in `dir` (a snapshot directory's [`crate::snapshot::PACKS_DIR`]),
/// in id order, with their sizes: what an operator or a test looks at.
pub fn pack_files(dir: &Path) -> io::Result<Vec<(PathBuf, u64)>> {
    pack_ids(dir)?
        .into_iter()
        .map(|id| {
            let path = pack_path(dir, id);
            let len = fs::metadata(&path).map_err(|e| io_context(format!("reading {}", path.display()), e))?.len();
            Ok((path, len))
        })
        .collect()
}

fn pack_path(dir: &Path, id: u32) -> PathBuf {
    dir.join(format!("{PREFIX}{id:010}{SUFFIX}"))
}

/// The ids of the packs in `dir`, ascending.
fn pack_ids(dir: &Path) -> io::Result<Vec<u32>> {
    let ctx = |e| io_context(format!("listing {}", dir.display()), e);
    let mut ids = Vec::new();
    let entries = match fs::read_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(ids),
        entries => entries.map_err(ctx)?,
    };
    for entry in entries {
        let name = entry.map_err(ctx)?.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(id) = name.strip_prefix(PREFIX).and_then(|n| n.strip_suffix(SUFFIX)) {
            if let Ok(id) = id.parse::<u32>() {
                ids.push(id);
            }
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io_context(format!("syncing {}", dir.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{FaultyIo, RealIo};

    fn record(n: u8) -> Vec<u8> {
        vec![n; 1000]
    }

    fn files(dir: &Path) -> Vec<u32> {
        pack_ids(dir).unwrap()
    }

    fn read(dir: &Path, loc: PackLoc) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        PackReader::new(dir.to_path_buf()).read(loc, &mut out).map(|()| out)
    }

    /// A record placed and synced is named again by its token without a
    /// byte written, and reads back as it was.
    #[test]
    fn a_record_is_written_once_and_named_again() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let packs = ChunkPacks::open(dir.path().to_path_buf(), Arc::new(RealIo))?;
        let mut first = packs.session();
        let a = first.place(0, 1000, &|| record(1))?;
        let b = first.place(0, 1000, &|| record(2))?;
        assert_eq!((a.pack, a.offset, b.offset), (1, 0, 1008));
        first.sync()?;
        assert_eq!(first.appended(), 2016);
        first.release()?;

        let mut second = packs.session();
        assert_eq!(second.place(b.token(), 1000, &|| panic!("written again"))?, b);
        assert_eq!(second.appended(), 0);
        let c = second.place(0, 1000, &|| record(3))?;
        assert_eq!((c.pack, c.offset, second.appended()), (1, 2016, 1008), "appended behind the first session's");
        second.sync()?;
        second.release()?;
        assert_eq!(read(dir.path(), b).unwrap(), record(2));
        assert_eq!(read(dir.path(), c).unwrap(), record(3));
        assert_eq!(files(dir.path()), vec![1], "the pack the snapshot names stays");
        assert_eq!(fs::metadata(pack_path(dir.path(), 1))?.len(), 3024);
        Ok(())
    }

    /// A session whose snapshot failed (dropped before its sync, or its
    /// sync failed) leaves its appends untrusted: the next writes them again,
    /// into a new pack.
    #[test]
    fn what_no_sync_covered_is_written_again() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let io = Arc::new(FaultyIo::new());
        let packs = ChunkPacks::open(dir.path().to_path_buf(), io.clone())?;
        let mut dropped = packs.session();
        let lost = dropped.place(0, 1000, &|| record(1))?;
        drop(dropped);
        let mut failed = packs.session();
        let lost_too = failed.place(lost.token(), 1000, &|| record(1))?;
        assert_eq!(lost_too.pack, 2, "an unsynced pack takes no more appends");
        io.fail_next_sync();
        assert!(failed.sync().is_err());
        drop(failed);
        let mut next = packs.session();
        let kept = next.place(lost_too.token(), 1000, &|| record(1))?;
        assert_eq!((kept.pack, next.appended()), (3, 1008));
        next.sync()?;
        next.release()?;
        assert_eq!(files(dir.path()), vec![3], "packs no snapshot names are deleted");
        assert_eq!(read(dir.path(), kept).unwrap(), record(1));
        Ok(())
    }

    /// Packs close at their size; once a snapshot is in place, packs it
    /// does not name are deleted, and a closed pack it names for less than
    /// half its bytes is retired: the next snapshot writes those records
    /// again, and then it is deleted.
    #[test]
    fn sparse_packs_are_retired_and_unnamed_ones_deleted() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let packs = ChunkPacks::open_sized(dir.path().to_path_buf(), Arc::new(RealIo), 3 * 1008)?;
        let mut first = packs.session();
        let locs: Vec<PackLoc> = (0..7u8).map(|n| first.place(0, 1000, &|| record(n))).collect::<io::Result<_>>()?;
        assert_eq!(locs.iter().map(|l| l.pack).collect::<Vec<_>>(), [1, 1, 1, 2, 2, 2, 3]);
        first.sync()?;
        first.release()?;

        // Names pack 1 whole, one record of pack 2, none of pack 3 (the
        // open one, which goes with the others no snapshot names).
        let mut second = packs.session();
        for loc in [locs[0], locs[1], locs[2], locs[3]] {
            assert_eq!(second.place(loc.token(), 1000, &|| panic!("written again"))?, loc);
        }
        second.sync()?;
        second.release()?;
        assert_eq!(files(dir.path()), vec![1, 2]);

        let mut third = packs.session();
        assert_eq!(third.place(locs[0].token(), 1000, &|| panic!("written again"))?, locs[0]);
        let moved = third.place(locs[3].token(), 1000, &|| record(3))?;
        assert_eq!(moved.pack, 4, "a record of a retired pack is written again");
        third.sync()?;
        third.release()?;
        assert_eq!(files(dir.path()), vec![1, 4]);
        assert_eq!(read(dir.path(), moved).unwrap(), record(3));
        Ok(())
    }

    /// Reopened, the packs there are read but never appended to, and the
    /// next ids follow the highest.
    #[test]
    fn a_reopened_directory_appends_to_a_new_pack() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let loc = {
            let packs = ChunkPacks::open(dir.path().to_path_buf(), Arc::new(RealIo))?;
            let mut s = packs.session();
            let loc = s.place(0, 1000, &|| record(9))?;
            s.sync()?;
            s.release()?;
            loc
        };
        let packs = ChunkPacks::open(dir.path().to_path_buf(), Arc::new(RealIo))?;
        let mut s = packs.session();
        let again = s.place(loc.token(), 1000, &|| record(9))?;
        assert_eq!(again.pack, 2, "tokens of an earlier run are not trusted");
        assert_eq!(read(dir.path(), loc).unwrap(), record(9));
        Ok(())
    }

    /// A damaged record, or one cut short, is refused with a reason.
    #[test]
    fn a_damaged_record_is_refused() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let packs = ChunkPacks::open(dir.path().to_path_buf(), Arc::new(RealIo))?;
        let mut s = packs.session();
        let loc = s.place(0, 1000, &|| record(5))?;
        s.sync()?;
        s.release()?;
        let path = pack_path(dir.path(), 1);
        let mut bytes = fs::read(&path)?;
        bytes[500] ^= 1;
        fs::write(&path, &bytes)?;
        assert!(read(dir.path(), loc).unwrap_err().contains("checksum"));
        fs::write(&path, &bytes[..600])?;
        assert!(read(dir.path(), loc).is_err());
        Ok(())
    }
}

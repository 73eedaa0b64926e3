//! A snapshot file's data, read as it is decoded.
//!
//! A restart decodes the newest snapshot. Read whole first, a 1.15 GB
//! snapshot took 1.3-2.3 s to read (into as much fresh memory) before its
//! decoding could start. Streamed, a thread of its own reads the file and
//! sums its checksum a few pieces ahead of the decoder, so the reading
//! overlaps the decoding and the data is never held whole in memory: a
//! 10 M-partition restart peaks 0.6 GB lower (docs/benchmarks.md, item
//! 28). A decoder reading from a stream has no end to check a length
//! against before it allocates for it, so the stream says how many bytes
//! it has left ([`SnapshotStream::bytes_left`], known without counting
//! each read) and `State::decode_from` checks each length against that.
//!
//! The checksum covers the whole file, so it is known only once the last
//! piece is read: whatever was decoded from a stream counts only after
//! [`SnapshotStream::finish`] says the file was whole.
//!
//! A holed file (version 2, [`crate::snapshot_holes`]) is filled on the
//! same thread: its frames are read and each hole's record read from its
//! pack, so the pieces handed over are the flat data either way, and
//! [`SnapshotStream::data_len`] is the flat length.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};

use crate::chunk_packs::PackReader;
use crate::snapshot::{check_sum, packs_dir_of, parse_head, FIXED_HEAD_BYTES, HOLED_VERSION};
use crate::snapshot_holes::{Filler, Frame};

/// The size of one piece read ahead.
pub const STREAM_PIECE_BYTES: usize = 8 * 1024 * 1024;
/// How many pieces the reading thread may hold ready before the decoder
/// takes them.
pub const STREAM_PIECES_AHEAD: usize = 4;

/// What the reading thread hands over.
enum Piece {
    Data(Vec<u8>),
    /// The file was read to its end: whole, or why not.
    End(Result<(), String>),
}

/// One snapshot file: its meta, and its data as a [`Read`].
pub struct SnapshotStream {
    meta: Vec<u8>,
    data_len: u64,
    /// The piece being read and how far.
    current: Vec<u8>,
    at: usize,
    /// Data bytes in the pieces before `current`.
    passed: u64,
    pieces: Receiver<Piece>,
    /// Pieces read, handed back to be filled again.
    spent: Sender<Vec<u8>>,
    /// Set once the reading thread has said how the file ended.
    ended: Option<Result<(), String>>,
}

impl SnapshotStream {
    /// Opens the snapshot file at `path` and starts reading its data on a
    /// thread of its own. A file whose head does not read, or whose length
    /// is not the one its head implies, is refused here, with the reason.
    pub fn open(path: &Path) -> Result<SnapshotStream, String> {
        let mut file = File::open(path).map_err(|e| format!("cannot open: {e}"))?;
        let file_len = file.metadata().map_err(|e| format!("cannot read its length: {e}"))?.len();
        let mut head = vec![0u8; FIXED_HEAD_BYTES];
        file.read_exact(&mut head).map_err(|e| format!("its head does not read: {e}"))?;
        let meta_len = u32::from_le_bytes(head[8..12].try_into().expect("four bytes")) as u64;
        if file_len < FIXED_HEAD_BYTES as u64 + meta_len + 8 + 4 {
            return Err(format!("truncated: {file_len} bytes, with {meta_len} bytes of meta"));
        }
        let mut rest = vec![0u8; meta_len as usize + 8];
        file.read_exact(&mut rest).map_err(|e| format!("its head does not read: {e}"))?;
        head.extend_from_slice(&rest);
        let (meta, file_data_len, version) = parse_head(&head)?;
        let expected = (head.len() as u64).checked_add(file_data_len).and_then(|n| n.checked_add(4));
        if expected != Some(file_len) {
            return Err(format!("{file_len} bytes long, not the {expected:?} its head implies"));
        }
        let meta = head[meta].to_vec();
        let mut crc = crc32c::crc32c(&head);
        let (ready, pieces) = sync_channel(STREAM_PIECES_AHEAD);
        let (spent, to_refill) = channel();
        let (data_len, read): (u64, Box<dyn FnOnce() + Send>) = if version == HOLED_VERSION {
            let mut flat_len = [0u8; 8];
            if file_data_len < 8 {
                return Err(format!("holed data of {file_data_len} bytes"));
            }
            file.read_exact(&mut flat_len).map_err(|e| format!("its data does not read: {e}"))?;
            crc = crc32c::crc32c_append(crc, &flat_len);
            let flat_len = u64::from_le_bytes(flat_len);
            let filler = Filler::new(PackReader::new(packs_dir_of(path)), flat_len);
            let framed =
                Framed { file: std::io::BufReader::with_capacity(1 << 20, file), crc, left: file_data_len - 8 };
            (flat_len, Box::new(move || read_filled(framed, filler, ready, to_refill)))
        } else {
            (file_data_len, Box::new(move || read_ahead(file, crc, file_data_len, ready, to_refill)))
        };
        std::thread::Builder::new()
            .name("regina-snapshot-read".into())
            .spawn(read)
            .map_err(|e| format!("cannot start its reading thread: {e}"))?;
        Ok(SnapshotStream { meta, data_len, current: Vec::new(), at: 0, passed: 0, pieces, spent, ended: None })
    }

    /// The snapshot's meta (read with its head).
    pub fn meta(&self) -> &[u8] {
        &self.meta
    }

    /// How many bytes of data the file holds.
    pub fn data_len(&self) -> u64 {
        self.data_len
    }

    /// How many bytes of data are left to read: what a decoder checks a
    /// length it is about to allocate for against, known here without
    /// counting every read.
    pub fn bytes_left(&self) -> u64 {
        self.data_len.saturating_sub(self.passed + self.at as u64)
    }

    /// Whether the file was whole: the rest of its data read (what the
    /// decoder left is read here) and its checksum compared. `Ok` with the
    /// number of data bytes the decoder left unread, `Err` with why the
    /// file is damaged. A stream dropped unfinished stops its thread.
    pub fn finish(mut self) -> Result<u64, String> {
        let unread = self.bytes_left();
        loop {
            self.at = self.current.len();
            match self.next_piece() {
                Ok(true) => {}
                Ok(false) => return Ok(unread),
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    /// Moves to the next piece; `false` at the end of the data.
    fn next_piece(&mut self) -> io::Result<bool> {
        if let Some(ended) = &self.ended {
            return ended.clone().map(|()| false).map_err(damaged);
        }
        let spent = std::mem::take(&mut self.current);
        self.passed += spent.len() as u64;
        if spent.capacity() > 0 {
            // The thread may have finished already: the buffer is then freed.
            let _ = self.spent.send(spent);
        }
        self.at = 0;
        match self.pieces.recv() {
            Ok(Piece::Data(piece)) => {
                self.current = piece;
                Ok(true)
            }
            Ok(Piece::End(result)) => {
                self.ended = Some(result.clone());
                result.map(|()| false).map_err(damaged)
            }
            Err(_) => {
                let gone = "the snapshot's reading thread stopped before the end".to_string();
                self.ended = Some(Err(gone.clone()));
                Err(damaged(gone))
            }
        }
    }
}

fn damaged(reason: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, reason)
}

impl Read for SnapshotStream {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.at == self.current.len() {
            if out.is_empty() || !self.next_piece()? {
                return Ok(0);
            }
        }
        let n = out.len().min(self.current.len() - self.at);
        out[..n].copy_from_slice(&self.current[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }

    /// The decoder reads field by field: most reads lie inside the current
    /// piece and cost one copy, inlined into the decoder (called, this was
    /// a tenth of a restart's decoding).
    #[inline]
    fn read_exact(&mut self, out: &mut [u8]) -> io::Result<()> {
        let end = self.at + out.len();
        if end <= self.current.len() {
            out.copy_from_slice(&self.current[self.at..end]);
            self.at = end;
            return Ok(());
        }
        self.read_exact_across(out)
    }
}

impl SnapshotStream {
    /// [`Read::read_exact`] of bytes that run past the current piece.
    #[cold]
    fn read_exact_across(&mut self, out: &mut [u8]) -> io::Result<()> {
        let mut filled = 0;
        while filled < out.len() {
            match self.read(&mut out[filled..])? {
                0 => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the snapshot's data ended early")),
                n => filled += n,
            }
        }
        Ok(())
    }
}

/// The reading thread: `left` bytes of data in pieces, each summed into
/// `crc` (the head's already), then the stored checksum compared.
fn read_ahead(mut file: File, mut crc: u32, mut left: u64, ready: SyncSender<Piece>, to_refill: Receiver<Vec<u8>>) {
    let mut read = || -> Result<(), String> {
        while left > 0 {
            let n = usize::try_from(left.min(STREAM_PIECE_BYTES as u64)).expect("a piece fits in memory");
            let mut piece = to_refill.try_recv().unwrap_or_default();
            piece.resize(n, 0);
            file.read_exact(&mut piece).map_err(|e| format!("its data does not read: {e}"))?;
            crc = crc32c::crc32c_append(crc, &piece);
            left -= n as u64;
            if ready.send(Piece::Data(piece)).is_err() {
                // The decoder stopped early and dropped the stream.
                return Ok(());
            }
        }
        let mut stored = [0u8; 4];
        file.read_exact(&mut stored).map_err(|e| format!("its checksum does not read: {e}"))?;
        check_sum(u32::from_le_bytes(stored), crc)
    };
    let result = read();
    let _ = ready.send(Piece::End(result));
}

/// A holed file's frames as they are read: summed into the checksum, and
/// never read past the data.
struct Framed {
    file: std::io::BufReader<File>,
    crc: u32,
    /// Data bytes not yet read.
    left: u64,
}

impl Framed {
    fn take(&mut self, out: &mut [u8]) -> Result<(), String> {
        if out.len() as u64 > self.left {
            return Err(format!("a frame runs {} bytes past the data", out.len() as u64 - self.left));
        }
        self.file.read_exact(out).map_err(|e| format!("its data does not read: {e}"))?;
        self.crc = crc32c::crc32c_append(self.crc, out);
        self.left -= out.len() as u64;
        Ok(())
    }
}

/// The reading thread of a holed file: its frames read, each hole filled
/// from its pack, the flat data handed over in pieces; then the stored
/// checksum compared, and the flat length the data promised.
fn read_filled(mut framed: Framed, mut filler: Filler, ready: SyncSender<Piece>, to_refill: Receiver<Vec<u8>>) {
    let mut read = || -> Result<(), String> {
        let mut piece = Vec::new();
        while framed.left > 0 {
            if piece.capacity() == 0 {
                piece = to_refill.try_recv().unwrap_or_default();
                piece.clear();
                piece.reserve(STREAM_PIECE_BYTES + crate::snapshot_holes::FRAME_BYTES_MAX);
            }
            let mut tag = [0u8];
            framed.take(&mut tag)?;
            match filler.frame(tag[0], &mut |fields| framed.take(fields))? {
                Frame::Bytes(n) => {
                    let from = piece.len();
                    piece.resize(from + n, 0);
                    framed.take(&mut piece[from..])?;
                    filler.flat += n as u64;
                }
                Frame::Hole { loc, range } => filler.fill(loc, range, &mut piece)?,
            }
            if piece.len() >= STREAM_PIECE_BYTES && ready.send(Piece::Data(std::mem::take(&mut piece))).is_err() {
                // The decoder stopped early and dropped the stream.
                return Ok(());
            }
        }
        if !piece.is_empty() && ready.send(Piece::Data(piece)).is_err() {
            return Ok(());
        }
        if filler.flat != filler.flat_len {
            return Err(format!("its frames fill {} bytes, not the {} it promised", filler.flat, filler.flat_len));
        }
        let mut stored = [0u8; 4];
        framed.file.read_exact(&mut stored).map_err(|e| format!("its checksum does not read: {e}"))?;
        check_sum(u32::from_le_bytes(stored), framed.crc)
    };
    let result = read();
    let _ = ready.send(Piece::End(result));
}

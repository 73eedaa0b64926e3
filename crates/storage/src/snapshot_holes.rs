//! The data of a holed snapshot file: the state's bytes with holes, each
//! filled from a chunk pack ([`crate::chunk_packs`]).
//!
//! A snapshot's data is opaque bytes here. A holed one (file version 2) is
//! the bytes with some runs left out, each named instead by the pack
//! record that holds it, so a record stored by one snapshot is named by
//! the next without being written again. Reading the file fills every hole
//! in place and gives back the flat bytes a version-1 file holds
//! ([`crate::snapshot_stream`]), so readers never see the difference and
//! a follower or a backup is always sent flat bytes.
//!
//! Layout of the data, little-endian: `u64 flat_len`, then frames until
//! the data ends:
//! - `0u8 | u32 len | len bytes`: bytes as they are (`len` at most
//!   [`FRAME_BYTES_MAX`]);
//! - `1u8 | u32 pack | u32 offset | u32 from | u32 to`: the bytes
//!   `from..to` of the payload of the record at `offset` of pack `pack`.
//!
//! The file's checksum covers the frames; each record carries its own.

use std::io::{self, Write};
use std::ops::Range;

use crate::chunk_packs::{PackLoc, PackReader, PackSession};

/// The most bytes one frame carries as they are.
pub const FRAME_BYTES_MAX: usize = 1024 * 1024;
const BYTES_TAG: u8 = 0;
const HOLE_TAG: u8 = 1;

/// Where a hole's record is stored: a session of the packs.
pub trait Place {
    /// [`PackSession::place`].
    fn place(&mut self, token: u64, len: usize, record: &dyn Fn() -> Vec<u8>) -> io::Result<PackLoc>;
}

impl Place for PackSession<'_> {
    fn place(&mut self, token: u64, len: usize, record: &dyn Fn() -> Vec<u8>) -> io::Result<PackLoc> {
        PackSession::place(self, token, len, record)
    }
}

/// What a holed encoding writes into: bytes, and holes.
pub struct HoledData<'a> {
    mode: Mode<'a>,
    /// Bytes gathered for the next frame.
    pending: Vec<u8>,
    /// Bytes of flat data so far (holes filled).
    flat: u64,
    /// Data bytes so far (frames, and the flat length in front).
    written: u64,
    holes: u64,
}

enum Mode<'a> {
    /// Counting what a framed write would write.
    Count,
    /// Frames into `out`, records placed through `packs`.
    Frames { out: &'a mut dyn Write, packs: &'a mut (dyn Place + 'a) },
    /// No holes: the bytes straight into `out` (a version-1 file).
    Plain { out: &'a mut dyn Write },
}

impl<'a> HoledData<'a> {
    /// Counts what [`HoledData::frames`] would write, holes and all.
    pub fn counting() -> HoledData<'static> {
        HoledData::with(Mode::Count, 8)
    }

    /// Frames into `out` (after its flat length, `flat_len`, which a
    /// counting pass gave), each hole's record placed through `packs`.
    pub fn frames(out: &'a mut dyn Write, packs: &'a mut (dyn Place + 'a), flat_len: u64) -> io::Result<Self> {
        out.write_all(&flat_len.to_le_bytes())?;
        Ok(HoledData::with(Mode::Frames { out, packs }, 8))
    }

    /// The bytes as they are into `out`: for an encoding a counting pass
    /// found without holes.
    pub fn plain(out: &'a mut dyn Write) -> Self {
        HoledData::with(Mode::Plain { out }, 0)
    }

    fn with(mode: Mode<'a>, written: u64) -> Self {
        HoledData { mode, pending: Vec::new(), flat: 0, written, holes: 0 }
    }

    /// Leaves `range` of a record out: the record `token` names where it is
    /// still good, otherwise `record()`, stored. The record's token, to
    /// name it by next time (`None` while counting, where nothing is
    /// stored).
    pub fn hole(
        &mut self,
        token: u64,
        record_len: usize,
        record: &dyn Fn() -> Vec<u8>,
        range: Range<usize>,
    ) -> io::Result<Option<u64>> {
        if range.start > range.end || range.end > record_len {
            return Err(io::Error::other(format!("a hole of {range:?} in a record of {record_len} bytes")));
        }
        self.frame_pending()?;
        self.holes += 1;
        self.flat += range.len() as u64;
        self.written += 17;
        let placed = match &mut self.mode {
            Mode::Count => None,
            Mode::Plain { .. } => {
                return Err(io::Error::other("a hole in an encoding that was counted without holes"));
            }
            Mode::Frames { out, packs } => {
                let loc = packs.place(token, record_len, record)?;
                let mut frame = [0u8; 17];
                frame[0] = HOLE_TAG;
                frame[1..5].copy_from_slice(&loc.pack.to_le_bytes());
                frame[5..9].copy_from_slice(&loc.offset.to_le_bytes());
                frame[9..13].copy_from_slice(&(range.start as u32).to_le_bytes());
                frame[13..17].copy_from_slice(&(range.end as u32).to_le_bytes());
                out.write_all(&frame)?;
                Some(loc.token())
            }
        };
        Ok(placed)
    }

    /// Writes what is gathered as one frame.
    fn frame_pending(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.written += 5 + self.pending.len() as u64;
        if let Mode::Frames { out, .. } = &mut self.mode {
            out.write_all(&[BYTES_TAG])?;
            out.write_all(&(self.pending.len() as u32).to_le_bytes())?;
            out.write_all(&self.pending)?;
        }
        self.pending.clear();
        Ok(())
    }

    /// The end of the encoding: what is gathered written. Returns (data
    /// bytes, flat bytes, holes).
    pub fn finish(mut self) -> io::Result<(u64, u64, u64)> {
        self.frame_pending()?;
        Ok((self.written, self.flat, self.holes))
    }
}

impl Write for HoledData<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.write_all(bytes)?;
        Ok(bytes.len())
    }

    fn write_all(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        self.flat += bytes.len() as u64;
        if let Mode::Plain { out } = &mut self.mode {
            self.written += bytes.len() as u64;
            return out.write_all(bytes);
        }
        while !bytes.is_empty() {
            let room = FRAME_BYTES_MAX - self.pending.len();
            let (now, later) = bytes.split_at(room.min(bytes.len()));
            self.pending.extend_from_slice(now);
            bytes = later;
            if self.pending.len() == FRAME_BYTES_MAX {
                self.frame_pending()?;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Fills a holed file's frames back into flat bytes, as they are read.
pub struct Filler {
    packs: PackReader,
    record: Vec<u8>,
    /// Flat bytes given so far, and how many the data said there are.
    pub flat: u64,
    pub flat_len: u64,
}

/// What one frame asks for.
pub enum Frame {
    /// This many bytes, as they are, follow in the data.
    Bytes(usize),
    /// A record's bytes.
    Hole { loc: PackLoc, range: Range<usize> },
}

impl Filler {
    pub fn new(packs: PackReader, flat_len: u64) -> Filler {
        Filler { packs, record: Vec::new(), flat: 0, flat_len }
    }

    /// Parses the frame that starts with `tag`, whose fields `fields`
    /// reads (16 bytes for a hole, 4 for bytes).
    pub fn frame(&self, tag: u8, fields: &mut dyn FnMut(&mut [u8]) -> Result<(), String>) -> Result<Frame, String> {
        match tag {
            BYTES_TAG => {
                let mut len = [0u8; 4];
                fields(&mut len)?;
                let len = u32::from_le_bytes(len) as usize;
                if len == 0 || len > FRAME_BYTES_MAX {
                    return Err(format!("a frame of {len} bytes"));
                }
                self.check_room(len as u64)?;
                Ok(Frame::Bytes(len))
            }
            HOLE_TAG => {
                let mut f = [0u8; 16];
                fields(&mut f)?;
                let word = |i: usize| u32::from_le_bytes(f[i..i + 4].try_into().expect("four bytes"));
                let loc = PackLoc { pack: word(0), offset: word(4) };
                let range = word(8) as usize..word(12) as usize;
                if range.start > range.end {
                    return Err(format!("a hole of {range:?}"));
                }
                self.check_room(range.len() as u64)?;
                Ok(Frame::Hole { loc, range })
            }
            other => Err(format!("an unknown frame ({other})")),
        }
    }

    fn check_room(&self, n: u64) -> Result<(), String> {
        match self.flat.checked_add(n) {
            Some(total) if total <= self.flat_len => Ok(()),
            _ => Err(format!("frames past the {} flat bytes the data promised", self.flat_len)),
        }
    }

    /// Appends the bytes a hole stands for to `out`.
    pub fn fill(&mut self, loc: PackLoc, range: Range<usize>, out: &mut Vec<u8>) -> Result<(), String> {
        self.packs.read(loc, &mut self.record)?;
        let bytes = self.record.get(range.clone()).ok_or_else(|| {
            format!("a hole of {range:?} in a record of {} bytes (pack {})", self.record.len(), loc.pack)
        })?;
        out.extend_from_slice(bytes);
        self.flat += bytes.len() as u64;
        Ok(())
    }
}

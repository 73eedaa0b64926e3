//! A state encoded with its sealed message chunks left out, as holes.
//!
//! A partition's full chunks of [`CHUNK`] messages are immutable once
//! sealed ([`crate::msg_table`]), yet every snapshot encoded them again: a
//! node holding 100 M messages wrote 2.6-2.9 GB per snapshot late in a
//! 300 s push, 28 GB over the run, and its push rate fell to 0.86 of its
//! first minute (docs/benchmarks.md, items 37 and 39). Encoded with holes,
//! the state's bytes are its usual encoding minus the messages of every
//! sealed chunk; at each such run the writer is told where the run belongs
//! ([`HoledWrite::hole`]), and it stores the chunk once, somewhere the next
//! snapshot can name again without rewriting it (the chunk remembers where:
//! [`Hole::placed`]). Reading the holes back in place gives exactly the
//! bytes [`State::encode`] writes, so a decoder never knows the difference.
//!
//! How the encoding reaches the chunks: serde gives `MsgTable::serialize`
//! no way to the writer, so while [`State::encode_holed`] runs, this
//! thread's table of pending holes is switched on; the message table hands
//! its sealed runs to it instead of serializing them, and the writer's
//! adapter ([`InOrder`]) hands them on before the next bytes it writes, the
//! place where they belong. Nothing here does I/O: the writer is the
//! caller's.

use std::cell::RefCell;
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::msg_table::CHUNK;
use crate::partition::MsgMeta;
use crate::state::{State, STATE_FORMAT};

/// Bytes one [`MsgMeta`] encodes to (bincode, fixed-width integers): every
/// message of a chunk takes the same room, so a run of it is a byte range.
pub const META_BYTES: usize = 8 + 4 + 8 + 16;

/// A sealed chunk: [`CHUNK`] messages, never changed once sealed, and where
/// a snapshot last stored them.
#[derive(Debug)]
pub struct Chunk {
    pub(crate) metas: Vec<MsgMeta>,
    /// The writer's token for where this chunk is stored (0: nowhere yet).
    /// Only a hint: the writer checks it is still good before it trusts it,
    /// and it takes no part in the state's meaning, equality or encoding.
    placed: AtomicU64,
}

impl Chunk {
    pub(crate) fn new(metas: Vec<MsgMeta>) -> Chunk {
        debug_assert_eq!(metas.len(), CHUNK);
        Chunk { metas, placed: AtomicU64::new(0) }
    }
}

/// A run of a sealed chunk left out of a holed encoding: the chunk's
/// messages from `from` to its end.
#[derive(Debug, Clone)]
pub struct Hole {
    chunk: Arc<Chunk>,
    from: usize,
}

impl Hole {
    /// The token the writer last gave this chunk (0 if none).
    pub fn placed(&self) -> u64 {
        self.chunk.placed.load(Ordering::Relaxed)
    }

    /// Remembers where the writer stored this chunk.
    pub fn set_placed(&self, token: u64) {
        self.chunk.placed.store(token, Ordering::Relaxed);
    }

    /// The whole chunk's encoding ([`CHUNK`] messages, [`META_BYTES`] each),
    /// as a writer stores it.
    pub fn chunk_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(CHUNK * META_BYTES);
        for m in &self.chunk.metas {
            bincode::serialize_into(&mut out, m).expect("message metadata encodes");
        }
        debug_assert_eq!(out.len(), CHUNK * META_BYTES);
        out
    }

    /// Where the run lies in [`Hole::chunk_bytes`]: the bytes that fill it.
    pub fn byte_range(&self) -> std::ops::Range<usize> {
        self.from * META_BYTES..CHUNK * META_BYTES
    }
}

/// Where a holed encoding goes: its bytes, and each hole at its place.
pub trait HoledWrite: Write {
    /// `hole`'s messages belong right after the bytes written so far.
    fn hole(&mut self, hole: Hole) -> io::Result<()>;
}

thread_local! {
    /// The holes the message tables left since the writer last wrote;
    /// `None` unless a holed encoding runs on this thread.
    static PENDING: RefCell<Option<Vec<Hole>>> = const { RefCell::new(None) };
}

/// Called by the message table for each of its sealed runs: `true` if a
/// holed encoding runs and took the run (the table then leaves it out).
pub(crate) fn take_as_hole(chunk: &Arc<Chunk>, from: usize) -> bool {
    PENDING.with(|p| match p.borrow_mut().as_mut() {
        Some(pending) => {
            pending.push(Hole { chunk: chunk.clone(), from });
            true
        }
        None => false,
    })
}

/// Switches this thread's holes on, and off again however the encoding
/// ends (an error or a panic included).
struct HolesOn;

impl HolesOn {
    fn new() -> HolesOn {
        PENDING.with(|p| {
            let mut p = p.borrow_mut();
            assert!(p.is_none(), "one holed encoding at a time on a thread");
            *p = Some(Vec::new());
        });
        HolesOn
    }
}

impl Drop for HolesOn {
    fn drop(&mut self) {
        PENDING.with(|p| *p.borrow_mut() = None);
    }
}

/// The writer as the encoder sees it: before any bytes, the holes left
/// since the last write are handed on, so each lands where it belongs.
struct InOrder<'a>(&'a mut dyn HoledWrite);

impl InOrder<'_> {
    fn holes_first(&mut self) -> io::Result<()> {
        let holes = PENDING.with(|p| p.borrow_mut().as_mut().map(std::mem::take).unwrap_or_default());
        for hole in holes {
            self.0.hole(hole)?;
        }
        Ok(())
    }
}

impl Write for InOrder<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.holes_first()?;
        self.0.write(bytes)
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.holes_first()?;
        self.0.write_all(bytes)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.holes_first()?;
        self.0.flush()
    }
}

impl State {
    /// [`State::encode`] into `out` with every sealed chunk's messages left
    /// out, `out` told at each place which ([`HoledWrite::hole`]). Filling
    /// each hole with its bytes gives exactly [`State::encode`]'s bytes.
    pub fn encode_holed(&self, out: &mut dyn HoledWrite) -> io::Result<()> {
        out.write_all(STATE_FORMAT)?;
        serialize_holed(self, out)
    }
}

/// The bincode encoding of `value`, holed, into `out`.
pub(crate) fn serialize_holed<T: serde::Serialize>(value: &T, out: &mut dyn HoledWrite) -> io::Result<()> {
    let _on = HolesOn::new();
    let mut out = InOrder(out);
    bincode::serialize_into(&mut out, value).map_err(|e| match *e {
        bincode::ErrorKind::Io(e) => e,
        other => io::Error::other(format!("the state did not encode: {other}")),
    })?;
    out.flush()
}

/// A [`HoledWrite`] that fills each hole at once: what a reader of the
/// stored holes gives back (for tests).
#[derive(Default)]
pub struct FilledHoles {
    pub bytes: Vec<u8>,
    pub holes: usize,
}

impl Write for FilledHoles {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.bytes.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl HoledWrite for FilledHoles {
    fn hole(&mut self, hole: Hole) -> io::Result<()> {
        self.bytes.extend_from_slice(&hole.chunk_bytes()[hole.byte_range()]);
        self.holes += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_encodes_to_its_fixed_width() {
        let meta = MsgMeta::new(u64::MAX, u32::MAX, 7, u128::MAX);
        assert_eq!(bincode::serialize(&meta).unwrap().len(), META_BYTES);
    }
}

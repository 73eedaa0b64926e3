//! Entries decoded ahead of a restart's re-apply.
//!
//! A restart re-applies every committed entry after the snapshot it loaded
//! (openraft reads them 64 at a time inside `Raft::new`), and each was read
//! back from the WAL and decoded on the thread that then applied it: over a
//! quarter of the re-apply at 10 M partitions (docs/benchmarks.md, item
//! 30), while the machine's other core sat idle. While a node starts, a
//! decoder thread reads the entries in order ahead of the reader, so the
//! next chunk is decoded while the one before is applied.
//!
//! The decoder holds at most [`AHEAD_BYTES_MAX`] of entries (their encoded
//! size). A reader waits only for an entry the decoder is about to reach;
//! one it passed, one it will not hold in time, or any after the decoder
//! stopped, the reader reads from the WAL itself, as before. What the
//! decoder hands over is checked as a WAL read is (its log id is the one
//! the index holds at that place).
//!
//! Only a node's start arms it ([`crate::LogStore::read_ahead`]): the
//! simulation's disks and a running node's reads stay on the caller's
//! thread, in the caller's order.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::types::RaftEntry;

/// Encoded bytes of decoded entries the decoder holds at most: a few of
/// openraft's 64-entry chunks of large pushes.
pub const AHEAD_BYTES_MAX: usize = 96 << 20;

/// One group's read-ahead: off, armed (the next range read starts it) or
/// running.
#[derive(Default)]
pub(crate) struct Slot(Mutex<Phase>);

#[derive(Default)]
enum Phase {
    #[default]
    Off,
    Armed,
    Running(Arc<Ahead>),
}

/// What the decoder and the reader share.
struct Ahead {
    inner: Mutex<Decoded>,
    changed: Condvar,
}

struct Decoded {
    /// The index the decoder works on now, or next.
    next: u64,
    /// One past the last index it decodes.
    end: u64,
    entries: BTreeMap<u64, (RaftEntry, usize)>,
    bytes: usize,
    /// It finished, could not read an entry, or was stopped.
    done: bool,
}

impl Slot {
    /// The next range read starts a decoder.
    pub fn arm(&self) {
        let mut phase = self.0.lock();
        if matches!(*phase, Phase::Off) {
            *phase = Phase::Armed;
        }
    }

    /// Stops the decoder, if one runs, and drops what it decoded.
    pub fn disarm(&self) {
        if let Phase::Running(ahead) = std::mem::take(&mut *self.0.lock()) {
            let mut decoded = ahead.inner.lock();
            decoded.done = true;
            decoded.bytes = 0;
            let entries = std::mem::take(&mut decoded.entries);
            drop(decoded);
            ahead.changed.notify_all();
            crate::background_drop::drop_in_background(entries);
        }
    }

    /// If armed, starts a thread decoding `from..end` in order; `read(i)`
    /// reads entry `i` from the WAL with its encoded size (`None`: it
    /// could not, and the decoder stops there).
    pub fn start<R>(&self, from: u64, end: u64, mut read: R)
    where
        R: FnMut(u64) -> Option<(RaftEntry, usize)> + Send + 'static,
    {
        let mut phase = self.0.lock();
        if !matches!(*phase, Phase::Armed) || from >= end {
            return;
        }
        let decoded = Decoded { next: from, end, entries: BTreeMap::new(), bytes: 0, done: false };
        let ahead = Arc::new(Ahead { inner: Mutex::new(decoded), changed: Condvar::new() });
        let decoder = Arc::clone(&ahead);
        let spawned = std::thread::Builder::new().name("regina-read-ahead".into()).spawn(move || {
            while let Some(index) = decoder.wait_for_room() {
                let entry = read(index);
                let mut decoded = decoder.inner.lock();
                match entry {
                    Some((entry, bytes)) if !decoded.done => {
                        decoded.entries.insert(index, (entry, bytes));
                        decoded.bytes += bytes;
                        decoded.next = index + 1;
                    }
                    _ => decoded.done = true,
                }
                drop(decoded);
                decoder.changed.notify_all();
            }
        });
        // Without a thread every read stays the caller's, as before.
        *phase = if spawned.is_ok() { Phase::Running(ahead) } else { Phase::Off };
    }

    /// Entry `index` if the decoder has it or is about to; `None` when the
    /// caller should read it itself.
    pub fn take(&self, index: u64) -> Option<RaftEntry> {
        let ahead = match &*self.0.lock() {
            Phase::Running(ahead) => Arc::clone(ahead),
            _ => return None,
        };
        let mut decoded = ahead.inner.lock();
        loop {
            if let Some((entry, bytes)) = decoded.entries.remove(&index) {
                decoded.bytes -= bytes;
                drop(decoded);
                ahead.changed.notify_all();
                return Some(entry);
            }
            // Waiting is safe only while the decoder can still get there:
            // it moves on until its bytes are full, and only a take frees
            // them.
            let coming =
                !decoded.done && (decoded.next..decoded.end).contains(&index) && decoded.bytes < AHEAD_BYTES_MAX;
            if !coming {
                return None;
            }
            ahead.changed.wait(&mut decoded);
        }
    }
}

impl Ahead {
    /// The next index to decode once there is room for it; `None` once the
    /// decoder is done.
    fn wait_for_room(&self) -> Option<u64> {
        let mut decoded = self.inner.lock();
        loop {
            if !decoded.done && decoded.next >= decoded.end {
                decoded.done = true;
                self.changed.notify_all();
            }
            if decoded.done {
                return None;
            }
            if decoded.bytes < AHEAD_BYTES_MAX {
                return Some(decoded.next);
            }
            self.changed.wait(&mut decoded);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::LogId;
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry(index: u64) -> RaftEntry {
        RaftEntry { log_id: LogId::new(CommittedLeaderId::new(1, 1), index), payload: EntryPayload::Blank }
    }

    #[test]
    fn an_unarmed_slot_never_decodes() {
        let slot = Slot::default();
        slot.start(1, 10, |i| Some((entry(i), 1)));
        assert!(slot.take(1).is_none());
    }

    #[test]
    fn entries_come_in_order_and_each_once() {
        let slot = Slot::default();
        slot.arm();
        slot.start(5, 50, |i| Some((entry(i), 1000)));
        for i in 5..50 {
            assert_eq!(slot.take(i).map(|e| e.log_id.index), Some(i));
        }
        assert!(slot.take(7).is_none(), "taken already");
        assert!(slot.take(50).is_none(), "past the range");
        assert!(slot.take(4).is_none(), "before it");
        slot.disarm();
    }

    #[test]
    fn a_reader_far_ahead_is_sent_to_the_wal_not_left_waiting() {
        let slot = Slot::default();
        slot.arm();
        // Each entry fills a third of the room: the decoder stops after
        // three, short of what the reader asks for.
        let big = AHEAD_BYTES_MAX / 3 + 1;
        slot.start(1, 100, move |i| Some((entry(i), big)));
        assert!(slot.take(90).is_none());
        assert_eq!(slot.take(1).map(|e| e.log_id.index), Some(1));
        slot.disarm();
        assert!(slot.take(2).is_none(), "a stopped decoder hands nothing over");
    }

    #[test]
    fn a_read_that_fails_stops_the_decoder_there() {
        let slot = Slot::default();
        slot.arm();
        slot.start(1, 10, |i| (i < 4).then(|| (entry(i), 1)));
        for i in 1..4 {
            assert!(slot.take(i).is_some());
        }
        assert!(slot.take(4).is_none());
        assert!(slot.take(5).is_none());
    }
}

//! The newest message bodies, kept in memory as they are written, so the
//! consumers that read them soon after their push (the usual case) need no
//! system call per message.
//!
//! A pop of 100 messages read each body with its own `pread`: in a
//! consume run with three groups the reads were a fifth of the broker's
//! samples, most of it the system call and the page-cache lookup, not the
//! copy (docs/benchmarks.md, item 21).
//!
//! It is a ring over body positions: the byte at position `p` lives at
//! `p % capacity`, and the ring holds the `held` bytes below `end`. Writes
//! come in position order (a body's place is chosen in log order). A write
//! at the start of the next segment bridges the unused end of the last one
//! when no write ever reached past it (so no body lies there, and none is
//! ever read from it; a write that did not reach the file counts as one
//! that reached past); a write anywhere else (the first write, a rewrite)
//! starts the ring afresh at its position. A read outside the held range is
//! `None`, and the caller reads the file.
//!
//! The ring's memory comes in chunks of [`CHUNK_BYTES`], each allocated at
//! the first write into it: allocating (and so zeroing) the whole ring at
//! the first write stopped applying for 200 ms, the first messages of an
//! e2e run waiting behind it (docs/benchmarks.md, item 22).

use parking_lot::RwLock;

/// How many bytes of the newest bodies a store keeps in memory by default.
pub const RECENT_BODY_BYTES: usize = 128 * 1024 * 1024;

/// The ring's unit of allocation.
const CHUNK_BYTES: usize = 1024 * 1024;

pub(crate) struct RecentBodies {
    capacity: usize,
    /// Bytes per chunk of memory ([`CHUNK_BYTES`]; smaller in tests).
    chunk: usize,
    /// The body segments' size: a write at a segment's start may follow a
    /// gap.
    segment_bytes: u64,
    ring: RwLock<Ring>,
}

struct Ring {
    /// The ring's bytes, chunk by chunk; a chunk never written into is
    /// empty (a store never written keeps no memory).
    chunks: Vec<Box<[u8]>>,
    /// One past the newest held position.
    end: u64,
    /// How many bytes below `end` are held (at most the capacity).
    held: u64,
    /// No body was written at or past this position since the store was
    /// opened or cut (`u64::MAX`: not known).
    high_water: u64,
}

impl RecentBodies {
    /// A ring of `capacity` bytes over segments of `segment_bytes`; a
    /// capacity of 0 keeps nothing.
    pub(crate) fn new(capacity: usize, segment_bytes: u64) -> Self {
        Self::in_chunks_of(CHUNK_BYTES, capacity, segment_bytes)
    }

    fn in_chunks_of(chunk: usize, capacity: usize, segment_bytes: u64) -> Self {
        assert!(chunk > 0, "a ring's chunks hold at least a byte");
        RecentBodies {
            capacity,
            chunk,
            segment_bytes,
            ring: RwLock::new(Ring {
                chunks: vec![Box::default(); capacity.div_ceil(chunk)],
                end: 0,
                held: 0,
                high_water: 0,
            }),
        }
    }

    /// `parts` were written back to back from `pos`.
    pub(crate) fn wrote(&self, pos: u64, parts: &[&[u8]]) {
        if self.capacity == 0 {
            return;
        }
        let cap = self.capacity as u64;
        let len: u64 = parts.iter().map(|p| p.len() as u64).sum();
        let mut ring = self.ring.write();
        let next_segment = pos > ring.end
            && ring.end >= ring.high_water
            && pos.is_multiple_of(self.segment_bytes)
            && pos - ring.end < self.segment_bytes;
        if (pos != ring.end && !next_segment) || len > cap {
            // Not the next position, or larger than the whole ring: start
            // afresh (what was held may no longer be what the file holds).
            ring.held = 0;
            ring.end = pos;
            if len > cap {
                ring.end = pos + len;
                ring.high_water = ring.high_water.max(ring.end);
                return;
            }
        }
        let mut at = pos;
        for part in parts {
            let mut from = 0;
            for (index, within, n) in self.pieces(at, part.len()) {
                let chunk = &mut ring.chunks[index];
                if chunk.is_empty() {
                    *chunk = vec![0u8; self.chunk_len(index)].into_boxed_slice();
                }
                chunk[within..within + n].copy_from_slice(&part[from..from + n]);
                from += n;
            }
            at += part.len() as u64;
        }
        ring.held = (ring.held + (at - ring.end)).min(cap);
        ring.end = at;
        ring.high_water = ring.high_water.max(at);
    }

    /// The `len` bytes at `pos`, if they are all held.
    pub(crate) fn read(&self, pos: u64, len: u64) -> Option<Vec<u8>> {
        if self.capacity == 0 {
            return None;
        }
        let ring = self.ring.read();
        let first_held = ring.end - ring.held;
        if pos < first_held || pos.checked_add(len)? > ring.end {
            return None;
        }
        let mut out = Vec::with_capacity(len as usize);
        for (index, within, n) in self.pieces(pos, len as usize) {
            // A chunk never written into lies in a bridged gap, where no
            // body is: the file answers instead.
            let chunk = ring.chunks[index].get(within..within + n)?;
            out.extend_from_slice(chunk);
        }
        Some(out)
    }

    /// Where `len` bytes from position `pos` lie in the ring: (chunk,
    /// offset in it, length) for each piece, wrapping at the ring's end.
    fn pieces(&self, pos: u64, len: usize) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        let (mut at, mut left) = ((pos % self.capacity as u64) as usize, len);
        std::iter::from_fn(move || {
            (left > 0).then(|| {
                let (index, within) = (at / self.chunk, at % self.chunk);
                let n = left.min(self.chunk_len(index) - within);
                (left, at) = (left - n, (at + n) % self.capacity);
                (index, within, n)
            })
        })
    }

    /// The length of chunk `index` (the last may be shorter).
    fn chunk_len(&self, index: usize) -> usize {
        self.chunk.min(self.capacity - index * self.chunk)
    }

    /// A write of `len` bytes at `pos` did not reach the file (the store
    /// keeps the body elsewhere until it does): no write may bridge to a
    /// segment past it, as if it had been written.
    pub(crate) fn missed(&self, pos: u64, len: u64) {
        let mut ring = self.ring.write();
        ring.high_water = ring.high_water.max(pos.saturating_add(len));
    }

    /// Forgets everything, the store being cut at `pos` (rare: nothing is
    /// kept).
    pub(crate) fn forget_from(&self, pos: u64) {
        let mut ring = self.ring.write();
        (ring.held, ring.end, ring.high_water) = (0, pos, pos);
    }

    /// Forgets everything, the store's segments being replaced by others
    /// whose bodies it does not know.
    pub(crate) fn forget_all(&self) {
        let mut ring = self.ring.write();
        (ring.held, ring.end, ring.high_water) = (0, 0, u64::MAX);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn serves_what_it_holds_and_nothing_else() {
        let r = RecentBodies::new(16, 1000);
        assert_eq!(r.read(0, 1), None, "nothing written yet");
        r.wrote(100, &[b"abcd", b"efgh"]);
        assert_eq!(r.read(100, 8).as_deref(), Some(&b"abcdefgh"[..]));
        assert_eq!(r.read(102, 3).as_deref(), Some(&b"cde"[..]));
        assert_eq!((r.read(99, 2), r.read(107, 2)), (None, None), "past either end");
        // Wrapping: 12 more bytes push the first 4 out.
        r.wrote(108, &[b"ijklmnopqrst"]);
        assert_eq!(r.read(100, 4), None);
        assert_eq!(r.read(104, 16).as_deref(), Some(&b"efghijklmnopqrst"[..]));
        // A write at the next segment's start bridges the gap before it.
        let s = RecentBodies::new(16, 10);
        s.wrote(5, &[b"abc"]);
        s.wrote(10, &[b"de"]);
        assert_eq!((s.read(5, 3).as_deref(), s.read(10, 2).as_deref()), (Some(&b"abc"[..]), Some(&b"de"[..])));
        s.wrote(30, &[b"f"]);
        assert_eq!((s.read(10, 2), s.read(30, 1).as_deref()), (None, Some(&b"f"[..])), "a segment skipped");
        // Any other jump starts afresh.
        r.wrote(200, &[b"xy"]);
        assert_eq!((r.read(104, 1), r.read(200, 2).as_deref()), (None, Some(&b"xy"[..])));
        // A cut forgets all, and takes writes from where it cut.
        r.forget_from(201);
        assert_eq!(r.read(200, 1), None);
        r.wrote(201, &[b"z"]);
        assert_eq!((r.read(200, 1), r.read(201, 1).as_deref()), (None, Some(&b"z"[..])));
        // Larger than the ring: not held.
        r.wrote(300, &[&[7u8; 17]]);
        assert_eq!(r.read(300, 1), None);
        assert_eq!(RecentBodies::new(0, 1000).read(0, 0), None);
    }

    #[test]
    fn allocates_a_chunk_at_its_first_write_and_reads_across_chunks() {
        let r = RecentBodies::in_chunks_of(4, 16, 10);
        r.wrote(1, &[b"ab"]);
        let allocated = |r: &RecentBodies| r.ring.read().chunks.iter().filter(|c| !c.is_empty()).count();
        assert_eq!(allocated(&r), 1);
        // The next segment's start bridges 3..10; chunk 4..8 is never
        // written, and a read there is left to the file.
        r.wrote(10, &[b"cdefgh"]);
        assert_eq!(allocated(&r), 3);
        assert_eq!(r.read(4, 2), None);
        assert_eq!(r.read(1, 2).as_deref(), Some(&b"ab"[..]));
        assert_eq!(r.read(10, 6).as_deref(), Some(&b"cdefgh"[..]), "across two chunks");
        // Wrapping into chunk 0 again, and across the ring's end.
        r.wrote(16, &[b"ijklmn"]);
        assert_eq!(r.read(13, 9).as_deref(), Some(&b"fghijklmn"[..]));
        assert_eq!(allocated(&r), 4);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        /// Every body still in place reads as it was written, or not at
        /// all, against a model of the bodies written (placed as the store
        /// places them: back to back, moving to the next segment's start
        /// when one does not fit; now and then somewhere else, as a replay
        /// rewrites; now and then cut, as a recovery cuts).
        #[test]
        fn serves_only_the_bodies_as_written(
            steps in proptest::collection::vec((0u8..8, 0u64..64, 1usize..12), 1..80),
            capacity in 1usize..40,
            chunk in 1usize..12,
            segment in 12u64..30,
        ) {
            let r = RecentBodies::in_chunks_of(chunk, capacity, segment);
            // Bodies in place: position -> bytes.
            let mut bodies: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
            let mut next = 0u64;
            let mut fill = 0u8;
            for (kind, pos, len) in steps {
                match kind {
                    0..=2 => {
                        let at = if kind == 0 { pos } else { crate::bodies::place(next, len as u64, segment) };
                        let body: Vec<u8> = (0..len).map(|_| { fill = fill.wrapping_add(1); fill }).collect();
                        let (a, b) = body.split_at(len / 2);
                        r.wrote(at, &[a, b]);
                        let end = at + len as u64;
                        bodies.retain(|&p, b| p + b.len() as u64 <= at || p >= end);
                        bodies.insert(at, body.clone());
                        next = end;
                        // The newest write is served whenever it fits.
                        if len <= capacity {
                            proptest::prop_assert_eq!(r.read(at, len as u64), Some(body));
                        }
                    }
                    3 => {
                        r.forget_from(pos);
                        bodies.retain(|&p, b| p + b.len() as u64 <= pos);
                        next = pos;
                    }
                    // A write that did not reach the file (no space: the
                    // store keeps the body elsewhere, and writes it later
                    // at the same place).
                    5 if pos % 2 == 0 => {
                        let at = crate::bodies::place(next, len as u64, segment);
                        let body: Vec<u8> = (0..len).map(|_| { fill = fill.wrapping_add(1); fill }).collect();
                        r.missed(at, len as u64);
                        let end = at + len as u64;
                        bodies.retain(|&p, b| p + b.len() as u64 <= at || p >= end);
                        bodies.insert(at, body);
                        next = end;
                    }
                    // Segments replaced by others (bodies it never saw, as
                    // a snapshot's transfer brings them), then the store
                    // cut where the new state writes on.
                    4 if pos % 4 == 0 => {
                        r.forget_all();
                        bodies.clear();
                        bodies.insert(pos, vec![0xee; len]);
                        next = pos + len as u64 + (pos % 7);
                        r.forget_from(next);
                    }
                    _ => {
                        for (&p, body) in &bodies {
                            if let Some(got) = r.read(p, body.len() as u64) {
                                proptest::prop_assert_eq!(&got, body, "the body at {}", p);
                            }
                        }
                    }
                }
            }
        }
    }
}

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

use parking_lot::RwLock;

/// How many bytes of the newest bodies a store keeps in memory by default.
pub const RECENT_BODY_BYTES: usize = 128 * 1024 * 1024;

pub(crate) struct RecentBodies {
    capacity: usize,
    /// The body segments' size: a write at a segment's start may follow a
    /// gap.
    segment_bytes: u64,
    ring: RwLock<Ring>,
}

struct Ring {
    /// Allocated at the first write that fits (a store never written keeps
    /// no memory).
    bytes: Vec<u8>,
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
        RecentBodies {
            capacity,
            segment_bytes,
            ring: RwLock::new(Ring { bytes: Vec::new(), end: 0, held: 0, high_water: 0 }),
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
        if ring.bytes.is_empty() {
            ring.bytes = vec![0; self.capacity];
        }
        let mut at = pos;
        for part in parts {
            copy_in(&mut ring.bytes, at, part);
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
        let start = (pos % self.capacity as u64) as usize;
        let first = (len as usize).min(self.capacity - start);
        out.extend_from_slice(&ring.bytes[start..start + first]);
        out.extend_from_slice(&ring.bytes[..len as usize - first]);
        Some(out)
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

/// Copies `part` into the ring at position `at`, wrapping at its end.
fn copy_in(bytes: &mut [u8], at: u64, part: &[u8]) {
    let cap = bytes.len();
    let start = (at % cap as u64) as usize;
    let first = part.len().min(cap - start);
    bytes[start..start + first].copy_from_slice(&part[..first]);
    bytes[..part.len() - first].copy_from_slice(&part[first..]);
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
            segment in 12u64..30,
        ) {
            let r = RecentBodies::new(capacity, segment);
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

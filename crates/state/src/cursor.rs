//! One consumer group's position in one partition, and the lease that
//! holds the batch it was last handed.

use serde::{Deserialize, Serialize};

/// The batch a pop handed out, held until `expires_ms` or until the batch
/// is settled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseSlot {
    pub id: String,
    /// First delivered offset.
    pub start: u64,
    /// One past the last delivered offset.
    pub end: u64,
    pub expires_ms: u64,
    /// Length of the lease, reused when it is extended.
    pub duration_ms: u64,
}

impl LeaseSlot {
    pub fn is_live(&self, now_ms: u64) -> bool {
        self.expires_ms > now_ms
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    /// Every offset below this is committed for the group.
    pub next: u64,
    pub lease: Option<LeaseSlot>,
    /// The offset whose failures are being counted, and how many.
    pub fail_offset: u64,
    pub failures: u32,
}

impl Cursor {
    pub fn at(next: u64) -> Self {
        Cursor { next, lease: None, fail_offset: u64::MAX, failures: 0 }
    }

    /// The live lease, if any; an expired one counts as none.
    pub fn live_lease(&self, now_ms: u64) -> Option<&LeaseSlot> {
        self.lease.as_ref().filter(|l| l.is_live(now_ms))
    }

    /// Puts the cursor at `next` with no lease and no failures counted: an
    /// operator's seek or re-subscription, the one move that may go back.
    pub fn reset_to(&mut self, next: u64) {
        self.next = next;
        self.lease = None;
        self.fail_offset = u64::MAX;
        self.failures = 0;
    }

    /// Moves the committed position forward, never back.
    pub fn commit_to(&mut self, next: u64) {
        if next > self.next {
            self.next = next;
        }
        if self.fail_offset < self.next {
            self.fail_offset = u64::MAX;
            self.failures = 0;
        }
    }

    /// Delivery attempt number of `offset` if it were handed out now.
    pub fn attempt_of(&self, offset: u64) -> u32 {
        if offset == self.fail_offset {
            self.failures.saturating_add(1)
        } else {
            1
        }
    }
}

/// A partition's cursors, one slot per group of its queue by group number.
/// One word in the partition, the slots behind it: a `Vec` in place was
/// three words in every partition, and most partitions of a large queue
/// hold no cursor (docs/benchmarks.md, item 41). Reads as a slice; encodes
/// as the sequence the `Vec` encoded to.
#[derive(Debug, Clone, Default)]
// The box is the point: one word in place of the `Vec`'s three.
#[allow(clippy::box_collection)]
pub struct Cursors(Option<Box<Vec<Option<Cursor>>>>);

impl Cursors {
    /// Grows the slots to `len` (new ones empty); never shrinks them.
    pub fn grow_to(&mut self, len: usize) {
        if self.len() < len {
            self.0.get_or_insert_with(Default::default).resize(len, None);
        }
    }
}

impl std::ops::Deref for Cursors {
    type Target = [Option<Cursor>];
    fn deref(&self) -> &[Option<Cursor>] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }
}

impl std::ops::DerefMut for Cursors {
    fn deref_mut(&mut self) -> &mut [Option<Cursor>] {
        match &mut self.0 {
            Some(v) => v.as_mut_slice(),
            None => &mut [],
        }
    }
}

impl PartialEq for Cursors {
    fn eq(&self, other: &Cursors) -> bool {
        **self == **other
    }
}

impl Eq for Cursors {}

impl Serialize for Cursors {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for Cursors {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let slots = Vec::<Option<Cursor>>::deserialize(d)?;
        Ok(Cursors(if slots.is_empty() { None } else { Some(Box::new(slots)) }))
    }
}

#[cfg(test)]
mod cursors_tests {
    use super::*;

    #[test]
    fn cursors_encode_as_the_vec_they_replace() {
        let mut c = Cursors::default();
        assert_eq!(bincode::serialize(&c).unwrap(), bincode::serialize(&Vec::<Option<Cursor>>::new()).unwrap());
        c.grow_to(3);
        c[2] = Some(Cursor::at(7));
        let plain = vec![None, None, Some(Cursor::at(7))];
        let bytes = bincode::serialize(&c).unwrap();
        assert_eq!(bytes, bincode::serialize(&plain).unwrap());
        assert_eq!(bincode::deserialize::<Cursors>(&bytes).unwrap(), c);
        c.grow_to(1);
        assert_eq!(c.len(), 3, "never shrinks");
        assert_eq!(
            Cursors::default(),
            bincode::deserialize::<Cursors>(&bincode::serialize(&Cursors::default()).unwrap()).unwrap()
        );
    }
}

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

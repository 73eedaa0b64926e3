//! One partition of an ephemeral queue: a FIFO ring of messages and, for
//! every consumer group that has met it, where that group stands.
//!
//! Sequence numbers come from one counter of the whole store, so they rise
//! along the ring and are never reused while the node runs: an ack naming a
//! message that is gone can never land on a newer one.
//!
//! Invariant: every sequence a group holds (leased or handed back) is still
//! in the ring. Anything that removes a message from the ring (bounds, TTL,
//! trimming) removes it from every group first or only removes what no group
//! holds.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

pub struct Message {
    pub seq: u64,
    /// Store time of the push, for `ttlSeconds`.
    pub at_ms: u64,
    /// The payload's JSON text exactly as it was pushed.
    pub payload: Arc<str>,
}

/// One delivery out of a claim.
pub struct Claimed {
    pub seq: u64,
    pub attempts: u32,
    pub payload: Arc<str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// The group is done with the message.
    Done,
    /// The group's deliveries are spent: dropped for this group (no DLQ).
    Dropped,
    /// Handed back for another delivery.
    Again,
    /// The group holds no lease on it (acked, lapsed or never delivered).
    NoLease,
}

struct Lease {
    until_ms: u64,
    attempts: u32,
}

/// Where one group stands in the ring.
#[derive(Default)]
struct Cursor {
    /// The oldest sequence never yet delivered to this group.
    next: u64,
    /// Delivered and not yet settled.
    leased: BTreeMap<u64, Lease>,
    /// Handed back by a failure or a lapsed lease, with the deliveries so
    /// far; delivered before anything fresh so the group keeps FIFO order.
    again: BTreeMap<u64, u32>,
}

impl Cursor {
    /// Below this every message is settled for the group.
    fn low_water(&self) -> u64 {
        let leased = self.leased.keys().next().copied().unwrap_or(u64::MAX);
        let again = self.again.keys().next().copied().unwrap_or(u64::MAX);
        self.next.min(leased).min(again)
    }

    fn forget_through(&mut self, seq: u64) {
        self.leased = self.leased.split_off(&(seq + 1));
        self.again = self.again.split_off(&(seq + 1));
    }
}

#[derive(Default)]
pub struct Partition {
    ring: VecDeque<Message>,
    bytes: usize,
    cursors: BTreeMap<String, Cursor>,
}

impl Partition {
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn push(&mut self, m: Message) {
        self.bytes += m.payload.len();
        self.ring.push_back(m);
    }

    pub fn oldest(&self) -> Option<&Message> {
        self.ring.front()
    }

    /// Drops the oldest message whatever any group holds on it (bounds and
    /// TTL); answers its size.
    pub fn drop_oldest(&mut self) -> Option<usize> {
        let m = self.ring.pop_front()?;
        self.bytes -= m.payload.len();
        for c in self.cursors.values_mut() {
            c.forget_through(m.seq);
        }
        Some(m.payload.len())
    }

    /// Empties the partition and forgets every group's place; answers how
    /// many messages went.
    pub fn clear(&mut self) -> usize {
        let n = self.ring.len();
        *self = Partition::default();
        n
    }

    /// Leases that lapsed by `now` hand their message back, or drop it for
    /// that group once `attempts_max` deliveries are spent. Answers how many
    /// were dropped.
    pub fn expire(&mut self, now: u64, attempts_max: u32) -> usize {
        let mut dropped = 0;
        for c in self.cursors.values_mut() {
            let lapsed: Vec<u64> = c.leased.iter().filter(|(_, l)| l.until_ms <= now).map(|(s, _)| *s).collect();
            for seq in lapsed {
                let Some(lease) = c.leased.remove(&seq) else { continue };
                if lease.attempts >= attempts_max {
                    dropped += 1;
                } else {
                    c.again.insert(seq, lease.attempts);
                }
            }
        }
        dropped
    }

    /// The earliest lease expiry `group` holds here.
    pub fn next_expiry(&self, group: &str) -> Option<u64> {
        self.cursors.get(group)?.leased.values().map(|l| l.until_ms).min()
    }

    /// Messages a pop of `group` could claim now. A group that never met
    /// the partition can claim the whole ring.
    pub fn ready(&self, group: &str) -> usize {
        match self.cursors.get(group) {
            None => self.ring.len(),
            Some(c) => c.again.len() + self.ring.len() - self.ring.partition_point(|m| m.seq < c.next),
        }
    }

    pub fn leased(&self, group: &str) -> usize {
        self.cursors.get(group).map_or(0, |c| c.leased.len())
    }

    /// Claims up to `max` messages for `group`: handed-back ones first,
    /// then fresh ones in ring order. With a lease each claim is held until
    /// `now + lease_ms`; without one (commit at delivery) it is settled at
    /// once.
    pub fn claim(&mut self, group: &str, max: usize, now: u64, lease_ms: Option<u64>) -> Vec<Claimed> {
        let Partition { ring, cursors, .. } = self;
        let c = cursors.entry(group.to_string()).or_default();
        let mut out = Vec::new();
        while out.len() < max {
            let Some((seq, attempts)) = c.again.pop_first() else { break };
            let Ok(idx) = ring.binary_search_by_key(&seq, |m| m.seq) else { continue };
            out.push(Claimed { seq, attempts: attempts + 1, payload: ring[idx].payload.clone() });
        }
        let start = ring.partition_point(|m| m.seq < c.next);
        for m in ring.range(start..).take(max - out.len()) {
            out.push(Claimed { seq: m.seq, attempts: 1, payload: m.payload.clone() });
            c.next = m.seq + 1;
        }
        if let Some(ms) = lease_ms {
            for d in &out {
                c.leased.insert(d.seq, Lease { until_ms: now + ms, attempts: d.attempts });
            }
        }
        out
    }

    /// Settles one leased delivery of `group`: `ok` is done; a failure hands
    /// it back, or drops it once `attempts_max` deliveries are spent.
    pub fn settle(&mut self, group: &str, seq: u64, ok: bool, attempts_max: u32) -> Settle {
        let Some(c) = self.cursors.get_mut(group) else { return Settle::NoLease };
        let Some(lease) = c.leased.remove(&seq) else { return Settle::NoLease };
        if ok {
            Settle::Done
        } else if lease.attempts >= attempts_max {
            Settle::Dropped
        } else {
            c.again.insert(seq, lease.attempts);
            Settle::Again
        }
    }

    pub fn forget_group(&mut self, group: &str) {
        self.cursors.remove(group);
    }

    /// Removes the oldest messages every group of the queue is done with;
    /// answers (messages, bytes) removed. A group that never met this
    /// partition has taken nothing from it yet, so it keeps everything, and
    /// with no group at all nothing is consumed.
    pub fn trim<'a>(&mut self, groups: impl Iterator<Item = &'a String>) -> (usize, usize) {
        let water = groups.map(|g| self.low_water(g)).min();
        water.map_or((0, 0), |w| self.retire_below(w))
    }

    /// When the last groups of a queue go quiet: removes what any of them
    /// is done with, so nothing consumed is offered again to whoever comes
    /// next, and keeps what none of them took.
    pub fn retire_consumed<'a>(&mut self, groups: impl Iterator<Item = &'a String>) -> (usize, usize) {
        let water = groups.map(|g| self.low_water(g)).max();
        water.map_or((0, 0), |w| self.retire_below(w))
    }

    fn low_water(&self, group: &str) -> u64 {
        self.cursors.get(group).map_or(0, Cursor::low_water)
    }

    fn retire_below(&mut self, water: u64) -> (usize, usize) {
        let (mut n, mut bytes) = (0, 0);
        while self.ring.front().is_some_and(|m| m.seq < water) {
            let m = self.ring.pop_front().expect("a front message");
            self.bytes -= m.payload.len();
            n += 1;
            bytes += m.payload.len();
        }
        (n, bytes)
    }

    /// Nothing stored and nothing anyone holds: safe to forget.
    pub fn is_vacant(&self) -> bool {
        self.ring.is_empty()
    }
}

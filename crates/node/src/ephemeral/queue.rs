//! One ephemeral queue: its options, its partitions, the groups consuming
//! it, and the signal a long poll parks on.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::Notify;

use regina_types::limits::{EPHEMERAL_GROUPS_PER_QUEUE_MAX, EPHEMERAL_IDLE_MS, EPHEMERAL_PARTITIONS_PER_QUEUE_MAX};

use super::options::{Options, Policy};
use super::partition::{Claimed, Message, Partition, Settle};
use super::EphemeralError;

/// Messages dropped without being consumed, by cause.
#[derive(Debug, Default, Clone, Copy)]
pub struct Dropped {
    pub bounds: u64,
    pub ttl: u64,
    pub retry: u64,
}

pub struct Queue {
    pub options: Options,
    /// Made by configure (kept until deleted) rather than by a push or pop
    /// (collected once empty and idle).
    pub declared: bool,
    /// Raised by every push and every hand-back, so parked pops look again.
    pub notify: Arc<Notify>,
    pub last_active_ms: u64,
    pub(super) partitions: BTreeMap<String, Partition>,
    /// Every group consuming the queue, with when it last popped or acked.
    pub(super) groups: BTreeMap<String, u64>,
    pub(super) messages: usize,
    pub(super) bytes: usize,
    pub dropped: Dropped,
    /// Where a pop naming no partition starts, so partitions take turns.
    turn: usize,
}

impl Queue {
    pub fn new(options: Options, declared: bool, now: u64) -> Queue {
        Queue {
            options,
            declared,
            notify: Arc::new(Notify::new()),
            last_active_ms: now,
            partitions: BTreeMap::new(),
            groups: BTreeMap::new(),
            messages: 0,
            bytes: 0,
            dropped: Dropped::default(),
            turn: 0,
        }
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// An implicit queue with nothing in it, untouched for the idle time.
    pub fn is_collectable(&self, now: u64) -> bool {
        !self.declared && self.messages == 0 && now.saturating_sub(self.last_active_ms) >= EPHEMERAL_IDLE_MS
    }

    /// Lapsed leases, TTL, groups gone quiet, and trimming what every group
    /// is done with. Run before anything reads or changes the queue.
    pub fn housekeep(&mut self, now: u64) {
        let max = self.options.attempts_max();
        for p in self.partitions.values_mut() {
            let n = p.expire(now, max);
            self.dropped.retry += n as u64;
        }
        if self.options.ttl_seconds > 0 {
            let horizon = now.saturating_sub(self.options.ttl_seconds * 1000);
            for p in self.partitions.values_mut() {
                while p.oldest().is_some_and(|m| m.at_ms <= horizon) {
                    let b = p.drop_oldest().unwrap_or(0);
                    self.messages -= 1;
                    self.bytes -= b;
                    self.dropped.ttl += 1;
                }
            }
        }
        let quiet: Vec<String> = self
            .groups
            .iter()
            .filter(|(g, seen)| {
                now.saturating_sub(**seen) >= EPHEMERAL_IDLE_MS && self.partitions.values().all(|p| p.leased(g) == 0)
            })
            .map(|(g, _)| g.clone())
            .collect();
        if !quiet.is_empty() && quiet.len() == self.groups.len() {
            for p in self.partitions.values_mut() {
                let (n, b) = p.retire_consumed(quiet.iter());
                self.messages -= n;
                self.bytes -= b;
            }
        }
        for g in quiet {
            self.groups.remove(&g);
            self.partitions.values_mut().for_each(|p| p.forget_group(&g));
        }
        self.trim();
    }

    fn trim(&mut self) {
        for p in self.partitions.values_mut() {
            let (n, b) = p.trim(self.groups.keys());
            self.messages -= n;
            self.bytes -= b;
        }
        self.partitions.retain(|_, p| !p.is_vacant());
    }

    /// Appends `payloads` to `partition`, all or nothing. `node_room` is how
    /// many bytes this queue may hold before the node's budget is spent.
    pub fn push(
        &mut self,
        partition: &str,
        payloads: Vec<Arc<str>>,
        now: u64,
        next_seq: &mut u64,
        node_room: usize,
    ) -> Result<usize, EphemeralError> {
        let n = payloads.len();
        let b: usize = payloads.iter().map(|p| p.len()).sum();
        let o = &self.options;
        if n > o.max_length || b > o.max_bytes {
            return Err(EphemeralError::bad(format!(
                "this push ({n} messages, {b} bytes) is larger than the queue's bounds ({} messages, {} bytes)",
                o.max_length, o.max_bytes
            )));
        }
        if !self.partitions.contains_key(partition) && self.partitions.len() >= EPHEMERAL_PARTITIONS_PER_QUEUE_MAX {
            return Err(EphemeralError::bad(format!(
                "the queue already has {EPHEMERAL_PARTITIONS_PER_QUEUE_MAX} partitions"
            )));
        }
        let over = |q: &Queue, cap: usize| q.messages + n > q.options.max_length || q.bytes + b > cap;
        match self.options.policy {
            Policy::Reject => {
                if over(self, self.options.max_bytes) {
                    return Err(EphemeralError::full(format!(
                        "the ephemeral queue is at its bounds ({} of {} messages, {} of {} bytes) and its policy is reject",
                        self.messages, self.options.max_length, self.bytes, self.options.max_bytes
                    )));
                }
                if self.bytes + b > node_room {
                    return Err(EphemeralError::node_full(node_room));
                }
            }
            Policy::DropOldest => {
                if b > node_room {
                    return Err(EphemeralError::node_full(node_room));
                }
                // Feed semantics: the oldest messages make room, for the
                // queue's bounds and for the node's budget alike.
                let cap = self.options.max_bytes.min(node_room);
                while over(self, cap) && self.drop_oldest() {
                    self.dropped.bounds += 1;
                }
            }
        }
        let p = self.partitions.entry(partition.to_string()).or_default();
        for payload in payloads {
            *next_seq += 1;
            p.push(Message { seq: *next_seq, at_ms: now, payload });
        }
        self.messages += n;
        self.bytes += b;
        self.last_active_ms = now;
        self.notify.notify_waiters();
        Ok(n)
    }

    /// Drops the queue's oldest message, whichever partition holds it.
    fn drop_oldest(&mut self) -> bool {
        let oldest = self.partitions.iter().filter_map(|(n, p)| p.oldest().map(|m| (m.seq, n))).min_by_key(|(s, _)| *s);
        let Some(name) = oldest.map(|(_, n)| n.clone()) else { return false };
        let b = self.partitions.get_mut(&name).and_then(Partition::drop_oldest).unwrap_or(0);
        self.messages -= 1;
        self.bytes -= b;
        true
    }

    /// Registers `group` as a consumer (refreshing when it was last seen).
    pub fn meet_group(&mut self, group: &str, now: u64) -> Result<(), EphemeralError> {
        if !self.groups.contains_key(group) && self.groups.len() >= EPHEMERAL_GROUPS_PER_QUEUE_MAX {
            return Err(EphemeralError::bad(format!(
                "the queue already has {EPHEMERAL_GROUPS_PER_QUEUE_MAX} consumer groups; idle ones are forgotten \
                 after {} s",
                EPHEMERAL_IDLE_MS / 1000
            )));
        }
        self.groups.insert(group.to_string(), now);
        Ok(())
    }

    /// The partitions a pop looks at, in the order it takes them.
    fn scope(&mut self, partition: Option<&str>) -> Vec<String> {
        match partition {
            Some(p) if self.partitions.contains_key(p) => vec![p.to_string()],
            Some(_) => Vec::new(),
            None => {
                let names: Vec<String> = self.partitions.keys().cloned().collect();
                let start = if names.is_empty() { 0 } else { self.turn % names.len() };
                self.turn = self.turn.wrapping_add(1);
                names[start..].iter().chain(&names[..start]).cloned().collect()
            }
        }
    }

    /// Messages `group` could claim now in `partition` (or everywhere), and
    /// the earliest lease of the group there that will lapse.
    pub fn ready(&self, group: &str, partition: Option<&str>) -> (usize, Option<u64>) {
        let parts = self.partitions.iter().filter(|(name, _)| partition.is_none_or(|p| p == name.as_str()));
        parts.fold((0, None), |(n, due), (_, p)| {
            let d = p.next_expiry(group);
            (n + p.ready(group), due.into_iter().chain(d).min())
        })
    }

    /// Whether a waiting pop that has seen `ready` messages since `since`
    /// holds for the queue's `windowBuffer` instead of claiming now: `None`
    /// claims; `Some(closes)` holds, until `closes` when the window has a
    /// time bound (else until enough are ready or the pop's own timeout).
    pub fn window_holds(&self, ready: usize, batch: usize, since: u64, now: u64) -> Option<Option<u64>> {
        let w = self.options.window?;
        let want = if w.count > 0 { w.count.min(batch) } else { batch };
        let closes = (w.ms > 0).then(|| since + w.ms);
        (ready < want && closes.is_none_or(|t| now < t)).then_some(closes)
    }

    /// Claims up to `max` messages for `group`. Answers (partition, claim).
    pub fn claim(
        &mut self,
        group: &str,
        partition: Option<&str>,
        max: usize,
        auto_ack: bool,
        now: u64,
    ) -> Vec<(String, Claimed)> {
        let lease = (!auto_ack).then(|| self.options.lease_ms());
        let mut out = Vec::new();
        for name in self.scope(partition) {
            if out.len() >= max {
                break;
            }
            let Some(p) = self.partitions.get_mut(&name) else { continue };
            for c in p.claim(group, max - out.len(), now, lease) {
                out.push((name.clone(), c));
            }
        }
        self.last_active_ms = now;
        if auto_ack {
            self.trim();
        }
        out
    }

    /// Settles one delivery of `group`.
    pub fn settle(&mut self, group: &str, partition: &str, seq: u64, ok: bool, now: u64) -> Settle {
        self.last_active_ms = now;
        if let Some(seen) = self.groups.get_mut(group) {
            *seen = now;
        }
        let max = self.options.attempts_max();
        let Some(p) = self.partitions.get_mut(partition) else { return Settle::NoLease };
        let s = p.settle(group, seq, ok, max);
        match s {
            Settle::Dropped => self.dropped.retry += 1,
            Settle::Again => self.notify.notify_waiters(),
            Settle::Done | Settle::NoLease => {}
        }
        s
    }

    /// Called once after a run of `settle`s.
    pub fn settled(&mut self) {
        self.trim();
    }

    /// Drops every message, voids every lease and forgets every group's
    /// place; keeps the options. Answers how many messages went.
    pub fn reset(&mut self) -> usize {
        let n: usize = self.partitions.values_mut().map(Partition::clear).sum();
        self.partitions.clear();
        self.groups.clear();
        self.messages = 0;
        self.bytes = 0;
        n
    }
}

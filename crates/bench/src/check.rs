//! Delivery checks over what consumers received: nothing lost, nothing
//! delivered twice unless a redelivery was legitimate, and each partition
//! read in the order it was written. A plain function over records so a
//! bad broker can be simulated in tests without a network.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Value};

/// One message as a consumer of `group` received it, in the order the
/// group's consumers received them (appended before the batch is acked, so
/// a partition's next lease cannot start before this batch is recorded).
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub group: usize,
    pub partition: String,
    pub offset: i64,
    pub txn: String,
    /// The producer's per-partition sequence number carried in the payload.
    pub seq: Option<u64>,
    pub attempt: u64,
}

/// What was written: transaction id -> (partition, per-partition sequence).
pub type Expected = HashMap<String, (String, u64)>;

#[derive(Debug, Default)]
pub struct Verdict {
    pub expected: u64,
    pub received: u64,
    pub lost: u64,
    pub duplicates: u64,
    pub unexpected: u64,
    pub misrouted: u64,
    pub out_of_order: u64,
    /// Duplicates are tolerated only when a lease expired or a message came
    /// back with `deliveryAttempt > 1`; set from what the consumers saw.
    pub redelivery_seen: bool,
    pub problems: Vec<String>,
}

impl Verdict {
    pub fn ok(&self) -> bool {
        self.lost == 0
            && self.unexpected == 0
            && self.misrouted == 0
            && self.out_of_order == 0
            && (self.duplicates == 0 || self.redelivery_seen)
    }

    pub fn report(&self) -> Value {
        json!({
            "ok": self.ok(), "expected": self.expected, "received": self.received,
            "lost": self.lost, "duplicates": self.duplicates, "unexpected": self.unexpected,
            "misrouted": self.misrouted, "outOfOrder": self.out_of_order,
            "redeliverySeen": self.redelivery_seen, "problems": self.problems,
        })
    }

    /// A one-paragraph reason for a failed run.
    pub fn failure(&self) -> String {
        format!(
            "delivery check FAILED: lost={} duplicates={} (redelivery seen: {}) unexpected={} misrouted={} out_of_order={}; first problems: {}",
            self.lost, self.duplicates, self.redelivery_seen, self.unexpected, self.misrouted,
            self.out_of_order, self.problems.join("; ")
        )
    }

    fn note(&mut self, p: String) {
        if self.problems.len() < 10 {
            self.problems.push(p);
        }
    }
}

/// Checks `records` of `groups` groups against `expected`. Every group must
/// see every expected message. Order: within one (group, partition), the
/// first deliveries must have strictly increasing offsets and producer
/// sequences; a redelivered copy is judged as a duplicate, not as disorder.
pub fn check(expected: &Expected, groups: usize, records: &[Record], redelivery_seen: bool) -> Verdict {
    let mut v = Verdict {
        expected: expected.len() as u64 * groups as u64,
        received: records.len() as u64,
        redelivery_seen: redelivery_seen || records.iter().any(|r| r.attempt > 1),
        ..Verdict::default()
    };
    let mut seen: Vec<HashSet<&str>> = vec![HashSet::new(); groups];
    // (group, partition) -> last (offset, seq) of a first delivery.
    let mut last: HashMap<(usize, &str), (i64, Option<u64>)> = HashMap::new();
    for r in records {
        if r.group >= groups {
            v.unexpected += 1;
            v.note(format!("record for unknown group {}", r.group));
            continue;
        }
        let Some((part, seq)) = expected.get(&r.txn) else {
            v.unexpected += 1;
            v.note(format!("group {} got {} which was never written", r.group, r.txn));
            continue;
        };
        if !seen[r.group].insert(r.txn.as_str()) {
            v.duplicates += 1;
            v.note(format!("group {} got {} again (offset {}, attempt {})", r.group, r.txn, r.offset, r.attempt));
            continue;
        }
        if *part != r.partition {
            v.misrouted += 1;
            v.note(format!("{} was written to {part} but read from {}", r.txn, r.partition));
        }
        if r.seq.is_some_and(|s| s != *seq) {
            v.misrouted += 1;
            v.note(format!("{} carries sequence {:?}, written as {seq}", r.txn, r.seq));
        }
        let key = (r.group, r.partition.as_str());
        if let Some(&(off, prev_seq)) = last.get(&key) {
            if r.offset <= off || prev_seq.is_some_and(|p| p >= *seq) {
                v.out_of_order += 1;
                v.note(format!(
                    "group {} partition {}: offset {} (seq {seq}) after offset {off} (seq {prev_seq:?})",
                    r.group, r.partition, r.offset
                ));
            }
        }
        last.insert(key, (r.offset, Some(*seq)));
    }
    for (g, s) in seen.iter().enumerate() {
        let missing = expected.keys().filter(|t| !s.contains(t.as_str()));
        for t in missing {
            v.lost += 1;
            if v.lost <= 3 {
                v.note(format!("group {g} never got {t}"));
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (Expected, Vec<Record>) {
        let mut e = Expected::new();
        let mut r = Vec::new();
        for p in 0..2 {
            for s in 0..3u64 {
                let txn = format!("p{p}-{s}");
                e.insert(txn.clone(), (format!("p{p}"), s));
                r.push(Record {
                    group: 0,
                    partition: format!("p{p}"),
                    offset: s as i64,
                    txn,
                    seq: Some(s),
                    attempt: 1,
                });
            }
        }
        (e, r)
    }

    #[test]
    fn clean_passes() {
        let (e, r) = setup();
        assert!(check(&e, 1, &r, false).ok());
    }

    #[test]
    fn loss_duplicate_and_disorder_fail() {
        let (e, mut r) = setup();
        r.remove(1);
        let v = check(&e, 1, &r, false);
        assert_eq!((v.lost, v.ok()), (1, false));

        let (e, mut r) = setup();
        r.push(r[2].clone());
        let v = check(&e, 1, &r, false);
        assert_eq!((v.duplicates, v.ok()), (1, false));
        assert!(check(&e, 1, &r, true).ok(), "a duplicate after an expired lease is legal");

        let (e, mut r) = setup();
        r.swap(0, 1);
        let v = check(&e, 1, &r, false);
        assert_eq!((v.out_of_order, v.ok()), (1, false));
    }

    #[test]
    fn every_group_must_see_everything() {
        let (e, r) = setup();
        let v = check(&e, 2, &r, false);
        assert_eq!(v.lost, 6);
    }
}

//! Timers: a message promised for later, keyed by (queue, timer key). A
//! timer fires through the log like any push, by a `FireTimers` entry the
//! leader proposes when one is due; it is judged against that entry's time,
//! so it never fires early. Scheduling the same key again replaces it.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// Most timers fired by one entry; the rest wait for the next one.
pub const TIMERS_PER_FIRE_MAX: usize = 256;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerRow {
    pub partition: String,
    pub txn: String,
    /// Minted when scheduled; the fired message carries it.
    pub message_id: [u8; 16],
    /// The payload's JSON text.
    #[serde(with = "serde_bytes")]
    pub payload: Vec<u8>,
    pub deliver_at_ms: u64,
    pub created_ms: u64,
}

/// A schedule request as the log carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleOp {
    pub queue: String,
    pub timer_key: String,
    pub partition: String,
    pub txn: String,
    pub message_id: [u8; 16],
    #[serde(with = "serde_bytes")]
    pub payload: Vec<u8>,
    /// Relative to the entry's time; negative fires at the next check.
    pub delay_ms: i64,
}

/// One timer operation of a call or a transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimerOp {
    Schedule(ScheduleOp),
    Cancel { queue: String, timer_key: String },
}

/// What a timer operation did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimerOutcome {
    Scheduled { replaced: bool, deliver_at_ms: u64 },
    Cancelled { txn: String },
    Absent,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timers {
    rows: BTreeMap<(String, String), TimerRow>,
    /// (deliver_at, queue, key), earliest first.
    due: BTreeSet<(u64, String, String)>,
}

impl Timers {
    pub fn apply(&mut self, op: &TimerOp, now_ms: u64) -> TimerOutcome {
        match op {
            TimerOp::Schedule(s) => {
                let deliver_at_ms = if s.delay_ms <= 0 { now_ms } else { now_ms.saturating_add(s.delay_ms as u64) };
                let key = (s.queue.clone(), s.timer_key.clone());
                let replaced = self.remove(&key).is_some();
                self.due.insert((deliver_at_ms, key.0.clone(), key.1.clone()));
                let row = TimerRow {
                    partition: s.partition.clone(),
                    txn: s.txn.clone(),
                    message_id: s.message_id,
                    payload: s.payload.clone(),
                    deliver_at_ms,
                    created_ms: now_ms,
                };
                self.rows.insert(key, row);
                TimerOutcome::Scheduled { replaced, deliver_at_ms }
            }
            TimerOp::Cancel { queue, timer_key } => match self.remove(&(queue.clone(), timer_key.clone())) {
                Some(row) => TimerOutcome::Cancelled { txn: row.txn },
                None => TimerOutcome::Absent,
            },
        }
    }

    fn remove(&mut self, key: &(String, String)) -> Option<TimerRow> {
        let row = self.rows.remove(key)?;
        self.due.remove(&(row.deliver_at_ms, key.0.clone(), key.1.clone()));
        Some(row)
    }

    /// Removes and returns up to [`TIMERS_PER_FIRE_MAX`] timers due at
    /// `now_ms`, earliest first.
    pub fn take_due(&mut self, now_ms: u64) -> Vec<((String, String), TimerRow)> {
        let keys: Vec<(String, String)> = self
            .due
            .iter()
            .take_while(|(at, _, _)| *at <= now_ms)
            .take(TIMERS_PER_FIRE_MAX)
            .map(|(_, q, k)| (q.clone(), k.clone()))
            .collect();
        keys.into_iter().filter_map(|k| self.remove(&k).map(|row| (k, row))).collect()
    }

    /// The earliest due time, if any timer is pending.
    pub fn next_due_ms(&self) -> Option<u64> {
        self.due.first().map(|(at, _, _)| *at)
    }

    pub fn get(&self, queue: &str, timer_key: &str) -> Option<&TimerRow> {
        self.rows.get(&(queue.to_string(), timer_key.to_string()))
    }

    /// A queue's timers in key order after `after` (exclusive).
    pub fn list<'a>(&'a self, queue: &'a str, after: Option<&'a str>) -> impl Iterator<Item = (&'a str, &'a TimerRow)> {
        let start = (queue.to_string(), after.unwrap_or("").to_string());
        self.rows
            .range(start..)
            .take_while(move |((q, _), _)| q == queue)
            .filter(move |((_, k), _)| after.is_none_or(|a| k.as_str() > a))
            .map(|((_, k), row)| (k.as_str(), row))
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

impl crate::state::State {
    /// Pushes every due timer's message through the ordinary push path
    /// (dedup included) and forgets the timer.
    pub(crate) fn fire_timers(&mut self, writes: &mut Vec<crate::body::BodyWrite>) {
        let due = self.timers.take_due(self.now_ms);
        if due.is_empty() {
            return;
        }
        let items = due
            .into_iter()
            .map(|((queue, _), row)| crate::command::PushItem {
                queue,
                partition: row.partition,
                transaction_id: row.txn,
                trace_id: None,
                message_id: row.message_id,
                payload: row.payload,
            })
            .collect();
        self.push(&crate::command::PushCmd { items }, writes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sched(key: &str, delay_ms: i64) -> TimerOp {
        TimerOp::Schedule(ScheduleOp {
            queue: "q".into(),
            timer_key: key.into(),
            partition: "P".into(),
            txn: format!("txn-{key}"),
            message_id: [1; 16],
            payload: b"{}".to_vec(),
            delay_ms,
        })
    }

    #[test]
    fn fires_never_early_and_replaces_by_key() {
        let mut t = Timers::default();
        assert_eq!(t.apply(&sched("a", 100), 1000), TimerOutcome::Scheduled { replaced: false, deliver_at_ms: 1100 });
        assert_eq!(t.apply(&sched("a", 50), 1010), TimerOutcome::Scheduled { replaced: true, deliver_at_ms: 1060 });
        assert!(t.take_due(1059).is_empty());
        let fired = t.take_due(1060);
        assert_eq!(fired.len(), 1);
        assert!(t.is_empty() && t.next_due_ms().is_none());
        assert_eq!(t.apply(&sched("b", -5), 2000), TimerOutcome::Scheduled { replaced: false, deliver_at_ms: 2000 });
        assert_eq!(
            t.apply(&TimerOp::Cancel { queue: "q".into(), timer_key: "b".into() }, 2000),
            TimerOutcome::Cancelled { txn: "txn-b".into() }
        );
        assert_eq!(t.apply(&TimerOp::Cancel { queue: "q".into(), timer_key: "b".into() }, 2000), TimerOutcome::Absent);
    }

    #[test]
    fn lists_in_key_order_after_a_key() {
        let mut t = Timers::default();
        for k in ["c", "a", "e", "b", "d"] {
            t.apply(&sched(k, 1000), 0);
        }
        let keys: Vec<&str> = t.list("q", None).map(|(k, _)| k).collect();
        assert_eq!(keys, vec!["a", "b", "c", "d", "e"]);
        let keys: Vec<&str> = t.list("q", Some("b")).map(|(k, _)| k).collect();
        assert_eq!(keys, vec!["c", "d", "e"]);
        assert_eq!(t.list("other", None).count(), 0);
    }
}

//! Timers: a message promised for later, keyed by (queue, timer key). A
//! timer fires through the log like any push, by a `FireTimers` entry the
//! leader proposes when one is due; it is judged against that entry's time,
//! so it never fires early. Scheduling the same key again replaces it.
//!
//! A fire is never lost: a timer whose push is refused (its queue holds
//! `maxSize` messages) stays and is tried again later (see `timer_fire`);
//! after its queue's `timerMaxAttempts` it stays `failed` until an operator
//! retries it, schedules its key again or cancels it.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// Most timers fired by one entry; the rest wait for the next one.
pub const TIMERS_PER_FIRE_MAX: usize = 256;

/// Whether a timer still waits to fire or has given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimerState {
    /// Fires at `deliver_at_ms` (a first try or a retry).
    Pending,
    /// Every attempt was refused; it never fires by itself.
    Failed,
}

impl TimerState {
    pub fn as_str(self) -> &'static str {
        match self {
            TimerState::Pending => "pending",
            TimerState::Failed => "failed",
        }
    }
}

/// Why a fire attempt was refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimerError {
    /// The queue held `max_size` messages already.
    QueueFull { max_size: u64 },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerRow {
    pub partition: String,
    pub txn: String,
    /// Minted when scheduled; the fired message carries it.
    pub message_id: [u8; 16],
    /// The payload's JSON text (sealed for a queue with encryption).
    #[serde(with = "serde_bytes")]
    pub payload: Vec<u8>,
    /// When it fires next; for a failed timer, when it was last tried.
    pub deliver_at_ms: u64,
    pub created_ms: u64,
    /// The time of the last change: scheduled, refused, retried.
    pub updated_ms: u64,
    pub state: TimerState,
    /// Fire attempts refused since it was scheduled or retried.
    pub attempts: u32,
    /// Why the last attempt was refused.
    pub error: Option<TimerError>,
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

/// A schedule request naming an absolute time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleAtOp {
    pub queue: String,
    pub timer_key: String,
    pub partition: String,
    pub txn: String,
    pub message_id: [u8; 16],
    #[serde(with = "serde_bytes")]
    pub payload: Vec<u8>,
    /// Milliseconds since the epoch; a time before the entry's fires at
    /// the next check.
    pub at_ms: u64,
}

/// One timer operation of a call or a transaction. The variant order is
/// part of the log format: new ones go at the end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimerOp {
    Schedule(ScheduleOp),
    Cancel {
        queue: String,
        timer_key: String,
    },
    ScheduleAt(ScheduleAtOp),
    /// Makes a failed timer pending again, `delay_ms` from the entry's
    /// time (negative: at the next check), with fresh attempts.
    Retry {
        queue: String,
        timer_key: String,
        delay_ms: i64,
    },
}

impl TimerOp {
    /// The (queue, timer key) the operation names.
    pub fn key(&self) -> (&str, &str) {
        match self {
            TimerOp::Schedule(s) => (&s.queue, &s.timer_key),
            TimerOp::ScheduleAt(s) => (&s.queue, &s.timer_key),
            TimerOp::Cancel { queue, timer_key } | TimerOp::Retry { queue, timer_key, .. } => (queue, timer_key),
        }
    }
}

/// What a timer operation did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimerOutcome {
    Scheduled {
        replaced: bool,
        deliver_at_ms: u64,
    },
    Cancelled {
        txn: String,
    },
    Absent,
    /// A failed timer is pending again.
    Retried {
        txn: String,
        deliver_at_ms: u64,
    },
    /// A retry of a timer that is not failed: pending (`exists`) or absent.
    NotFailed {
        exists: bool,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timers {
    rows: BTreeMap<(String, String), TimerRow>,
    /// Pending timers only: (deliver_at, queue, key), earliest first. A
    /// failed timer is absent, so it neither fires nor wakes the driver.
    due: BTreeSet<(u64, String, String)>,
    /// Every row as (queue, deliver_at, key): a queue's timers in due order.
    by_queue_due: BTreeSet<(String, u64, String)>,
}

/// Where to schedule a timer: relative to the entry's time or absolute.
enum When {
    Delay(i64),
    At(u64),
}

impl When {
    fn resolve(&self, now_ms: u64) -> u64 {
        match *self {
            When::Delay(d) if d <= 0 => now_ms,
            When::Delay(d) => now_ms.saturating_add(d as u64),
            When::At(at) => at.max(now_ms),
        }
    }
}

impl Timers {
    pub fn apply(&mut self, op: &TimerOp, now_ms: u64) -> TimerOutcome {
        match op {
            TimerOp::Schedule(s) => self.schedule(
                (s.queue.clone(), s.timer_key.clone()),
                (&s.partition, &s.txn, s.message_id, &s.payload),
                When::Delay(s.delay_ms),
                now_ms,
            ),
            TimerOp::ScheduleAt(s) => self.schedule(
                (s.queue.clone(), s.timer_key.clone()),
                (&s.partition, &s.txn, s.message_id, &s.payload),
                When::At(s.at_ms),
                now_ms,
            ),
            TimerOp::Cancel { queue, timer_key } => match self.remove(&(queue.clone(), timer_key.clone())) {
                Some(row) => TimerOutcome::Cancelled { txn: row.txn },
                None => TimerOutcome::Absent,
            },
            TimerOp::Retry { queue, timer_key, delay_ms } => {
                let key = (queue.clone(), timer_key.clone());
                match self.rows.get(&key).map(|r| r.state) {
                    None => TimerOutcome::NotFailed { exists: false },
                    Some(TimerState::Pending) => TimerOutcome::NotFailed { exists: true },
                    Some(TimerState::Failed) => {
                        let mut row = self.remove(&key).expect("present above");
                        row.deliver_at_ms = When::Delay(*delay_ms).resolve(now_ms);
                        row.updated_ms = now_ms;
                        row.state = TimerState::Pending;
                        row.attempts = 0;
                        row.error = None;
                        let out = TimerOutcome::Retried { txn: row.txn.clone(), deliver_at_ms: row.deliver_at_ms };
                        self.insert(key, row);
                        out
                    }
                }
            }
        }
    }

    /// A fresh pending row under `key`, replacing any (failed ones too).
    fn schedule(
        &mut self,
        key: (String, String),
        (partition, txn, message_id, payload): (&str, &str, [u8; 16], &[u8]),
        when: When,
        now_ms: u64,
    ) -> TimerOutcome {
        let deliver_at_ms = when.resolve(now_ms);
        let replaced = self.remove(&key).is_some();
        let row = TimerRow {
            partition: partition.to_string(),
            txn: txn.to_string(),
            message_id,
            payload: payload.to_vec(),
            deliver_at_ms,
            created_ms: now_ms,
            updated_ms: now_ms,
            state: TimerState::Pending,
            attempts: 0,
            error: None,
        };
        self.insert(key, row);
        TimerOutcome::Scheduled { replaced, deliver_at_ms }
    }

    fn insert(&mut self, key: (String, String), row: TimerRow) {
        if row.state == TimerState::Pending {
            self.due.insert((row.deliver_at_ms, key.0.clone(), key.1.clone()));
        }
        self.by_queue_due.insert((key.0.clone(), row.deliver_at_ms, key.1.clone()));
        self.rows.insert(key, row);
    }

    pub(crate) fn remove(&mut self, key: &(String, String)) -> Option<TimerRow> {
        let row = self.rows.remove(key)?;
        self.due.remove(&(row.deliver_at_ms, key.0.clone(), key.1.clone()));
        self.by_queue_due.remove(&(key.0.clone(), row.deliver_at_ms, key.1.clone()));
        Some(row)
    }

    /// Up to [`TIMERS_PER_FIRE_MAX`] pending timers due at `now_ms`,
    /// earliest first, with their rows. They stay until the fire's outcome
    /// says what becomes of each ([`Timers::remove`] or [`Timers::refused`]).
    pub fn due_at(&self, now_ms: u64) -> Vec<((String, String), TimerRow)> {
        self.due
            .iter()
            .take_while(|(at, _, _)| *at <= now_ms)
            .take(TIMERS_PER_FIRE_MAX)
            .map(|(_, q, k)| {
                let key = (q.clone(), k.clone());
                let row = self.rows.get(&key).expect("the due index is consistent").clone();
                (key, row)
            })
            .collect()
    }

    /// Records a refused fire of the timer under `key`: it waits
    /// `retry_wait_ms` more, or, once it has had `max_attempts`, stays
    /// failed where it is.
    pub(crate) fn refused(
        &mut self,
        key: &(String, String),
        error: TimerError,
        now_ms: u64,
        max_attempts: u32,
        retry_wait_ms: impl Fn(u32) -> u64,
    ) {
        let Some(mut row) = self.remove(key) else { return };
        row.attempts = row.attempts.saturating_add(1);
        row.error = Some(error);
        row.updated_ms = now_ms;
        if row.attempts >= max_attempts {
            row.state = TimerState::Failed;
        } else {
            row.deliver_at_ms = now_ms.saturating_add(retry_wait_ms(row.attempts));
        }
        self.insert(key.clone(), row);
    }

    /// The earliest due time of a pending timer, if any.
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

    /// A queue's timers by `deliver_at` then key, after the
    /// (deliver_at, key) `after` (exclusive): keyset paging in due order.
    pub fn list_due<'a>(
        &'a self,
        queue: &'a str,
        after: Option<(u64, &'a str)>,
    ) -> impl Iterator<Item = (&'a str, &'a TimerRow)> {
        let (at, key) = after.unwrap_or((0, ""));
        let start = (queue.to_string(), at, key.to_string());
        self.by_queue_due
            .range(start..)
            .take_while(move |(q, _, _)| q == queue)
            .filter(move |(_, at, k)| after.is_none_or(|(a_at, a_key)| (*at, k.as_str()) > (a_at, a_key)))
            .map(|(q, _, k)| {
                let row = self.rows.get(&(q.clone(), k.clone())).expect("the due index is consistent");
                (k.as_str(), row)
            })
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Every queue holding a timer, in name order, with its (pending,
    /// failed) timers, for listings.
    pub fn queue_counts(&self) -> std::collections::BTreeMap<&str, (usize, usize)> {
        let mut out: std::collections::BTreeMap<&str, (usize, usize)> = std::collections::BTreeMap::new();
        for ((queue, _), row) in &self.rows {
            let e = out.entry(queue.as_str()).or_default();
            if row.state == TimerState::Failed {
                e.1 += 1;
            } else {
                e.0 += 1;
            }
        }
        out
    }

    /// Timers waiting to fire (first tries and retries).
    pub fn pending_count(&self) -> usize {
        self.due.len()
    }

    /// Timers that gave up and wait for an operator.
    pub fn failed_count(&self) -> usize {
        self.rows.len() - self.due.len()
    }

    /// The indexes agree with the rows.
    pub fn check(&self) -> Result<(), String> {
        if self.by_queue_due.len() != self.rows.len() {
            return Err("timer due-order index and rows disagree".into());
        }
        for ((q, k), row) in &self.rows {
            let pending = self.due.contains(&(row.deliver_at_ms, q.clone(), k.clone()));
            if pending != (row.state == TimerState::Pending) {
                return Err(format!("timer {q}/{k} is {:?} but pending={pending} in the due index", row.state));
            }
            if !self.by_queue_due.contains(&(q.clone(), row.deliver_at_ms, k.clone())) {
                return Err(format!("timer {q}/{k} is missing from the due-order index"));
            }
        }
        Ok(())
    }
}

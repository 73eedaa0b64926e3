//! Timers: a message the broker pushes later. A timer is named by
//! (queue, timer key); scheduling an existing key moves it (and replaces
//! its payload). When it fires, the broker pushes `payload` into the queue
//! with the timer's `txn` as the message's transaction id, and the timer
//! row disappears. A fire the queue refuses (it is at `maxSize`) is tried
//! again; after the queue's `timerMaxAttempts` the row stays `failed`
//! until [`Timers::retry`] (or a new schedule of the key) revives it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::Method;
use serde_json::{json, Value};

use crate::base64;
use crate::client::{bool_of, opt_str, results, segment, str_of, Client, Error, Request, Result};
use crate::queue::DEFAULT_PARTITION;

/// A timer to schedule. Its `txn` is minted here, so sending the same
/// timer twice promises the same message.
#[derive(Debug, Clone)]
pub struct Timer {
    pub queue: String,
    pub key: String,
    /// From when the broker applies it; unused when `at` is set.
    pub delay: Duration,
    /// An absolute time instead of `delay`; a past time fires at once.
    pub at: Option<SystemTime>,
    pub payload: Value,
    pub partition: String,
    pub txn: String,
}

impl Timer {
    /// A timer firing `delay` from when the broker applies it, with a `null` payload.
    pub fn new(queue: impl Into<String>, key: impl Into<String>, delay: Duration) -> Timer {
        Timer {
            queue: queue.into(),
            key: key.into(),
            delay,
            at: None,
            payload: Value::Null,
            partition: DEFAULT_PARTITION.to_string(),
            txn: uuid::Uuid::now_v7().to_string(),
        }
    }

    /// A timer firing at `at` (a time in the past fires at the broker's
    /// next check), with a `null` payload.
    pub fn at(queue: impl Into<String>, key: impl Into<String>, at: SystemTime) -> Timer {
        Timer { at: Some(at), ..Timer::new(queue, key, Duration::ZERO) }
    }

    pub fn payload(mut self, payload: Value) -> Timer {
        self.payload = payload;
        self
    }

    /// The partition the fired message lands in.
    pub fn partition(mut self, partition: impl Into<String>) -> Timer {
        self.partition = partition.into();
        self
    }

    /// The fired message's transaction id.
    pub fn txn(mut self, txn: impl Into<String>) -> Timer {
        self.txn = txn.into();
        self
    }

    pub(crate) fn wire(&self, op: &str) -> Value {
        // The payload travels as base64 of its JSON text.
        let text = self.payload.to_string();
        let mut v = json!({
            "op": op,
            "queue": self.queue,
            "timerKey": self.key,
            "payload": base64::encode(text.as_bytes()),
            "txn": self.txn,
            "partition": self.partition,
        });
        // Exactly one of the two: the broker refuses both.
        match self.at {
            Some(at) => v["at"] = json!(epoch_ms(at)),
            None => v["delayMs"] = json!(self.delay.as_millis() as u64),
        }
        v
    }
}

fn epoch_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

pub(crate) fn cancel_wire(queue: &str, key: &str) -> Value {
    json!({ "op": "cancel", "queue": queue, "timerKey": key })
}

/// The broker's promise for a scheduled timer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheduled {
    /// True when the key was already pending and was moved.
    pub rescheduled: bool,
    pub txn: String,
    /// The id the fired message will carry.
    pub message_id: String,
    pub deliver_at: String,
}

impl Scheduled {
    pub(crate) fn from_wire(v: &Value) -> Scheduled {
        Scheduled {
            rescheduled: v.get("status").and_then(Value::as_str) == Some("rescheduled"),
            txn: str_of(v, "txn"),
            message_id: str_of(v, "messageId"),
            deliver_at: str_of(v, "deliverAt"),
        }
    }
}

/// Whether a timer still waits to fire or gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerState {
    /// Waits for its `deliver_at` (a first try or a retry).
    Pending,
    /// Every fire attempt was refused; it waits for [`Timers::retry`].
    Failed,
}

impl TimerState {
    fn as_str(self) -> &'static str {
        match self {
            TimerState::Pending => "pending",
            TimerState::Failed => "failed",
        }
    }
}

/// A timer as the broker holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct TimerRow {
    pub queue: String,
    pub key: String,
    pub partition: String,
    pub state: TimerState,
    /// When it fires next; for a failed timer, when it was last tried.
    pub deliver_at: String,
    /// Fire attempts refused since it was scheduled or retried.
    pub attempts: u32,
    /// Why the last attempt was refused (`{"code": "QUEUE_FULL", ...}`).
    pub error: Option<Value>,
    pub txn: String,
    pub message_id: String,
    pub payload: Value,
    pub created_at: String,
    pub updated_at: String,
}

impl TimerRow {
    fn from_wire(v: &Value) -> Result<TimerRow> {
        let bytes = base64::decode(&str_of(v, "payload"))
            .ok_or_else(|| Error::Decode(format!("a timer payload is not base64: {v}")))?;
        Ok(TimerRow {
            queue: str_of(v, "queue"),
            key: str_of(v, "timerKey"),
            partition: str_of(v, "partition"),
            state: if str_of(v, "state") == "failed" { TimerState::Failed } else { TimerState::Pending },
            deliver_at: str_of(v, "deliverAt"),
            attempts: v.get("attempts").and_then(Value::as_u64).unwrap_or(0) as u32,
            error: v.get("error").filter(|e| !e.is_null()).cloned(),
            txn: str_of(v, "txn"),
            message_id: str_of(v, "messageId"),
            payload: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            created_at: str_of(v, "createdAt"),
            updated_at: str_of(v, "updatedAt"),
        })
    }
}

/// How a list read orders rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimerOrder {
    /// By timer key (the cursor is a key).
    #[default]
    Key,
    /// By `deliverAt`, then key (the cursor is the page's `next_after`).
    Due,
}

/// What a list read asks for: a state, an order, a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerQuery {
    pub state: Option<TimerState>,
    pub order: TimerOrder,
    /// The previous page's `next_after`, exclusive.
    pub after: Option<String>,
    pub limit: u32,
}

impl Default for TimerQuery {
    fn default() -> Self {
        TimerQuery { state: None, order: TimerOrder::Key, after: None, limit: 100 }
    }
}

/// What a retry did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Retried {
    /// The failed timer is pending again, with fresh attempts.
    Retried { txn: String, deliver_at: String },
    /// Refused (`TIMER_NOT_FAILED`): the timer is pending (`exists`) or
    /// there is none under the key.
    NotFailed { exists: bool },
}

/// One page of a queue's timers.
#[derive(Debug, Clone, PartialEq)]
pub struct TimerPage {
    pub rows: Vec<TimerRow>,
    /// Where the next page starts; `None` on the last page.
    pub next_after: Option<String>,
}

/// The timers of one broker.
#[derive(Debug, Clone)]
pub struct Timers {
    client: Client,
}

impl Client {
    pub fn timers(&self) -> Timers {
        Timers { client: self.clone() }
    }
}

impl Timers {
    /// Schedules a timer, or moves it when its key is pending.
    pub async fn schedule(&self, timer: &Timer) -> Result<Scheduled> {
        self.upsert(timer, "schedule").await
    }

    /// The same upsert, named for code that means to move a timer.
    pub async fn reschedule(&self, timer: &Timer) -> Result<Scheduled> {
        self.upsert(timer, "reschedule").await
    }

    async fn upsert(&self, timer: &Timer, op: &str) -> Result<Scheduled> {
        let body = json!({ "operations": [timer.wire(op)] });
        let answer = self.client.post("/api/v1/timers", &body).await?;
        Ok(Scheduled::from_wire(&results(&answer, 1)?[0]))
    }

    /// Cancels a pending timer; false when none was pending (never
    /// scheduled, already fired or being fired).
    pub async fn cancel(&self, queue: &str, key: &str) -> Result<bool> {
        let path = format!("/api/v1/timers/{}/{}", segment(queue, false), segment(key, true));
        let answer = self.client.call(Request::new(Method::DELETE, path)).await?;
        Ok(bool_of(&answer, "ok"))
    }

    /// The pending timer under (queue, key), if any.
    pub async fn peek(&self, queue: &str, key: &str) -> Result<Option<TimerRow>> {
        let path = format!("/api/v1/timers/{}/{}", segment(queue, false), segment(key, true));
        let answer = self.client.get(&path).await?;
        if !bool_of(&answer, "found") {
            return Ok(None);
        }
        TimerRow::from_wire(&answer).map(Some)
    }

    /// One page of a queue's timers after the key `after` (exclusive), in key order.
    pub async fn list(&self, queue: &str, after: Option<&str>, limit: u32) -> Result<TimerPage> {
        let query = TimerQuery { after: after.map(str::to_string), limit, ..TimerQuery::default() };
        self.query(queue, &query).await
    }

    /// One page of a queue's timers as `query` asks: by state, in key or
    /// due order.
    pub async fn query(&self, queue: &str, query: &TimerQuery) -> Result<TimerPage> {
        let mut req = Request::new(Method::GET, format!("/api/v1/timers/{}", segment(queue, false)))
            .query("limit", query.limit.max(1));
        if let Some(a) = &query.after {
            req = req.query("after", a);
        }
        if let Some(s) = query.state {
            req = req.query("state", s.as_str());
        }
        if query.order == TimerOrder::Due {
            req = req.query("order", "due");
        }
        let answer = self.client.call(req).await?;
        let rows = answer
            .get("rows")
            .and_then(Value::as_array)
            .ok_or_else(|| Error::Decode(format!("timer list answered {answer}")))?
            .iter()
            .map(TimerRow::from_wire)
            .collect::<Result<Vec<_>>>()?;
        let next_after = if bool_of(&answer, "truncated") { opt_str(&answer, "nextAfter") } else { None };
        Ok(TimerPage { rows, next_after })
    }

    /// Makes a failed timer pending again, `delay` from now (`None`: at
    /// the broker's next check), with fresh attempts.
    pub async fn retry(&self, queue: &str, key: &str, delay: Option<Duration>) -> Result<Retried> {
        let mut op = json!({ "op": "retry", "queue": queue, "timerKey": key });
        if let Some(d) = delay {
            op["delayMs"] = json!(d.as_millis() as u64);
        }
        let answer = self.client.post("/api/v1/timers", &json!({ "operations": [op] })).await?;
        let r = &results(&answer, 1)?[0];
        if bool_of(r, "ok") {
            return Ok(Retried::Retried { txn: str_of(r, "txn"), deliver_at: str_of(r, "deliverAt") });
        }
        match r.get("code").and_then(Value::as_str) {
            Some("TIMER_NOT_FAILED") => Ok(Retried::NotFailed { exists: str_of(r, "status") == "pending" }),
            _ => Err(Error::Decode(format!("a retry answered {r}"))),
        }
    }
}

//! Timers: a message the broker pushes later. A timer is named by
//! (queue, timer key); scheduling an existing key moves it (and replaces
//! its payload). When it fires, the broker pushes `payload` into the queue
//! with the timer's `txn` as the message's transaction id, and the timer
//! row disappears.

use std::time::Duration;

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
    pub delay: Duration,
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
            payload: Value::Null,
            partition: DEFAULT_PARTITION.to_string(),
            txn: uuid::Uuid::now_v7().to_string(),
        }
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
        json!({
            "op": op,
            "queue": self.queue,
            "timerKey": self.key,
            "payload": base64::encode(text.as_bytes()),
            "delayMs": self.delay.as_millis() as u64,
            "txn": self.txn,
            "partition": self.partition,
        })
    }
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

/// A pending timer as the broker holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct TimerRow {
    pub queue: String,
    pub key: String,
    pub partition: String,
    pub deliver_at: String,
    pub txn: String,
    pub message_id: String,
    pub payload: Value,
    pub created_at: String,
}

impl TimerRow {
    fn from_wire(v: &Value) -> Result<TimerRow> {
        let bytes = base64::decode(&str_of(v, "payload"))
            .ok_or_else(|| Error::Decode(format!("a timer payload is not base64: {v}")))?;
        Ok(TimerRow {
            queue: str_of(v, "queue"),
            key: str_of(v, "timerKey"),
            partition: str_of(v, "partition"),
            deliver_at: str_of(v, "deliverAt"),
            txn: str_of(v, "txn"),
            message_id: str_of(v, "messageId"),
            payload: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            created_at: str_of(v, "createdAt"),
        })
    }
}

/// One page of a queue's pending timers, in key order.
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

    /// One page of a queue's pending timers after the key `after` (exclusive).
    pub async fn list(&self, queue: &str, after: Option<&str>, limit: u32) -> Result<TimerPage> {
        let mut req =
            Request::new(Method::GET, format!("/api/v1/timers/{}", segment(queue, false))).query("limit", limit.max(1));
        if let Some(a) = after {
            req = req.query("after", a);
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
}

//! The store's vocabulary: its clock seam, its refusals, and what a pop
//! and an ack ask and answer.

use std::sync::Arc;

use tokio::sync::Notify;

use regina_types::limits::{EPHEMERAL_NAME_BYTES_MAX, EPHEMERAL_NODE_BYTES_MAX};

pub use crate::clock::Clock;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// 400 `ephemeral_bad_request`.
    BadRequest,
    /// 404 `ephemeral_queue_not_found`.
    QueueNotFound,
    /// 429 `queue_full`: the queue's bounds, policy reject.
    QueueFull,
    /// 503 `ephemeral_unavailable`: the node's budget.
    Unavailable,
    /// 413 `too_large`: the request body is over the HTTP limit.
    TooLarge,
}

impl ErrorKind {
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::BadRequest => "ephemeral_bad_request",
            ErrorKind::QueueNotFound => "ephemeral_queue_not_found",
            ErrorKind::QueueFull => "queue_full",
            ErrorKind::Unavailable => "ephemeral_unavailable",
            ErrorKind::TooLarge => "too_large",
        }
    }

    pub fn status(self) -> u16 {
        match self {
            ErrorKind::BadRequest => 400,
            ErrorKind::QueueNotFound => 404,
            ErrorKind::QueueFull => 429,
            ErrorKind::Unavailable => 503,
            ErrorKind::TooLarge => 413,
        }
    }
}

#[derive(Debug, Clone)]
pub struct EphemeralError {
    pub kind: ErrorKind,
    pub message: String,
}

impl EphemeralError {
    pub fn bad(message: impl Into<String>) -> Self {
        EphemeralError { kind: ErrorKind::BadRequest, message: message.into() }
    }

    pub(super) fn full(message: String) -> Self {
        EphemeralError { kind: ErrorKind::QueueFull, message }
    }

    /// The node's byte budget leaves this queue only `room` bytes.
    pub(super) fn node_full(room: usize) -> Self {
        let message = format!(
            "this node's ephemeral queues are at their byte budget ({EPHEMERAL_NODE_BYTES_MAX} bytes in all; \
             this queue may hold {room} bytes now)"
        );
        EphemeralError { kind: ErrorKind::Unavailable, message }
    }
}

/// How an ack asks to settle a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckStatus {
    Completed,
    /// `failed`, `retry` or any status not read as completed.
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckOutcome {
    /// Settled; terminal (a failure whose deliveries were spent is dropped
    /// and also answers this).
    Acked,
    Redelivered,
    /// Minted by another incarnation of this node (or not by this node).
    Stale,
    /// No lease to settle: acked already, lapsed, or the message is gone.
    Unknown,
}

impl AckOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            AckOutcome::Acked => "acked",
            AckOutcome::Redelivered => "redelivered",
            AckOutcome::Stale => "stale",
            AckOutcome::Unknown => "unknown",
        }
    }
}

/// One pop, as the route parsed it.
#[derive(Debug, Clone)]
pub struct PopRequest {
    pub queue: String,
    pub partition: Option<String>,
    pub group: Option<String>,
    pub batch: usize,
    pub auto_ack: bool,
    /// A waiting pop with time left may hold for the queue's `windowBuffer`.
    pub hold: bool,
    /// Store time this request first saw a message ready (window start).
    pub ready_since_ms: Option<u64>,
}

pub struct Delivered {
    pub id: String,
    pub partition: String,
    pub attempts: u32,
    /// The payload's JSON text as pushed.
    pub payload: Arc<str>,
}

pub struct Popped {
    pub messages: Vec<Delivered>,
    /// The queue's wake-up signal (a deleted and re-created queue has a new one).
    pub notify: Arc<Notify>,
    /// Store time by which something may become claimable without a push
    /// (a lease lapsing, a window closing).
    pub wake_at_ms: Option<u64>,
    pub now_ms: u64,
    pub ready_since_ms: Option<u64>,
}

/// `e:<epoch>:<partition>:<seq>` minted by this incarnation, as (partition, seq).
pub(super) fn parse_id<'a>(epoch: &str, id: &'a str) -> Option<(&'a str, u64)> {
    let rest = id.strip_prefix("e:")?.strip_prefix(epoch)?.strip_prefix(':')?;
    let (partition, seq) = rest.rsplit_once(':')?;
    Some((partition, seq.parse().ok()?))
}

/// Names are 1..=512 bytes without control characters.
pub fn check_name(what: &str, name: &str) -> Result<(), EphemeralError> {
    if name.is_empty() {
        return Err(EphemeralError::bad(format!("{what} must not be empty")));
    }
    if name.len() > EPHEMERAL_NAME_BYTES_MAX {
        return Err(EphemeralError::bad(format!(
            "{what} is {} bytes; the limit is {EPHEMERAL_NAME_BYTES_MAX}",
            name.len()
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(EphemeralError::bad(format!("{what} must not contain control characters")));
    }
    Ok(())
}

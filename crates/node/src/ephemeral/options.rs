//! The knobs of an ephemeral queue (`POST /api/v1/ephemeral/configure`).
//!
//! A closed list: every knob bounds something (bytes, length, age,
//! redelivery), so a key this node does not know is refused rather than
//! ignored — a silently dropped `ttlSeconds` is a queue that grows until the
//! node's budget refuses everyone.

use serde_json::{json, Map, Value};

use regina_types::limits::{
    EPHEMERAL_ITEMS_MAX, EPHEMERAL_LEASE_SECONDS_DEFAULT, EPHEMERAL_LEASE_SECONDS_MAX, EPHEMERAL_QUEUE_BYTES_MAX,
    EPHEMERAL_QUEUE_MESSAGES_MAX, EPHEMERAL_RETRY_LIMIT_DEFAULT, EPHEMERAL_RETRY_LIMIT_MAX, EPHEMERAL_TTL_SECONDS_MAX,
    EPHEMERAL_WINDOW_MS_MAX,
};

use super::EphemeralError;

/// What a push over `maxBytes` / `maxLength` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Refuse the push: 429 `queue_full`.
    Reject,
    /// Make room by dropping the oldest messages of the queue.
    DropOldest,
}

impl Policy {
    fn as_str(self) -> &'static str {
        match self {
            Policy::Reject => "reject",
            Policy::DropOldest => "dropOldest",
        }
    }
}

/// Lets a waiting pop fatten its batch: it answers once `count` messages are
/// ready or `ms` have passed since the first one was, bounded by its timeout.
/// Zero means "no bound of this kind".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub ms: u64,
    pub count: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub max_bytes: usize,
    pub max_length: usize,
    pub policy: Policy,
    /// Messages older than this are dropped, oldest first; 0 keeps them.
    pub ttl_seconds: u64,
    pub lease_seconds: u64,
    /// Deliveries to one group before a failed or lapsed one drops the
    /// message; 0 and 1 both mean a single delivery.
    pub retry_limit: u32,
    pub window: Option<Window>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_bytes: EPHEMERAL_QUEUE_BYTES_MAX,
            max_length: EPHEMERAL_QUEUE_MESSAGES_MAX,
            policy: Policy::Reject,
            ttl_seconds: 0,
            lease_seconds: EPHEMERAL_LEASE_SECONDS_DEFAULT,
            retry_limit: EPHEMERAL_RETRY_LIMIT_DEFAULT,
            window: None,
        }
    }
}

impl Options {
    /// Deliveries after which a failure drops the message.
    pub fn attempts_max(&self) -> u32 {
        self.retry_limit.max(1)
    }

    pub fn lease_ms(&self) -> u64 {
        self.lease_seconds * 1000
    }

    /// These options with the given knobs applied on top. `null` restores a
    /// knob's default; an unknown knob or an out-of-range value refuses the
    /// whole call, so nothing is half-applied.
    pub fn merged(&self, given: &Map<String, Value>) -> Result<Options, EphemeralError> {
        let mut o = self.clone();
        let d = Options::default();
        for (key, value) in given {
            let null = value.is_null();
            match key.as_str() {
                "maxBytes" => {
                    o.max_bytes =
                        if null { d.max_bytes } else { int(key, value, 1, EPHEMERAL_QUEUE_BYTES_MAX as u64)? as usize }
                }
                "maxLength" => {
                    o.max_length = if null {
                        d.max_length
                    } else {
                        int(key, value, 1, EPHEMERAL_QUEUE_MESSAGES_MAX as u64)? as usize
                    }
                }
                "policy" => o.policy = if null { d.policy } else { policy(value)? },
                "ttlSeconds" => {
                    o.ttl_seconds = if null { d.ttl_seconds } else { int(key, value, 0, EPHEMERAL_TTL_SECONDS_MAX)? }
                }
                "leaseSeconds" => {
                    o.lease_seconds =
                        if null { d.lease_seconds } else { int(key, value, 1, EPHEMERAL_LEASE_SECONDS_MAX)? }
                }
                "retryLimit" => {
                    o.retry_limit =
                        if null { d.retry_limit } else { int(key, value, 0, EPHEMERAL_RETRY_LIMIT_MAX as u64)? as u32 }
                }
                "windowBuffer" => o.window = if null { None } else { window(value)? },
                other => {
                    return Err(EphemeralError::bad(format!(
                        "unknown option {other:?}; the options are maxBytes, maxLength, policy, ttlSeconds, \
                         leaseSeconds, retryLimit and windowBuffer"
                    )))
                }
            }
        }
        Ok(o)
    }

    pub fn to_json(&self) -> Value {
        let window = self.window.map_or(Value::Null, |w| json!({ "ms": w.ms, "count": w.count }));
        json!({
            "maxBytes": self.max_bytes,
            "maxLength": self.max_length,
            "policy": self.policy.as_str(),
            "ttlSeconds": self.ttl_seconds,
            "leaseSeconds": self.lease_seconds,
            "retryLimit": self.retry_limit,
            "windowBuffer": window,
        })
    }
}

fn int(key: &str, value: &Value, min: u64, max: u64) -> Result<u64, EphemeralError> {
    match value.as_u64() {
        Some(n) if n >= min && n <= max => Ok(n),
        _ => Err(EphemeralError::bad(format!("{key} must be an integer from {min} to {max}, not {value}"))),
    }
}

fn policy(value: &Value) -> Result<Policy, EphemeralError> {
    match value.as_str() {
        Some("reject") => Ok(Policy::Reject),
        Some("dropOldest" | "drop_oldest" | "drop-oldest") => Ok(Policy::DropOldest),
        _ => Err(EphemeralError::bad(format!("policy must be \"reject\" or \"dropOldest\", not {value}"))),
    }
}

fn window(value: &Value) -> Result<Option<Window>, EphemeralError> {
    let Some(obj) = value.as_object() else {
        return Err(EphemeralError::bad(format!("windowBuffer must be an object {{\"ms\", \"count\"}}, not {value}")));
    };
    let mut w = Window { ms: 0, count: 0 };
    for (key, v) in obj {
        match key.as_str() {
            "ms" => w.ms = int("windowBuffer.ms", v, 0, EPHEMERAL_WINDOW_MS_MAX)?,
            "count" => w.count = int("windowBuffer.count", v, 0, EPHEMERAL_ITEMS_MAX as u64)? as usize,
            other => {
                return Err(EphemeralError::bad(format!("unknown windowBuffer field {other:?}; use ms and count")))
            }
        }
    }
    Ok((w.ms > 0 || w.count > 0).then_some(w))
}

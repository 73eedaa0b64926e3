//! Reading timer operations (of `POST /api/v1/timers` and the timer riders
//! of `POST /api/v1/transaction`): names, sizes, when a timer fires and
//! the horizon. Refusals use the timers envelope `{"error", "reason",
//! "detail"}` with stable reasons.

use crate::http::codes::{self, Code};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{json, Map, Value};

use regina_state::timers::{ScheduleAtOp, ScheduleOp, TimerOp};
use regina_types::limits::{TIMER_HORIZON_MS, TIMER_KEY_BYTES_MAX, TIMER_OPS_MAX, TIMER_PAYLOAD_BYTES_MAX};
use regina_types::time::parse_iso;
use regina_types::{validate_name, NameKind, DEFAULT_PARTITION};

use crate::http::routes::binary::unzstd;
use regina_node::Replica;

/// Fields only the broker sets; a request naming one is refused.
const SERVER_OWNED: [&str; 12] = [
    "producerSub",
    "messageId",
    "tenant",
    "deliverAt",
    "delaySeconds",
    "attempts",
    "claimToken",
    "claimedUntil",
    "state",
    "error",
    "createdAt",
    "updatedAt",
];

/// A refusal in the timers envelope.
pub fn refusal(code: &'static Code, reason: &str, detail: impl Into<String>) -> Response {
    (code.status, axum::Json(json!({ "error": code.name, "reason": reason, "detail": detail.into() }))).into_response()
}

pub fn bad(reason: &str, detail: impl Into<String>) -> Response {
    refusal(codes::TIMERS_BAD_REQUEST, reason, detail)
}

fn beyond_horizon(i: usize, what: &str) -> Response {
    refusal(
        codes::TIMER_HORIZON_EXCEEDED,
        "timers_horizon",
        format!("operations[{i}]: {what} is beyond the {TIMER_HORIZON_MS} ms horizon"),
    )
}

/// When a schedule fires: `delayMs` from the entry's time, or `at`.
enum When {
    Delay(i64),
    At(u64),
}

/// Reads `delayMs` or `at` (exactly one), checking the horizon against
/// `now_ms`, the leader's clock. A past `at` is fine: it fires at the next
/// check.
fn when_of(i: usize, o: &Map<String, Value>, now_ms: u64) -> Result<When, Response> {
    match (o.get("delayMs"), o.get("at")) {
        (Some(_), Some(_)) => Err(bad("timers_at_and_delay", format!("operations[{i}]: give delayMs or at, not both"))),
        (None, None) => Err(bad(
            "timers_delay_required",
            format!("operations[{i}]: delayMs (an integer) or at (ISO-8601 or epoch ms) is required"),
        )),
        (Some(d), None) => {
            let delay_ms = d.as_i64().ok_or_else(|| {
                bad("timers_delay_required", format!("operations[{i}]: delayMs must be an integer, not {d}"))
            })?;
            if delay_ms > TIMER_HORIZON_MS as i64 {
                return Err(beyond_horizon(i, "delayMs"));
            }
            Ok(When::Delay(delay_ms))
        }
        (None, Some(a)) => {
            let at_ms = match a {
                Value::String(s) => parse_iso(s),
                Value::Number(n) => n.as_u64(),
                _ => None,
            }
            .ok_or_else(|| {
                bad(
                    "timers_bad_at",
                    format!("operations[{i}]: at must be an ISO-8601 time or epoch milliseconds (>= 0), not {a}"),
                )
            })?;
            if at_ms > now_ms.saturating_add(TIMER_HORIZON_MS) {
                return Err(beyond_horizon(i, "at"));
            }
            Ok(When::At(at_ms))
        }
    }
}

/// Reads one timer operation. `now_ms` is the leader's clock, for the
/// horizon of an absolute `at`.
pub fn parse_op(i: usize, v: &Value, now_ms: u64) -> Result<TimerOp, Response> {
    let Value::Object(o) = v else { return Err(bad("timers_bad_op", format!("operations[{i}] is not an object"))) };
    if let Some(k) = o.keys().find(|k| SERVER_OWNED.contains(&k.as_str()) || k.starts_with('_')) {
        return Err(bad("timers_server_owned_field", format!("operations[{i}]: {k} is set by the broker")));
    }
    let text = |key: &str| str_field(i, o, key);
    let queue = text("queue")?
        .filter(|q| !q.is_empty())
        .ok_or_else(|| bad("timers_queue_required", format!("operations[{i}]: queue is required")))?;
    validate_name(NameKind::Queue, queue).map_err(|e| bad("timers_bad_body", format!("operations[{i}]: {e}")))?;
    let timer_key = key_of(i, text("timerKey")?)?;
    match text("op")? {
        Some("schedule") | Some("reschedule") => {}
        Some("cancel") => return Ok(TimerOp::Cancel { queue: queue.into(), timer_key }),
        Some("retry") => return retry_of(i, o, queue, timer_key),
        other => {
            return Err(bad(
                "timers_bad_op",
                format!("operations[{i}]: op {other:?} is not schedule, reschedule, cancel or retry"),
            ))
        }
    }
    let when = when_of(i, o, now_ms)?;
    let payload = payload_of(i, o)?;
    let partition = match text("partition")? {
        None | Some("") => DEFAULT_PARTITION.to_string(),
        Some(p) => {
            validate_name(NameKind::Partition, p)
                .map_err(|e| bad("timers_bad_body", format!("operations[{i}]: {e}")))?;
            p.to_string()
        }
    };
    let txn = match text("txn")? {
        None | Some("") => regina_node::ids::new_id().to_string(),
        Some(t) if t.len() > regina_types::limits::TRANSACTION_ID_BYTES_MAX => {
            return Err(bad("timers_bad_body", format!("operations[{i}]: txn is too long")))
        }
        Some(t) => t.to_string(),
    };
    let (queue, message_id) = (queue.to_string(), *regina_node::ids::new_id().as_bytes());
    Ok(match when {
        When::Delay(delay_ms) => {
            TimerOp::Schedule(ScheduleOp { queue, timer_key, partition, txn, message_id, payload, delay_ms })
        }
        When::At(at_ms) => {
            TimerOp::ScheduleAt(ScheduleAtOp { queue, timer_key, partition, txn, message_id, payload, at_ms })
        }
    })
}

/// `{"op": "retry", "queue", "timerKey", "delayMs"?}`: a failed timer
/// pending again, `delayMs` (default 0: at the next check) from now.
fn retry_of(i: usize, o: &Map<String, Value>, queue: &str, timer_key: String) -> Result<TimerOp, Response> {
    if o.contains_key("at") {
        return Err(bad("timers_bad_op", format!("operations[{i}]: a retry takes delayMs, not at")));
    }
    let delay_ms = match o.get("delayMs") {
        None | Some(Value::Null) => 0,
        Some(d) => d.as_i64().ok_or_else(|| {
            bad("timers_delay_required", format!("operations[{i}]: delayMs must be an integer, not {d}"))
        })?,
    };
    if delay_ms > TIMER_HORIZON_MS as i64 {
        return Err(beyond_horizon(i, "delayMs"));
    }
    Ok(TimerOp::Retry { queue: queue.into(), timer_key, delay_ms })
}

/// A field that must be a string when present (`null` counts as absent):
/// a value of another type is refused, naming the field, not read as absent.
fn str_field<'a>(i: usize, o: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, Response> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(bad("timers_bad_body", format!("operations[{i}]: {key} must be a string, not {other}"))),
    }
}

fn key_of(i: usize, k: Option<&str>) -> Result<String, Response> {
    match k {
        Some(k) if !k.is_empty() && k.len() <= TIMER_KEY_BYTES_MAX && !k.chars().any(char::is_control) => Ok(k.into()),
        _ => Err(bad(
            "timers_bad_body",
            format!("operations[{i}]: timerKey must be 1 to {TIMER_KEY_BYTES_MAX} bytes without control characters"),
        )),
    }
}

/// The payload: base64 of a JSON document (optionally a zstd frame of it).
fn payload_of(i: usize, o: &Map<String, Value>) -> Result<Vec<u8>, Response> {
    let Some(b64) = str_field(i, o, "payload")? else {
        return Err(bad("timers_payload_required", format!("operations[{i}]: payload (base64) is required")));
    };
    let mut bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| bad("timers_payload_not_base64", format!("operations[{i}]: payload is not base64")))?;
    let zstd = match o.get("payloadZstd") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(bad(
                "timers_bad_body",
                format!("operations[{i}]: payloadZstd must be true or false, not {other}"),
            ))
        }
    };
    if zstd {
        bytes = unzstd(&bytes).map_err(|e| bad("timers_bad_body", format!("operations[{i}]: {e}")))?;
    }
    if bytes.len() > TIMER_PAYLOAD_BYTES_MAX {
        return Err(refusal(
            codes::PAYLOAD_TOO_LARGE,
            "timers_payload_too_large",
            format!("operations[{i}]: payload is over {TIMER_PAYLOAD_BYTES_MAX} bytes"),
        ));
    }
    if !crate::http::input::is_json_document(&bytes) {
        return Err(bad(
            "timers_bad_body",
            format!("operations[{i}]: the decoded payload is not a JSON document in UTF-8"),
        ));
    }
    Ok(bytes)
}

/// Reads a whole `operations` list: bounded, one op per (queue, key), and
/// the payloads of encrypted queues sealed so the log never holds them.
pub fn parse_ops(node: &Replica, list: &[Value]) -> Result<Vec<TimerOp>, Response> {
    if list.len() > TIMER_OPS_MAX {
        return Err(bad("timers_too_many_ops", format!("{} operations; the limit is {TIMER_OPS_MAX}", list.len())));
    }
    let now_ms = node.stamp();
    let mut ops = list.iter().enumerate().map(|(i, v)| parse_op(i, v, now_ms)).collect::<Result<Vec<_>, _>>()?;
    let mut keys: Vec<(&str, &str)> = ops.iter().map(TimerOp::key).collect();
    keys.sort_unstable();
    if keys.windows(2).any(|w| w[0] == w[1]) {
        return Err(bad("timers_bad_body", "one call names the same (queue, timerKey) twice"));
    }
    seal(node, &mut ops);
    Ok(ops)
}

/// Seals the payloads of schedules bound for queues with
/// `encryptionEnabled`, as a push seals message payloads: the fired message
/// carries the sealed bytes, which every read opens.
fn seal(node: &Replica, ops: &mut [TimerOp]) {
    for op in ops.iter_mut() {
        match op {
            TimerOp::Schedule(s) => crate::http::producer::stamp_current(&mut s.payload),
            TimerOp::ScheduleAt(s) => crate::http::producer::stamp_current(&mut s.payload),
            _ => {}
        }
    }
    let sealed: Vec<bool> = {
        let m = node.tenant_state();
        let encrypted = |q: &str| m.queue(q).is_some_and(|q| q.options.encryption_enabled);
        ops.iter()
            .map(|op| matches!(op, TimerOp::Schedule(_) | TimerOp::ScheduleAt(_)) && encrypted(op.key().0))
            .collect()
    };
    for (op, seal) in ops.iter_mut().zip(sealed) {
        let payload = match op {
            TimerOp::Schedule(s) if seal => &mut s.payload,
            TimerOp::ScheduleAt(s) if seal => &mut s.payload,
            _ => continue,
        };
        *payload = node.sealer().seal(payload);
    }
}

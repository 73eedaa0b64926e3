//! Timers over HTTP: `POST /api/v1/timers` (schedule, reschedule, cancel),
//! `DELETE /api/v1/timers/{queue}/{*timerKey}`, and the reads
//! `GET /api/v1/timers/{queue}/{*timerKey}` and `GET /api/v1/timers/{queue}`.
//! Errors use the timers envelope `{"error", "reason", "detail"}`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{json, Map, Value};

use regina_state::timers::{ScheduleOp, TimerOp, TimerOutcome, TimerRow};
use regina_state::{Command, Outcome};
use regina_types::limits::{TIMER_HORIZON_MS, TIMER_OPS_MAX, TIMER_PAYLOAD_BYTES_MAX};
use regina_types::time::format_iso;
use regina_types::{validate_name, NameKind, DEFAULT_PARTITION};

use super::binary::unzstd;
use super::error::ApiError;
use super::input::{query_get, query_pairs, query_u64};
use super::render::uuid_string;
use crate::node::Node;

/// Longest timer key, in bytes.
pub const TIMER_KEY_BYTES_MAX: usize = 512;
/// Fields only the broker sets; a request naming one is refused.
const SERVER_OWNED: [&str; 8] =
    ["producerSub", "messageId", "tenant", "deliverAt", "delaySeconds", "attempts", "claimToken", "claimedUntil"];

/// A refusal in the timers envelope.
pub fn refusal(status: StatusCode, error: &str, reason: &str, detail: impl Into<String>) -> Response {
    (status, axum::Json(json!({ "error": error, "reason": reason, "detail": detail.into() }))).into_response()
}

fn bad(reason: &str, detail: impl Into<String>) -> Response {
    refusal(StatusCode::BAD_REQUEST, "timers_bad_request", reason, detail)
}

/// Reads one timer operation, checking names, sizes and the horizon.
pub fn parse_op(i: usize, v: &Value) -> Result<TimerOp, Response> {
    let Value::Object(o) = v else { return Err(bad("timers_bad_op", format!("operations[{i}] is not an object"))) };
    if let Some(k) = o.keys().find(|k| SERVER_OWNED.contains(&k.as_str()) || k.starts_with('_')) {
        return Err(bad("timers_server_owned_field", format!("operations[{i}]: {k} is set by the broker")));
    }
    let text = |key: &str| o.get(key).and_then(Value::as_str);
    let queue = text("queue")
        .filter(|q| !q.is_empty())
        .ok_or_else(|| bad("timers_queue_required", format!("operations[{i}]: queue is required")))?;
    validate_name(NameKind::Queue, queue).map_err(|e| bad("timers_bad_body", format!("operations[{i}]: {e}")))?;
    let timer_key = key_of(i, text("timerKey"))?;
    match text("op") {
        Some("schedule") | Some("reschedule") => {}
        Some("cancel") => return Ok(TimerOp::Cancel { queue: queue.into(), timer_key }),
        other => {
            return Err(bad(
                "timers_bad_op",
                format!("operations[{i}]: op {other:?} is not schedule, reschedule or cancel"),
            ))
        }
    }
    let delay_ms = o
        .get("delayMs")
        .and_then(Value::as_i64)
        .ok_or_else(|| bad("timers_delay_required", format!("operations[{i}]: delayMs (an integer) is required")))?;
    if delay_ms > TIMER_HORIZON_MS as i64 {
        return Err(refusal(
            StatusCode::FORBIDDEN,
            "timer_horizon_exceeded",
            "timers_horizon",
            format!("operations[{i}]: delayMs is beyond the {TIMER_HORIZON_MS} ms horizon"),
        ));
    }
    let payload = payload_of(i, o)?;
    let partition = match text("partition") {
        None | Some("") => DEFAULT_PARTITION.to_string(),
        Some(p) => {
            validate_name(NameKind::Partition, p)
                .map_err(|e| bad("timers_bad_body", format!("operations[{i}]: {e}")))?;
            p.to_string()
        }
    };
    let txn = match text("txn") {
        None | Some("") => crate::ids::new_id().to_string(),
        Some(t) if t.len() > regina_types::limits::TRANSACTION_ID_BYTES_MAX => {
            return Err(bad("timers_bad_body", format!("operations[{i}]: txn is too long")))
        }
        Some(t) => t.to_string(),
    };
    Ok(TimerOp::Schedule(ScheduleOp {
        queue: queue.into(),
        timer_key,
        partition,
        txn,
        message_id: *crate::ids::new_id().as_bytes(),
        payload,
        delay_ms,
    }))
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
    let Some(b64) = o.get("payload").and_then(Value::as_str) else {
        return Err(bad("timers_payload_required", format!("operations[{i}]: payload (base64) is required")));
    };
    let mut bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| bad("timers_payload_not_base64", format!("operations[{i}]: payload is not base64")))?;
    if o.get("payloadZstd").and_then(Value::as_bool) == Some(true) {
        bytes = unzstd(&bytes).map_err(|e| bad("timers_bad_body", format!("operations[{i}]: {e}")))?;
    }
    if bytes.len() > TIMER_PAYLOAD_BYTES_MAX {
        return Err(refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            "timers_payload_too_large",
            format!("operations[{i}]: payload is over {TIMER_PAYLOAD_BYTES_MAX} bytes"),
        ));
    }
    if serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_err() {
        return Err(bad("timers_bad_body", format!("operations[{i}]: the decoded payload is not JSON")));
    }
    Ok(bytes)
}

/// Reads a whole `operations` list: bounded, one op per (queue, key).
pub fn parse_ops(list: &[Value]) -> Result<Vec<TimerOp>, Response> {
    if list.len() > TIMER_OPS_MAX {
        return Err(bad("timers_too_many_ops", format!("{} operations; the limit is {TIMER_OPS_MAX}", list.len())));
    }
    let ops = list.iter().enumerate().map(|(i, v)| parse_op(i, v)).collect::<Result<Vec<_>, _>>()?;
    let mut keys: Vec<(&str, &str)> = ops.iter().map(op_key).collect();
    keys.sort_unstable();
    if keys.windows(2).any(|w| w[0] == w[1]) {
        return Err(bad("timers_bad_body", "one call names the same (queue, timerKey) twice"));
    }
    Ok(ops)
}

fn op_key(op: &TimerOp) -> (&str, &str) {
    match op {
        TimerOp::Schedule(s) => (&s.queue, &s.timer_key),
        TimerOp::Cancel { queue, timer_key } => (queue, timer_key),
    }
}

/// One result element for an applied operation.
pub fn render(op: &TimerOp, out: &TimerOutcome, txn_echo: Option<&str>) -> Value {
    let (queue, key) = op_key(op);
    match (op, out) {
        (TimerOp::Schedule(s), TimerOutcome::Scheduled { replaced, deliver_at_ms }) => json!({
            "ok": true,
            "status": if *replaced { "rescheduled" } else { "scheduled" },
            "queue": queue, "timerKey": key, "txn": s.txn,
            "messageId": uuid_string(&s.message_id),
            "deliverAt": format_iso(*deliver_at_ms),
        }),
        (_, TimerOutcome::Cancelled { txn }) => {
            json!({ "ok": true, "status": "cancelled", "queue": queue, "timerKey": key, "txn": txn })
        }
        _ => json!({ "ok": false, "status": "absent", "queue": queue, "timerKey": key, "txn": txn_echo }),
    }
}

async fn run(node: &Node, ops: Vec<TimerOp>) -> Result<Vec<TimerOutcome>, Response> {
    match node.propose(Command::Timers(ops)).await {
        Ok(Outcome::Timers(r)) => Ok(r),
        Ok(other) => Err(ApiError::internal(format!("timers answered {other:?}")).into_response()),
        Err(e) => Err(ApiError::from(e).into_response()),
    }
}

pub async fn post(State(node): State<Arc<Node>>, body: Result<Bytes, BytesRejection>) -> Response {
    let bytes = match super::input::body_bytes(body) {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let Ok(Value::Object(b)) = serde_json::from_slice::<Value>(&bytes) else {
        return bad("timers_bad_body", "the body must be a JSON object with operations");
    };
    let Some(Value::Array(list)) = b.get("operations") else {
        return bad("timers_bad_body", "operations (an array) is required");
    };
    let ops = match parse_ops(list) {
        Ok(ops) => ops,
        Err(r) => return r,
    };
    match run(&node, ops.clone()).await {
        Ok(outs) => {
            let results: Vec<Value> = ops.iter().zip(&outs).map(|(op, o)| render(op, o, None)).collect();
            axum::Json(json!({ "results": results })).into_response()
        }
        Err(r) => r,
    }
}

pub async fn cancel(
    State(node): State<Arc<Node>>,
    Path((queue, timer_key)): Path<(String, String)>,
    RawQuery(q): RawQuery,
) -> Response {
    let pairs = query_pairs(q.as_deref()).unwrap_or_default();
    let txn = query_get(&pairs, "txn").map(str::to_string);
    let op = TimerOp::Cancel { queue, timer_key };
    match run(&node, vec![op.clone()]).await {
        Ok(outs) => axum::Json(render(&op, &outs[0], txn.as_deref())).into_response(),
        Err(r) => r,
    }
}

fn row_json(queue: &str, key: &str, r: &TimerRow) -> Value {
    json!({
        "queue": queue,
        "timerKey": key,
        "partition": r.partition,
        "deliverAt": format_iso(r.deliver_at_ms),
        "txn": r.txn,
        "messageId": uuid_string(&r.message_id),
        "payload": base64::engine::general_purpose::STANDARD.encode(&r.payload),
        "createdAt": format_iso(r.created_ms),
        "encrypted": false,
    })
}

pub async fn peek(State(node): State<Arc<Node>>, Path((queue, timer_key)): Path<(String, String)>) -> Response {
    let m = node.tenant_state();
    match m.timers.get(&queue, &timer_key) {
        Some(r) => {
            let mut v = row_json(&queue, &timer_key, r);
            v["found"] = json!(true);
            axum::Json(v).into_response()
        }
        None => axum::Json(json!({ "found": false, "queue": queue, "timerKey": timer_key })).into_response(),
    }
}

pub async fn list(State(node): State<Arc<Node>>, Path(queue): Path<String>, RawQuery(q): RawQuery) -> Response {
    let pairs = match query_pairs(q.as_deref()) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let limit = match query_u64(&pairs, "limit", 1, u32::MAX as u64) {
        Ok(l) => l.unwrap_or(100).min(1000) as usize,
        Err(e) => return e.into_response(),
    };
    let after = query_get(&pairs, "after").filter(|a| !a.is_empty());
    let m = node.tenant_state();
    let mut rows: Vec<Value> = Vec::new();
    let mut truncated = false;
    for (key, r) in m.timers.list(&queue, after) {
        if rows.len() == limit {
            truncated = true;
            break;
        }
        rows.push(row_json(&queue, key, r));
    }
    let next_after = if truncated { rows.last().map(|r| r["timerKey"].clone()) } else { None };
    axum::Json(json!({ "rows": rows, "truncated": truncated, "nextAfter": next_after })).into_response()
}

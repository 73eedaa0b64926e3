//! Timers over HTTP: `POST /api/v1/timers` (schedule, reschedule, cancel,
//! retry), `DELETE /api/v1/timers/{queue}/{*timerKey}`, and the reads
//! `GET /api/v1/timers/{queue}/{*timerKey}` and `GET /api/v1/timers/{queue}`
//! (`state=`, `order=key|due`, keyset paging by `after`). Operations are
//! read in `timer_ops`; errors use the timers envelope
//! `{"error", "reason", "detail"}`. See docs/timers.md.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{json, Value};

use regina_state::timers::{TimerError, TimerOp, TimerOutcome, TimerRow, TimerState};
use regina_state::{Command, Outcome};
use regina_types::limits::{TIMER_LIST_ROWS_DEFAULT, TIMER_LIST_ROWS_MAX};
use regina_types::time::format_iso;

use crate::http::error::ApiError;
use crate::http::input::{query_get, query_pairs, query_u64};
use crate::http::render::uuid_string;
use crate::http::routes::timer_ops::bad;
pub use crate::http::routes::timer_ops::parse_ops;
use regina_node::Replica;

/// One result element for an applied operation.
pub fn render(op: &TimerOp, out: &TimerOutcome, txn_echo: Option<&str>) -> Value {
    let (queue, key) = op.key();
    let scheduled_txn_and_id = match op {
        TimerOp::Schedule(s) => Some((&s.txn, &s.message_id)),
        TimerOp::ScheduleAt(s) => Some((&s.txn, &s.message_id)),
        _ => None,
    };
    match (scheduled_txn_and_id, out) {
        (Some((txn, id)), TimerOutcome::Scheduled { replaced, deliver_at_ms }) => json!({
            "ok": true,
            "status": if *replaced { "rescheduled" } else { "scheduled" },
            "queue": queue, "timerKey": key, "txn": txn,
            "messageId": uuid_string(id),
            "deliverAt": format_iso(*deliver_at_ms),
        }),
        (_, TimerOutcome::Cancelled { txn }) => {
            json!({ "ok": true, "status": "cancelled", "queue": queue, "timerKey": key, "txn": txn })
        }
        (_, TimerOutcome::Retried { txn, deliver_at_ms }) => json!({
            "ok": true, "status": "retried", "queue": queue, "timerKey": key, "txn": txn,
            "deliverAt": format_iso(*deliver_at_ms),
        }),
        (_, TimerOutcome::NotFailed { exists }) => json!({
            "ok": false,
            "status": if *exists { "pending" } else { "absent" },
            "code": "TIMER_NOT_FAILED",
            "error": if *exists {
                "the timer is pending, not failed; only a failed timer can be retried"
            } else {
                "no timer is scheduled under this key; only a failed timer can be retried"
            },
            "queue": queue, "timerKey": key,
        }),
        _ => json!({ "ok": false, "status": "absent", "queue": queue, "timerKey": key, "txn": txn_echo }),
    }
}

async fn run(node: &Replica, ops: Vec<TimerOp>) -> Result<Vec<TimerOutcome>, Response> {
    match node.propose(Command::Timers(ops)).await {
        Ok(Outcome::Timers(r)) => Ok(r),
        Ok(other) => Err(ApiError::internal(format!("timers answered {other:?}")).into_response()),
        Err(e) => Err(ApiError::from(e).into_response()),
    }
}

pub async fn post(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> Response {
    let bytes = match crate::http::input::body_bytes(body) {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let Ok(Value::Object(b)) = serde_json::from_slice::<Value>(&bytes) else {
        return bad("timers_bad_body", "the body must be a JSON object with operations");
    };
    let Some(Value::Array(list)) = b.get("operations") else {
        return bad("timers_bad_body", "operations (an array) is required");
    };
    let ops = match parse_ops(&node, list) {
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
    State(node): State<Arc<Replica>>,
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

/// Why the last fire attempt was refused, as rows show it.
fn error_json(queue: &str, e: &Option<TimerError>) -> Value {
    match e {
        None => Value::Null,
        Some(TimerError::QueueFull { max_size }) => json!({
            "code": "QUEUE_FULL",
            "message": format!("queue {queue} held maxSize ({max_size}) messages; the push was refused"),
            "maxSize": max_size,
        }),
    }
}

fn row_json(node: &Replica, queue: &str, key: &str, r: &TimerRow) -> Result<Value, Response> {
    let encrypted = regina_node::sealing::is_sealed(&r.payload);
    let payload = node.sealer().open(r.payload.clone()).map_err(|e| ApiError::internal(e).into_response())?;
    let (_, payload) = crate::http::producer::unstamp(payload);
    Ok(json!({
        "queue": queue,
        "timerKey": key,
        "partition": r.partition,
        "state": r.state.as_str(),
        "deliverAt": format_iso(r.deliver_at_ms),
        "attempts": r.attempts,
        "error": error_json(queue, &r.error),
        "txn": r.txn,
        "messageId": uuid_string(&r.message_id),
        "payload": base64::engine::general_purpose::STANDARD.encode(&payload),
        "createdAt": format_iso(r.created_ms),
        "updatedAt": format_iso(r.updated_ms),
        "encrypted": encrypted,
    }))
}

pub async fn peek(State(node): State<Arc<Replica>>, Path((queue, timer_key)): Path<(String, String)>) -> Response {
    let row = node.tenant_state().timers.get(&queue, &timer_key).cloned();
    match row {
        Some(r) => match row_json(&node, &queue, &timer_key, &r) {
            Ok(mut v) => {
                v["found"] = json!(true);
                axum::Json(v).into_response()
            }
            Err(resp) => resp,
        },
        None => axum::Json(json!({ "found": false, "queue": queue, "timerKey": timer_key })).into_response(),
    }
}

/// The list read's order; `after` and `nextAfter` take its cursor's form.
#[derive(Clone, Copy, PartialEq)]
enum Order {
    /// By timer key; the cursor is a key.
    Key,
    /// By `deliverAt`, then key; the cursor is `{deliverAt epoch ms}:{key}`.
    Due,
}

/// `{ms}:{key}`, the due-order cursor.
fn due_cursor(s: &str) -> Option<(u64, &str)> {
    let (ms, key) = s.split_once(':')?;
    Some((ms.parse().ok()?, key))
}

pub async fn list(State(node): State<Arc<Replica>>, Path(queue): Path<String>, RawQuery(q): RawQuery) -> Response {
    let pairs = match query_pairs(q.as_deref()) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    // Larger limits are clamped, as they always were.
    let limit = match query_u64(&pairs, "limit", 1, u32::MAX as u64) {
        Ok(l) => l.map_or(TIMER_LIST_ROWS_DEFAULT, |l| (l as usize).min(TIMER_LIST_ROWS_MAX)),
        Err(e) => return e.into_response(),
    };
    let order = match query_get(&pairs, "order") {
        None | Some("") | Some("key") => Order::Key,
        Some("due") => Order::Due,
        Some(o) => return bad("timers_bad_order", format!("order must be key or due, not {o:?}")),
    };
    let state = match query_get(&pairs, "state") {
        None | Some("") => None,
        Some("pending") => Some(TimerState::Pending),
        Some("failed") => Some(TimerState::Failed),
        Some(s) => return bad("timers_bad_state", format!("state must be pending or failed, not {s:?}")),
    };
    let after = query_get(&pairs, "after").filter(|a| !a.is_empty());
    let due_after = match (order, after) {
        (Order::Due, Some(a)) => match due_cursor(a) {
            Some(c) => Some(c),
            None => {
                return bad(
                    "timers_bad_after",
                    format!("in due order, after is the nextAfter of a page ({{deliverAt ms}}:{{key}}), not {a:?}"),
                )
            }
        },
        _ => None,
    };
    let mut page: Vec<(String, TimerRow)> = Vec::new();
    let mut truncated = false;
    {
        let m = node.tenant_state();
        let rows: Box<dyn Iterator<Item = (&str, &TimerRow)>> = match order {
            Order::Key => Box::new(m.timers.list(&queue, after)),
            Order::Due => Box::new(m.timers.list_due(&queue, due_after)),
        };
        for (key, r) in rows.filter(|(_, r)| state.is_none_or(|s| r.state == s)) {
            if page.len() == limit {
                truncated = true;
                break;
            }
            page.push((key.to_string(), r.clone()));
        }
    }
    let next_after = match (truncated, page.last(), order) {
        (true, Some((k, _)), Order::Key) => json!(k),
        (true, Some((k, r)), Order::Due) => json!(format!("{}:{k}", r.deliver_at_ms)),
        _ => Value::Null,
    };
    let mut rows = Vec::with_capacity(page.len());
    for (key, r) in &page {
        match row_json(&node, &queue, key, r) {
            Ok(v) => rows.push(v),
            Err(resp) => return resp,
        }
    }
    let order = if order == Order::Due { "due" } else { "key" };
    axum::Json(json!({ "rows": rows, "truncated": truncated, "nextAfter": next_after, "order": order })).into_response()
}

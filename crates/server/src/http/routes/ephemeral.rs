//! The ephemeral routes, `/api/v1/ephemeral/*`: in-memory queues served
//! from this node's [`regina_node::ephemeral::Store`]. Nothing here proposes to
//! the log; see that module for what is (deliberately) not kept.
//!
//! Refusals use the envelope `{"error": "<prose>", "code": "<code>"}`;
//! 429 `queue_full` and 503 `ephemeral_unavailable` carry `Retry-After`.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use tokio::sync::Notify;

use regina_types::limits::{
    EPHEMERAL_ITEMS_MAX, EPHEMERAL_POP_BATCH_DEFAULT, EPHEMERAL_POP_WAIT_MS_DEFAULT, EPHEMERAL_POP_WAIT_MS_MAX,
    EPHEMERAL_RETRY_AFTER_SECONDS, REQUEST_BODY_BYTES_MAX,
};

use crate::http::input::{query_get, query_pairs};
use regina_node::ephemeral::{check_name, AckStatus, Delivered, EphemeralError, ErrorKind, PopRequest};
use regina_node::Replica;

/// Longest a parked pop sleeps without looking again, whatever it expects:
/// a safety net under the wake-ups, not the way pops learn of pushes.
const NAP_MAX: Duration = Duration::from_secs(1);

type Answer = Result<Response, Refusal>;

/// An ephemeral store's refusal as an HTTP answer.
pub(crate) struct Refusal(EphemeralError);

impl From<EphemeralError> for Refusal {
    fn from(e: EphemeralError) -> Refusal {
        Refusal(e)
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let Refusal(e) = self;
        let code = table_code(e.kind);
        let body = json!({ "error": e.message, "code": code.name });
        let mut resp = (code.status, axum::Json(body)).into_response();
        if matches!(e.kind, ErrorKind::QueueFull | ErrorKind::Unavailable) {
            resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(EPHEMERAL_RETRY_AFTER_SECONDS));
        }
        resp
    }
}

fn parse<'a, T: Deserialize<'a>>(body: &'a Result<Bytes, BytesRejection>) -> Result<T, EphemeralError> {
    let bytes = match body {
        Ok(b) => b,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            let message = format!("request body is over the limit of {REQUEST_BODY_BYTES_MAX} bytes");
            return Err(EphemeralError { kind: ErrorKind::TooLarge, message });
        }
        Err(e) => return Err(EphemeralError::bad(format!("could not read the request body: {e}"))),
    };
    serde_json::from_slice(bytes).map_err(|e| EphemeralError::bad(format!("invalid JSON body: {e}")))
}

fn path_queue(path: Result<Path<String>, PathRejection>) -> Result<String, EphemeralError> {
    path.map(|Path(q)| q).map_err(|e| EphemeralError::bad(format!("bad queue name in the path: {e}")))
}

fn count_ok(what: &str, n: usize) -> Result<(), EphemeralError> {
    if n > EPHEMERAL_ITEMS_MAX {
        return Err(EphemeralError::bad(format!("{n} {what} in one call; the limit is {EPHEMERAL_ITEMS_MAX}")));
    }
    Ok(())
}

#[derive(Deserialize)]
struct ConfigureBody {
    queue: String,
    #[serde(default)]
    options: Option<Map<String, Value>>,
}

pub async fn configure(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> Answer {
    let b: ConfigureBody = parse(&body)?;
    let answer = node.ephemeral().configure(&b.queue, &b.options.unwrap_or_default())?;
    Ok(axum::Json(answer).into_response())
}

#[derive(Deserialize)]
struct QueueBody {
    queue: String,
}

pub async fn reset(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> Answer {
    let b: QueueBody = parse(&body)?;
    let dropped = node.ephemeral().reset(&b.queue)?;
    Ok(axum::Json(json!({ "queue": b.queue, "dropped": dropped })).into_response())
}

pub async fn delete_queue(State(node): State<Arc<Replica>>, path: Result<Path<String>, PathRejection>) -> Answer {
    let queue = path_queue(path)?;
    let (deleted, declared) = node.ephemeral().delete(&queue)?;
    Ok(axum::Json(json!({ "queue": queue, "deleted": deleted, "declared": declared })).into_response())
}

#[derive(Deserialize)]
struct PushBody<'a> {
    queue: String,
    #[serde(default)]
    partition: Option<String>,
    #[serde(borrow)]
    messages: Vec<MessageBody<'a>>,
}

#[derive(Deserialize)]
struct MessageBody<'a> {
    /// Kept as the JSON text it arrived as; `null` is a payload, a missing
    /// field is refused.
    #[serde(borrow)]
    payload: &'a RawValue,
}

pub async fn push(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> Answer {
    let b: PushBody = parse(&body)?;
    count_ok("messages", b.messages.len())?;
    check_name("queue", &b.queue)?;
    if b.messages.is_empty() {
        return Ok((StatusCode::CREATED, axum::Json(json!({ "pushed": 0 }))).into_response());
    }
    let payloads = b.messages.iter().map(|m| Arc::<str>::from(m.payload.get())).collect();
    let pushed = node.ephemeral().push(&b.queue, b.partition.as_deref(), payloads)?;
    Ok((StatusCode::CREATED, axum::Json(json!({ "pushed": pushed }))).into_response())
}

fn flag(pairs: &[(String, String)], key: &str) -> Result<bool, EphemeralError> {
    match query_get(pairs, key) {
        None | Some("") => Ok(false),
        Some(v) if v.eq_ignore_ascii_case("true") || v == "1" => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") || v == "0" => Ok(false),
        Some(v) => Err(EphemeralError::bad(format!("{key} must be true or false, not {v:?}"))),
    }
}

fn number(pairs: &[(String, String)], key: &str, min: u64, max: u64) -> Result<Option<u64>, EphemeralError> {
    match query_get(pairs, key) {
        None | Some("") => Ok(None),
        Some(v) => match v.parse::<u64>() {
            Ok(n) if n >= min && n <= max => Ok(Some(n)),
            _ => Err(EphemeralError::bad(format!("{key} must be an integer from {min} to {max}, not {v:?}"))),
        },
    }
}

/// The pop's query: the request, whether it waits, and for how long.
fn pop_query(raw: Option<&str>) -> Result<(PopRequest, bool, Duration), EphemeralError> {
    let pairs = query_pairs(raw).map_err(|e| EphemeralError::bad(e.message))?;
    let text = |key: &str| query_get(&pairs, key).filter(|v| !v.is_empty()).map(str::to_string);
    let queue = text("queue").ok_or_else(|| EphemeralError::bad("a pop needs ?queue=<name>"))?;
    let batch =
        number(&pairs, "batch", 1, EPHEMERAL_ITEMS_MAX as u64)?.map_or(EPHEMERAL_POP_BATCH_DEFAULT, |b| b as usize);
    let wait = flag(&pairs, "wait")?;
    // Larger timeouts are clamped, as on the durable pop: the client sets its
    // own deadline from the number it sent, which is never shorter.
    let timeout =
        number(&pairs, "timeout", 0, u64::MAX)?.unwrap_or(EPHEMERAL_POP_WAIT_MS_DEFAULT).min(EPHEMERAL_POP_WAIT_MS_MAX);
    let auto_ack = flag(&pairs, "autoAck")? || flag(&pairs, "commitOnDelivery")?;
    let req = PopRequest {
        queue,
        partition: text("partition"),
        group: text("group").or_else(|| text("consumerGroup")),
        batch,
        auto_ack,
        hold: false,
        ready_since_ms: None,
    };
    Ok((req, wait, Duration::from_millis(timeout)))
}

/// A long poll parks on the queue's signal (raised by pushes and
/// hand-backs) and otherwise sleeps only until a lease it could take over
/// lapses or its window closes; a graceful stop answers it at once.
pub async fn pop(State(node): State<Arc<Replica>>, RawQuery(raw): RawQuery) -> Answer {
    let (mut req, wait, timeout) = pop_query(raw.as_deref())?;
    let deadline = Instant::now() + timeout;
    let mut signal: Option<Arc<Notify>> = None;
    loop {
        let now = Instant::now();
        req.hold = wait && now < deadline;
        // Created before looking, so a push between the look and the nap
        // still wakes this pop.
        let armed = signal.clone();
        let notified = armed.as_deref().map(Notify::notified);
        let popped = node.ephemeral().pop(&req)?;
        if !popped.messages.is_empty() || !req.hold {
            return Ok(render_pop(&req.queue, &popped.messages));
        }
        req.ready_since_ms = popped.ready_since_ms;
        let (Some(notified), Some(armed)) = (notified, armed.as_ref()) else {
            signal = Some(popped.notify);
            continue;
        };
        if !Arc::ptr_eq(armed, &popped.notify) {
            // The queue was deleted and re-created under this pop.
            signal = Some(popped.notify);
            continue;
        }
        let due = popped.wake_at_ms.map_or(NAP_MAX, |t| Duration::from_millis(t.saturating_sub(popped.now_ms)));
        let nap = due.clamp(Duration::from_millis(1), NAP_MAX).min(deadline.saturating_duration_since(now));
        tokio::select! {
            _ = notified => {}
            _ = tokio::time::sleep(nap) => {}
            _ = node.stopped() => return Ok(render_pop(&req.queue, &[])),
        }
    }
}

/// `{"queue", "messages": [{"id", "partition", "attempts", "payload"}]}`,
/// written by hand so each payload goes out as the exact text it came in as.
fn render_pop(queue: &str, messages: &[Delivered]) -> Response {
    let text = |s: &str| Value::String(s.to_string()).to_string();
    let mut out = String::with_capacity(64 + messages.iter().map(|m| m.payload.len() + 96).sum::<usize>());
    let _ = write!(out, "{{\"queue\":{},\"messages\":[", text(queue));
    for (i, m) in messages.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(
            out,
            "{sep}{{\"id\":{},\"partition\":{},\"attempts\":{},\"payload\":{}}}",
            text(&m.id),
            text(&m.partition),
            m.attempts,
            m.payload
        );
    }
    out.push_str("]}");
    ([(header::CONTENT_TYPE, "application/json")], out).into_response()
}

#[derive(Deserialize)]
struct AckBody {
    queue: String,
    #[serde(default)]
    group: Option<String>,
    acks: Vec<AckItem>,
}

#[derive(Deserialize)]
struct AckItem {
    id: String,
    #[serde(default)]
    status: Option<Value>,
}

/// The durable ack's status table: completed/success/acked/ok (or none)
/// complete; anything else is a failure, so a typo never retires a message.
fn ack_status(v: &Option<Value>) -> Result<AckStatus, EphemeralError> {
    match v {
        None | Some(Value::Null) | Some(Value::Bool(true)) => Ok(AckStatus::Completed),
        Some(Value::Bool(false)) => Ok(AckStatus::Failed),
        Some(Value::String(s)) if matches!(s.as_str(), "completed" | "success" | "acked" | "ok") => {
            Ok(AckStatus::Completed)
        }
        Some(Value::String(_)) => Ok(AckStatus::Failed),
        Some(other) => Err(EphemeralError::bad(format!("an ack's status must be a string, not {other}"))),
    }
}

pub async fn ack(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> Answer {
    let b: AckBody = parse(&body)?;
    count_ok("acks", b.acks.len())?;
    let mut acks = Vec::with_capacity(b.acks.len());
    for (i, a) in b.acks.into_iter().enumerate() {
        if a.id.is_empty() {
            return Err(EphemeralError::bad(format!("the ack at index {i} carries no message id")).into());
        }
        let status = ack_status(&a.status)?;
        acks.push((a.id, status));
    }
    let outcomes = node.ephemeral().ack(&b.queue, b.group.as_deref(), &acks)?;
    let results: Vec<Value> =
        acks.iter().zip(outcomes).map(|((id, _), o)| json!({ "id": id, "outcome": o.as_str() })).collect();
    Ok(axum::Json(json!({ "results": results })).into_response())
}

pub async fn queues(State(node): State<Arc<Replica>>) -> Answer {
    Ok(axum::Json(node.ephemeral().queues()).into_response())
}

pub async fn depth(State(node): State<Arc<Replica>>, path: Result<Path<String>, PathRejection>) -> Answer {
    let queue = path_queue(path)?;
    Ok(axum::Json(node.ephemeral().depth(&queue)?).into_response())
}

/// The ephemeral store's error kinds, by the code it names them with, in
/// the one table (a test checks every kind has its entry, status included).
fn table_code(kind: ErrorKind) -> &'static crate::http::codes::Code {
    crate::http::codes::by_name(kind.code()).unwrap_or(crate::http::codes::INTERNAL)
}

#[cfg(test)]
mod code_tests {
    use super::*;

    #[test]
    fn every_error_kind_has_its_table_entry() {
        use ErrorKind::*;
        for kind in [BadRequest, QueueNotFound, QueueFull, Unavailable, TooLarge] {
            let code =
                crate::http::codes::by_name(kind.code()).unwrap_or_else(|| panic!("{kind:?} is not in the table"));
            assert_eq!(code.status.as_u16(), kind.status(), "{kind:?}");
            assert_eq!(table_code(kind), code);
        }
    }
}

//! Reads by offset (`POST /api/v1/fetch`) and partition discovery
//! (`POST /api/v1/partitions/changed`). Neither takes a lease or moves a
//! cursor: they read the applied state and the body files, nothing else.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use regina_state::views::{self, FetchError, FetchPlan};
use regina_types::time::{format_iso, parse_iso};
use regina_types::DEFAULT_PARTITION;

use super::{payload_value, read_record};
use crate::http::error::{ApiError, ApiResult};
use crate::http::input::{body_bytes, json_body};
use regina_node::Replica;

/// Most entries one call may carry.
const ENTRIES_MAX: usize = 1024;
/// Body bytes an entry reads when it names no budget, and the most it may.
const ENTRY_BYTES_DEFAULT: i64 = 1 << 20;
const ENTRY_BYTES_MAX: i64 = 8 << 20;
/// The most body bytes one call reads across its entries.
const CALL_BYTES_MAX: i64 = 8 << 20;
/// Records one entry returns at most, whatever its byte budget.
const ENTRY_RECORDS_MAX: usize = 10_000;
/// Longest a fetch may wait for records.
const WAIT_MS_MAX: u64 = 30_000;
/// Partitions one discovery page lists at most (and by default).
const PAGE_MAX: i64 = 1_000;
/// How often a waiting fetch looks again without a wake-up.
const RECHECK: Duration = Duration::from_millis(100);

#[derive(Deserialize)]
struct FetchBody {
    #[serde(default)]
    entries: Vec<FetchEntry>,
    #[serde(rename = "maxBytes")]
    max_bytes: Option<i64>,
    #[serde(rename = "maxWaitMs")]
    max_wait_ms: Option<u64>,
    #[serde(rename = "minBytes")]
    min_bytes: Option<i64>,
}

#[derive(Deserialize)]
struct FetchEntry {
    queue: String,
    /// A name, or a number read as its decimal name; absent is `Default`.
    #[serde(default)]
    partition: Option<Value>,
    offset: i64,
    #[serde(rename = "maxBytes")]
    max_bytes: Option<i64>,
}

fn budget(v: Option<i64>, default: i64, max: i64, what: &str) -> ApiResult<u64> {
    match v {
        Some(n) if n < 1 => Err(ApiError::bad_body(format!("{what} must be positive, got {n}"))),
        Some(n) => Ok(n.min(max) as u64),
        None => Ok(default as u64),
    }
}

/// `POST /api/v1/fetch`: one answer per entry, in request order, each with
/// the partition's bounds. An offset below the oldest kept message or past
/// the end answers `OFFSET_OUT_OF_RANGE`; a queue that does not exist,
/// `UNKNOWN_TOPIC_OR_PARTITION`; a partition never written of an existing
/// queue is an empty log. With `maxWaitMs`, an answer short of `minBytes`
/// (default 1) of records waits for writes, up to 30 s.
pub async fn fetch(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> ApiResult<Json<Value>> {
    let bytes = body_bytes(body)?;
    let req: FetchBody = json_body(&bytes, false)?;
    if req.entries.len() > ENTRIES_MAX {
        return Err(ApiError::bad_body(format!("at most {ENTRIES_MAX} entries per call, got {}", req.entries.len()))
            .at_field("entries"));
    }
    let call_bytes = budget(req.max_bytes, CALL_BYTES_MAX, CALL_BYTES_MAX, "maxBytes")?;
    let asks = asks_of(&req.entries)?;
    let wait = Duration::from_millis(req.max_wait_ms.unwrap_or(0).min(WAIT_MS_MAX));
    let min_bytes = req.min_bytes.unwrap_or(1).max(0) as u64;
    let deadline = Instant::now() + wait;
    let plans = loop {
        let notified = node.applied_signal().notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let plans: Vec<FetchPlan> = {
            let m = node.tenant_state();
            let mut left = call_bytes;
            asks.iter()
                .map(|(q, p, off, eb)| views::plan_fetch(&m, q, p, *off, *eb, &mut left, ENTRY_RECORDS_MAX))
                .collect()
        };
        let got: u64 = plans.iter().flat_map(|p| &p.records).map(|(_, m)| (m.len as u64).max(1)).sum();
        let now = Instant::now();
        if wait.is_zero()
            || min_bytes == 0
            || got >= min_bytes
            || plans.iter().any(|p| p.error.is_some())
            || now >= deadline
        {
            break plans;
        }
        tokio::select! {
            _ = &mut notified => {}
            _ = tokio::time::sleep(RECHECK.min(deadline - now)) => {}
        }
    };
    let mut entries = Vec::with_capacity(plans.len());
    for ((queue, partition, _, _), plan) in asks.iter().zip(plans) {
        let mut records = Vec::with_capacity(plan.records.len());
        for (offset, meta) in &plan.records {
            let (b, _) = read_record(&node, meta.pos, meta.len)?;
            records.push(json!({
                "offset": offset,
                "transactionId": b.transaction_id,
                "payload": payload_value(&b.payload),
                "ts": format_iso(meta.created_ms),
            }));
        }
        let mut e = json!({
            "queue": queue,
            "partition": partition,
            "records": records,
            "highWatermark": plan.high_watermark,
            "logStartOffset": plan.log_start,
        });
        if let Some(err) = plan.error {
            e["error"] = json!(match err {
                FetchError::UnknownQueue => "UNKNOWN_TOPIC_OR_PARTITION",
                FetchError::OutOfRange => "OFFSET_OUT_OF_RANGE",
            });
        }
        entries.push(e);
    }
    Ok(Json(json!({ "entries": entries })))
}

/// Each entry as (queue, partition, offset, byte budget), checked.
fn asks_of(entries: &[FetchEntry]) -> ApiResult<Vec<(&str, String, u64, u64)>> {
    let mut asks = Vec::with_capacity(entries.len());
    for e in entries {
        if e.offset < 0 {
            return Err(ApiError::bad_body(format!("offset must be non-negative, got {}", e.offset)));
        }
        let partition = partition_name(e.partition.as_ref()).map_err(ApiError::bad_body)?;
        let entry_bytes = budget(e.max_bytes, ENTRY_BYTES_DEFAULT, ENTRY_BYTES_MAX, "an entry's maxBytes")?;
        asks.push((e.queue.as_str(), partition, e.offset as u64, entry_bytes));
    }
    Ok(asks)
}

/// An entry's partition: a name, or a number read as its decimal name;
/// absent or null is `Default`.
pub(super) fn partition_name(v: Option<&Value>) -> Result<String, String> {
    match v {
        None | Some(Value::Null) => Ok(DEFAULT_PARTITION.to_string()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Number(n)) => Ok(n.to_string()),
        Some(other) => Err(format!("partition must be a name or a number, not {other}")),
    }
}

#[derive(Deserialize)]
struct ChangedBody {
    #[serde(default)]
    entries: Vec<ChangedEntry>,
}

#[derive(Deserialize)]
struct ChangedEntry {
    queue: String,
    since: Option<String>,
    after: Option<String>,
    limit: Option<i64>,
}

/// The page cursor: `p|<index>`, the creation index of the next partition
/// to look at. Absent or empty starts the pass.
fn parse_cursor(after: Option<&str>) -> Option<usize> {
    match after {
        None | Some("") => Some(0),
        Some(s) => s.strip_prefix("p|")?.parse().ok(),
    }
}

/// `POST /api/v1/partitions/changed`: per entry, the queue's partitions in
/// creation order (written at or after `since` when given), a page at a
/// time. `safeTime` is the newest entry time the state has applied: every
/// later write is stamped at or after it, so it is the `since` of the next
/// pass.
pub async fn changed(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> ApiResult<Json<Value>> {
    let bytes = body_bytes(body)?;
    let req: ChangedBody = json_body(&bytes, false)?;
    if req.entries.len() > ENTRIES_MAX {
        return Err(ApiError::bad_body(format!("at most {ENTRIES_MAX} entries per call, got {}", req.entries.len()))
            .at_field("entries"));
    }
    let mut asks = Vec::with_capacity(req.entries.len());
    for e in &req.entries {
        let since = match e.since.as_deref().filter(|s| !s.is_empty()) {
            None => None,
            Some(s) => {
                Some(parse_iso(s).ok_or_else(|| ApiError::bad_body(format!("since {s:?} is not an ISO-8601 time")))?)
            }
        };
        let limit = e.limit.unwrap_or(PAGE_MAX).clamp(1, PAGE_MAX) as usize;
        asks.push((e.queue.as_str(), since, parse_cursor(e.after.as_deref()), limit));
    }
    let m = node.tenant_state();
    let s = &*m;
    let entries: Vec<Value> = asks
        .iter()
        .map(|&(queue, since, start, limit)| {
            let Some(q) = s.queue(queue) else {
                return json!({ "queue": queue, "error": "UNKNOWN_TOPIC_OR_PARTITION" });
            };
            let Some(start) = start else {
                return json!({ "queue": queue, "error": "BAD_CURSOR" });
            };
            let page = views::changed(q, since, start, limit);
            let partitions: Vec<Value> = page
                .rows
                .iter()
                .map(|r| {
                    json!({
                        "name": r.name,
                        "id": r.id.to_string(),
                        "lastOffset": r.last_offset,
                        "logStart": r.log_start,
                        "lastWriteAt": format_iso(r.last_write_ms),
                    })
                })
                .collect();
            json!({ "queue": queue, "partitions": partitions, "next": page.next.map(|n| format!("p|{n}")) })
        })
        .collect();
    Ok(Json(json!({ "safeTime": format_iso(s.now_ms), "safeTimeDegraded": false, "entries": entries })))
}

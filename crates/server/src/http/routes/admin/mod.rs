//! Administration and observability reads: queues, partitions, namespaces,
//! tasks, messages, consumer groups, status and analytics, metrics, and the
//! reads by offset.
//!
//! Every figure is computed from the applied state at the moment of the
//! request (see `regina_state::views` for what each count means); nothing is
//! sampled or cached, so there is no statistics job to refresh. The state's
//! read lock is held only while the figures are gathered: message bodies are
//! read from disk after it is released.

mod consumer_groups;
mod messages;
mod metrics;
mod offsets;
mod process;
mod queen_metrics;
mod queues;
mod reads;
mod resources;
mod status;

use std::sync::OnceLock;
use std::time::Instant;

use axum::extract::rejection::PathRejection;
use axum::routing::{get, post};
use serde_json::{json, Value};

use regina_state::views::StatusCounts;
use regina_state::BodyRecord;
use regina_types::time::{format_iso, parse_iso};

use crate::http::error::{ApiError, ApiResult};
use crate::http::input::query_get;
use regina_node::Replica;

/// When this process started serving, for `uptime`.
static STARTED: OnceLock<Instant> = OnceLock::new();

/// The read-only administration routes.
pub fn routes() -> crate::http::Routes {
    STARTED.get_or_init(Instant::now);
    crate::http::Routes::default()
        .route("/api/v1/resources/overview", get(resources::overview))
        .route("/api/v1/resources/namespaces", get(resources::namespaces))
        .route("/api/v1/resources/tasks", get(resources::tasks))
        .route("/api/v1/resources/queues", get(queues::list))
        .route("/api/v1/resources/queues/{queue}", get(queues::detail))
        .route("/api/v1/resources/queues/{queue}/depth", get(queues::depth))
        .route("/api/v1/resources/partitions", get(resources::partitions))
        .route("/api/v1/messages", get(messages::list))
        .route("/api/v1/messages/{partition_id}/{transaction_id}", get(messages::detail))
        .route("/api/v1/consumer-groups", get(consumer_groups::list))
        .route("/api/v1/consumer-groups/lagging", get(consumer_groups::lagging))
        .route("/api/v1/consumer-groups/{group}", get(consumer_groups::detail))
        .route("/api/v1/status", get(status::overall))
        .route("/api/v1/status/queues", get(status::queues))
        .route("/api/v1/status/queues/{queue}", get(status::queue))
        .route("/api/v1/status/analytics", get(status::analytics))
        .route("/api/v1/stats/refresh", post(status::refresh))
        .route("/api/v1/analytics/system-metrics", get(process::system_metrics))
        .route("/api/v1/analytics/worker-metrics", get(process::worker_metrics))
        .route("/metrics", get(metrics::metrics))
        .route("/metrics/prometheus", get(metrics::prometheus))
        .route("/api/v1/fetch", post(reads::fetch))
        .route("/api/v1/fetch/offsets", post(offsets::offsets))
        .route("/api/v1/partitions/changed", post(reads::changed))
}

fn uptime_seconds() -> u64 {
    STARTED.get_or_init(Instant::now).elapsed().as_secs()
}

/// A path segment axum could not decode, as a JSON 400.
fn bad_path(e: PathRejection) -> ApiError {
    ApiError::bad_request(format!("invalid path segment: {e}"))
}

fn queue_not_found(name: &str) -> ApiError {
    ApiError::new(crate::http::codes::QUEUE_NOT_FOUND, format!("queue {name:?} does not exist"))
}

/// A non-empty query parameter.
fn param<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    query_get(pairs, key).filter(|s| !s.is_empty())
}

fn param_time(pairs: &[(String, String)], key: &str) -> ApiResult<Option<u64>> {
    match param(pairs, key) {
        None => Ok(None),
        Some(v) => parse_iso(v)
            .map(Some)
            .ok_or_else(|| ApiError::bad_request(format!("{key} {v:?} is not an ISO-8601 time")).at_field(key)),
    }
}

fn iso_opt(ms: Option<u64>) -> Value {
    ms.map_or(Value::Null, |m| Value::String(format_iso(m)))
}

fn counts_json(c: &StatusCounts) -> Value {
    json!({
        "total": c.total,
        "pending": c.pending,
        "processing": c.processing,
        "completed": c.completed,
        "deadLetter": c.dead_letter,
    })
}

/// A reporting window: `from`/`to` (ISO-8601, default the last hour), cut
/// into buckets whose width grows with the span so a series stays short.
struct Window {
    from_ms: u64,
    to_ms: u64,
    bucket_ms: u64,
    buckets: usize,
}

/// Longest window a series may cover: a year.
const WINDOW_MS_MAX: u64 = 366 * 86_400_000;

impl Window {
    fn parse(pairs: &[(String, String)], now_ms: u64) -> ApiResult<Window> {
        let to_ms = param_time(pairs, "to")?.unwrap_or(now_ms);
        let from_ms = param_time(pairs, "from")?.unwrap_or(to_ms.saturating_sub(3_600_000));
        if from_ms >= to_ms {
            return Err(ApiError::bad_request("from must be before to"));
        }
        let span = to_ms - from_ms;
        if span > WINDOW_MS_MAX {
            return Err(ApiError::bad_request("the window may span at most 366 days"));
        }
        let minutes: u64 = match span {
            s if s <= 3_600_000 => 1,
            s if s <= 6 * 3_600_000 => 5,
            s if s <= 86_400_000 => 15,
            s if s <= 7 * 86_400_000 => 60,
            _ => 1_440,
        };
        let bucket_ms = minutes * 60_000;
        Ok(Window { from_ms, to_ms, bucket_ms, buckets: span.div_ceil(bucket_ms) as usize })
    }

    fn bucket_minutes(&self) -> u64 {
        self.bucket_ms / 60_000
    }

    fn bucket_start(&self, i: usize) -> u64 {
        self.from_ms + self.bucket_ms * i as u64
    }

    fn range_json(&self) -> Value {
        json!({ "from": format_iso(self.from_ms), "to": format_iso(self.to_ms) })
    }
}

/// Reads and decodes one stored body.
fn read_record(node: &Replica, pos: u64, len: u32) -> ApiResult<(BodyRecord, Option<String>)> {
    crate::http::render::read_message(node, pos, len)
}

/// A stored payload as JSON; it was validated JSON when pushed, and an
/// empty one reads as `null`.
fn payload_value(payload: &[u8]) -> Value {
    if payload.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(payload).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(payload).into_owned()))
}

//! `GET /api/v1/dlq`: dead-lettered messages, newest last, filtered by queue
//! and consumer group (and partition and a failure-time window), paged by
//! `limit` and `offset`. `total` counts every match before paging.

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use regina_types::time::{format_iso, parse_iso};

use crate::http::error::{ApiError, ApiResult};
use crate::http::input::{query_get, query_pairs, query_u64};
use crate::http::render::{read_message, uuid_string};
use regina_node::Replica;

/// Most rows one DLQ read returns.
const DLQ_LIMIT_MAX: u64 = 1_000;

pub async fn read(State(node): State<Arc<Replica>>, RawQuery(q): RawQuery) -> ApiResult<Response> {
    let pairs = query_pairs(q.as_deref())?;
    let queue = query_get(&pairs, "queue").filter(|s| !s.is_empty());
    let group = query_get(&pairs, "consumerGroup").filter(|s| !s.is_empty());
    let partition = query_get(&pairs, "partition").filter(|s| !s.is_empty());
    let time = |key: &str| -> ApiResult<Option<u64>> {
        match query_get(&pairs, key).filter(|s| !s.is_empty()) {
            None => Ok(None),
            Some(v) => parse_iso(v)
                .map(Some)
                .ok_or_else(|| ApiError::bad_request(format!("{key} {v:?} is not an ISO-8601 time")).at_field(key)),
        }
    };
    let (from, to) = (time("from")?, time("to")?);
    let limit = query_u64(&pairs, "limit", 1, DLQ_LIMIT_MAX)?.unwrap_or(100) as usize;
    let offset = query_u64(&pairs, "offset", 0, u32::MAX as u64)?.unwrap_or(0) as usize;
    let rows: Vec<(String, regina_state::queue::DlqEntry)> = {
        let m = node.tenant_state();
        m.queue_names
            .iter()
            .filter(|(name, _)| queue.is_none_or(|q| q == name.as_str()))
            .flat_map(|(name, id)| m.queues[id].dlq.iter().map(move |e| (name.clone(), e.clone())))
            .filter(|(_, e)| group.is_none_or(|g| g == e.group))
            .filter(|(_, e)| partition.is_none_or(|p| p == e.partition))
            .filter(|(_, e)| from.is_none_or(|f| e.failed_ms >= f) && to.is_none_or(|t| e.failed_ms <= t))
            .collect()
    };
    let total = rows.len();
    let mut messages = Vec::new();
    for (queue, e) in rows.into_iter().skip(offset).take(limit) {
        let (b, producer_sub) = read_message(&node, e.pos, e.len)?;
        let data: Value =
            serde_json::from_str(crate::http::render::payload_raw(b.payload).get()).unwrap_or(Value::Null);
        messages.push(json!({
            "id": uuid_string(&b.id),
            "transactionId": b.transaction_id,
            "partitionId": e.partition_id.to_string(),
            "partition": e.partition,
            "queue": queue,
            "consumerGroup": e.group,
            "data": data,
            "producerSub": producer_sub,
            "errorMessage": e.error,
            "retryCount": e.attempts,
            "offset": e.offset,
            "createdAt": format_iso(b.created_ms),
            "failedAt": format_iso(e.failed_ms),
        }));
    }
    Ok(axum::Json(json!({ "messages": messages, "total": total })).into_response())
}

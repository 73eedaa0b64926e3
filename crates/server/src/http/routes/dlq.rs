//! The dead-letter routes beside the per-message ones:
//!
//! - `GET /api/v1/dlq`: dead-lettered messages, newest last, filtered by
//!   queue and consumer group (and partition and a failure-time window),
//!   paged by `limit` and `offset`. `total` counts every match before paging.
//! - `DELETE /api/v1/dlq?queue=Q[&consumerGroup=G][&partition=P]`: purges
//!   every matching row of one queue (the queue is required).
//! - `POST /api/v1/dlq/{id}/replay`: the retry of the row whose message has
//!   id `id` (the `id` the list shows).

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
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
            serde_json::from_str(crate::http::render::payload_json(b.payload).get()).unwrap_or(Value::Null);
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

/// Deletes at once, at most: the proposer packs them into few entries.
const PURGE_CONCURRENCY: usize = 256;

pub async fn purge(State(node): State<Arc<Replica>>, RawQuery(q): RawQuery) -> ApiResult<Response> {
    let pairs = query_pairs(q.as_deref())?;
    let Some(queue) = query_get(&pairs, "queue").filter(|s| !s.is_empty()) else {
        return Err(ApiError::bad_request("a purge needs queue (one exact queue name)").at_field("queue"));
    };
    let group = query_get(&pairs, "consumerGroup").filter(|s| !s.is_empty());
    let partition = query_get(&pairs, "partition").filter(|s| !s.is_empty());
    let rows: Vec<(u64, u64, u32)> = {
        let m = node.tenant_state();
        let Some(q) = m.queue(queue) else {
            return Err(ApiError::new(crate::http::codes::QUEUE_NOT_FOUND, format!("queue {queue:?} does not exist")));
        };
        q.dlq
            .iter()
            .filter(|e| group.is_none_or(|g| g == e.group))
            .filter(|e| partition.is_none_or(|p| p == e.partition))
            .map(|e| (e.partition_id, e.pos, e.len))
            .collect()
    };
    // Each row is deleted by its message's transaction id, read from its body.
    let mut targets = Vec::with_capacity(rows.len());
    for (partition_id, pos, len) in rows {
        let (b, _) = read_message(&node, pos, len)?;
        targets.push((partition_id, b.transaction_id));
    }
    let mut purged = 0u64;
    for chunk in targets.chunks(PURGE_CONCURRENCY) {
        let mut set = tokio::task::JoinSet::new();
        for (partition_id, txn) in chunk.iter().cloned() {
            let node = node.clone();
            set.spawn(async move {
                node.propose(regina_state::Command::DeleteDeadLetter { partition_id, transaction_id: txn }).await
            });
        }
        while let Some(done) = set.join_next().await {
            let outcome = done.map_err(|e| ApiError::internal(e.to_string()))?;
            if let regina_state::Outcome::Found(true) = outcome? {
                purged += 1;
            }
        }
    }
    Ok(axum::Json(json!({
        "success": true,
        "queue": queue,
        "consumerGroup": group,
        "partition": partition,
        "purged": purged,
    }))
    .into_response())
}

pub async fn replay(State(node): State<Arc<Replica>>, Path(id): Path<String>) -> ApiResult<Response> {
    let Ok(wanted) = uuid::Uuid::parse_str(&id) else {
        return Err(ApiError::bad_request(format!("{id:?} is not a dead-letter id (a message id)")).at_field("id"));
    };
    let rows: Vec<(u64, u64, u32)> = {
        let m = node.tenant_state();
        m.queues.values().flat_map(|q| q.dlq.iter().map(|e| (e.partition_id, e.pos, e.len))).collect()
    };
    for (partition_id, pos, len) in rows {
        let (b, _) = read_message(&node, pos, len)?;
        if b.id == *wanted.as_bytes() {
            return super::consumer_groups::replay_dead_letter(&node, partition_id, b.transaction_id).await;
        }
    }
    Err(ApiError::new(crate::http::codes::NOT_FOUND, format!("no dead-letter row has id {id}")))
}

//! Queues as resources: the list with counts, one queue's detail with its
//! partitions, and its depth (backlog per partition, overall or per group).

use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::Json;
use serde_json::{json, Value};

use regina_state::views::{self, QueueSummary, QueueView};
use regina_types::time::format_iso;

use super::{bad_path, counts_json, iso_opt, param, queue_not_found};
use crate::http::error::ApiResult;
use crate::http::input::{query_pairs, query_u64};
use crate::http::routes::queues::options_json;
use regina_node::Replica;

/// Most rows one queue list returns.
const LIST_LIMIT_MAX: u64 = 10_000;

/// One queue row. Regina keeps every queue's bodies in the shared body
/// files, so `segments` reports what a segment view would: the kept
/// messages and their body bytes.
fn summary_json(s: &QueueSummary) -> Value {
    json!({
        "id": s.id,
        "name": s.name,
        "namespace": s.namespace,
        "task": s.task,
        "priority": s.priority,
        "partitions": s.partitions,
        "messages": counts_json(&s.counts),
        "depth": s.depth,
        "segments": { "messages": s.counts.total, "bytes": s.bytes },
        "retainedBytes": s.bytes,
        "deadLetterRows": s.dlq_rows,
        "consumerGroups": s.groups,
        "createdAt": format_iso(s.created_ms),
        "lastWriteAt": iso_opt(s.last_write_ms),
    })
}

/// `GET /api/v1/resources/queues[?namespace=&task=&search=&limit=&offset=]`:
/// queues by name; `search` keeps names containing it; `total` counts the
/// matches before paging.
pub async fn list(State(node): State<Arc<Replica>>, RawQuery(q): RawQuery) -> ApiResult<Json<Value>> {
    let pairs = query_pairs(q.as_deref())?;
    let namespace = param(&pairs, "namespace");
    let task = param(&pairs, "task");
    let search = param(&pairs, "search");
    let limit = query_u64(&pairs, "limit", 1, LIST_LIMIT_MAX)?.unwrap_or(LIST_LIMIT_MAX) as usize;
    let offset = query_u64(&pairs, "offset", 0, u32::MAX as u64)?.unwrap_or(0) as usize;
    let rows: Vec<QueueSummary> = {
        let m = node.tenant_state();
        let now = node.read_time(m.now_ms);
        m.queue_names
            .iter()
            .filter(|(name, _)| search.is_none_or(|s| name.contains(s)))
            .filter_map(|(_, id)| m.queues.get(id))
            .filter(|q| namespace.is_none_or(|n| q.namespace.as_deref() == Some(n)))
            .filter(|q| task.is_none_or(|t| q.task.as_deref() == Some(t)))
            .map(|q| views::queue_summary(q, now))
            .collect()
    };
    let total = rows.len();
    let queues: Vec<Value> = rows.iter().skip(offset).take(limit).map(summary_json).collect();
    Ok(Json(json!({
        "queues": queues,
        "total": total,
        "pagination": { "limit": limit, "offset": offset },
    })))
}

/// `GET /api/v1/resources/queues/{queue}`: the queue, its configuration,
/// its partitions in creation order with their counts, and the totals.
pub async fn detail(
    State(node): State<Arc<Replica>>,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<Value>> {
    let Path(name) = path.map_err(bad_path)?;
    let m = node.tenant_state();
    let now = node.read_time(m.now_ms);
    let q = m.queue(&name).ok_or_else(|| queue_not_found(&name))?;
    let view = QueueView::new(q, now);
    let s = views::queue_summary(q, now);
    let partitions: Vec<Value> = q
        .partitions
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let row = views::partition_row(&view, i as u32);
            json!({
                "id": p.id.to_string(),
                "name": p.name,
                "createdAt": format_iso(p.created_ms),
                "lastWriteAt": format_iso(p.last_write_ms),
                "depth": row.depth,
                "offsets": { "logStart": row.base, "highWatermark": row.next_offset },
                "stats": counts_json(&row.counts),
                "bytes": views::kept_bytes(p),
                "oldestUnsettledAt": iso_opt(row.oldest_unsettled_ms),
            })
        })
        .collect();
    let groups: Vec<Value> = views::groups(q)
        .map(|(_, g)| {
            json!({
                "name": g.name,
                "registeredAt": format_iso(g.registered_ms),
                "subscriptionTimestamp": iso_opt(g.seed_from_ms),
            })
        })
        .collect();
    let mut totals = counts_json(&s.counts);
    totals["depth"] = json!(s.depth);
    Ok(Json(json!({
        "id": s.id,
        "name": s.name,
        "namespace": s.namespace,
        "task": s.task,
        "priority": s.priority,
        "createdAt": format_iso(s.created_ms),
        "lastWriteAt": iso_opt(s.last_write_ms),
        "config": options_json(&q.options),
        "partitions": partitions,
        "totals": totals,
        "segments": { "messages": s.counts.total, "bytes": s.bytes },
        "retainedBytes": s.bytes,
        "deadLetterRows": s.dlq_rows,
        "consumerGroups": groups,
    })))
}

/// `GET /api/v1/resources/queues/{queue}/depth[?group=]`: positions left to
/// settle per partition, leased ones included. Without `group` each
/// partition counts for its slowest group (every kept message while no
/// group has registered); with `group`, for that group (a name that never
/// registered owes every kept message). The effective figures are reported
/// equal to the plain ones: they do not discount what a conflating group
/// would skip.
pub async fn depth(
    State(node): State<Arc<Replica>>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(q): RawQuery,
) -> ApiResult<Json<Value>> {
    let Path(name) = path.map_err(bad_path)?;
    let pairs = query_pairs(q.as_deref())?;
    let group = param(&pairs, "group");
    let m = node.tenant_state();
    let now = node.read_time(m.now_ms);
    let q = m.queue(&name).ok_or_else(|| queue_not_found(&name))?;
    let view = QueueView::new(q, now);
    let gid = group.and_then(|g| q.group_index.get(g).copied());
    let mut parts = Vec::with_capacity(q.partitions.len());
    let (mut pending, mut processing, mut owing, mut ready_parts) = (0u64, 0u64, 0u64, 0u64);
    for (i, p) in q.partitions.iter().enumerate() {
        let pidx = i as u32;
        let (depth, leased) = match group {
            Some(g) => (
                views::group_depth(q, pidx, g),
                gid.and_then(|g| views::live_lease(q, pidx, g, now)).map_or(0, |(_, r)| r.end - r.start),
            ),
            None => (views::depth(q, pidx), view.partition_counts(pidx).processing),
        };
        pending += depth;
        processing += leased;
        owing += (depth > 0) as u64;
        ready_parts += (depth > leased) as u64;
        parts.push(json!({ "partition": p.name, "pending": depth }));
    }
    let ready = pending.saturating_sub(processing);
    Ok(Json(json!({
        "queue": q.name,
        "group": group,
        "pending": pending,
        "processing": processing,
        "ready": ready,
        "partitionsPending": owing,
        "partitionsReady": ready_parts,
        "conflation": false,
        "effectivePending": pending,
        "effectiveReady": ready,
        "partitions": parts,
    })))
}

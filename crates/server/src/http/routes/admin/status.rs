//! Dashboard status: the broker at a glance, queue statistics, and the
//! activity series.
//!
//! Series are computed from the state at request time over a window
//! (`from`/`to`, default the last hour): `ingested` counts the kept
//! messages created in each bucket (messages retention already dropped are
//! not counted: the state holds no history) and `deadLettered` the
//! dead-letter rows filed in it. Lease figures exist only for the present,
//! so the worker series has a single point, now. `statsAge` is 0: nothing
//! is precomputed.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::Json;
use serde_json::{json, Value};

use regina_state::views::{self, StatusCounts};
use regina_state::State as MachineState;
use regina_types::time::format_iso;

use super::{bad_path, counts_json, iso_opt, param, queue_not_found, Window};
use crate::http::error::ApiResult;
use crate::http::input::{query_pairs, query_u64};
use crate::http::routes::queues::options_json;
use regina_node::Replica;

const QUEUES_LIMIT_MAX: u64 = 10_000;
const QUEUES_LIMIT_DEFAULT: u64 = 100;

/// The ingest and dead-letter series of one queue or all, over a window.
fn series(s: &MachineState, queue: Option<&str>, w: &Window) -> (Vec<Value>, u64, u64) {
    let points = views::activity(s, queue, w.from_ms, w.bucket_ms, w.buckets);
    let secs = (w.bucket_ms / 1000).max(1) as f64;
    let out = points
        .iter()
        .enumerate()
        .map(|(i, (ingested, dead))| {
            json!({
                "timestamp": format_iso(w.bucket_start(i)),
                "ingested": ingested,
                "ingestedPerSecond": *ingested as f64 / secs,
                "deadLettered": dead,
            })
        })
        .collect();
    let ingested = points.iter().map(|p| p.0).sum();
    let dead = points.iter().map(|p| p.1).sum();
    (out, ingested, dead)
}

/// `GET /api/v1/status[?from=&to=]`.
pub async fn overall(State(node): State<Arc<Replica>>, RawQuery(q): RawQuery) -> ApiResult<Json<Value>> {
    let pairs = query_pairs(q.as_deref())?;
    let m = node.tenant_state();
    let s = &*m;
    let now = node.read_time(s.now_ms);
    let w = Window::parse(&pairs, now)?;
    let (throughput, ingested, dead_in_window) = series(s, None, &w);
    let summaries = views::queue_summaries(s, now);
    let mut counts = StatusCounts::default();
    summaries.iter().for_each(|q| counts.add(q.counts));
    let lanes = views::lanes(s, None, now);
    let leased: Vec<&views::Lane> = lanes.iter().filter(|l| l.lease.is_some()).collect();
    let lease_ids: BTreeSet<&str> = leased.iter().filter_map(|l| l.lease.as_ref().map(|x| x.0.as_str())).collect();
    let leased_messages: u64 = leased.iter().filter_map(|l| l.lease.as_ref().map(|x| x.2)).sum();
    let dlq_rows: u64 = summaries.iter().map(|q| q.dlq_rows).sum();
    Ok(Json(json!({
        "timeRange": w.range_json(),
        "bucketMinutes": w.bucket_minutes(),
        "pointCount": w.buckets,
        "statsAge": 0,
        "throughput": throughput,
        "workers": [{
            "timestamp": format_iso(now),
            "activeWorkers": lease_ids.len(),
            "leasedPartitions": leased.len(),
            "leasedMessages": leased_messages,
        }],
        "queues": {
            "total": summaries.len(),
            "withBacklog": summaries.iter().filter(|q| q.depth > 0).count(),
            "partitions": summaries.iter().map(|q| q.partitions).sum::<u64>(),
        },
        "messages": {
            "counts": counts_json(&counts),
            "total": counts.total,
            "depth": summaries.iter().map(|q| q.depth).sum::<u64>(),
            "ingestedInWindow": ingested,
        },
        "leases": {
            "active": lease_ids.len(),
            "partitions": leased.len(),
            "messages": leased_messages,
        },
        "deadLetterQueue": { "total": dlq_rows, "inWindow": dead_in_window },
        "errors": { "deadLetteredInWindow": dead_in_window },
    })))
}

/// `GET /api/v1/status/queues[?namespace=&task=&limit=&offset=]`: one row
/// per queue, by name; `total` counts matches before paging.
pub async fn queues(State(node): State<Arc<Replica>>, RawQuery(q): RawQuery) -> ApiResult<Json<Value>> {
    let pairs = query_pairs(q.as_deref())?;
    let namespace = param(&pairs, "namespace");
    let task = param(&pairs, "task");
    let limit = query_u64(&pairs, "limit", 1, QUEUES_LIMIT_MAX)?.unwrap_or(QUEUES_LIMIT_DEFAULT) as usize;
    let offset = query_u64(&pairs, "offset", 0, u32::MAX as u64)?.unwrap_or(0) as usize;
    let m = node.tenant_state();
    let now = node.read_time(m.now_ms);
    let rows: Vec<_> = views::queue_summaries(&m, now)
        .into_iter()
        .filter(|q| namespace.is_none_or(|n| q.namespace.as_deref() == Some(n)))
        .filter(|q| task.is_none_or(|t| q.task.as_deref() == Some(t)))
        .collect();
    let total = rows.len();
    let queues: Vec<Value> = rows
        .iter()
        .skip(offset)
        .take(limit)
        .map(|q| {
            json!({
                "name": q.name,
                "namespace": q.namespace,
                "task": q.task,
                "priority": q.priority,
                "partitions": q.partitions,
                "messages": counts_json(&q.counts),
                "depth": q.depth,
                "deadLetterRows": q.dlq_rows,
                "consumerGroups": q.groups,
                "createdAt": format_iso(q.created_ms),
                "lastWriteAt": iso_opt(q.last_write_ms),
            })
        })
        .collect();
    Ok(Json(json!({
        "queues": queues,
        "total": total,
        "pagination": { "limit": limit, "offset": offset },
        "statsAge": 0,
    })))
}

/// `GET /api/v1/status/queues/{queue}[?from=&to=]`: one queue's
/// configuration, counts, partitions and series.
pub async fn queue(
    State(node): State<Arc<Replica>>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(q): RawQuery,
) -> ApiResult<Json<Value>> {
    let Path(name) = path.map_err(bad_path)?;
    let pairs = query_pairs(q.as_deref())?;
    let m = node.tenant_state();
    let s = &*m;
    let now = node.read_time(s.now_ms);
    let w = Window::parse(&pairs, now)?;
    let q = s.queue(&name).ok_or_else(|| queue_not_found(&name))?;
    let sum = views::queue_summary(q, now);
    let view = views::QueueView::new(q, now);
    let partitions: Vec<Value> = (0..q.partitions.len() as u32)
        .map(|i| {
            let r = views::partition_row(&view, i);
            json!({
                "name": r.name,
                "id": r.id.to_string(),
                "depth": r.depth,
                "messages": counts_json(&r.counts),
                "lagSeconds": r.oldest_unsettled_ms.map(|t| views::lag_seconds(now, t)),
                "lastWriteAt": format_iso(r.last_write_ms),
            })
        })
        .collect();
    let (throughput, _, _) = series(s, Some(&name), &w);
    Ok(Json(json!({
        "queue": {
            "id": q.id,
            "name": q.name,
            "namespace": q.namespace,
            "task": q.task,
            "createdAt": format_iso(q.created_ms),
            "config": options_json(&q.options),
        },
        "totals": counts_json(&sum.counts),
        "messages": counts_json(&sum.counts),
        "depth": sum.depth,
        "deadLetterRows": sum.dlq_rows,
        "partitions": partitions,
        "timeRange": w.range_json(),
        "bucketMinutes": w.bucket_minutes(),
        "pointCount": w.buckets,
        "throughput": throughput,
    })))
}

/// `GET /api/v1/status/analytics[?from=&to=&queue=]`: the activity series.
pub async fn analytics(State(node): State<Arc<Replica>>, RawQuery(q): RawQuery) -> ApiResult<Json<Value>> {
    let pairs = query_pairs(q.as_deref())?;
    let queue = param(&pairs, "queue");
    let m = node.tenant_state();
    let s = &*m;
    let w = Window::parse(&pairs, node.read_time(s.now_ms))?;
    if let Some(name) = queue {
        s.queue(name).ok_or_else(|| queue_not_found(name))?;
    }
    let (points, ingested, dead) = series(s, queue, &w);
    Ok(Json(json!({
        "from": format_iso(w.from_ms),
        "to": format_iso(w.to_ms),
        "interval": format!("{}m", w.bucket_minutes()),
        "bucketMinutes": w.bucket_minutes(),
        "pointCount": w.buckets,
        "dataPoints": points,
        "totals": { "ingested": ingested, "deadLettered": dead },
    })))
}

/// `POST /api/v1/stats/refresh` (no body needed): every figure is computed
/// at read time, so there is nothing to refresh.
pub async fn refresh() -> Json<Value> {
    Json(json!({
        "success": true,
        "refreshed": false,
        "reason": "statistics are computed from the live state on every read",
    }))
}

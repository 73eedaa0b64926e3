//! The resource overview, namespaces, tasks, and partitions ranked by
//! backlog.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::Json;
use serde_json::{json, Value};

use regina_state::views::{self, QueueSummary, StatusCounts};
use regina_state::State as MachineState;
use regina_types::time::format_iso;

use super::{counts_json, iso_opt, param};
use crate::http::error::ApiResult;
use crate::http::input::{query_pairs, query_u64};
use regina_node::Replica;

/// Rows the partition ranking returns when not told (the dashboard's
/// default), and the most it returns.
const PARTITIONS_DEFAULT: u64 = 610;
const PARTITIONS_MAX: u64 = 10_000;

/// `GET /api/v1/resources/overview`: counts across every queue. `lag` is
/// over the (group, partition) lanes that owe anything: `time` in seconds
/// since the oldest message each has not settled, `offset` in messages.
pub async fn overview(State(node): State<Arc<Replica>>) -> Json<Value> {
    let m = node.tenant_state();
    let s = &*m;
    let now = node.read_time(s.now_ms);
    let summaries = views::queue_summaries(s, now);
    let mut counts = StatusCounts::default();
    for q in &summaries {
        counts.add(q.counts);
    }
    let lanes: Vec<views::Lane> = views::lanes(s, None, now).into_iter().filter(|l| l.depth > 0).collect();
    let times: Vec<u64> =
        lanes.iter().filter_map(|l| l.oldest_unsettled_ms).map(|t| views::lag_seconds(now, t)).collect();
    let offsets: Vec<u64> = lanes.iter().map(|l| l.depth).collect();
    let labels = |f: fn(&QueueSummary) -> &Option<String>| {
        summaries.iter().filter_map(|q| f(q).as_deref()).collect::<BTreeSet<_>>().len()
    };
    let groups: BTreeSet<&str> =
        s.queues.values().flat_map(|q| views::groups(q).map(|(_, g)| g.name.as_str())).collect();
    Json(json!({
        "queues": summaries.len(),
        "partitions": summaries.iter().map(|q| q.partitions).sum::<u64>(),
        "namespaces": labels(|q| &q.namespace),
        "tasks": labels(|q| &q.task),
        "consumerGroups": groups.len(),
        "messages": counts_json(&counts),
        "depth": summaries.iter().map(|q| q.depth).sum::<u64>(),
        "deadLetterRows": summaries.iter().map(|q| q.dlq_rows).sum::<u64>(),
        "retainedBytes": summaries.iter().map(|q| q.bytes).sum::<u64>(),
        "lag": { "time": spread(&times), "offset": spread(&offsets) },
        "timestamp": format_iso(now),
    }))
}

/// Average, maximum and count of a set of figures (zeros when empty).
fn spread(xs: &[u64]) -> Value {
    let max = xs.iter().copied().max().unwrap_or(0);
    let avg = if xs.is_empty() { 0.0 } else { xs.iter().sum::<u64>() as f64 / xs.len() as f64 };
    json!({ "avg": avg, "max": max, "count": xs.len() })
}

/// The queues carrying each value of one label, by label.
fn by_label(s: &MachineState, now: u64, label: fn(&QueueSummary) -> &Option<String>) -> Vec<Value> {
    let mut groups: BTreeMap<String, Vec<QueueSummary>> = BTreeMap::new();
    for q in views::queue_summaries(s, now) {
        if let Some(l) = label(&q).clone() {
            groups.entry(l).or_default().push(q);
        }
    }
    groups
        .into_iter()
        .map(|(name, qs)| {
            let mut counts = StatusCounts::default();
            qs.iter().for_each(|q| counts.add(q.counts));
            json!({
                "name": name,
                "queues": qs.iter().map(|q| q.name.as_str()).collect::<Vec<_>>(),
                "queueCount": qs.len(),
                "partitions": qs.iter().map(|q| q.partitions).sum::<u64>(),
                "messages": counts_json(&counts),
                "depth": qs.iter().map(|q| q.depth).sum::<u64>(),
            })
        })
        .collect()
}

/// `GET /api/v1/resources/namespaces`: every namespace a queue carries.
pub async fn namespaces(State(node): State<Arc<Replica>>) -> Json<Value> {
    let m = node.tenant_state();
    let rows = by_label(&m, node.read_time(m.now_ms), |q| &q.namespace);
    Json(json!({ "namespaces": rows, "total": rows.len() }))
}

/// `GET /api/v1/resources/tasks`: every task a queue carries.
pub async fn tasks(State(node): State<Arc<Replica>>) -> Json<Value> {
    let m = node.tenant_state();
    let rows = by_label(&m, node.read_time(m.now_ms), |q| &q.task);
    Json(json!({ "tasks": rows, "total": rows.len() }))
}

/// `GET /api/v1/resources/partitions[?queue=&limit=]`: partitions holding
/// the deepest backlog first. `pending` is the queue-level depth (slowest
/// group), `processing` the messages under a live lease, `lagSeconds` the
/// age of the oldest message the slowest reader has not settled (`null`
/// when it is caught up).
pub async fn partitions(State(node): State<Arc<Replica>>, RawQuery(q): RawQuery) -> ApiResult<Json<Value>> {
    let pairs = query_pairs(q.as_deref())?;
    let queue = param(&pairs, "queue");
    let limit = query_u64(&pairs, "limit", 1, PARTITIONS_MAX)?.unwrap_or(PARTITIONS_DEFAULT) as usize;
    let (rows, now) = {
        let m = node.tenant_state();
        let now = node.read_time(m.now_ms);
        (views::ranked_partitions(&m, queue, limit, now), now)
    };
    let out: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!({
                "queue": r.queue,
                "partition": r.name,
                "id": r.id.to_string(),
                "pending": r.depth,
                "processing": r.counts.processing,
                "total": r.counts.total,
                "deadLetter": r.counts.dead_letter,
                "lagSeconds": r.oldest_unsettled_ms.map(|t| views::lag_seconds(now, t)),
                "oldestUnsettledAt": iso_opt(r.oldest_unsettled_ms),
                "lastWriteAt": format_iso(r.last_write_ms),
            })
        })
        .collect();
    Ok(Json(json!({ "partitions": out, "total": out.len() })))
}

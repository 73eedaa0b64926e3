//! Consumer groups: the list, one group's lanes queue by queue, and the
//! lanes that fall behind.
//!
//! A *lane* is one group in one partition where it has a cursor. The state
//! keeps no per-cursor consumption counter, so `totalConsumed` is the
//! group's position: the offsets below it, consumed or skipped when the
//! group was seeded. The state keeps no consumption times either, so
//! `lastConsumedAt` is always `null`.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::Json;
use serde_json::{json, Value};

use regina_state::views::{self, Lane};
use regina_types::time::format_iso;

use super::{bad_path, iso_opt, param};
use crate::http::error::{ApiError, ApiResult};
use crate::http::input::query_pairs;
use regina_node::Replica;

/// A group falls behind after this long without settling its oldest
/// message: the lag the list reports as `Lagging`.
const LAGGING_AFTER_S: u64 = 300;
/// `minLagSeconds` when the caller gives none.
const MIN_LAG_DEFAULT_S: u64 = 60;

fn lane_lag(now: u64, l: &Lane) -> u64 {
    l.oldest_unsettled_ms.map_or(0, |t| views::lag_seconds(now, t))
}

/// `GET /api/v1/consumer-groups`: one row per (group, queue) registration,
/// by group name then queue name, as a bare array. `members` counts the
/// partitions where the group has a cursor; `state` is `Lagging` when one
/// of its lanes has waited over five minutes, `Stable` when it has any
/// cursor, else `Registered`.
pub async fn list(State(node): State<Arc<Replica>>) -> Json<Value> {
    let m = node.tenant_state();
    let s = &*m;
    let now = node.read_time(s.now_ms);
    let mut lanes: BTreeMap<(String, String), Vec<Lane>> = BTreeMap::new();
    for l in views::lanes(s, None, now) {
        lanes.entry((l.group.clone(), l.queue.clone())).or_default().push(l);
    }
    let mut rows: BTreeMap<(String, String), Value> = BTreeMap::new();
    for (qname, qid) in &s.queue_names {
        let q = &s.queues[qid];
        for (_, g) in views::groups(q) {
            let key = (g.name.clone(), qname.clone());
            let mine = lanes.get(&key).map_or(&[][..], |v| v.as_slice());
            let max_lag = mine.iter().map(|l| lane_lag(now, l)).max().unwrap_or(0);
            let state = if max_lag > LAGGING_AFTER_S {
                "Lagging"
            } else if !mine.is_empty() {
                "Stable"
            } else {
                "Registered"
            };
            rows.insert(
                key,
                json!({
                    "name": g.name,
                    "queueName": qname,
                    "topics": [qname],
                    "members": mine.len(),
                    "partitionCursors": mine.len(),
                    "partitionsWithLag": mine.iter().filter(|l| l.depth > 0).count(),
                    "totalLag": mine.iter().map(|l| l.depth).sum::<u64>(),
                    "maxTimeLag": max_lag,
                    "activeLeases": mine.iter().filter(|l| l.lease.is_some()).count(),
                    "state": state,
                    "kind": "regina",
                    "conflation": false,
                    "subscriptionTimestamp": iso_opt(g.seed_from_ms),
                    "subscriptionCreatedAt": format_iso(g.registered_ms),
                }),
            );
        }
    }
    Json(Value::Array(rows.into_values().collect()))
}

/// `GET /api/v1/consumer-groups/{group}`: `{queue: {partitions: [...]}}` for
/// every queue the group is registered on, its lanes in partition creation
/// order; 404 when it is registered nowhere.
pub async fn detail(
    State(node): State<Arc<Replica>>,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<Value>> {
    let Path(group) = path.map_err(bad_path)?;
    let m = node.tenant_state();
    let s = &*m;
    let now = node.read_time(s.now_ms);
    let mut out = serde_json::Map::new();
    for (qname, qid) in &s.queue_names {
        let q = &s.queues[qid];
        if let Some(&gid) = q.group_index.get(&group) {
            let g = &q.groups[gid as usize];
            out.insert(
                qname.clone(),
                json!({
                    "conflation": false,
                    "kind": "regina",
                    "registeredAt": format_iso(g.registered_ms),
                    "subscriptionTimestamp": iso_opt(g.seed_from_ms),
                    "partitions": [],
                }),
            );
        }
    }
    if out.is_empty() {
        return Err(ApiError::new(crate::http::codes::GROUP_NOT_FOUND, "Consumer group not found"));
    }
    for l in views::lanes(s, Some(&group), now) {
        let lag = lane_lag(now, &l);
        let row = json!({
            "partition": l.partition,
            "partitionId": l.partition_id.to_string(),
            "workerId": l.lease.as_ref().map(|(id, _, _)| id.clone()),
            "lastConsumedAt": null,
            "totalConsumed": l.position,
            "committedOffset": l.position as i64 - 1,
            "offsetLag": l.depth,
            "timeLagSeconds": lag,
            "leaseActive": l.lease.is_some(),
            "leaseExpiresAt": l.lease.as_ref().map(|(_, at, _)| format_iso(*at)),
            "leasedMessages": l.lease.as_ref().map_or(0, |(_, _, n)| *n),
        });
        if let Some(Value::Array(parts)) = out.get_mut(&l.queue).and_then(|v| v.get_mut("partitions")) {
            parts.push(row);
        }
    }
    Ok(Json(Value::Object(out)))
}

/// `GET /api/v1/consumer-groups/lagging?minLagSeconds=N` (default 60): the
/// lanes whose oldest unsettled message is at least N seconds old, oldest
/// first, as a bare array of snake_case rows.
pub async fn lagging(State(node): State<Arc<Replica>>, RawQuery(q): RawQuery) -> ApiResult<Json<Value>> {
    let pairs = query_pairs(q.as_deref())?;
    let min = match param(&pairs, "minLagSeconds") {
        None => MIN_LAG_DEFAULT_S,
        // A negative threshold asks for every lane that owes anything.
        Some(v) => v.parse::<i64>().map(|n| n.max(0) as u64).map_err(|_| {
            ApiError::bad_request(format!("minLagSeconds must be an integer, not {v:?}")).at_field("minLagSeconds")
        })?,
    };
    let rows = {
        let m = node.tenant_state();
        views::lagging(&m, min, node.read_time(m.now_ms))
    };
    let out: Vec<Value> = rows
        .into_iter()
        .map(|(l, lag)| {
            json!({
                "consumer_group": l.group,
                "queue_name": l.queue,
                "partition_name": l.partition,
                "partition_id": l.partition_id.to_string(),
                "worker_id": l.lease.as_ref().map(|(id, _, _)| id.clone()),
                "kind": "regina",
                "offset_lag": l.depth,
                "time_lag_seconds": lag,
                "lag_hours": (lag as f64 / 36.0).round() / 100.0,
                "oldest_unconsumed_at": iso_opt(l.oldest_unsettled_ms),
                "last_consumed_at": null,
            })
        })
        .collect();
    Ok(Json(Value::Array(out)))
}

//! Read-only listings the dashboard needs and no other route gives: KV
//! namespaces and their rows, locks and their holders, timer queues and job
//! queues. Each reads the applied state under its read lock, like the admin
//! views, and returns at most its limit.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::Json;
use serde_json::{json, Value};

use regina_node::Replica;
use regina_state::locks::LOCK_NAMESPACE;
use regina_types::limits::{DASHBOARD_KV_LIST_DEFAULT, DASHBOARD_KV_LIST_MAX, DASHBOARD_LISTING_MAX};
use regina_types::time::format_iso;

use crate::http::error::{ApiError, ApiResult};
use crate::http::input::{query_get, query_pairs, query_u64};

fn iso(ms: Option<u64>) -> Value {
    ms.map_or(Value::Null, |m| Value::String(format_iso(m)))
}

/// `GET /api/v1/resources/kv/namespaces`: every KV namespace holding a row
/// (the locks' own namespace among them), with its row count.
pub async fn kv_namespaces(State(node): State<Arc<Replica>>) -> Json<Value> {
    let m = node.tenant_state();
    let all: Vec<(&str, usize)> = m.kv.namespaces().collect();
    let rows: Vec<Value> = all
        .iter()
        .take(DASHBOARD_LISTING_MAX)
        .map(|(ns, rows)| json!({ "namespace": ns, "rows": rows, "locks": *ns == LOCK_NAMESPACE }))
        .collect();
    Json(json!({ "namespaces": rows, "total": all.len(), "truncated": all.len() > DASHBOARD_LISTING_MAX }))
}

/// `GET /api/v1/resources/kv/list?namespace=&prefix=&after=&limit=`: the
/// live rows of a namespace whose key starts with `prefix`, in key order,
/// after the key `after`; `nextAfter` is the cursor of the next page.
pub async fn kv_list(State(node): State<Arc<Replica>>, RawQuery(q): RawQuery) -> ApiResult<Json<Value>> {
    let pairs = query_pairs(q.as_deref())?;
    let ns = query_get(&pairs, "namespace")
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApiError::bad_request("namespace is required").at_field("namespace"))?;
    let prefix = query_get(&pairs, "prefix").unwrap_or("");
    let after = query_get(&pairs, "after").filter(|s| !s.is_empty());
    let limit = query_u64(&pairs, "limit", 1, DASHBOARD_KV_LIST_MAX)?.unwrap_or(DASHBOARD_KV_LIST_DEFAULT) as usize;
    let m = node.tenant_state();
    let now = node.read_time(m.now_ms);
    let mut rows = Vec::new();
    let mut next_after = Value::Null;
    for (key, row) in m.kv.scan(ns, prefix, after).filter(|(_, r)| r.is_live(now)) {
        if rows.len() == limit {
            next_after = json!(rows.last().and_then(|r: &Value| r["key"].as_str()));
            break;
        }
        let value: Value = serde_json::from_slice(&row.value)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&row.value).into_owned()));
        rows.push(json!({
            "key": key,
            "value": value,
            "version": row.version,
            "createdAt": format_iso(row.created_ms),
            "updatedAt": format_iso(row.updated_ms),
            "expiresAt": iso(row.expires_ms),
        }));
    }
    Ok(Json(json!({ "namespace": ns, "prefix": prefix, "rows": rows, "nextAfter": next_after })))
}

/// `GET /api/v1/resources/locks`: every lock or semaphore with a live
/// permit, and who holds each permit.
pub async fn locks(State(node): State<Arc<Replica>>) -> Json<Value> {
    let m = node.tenant_state();
    let now = node.read_time(m.now_ms);
    let mut names: BTreeSet<&str> = BTreeSet::new();
    for (key, row) in m.kv.scan(LOCK_NAMESPACE, "", None) {
        if names.len() > DASHBOARD_LISTING_MAX {
            break;
        }
        if let Some((name, _slot)) = key.rsplit_once('#').filter(|_| row.is_live(now)) {
            names.insert(name);
        }
    }
    let truncated = names.len() > DASHBOARD_LISTING_MAX;
    let rows: Vec<Value> = names
        .iter()
        .take(DASHBOARD_LISTING_MAX)
        .map(|name| {
            let holders: Vec<Value> =
                m.kv.permits(name, now)
                    .iter()
                    .map(|h| {
                        json!({
                            "slot": h.slot,
                            "owner": h.owner,
                            "token": h.token,
                            "since": iso(h.since_ms),
                            "expiresAt": iso(h.expires_ms),
                            "renewedAt": format_iso(h.renewed_ms),
                        })
                    })
                    .collect();
            json!({ "name": name, "held": holders.len(), "holders": holders })
        })
        .filter(|l| l["held"].as_u64() > Some(0))
        .collect();
    Json(json!({ "locks": rows, "total": rows.len(), "truncated": truncated }))
}

/// `GET /api/v1/resources/timers`: every timer queue, with its pending and
/// failed timers.
pub async fn timer_queues(State(node): State<Arc<Replica>>) -> Json<Value> {
    let m = node.tenant_state();
    let all = m.timers.queue_counts();
    let rows: Vec<Value> = all
        .iter()
        .take(DASHBOARD_LISTING_MAX)
        .map(|(q, (pending, failed))| json!({ "queue": q, "pending": pending, "failed": failed }))
        .collect();
    Json(json!({ "queues": rows, "total": all.len(), "truncated": all.len() > DASHBOARD_LISTING_MAX }))
}

/// `GET /api/v1/resources/jobs`: every job queue, with its scopes and jobs
/// as stored (pending, leased, finished); `GET /api/v1/jobs/{queue}/stats`
/// judges them.
pub async fn job_queues(State(node): State<Arc<Replica>>) -> Json<Value> {
    let m = node.tenant_state();
    let all = &m.jobs.queues;
    let rows: Vec<Value> = all
        .iter()
        .take(DASHBOARD_LISTING_MAX)
        .map(|(name, q)| {
            let (mut pending, mut leased, mut finished) = (0, 0, 0);
            for s in q.scopes.values() {
                let (p, l, f) = s.stored_counts();
                (pending, leased, finished) = (pending + p, leased + l, finished + f);
            }
            json!({ "queue": name, "scopes": q.scopes.len(), "pending": pending, "leased": leased, "finished": finished })
        })
        .collect();
    Json(json!({ "queues": rows, "total": all.len(), "truncated": all.len() > DASHBOARD_LISTING_MAX }))
}

//! The message browser: a page of kept messages with their status, and one
//! message's detail with what every consumer group has done with it.

use std::sync::Arc;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::Json;
use serde_json::{json, Value};

use regina_state::views::{self, MessageFilter, MessageStatus, QueueView};
use regina_types::time::format_iso;
use regina_types::QUEUE_MODE_GROUP;

use super::{bad_path, param, param_time, payload_value, read_record};
use crate::http::error::{ApiError, ApiResult};
use crate::http::input::{query_pairs, query_u64};
use crate::http::render::uuid_string;
use crate::http::routes::queues::options_json;
use regina_node::Replica;

/// Most rows one page returns, and the default.
const PAGE_MAX: u64 = 1_000;
const PAGE_DEFAULT: u64 = 200;
/// Deepest a page may start: a page holds `offset + limit` candidates while
/// it is built.
const OFFSET_MAX: u64 = 100_000;

/// Who reads the queues a listing covers: queue mode, named groups, both.
fn mode_json((queue_mode, named): (bool, usize)) -> Value {
    let kind = match (queue_mode, named > 0) {
        (false, false) => "none",
        (true, false) => "queue",
        (false, true) => "bus",
        (true, true) => "hybrid",
    };
    json!({ "hasQueueMode": queue_mode, "busGroupsCount": named, "type": kind })
}

fn txn_hash_hex(h: u128) -> String {
    format!("{h:032x}")
}

/// `GET /api/v1/messages[?queue=&partition=&namespace=&task=&status=&from=&to=&limit=&offset=]`:
/// kept messages newest first. `status` is one of `pending`, `processing`,
/// `completed`, `dead_letter`; `from`/`to` bound the creation time. `total`
/// is the length of this page. `segment` locates the body in the body
/// files.
pub async fn list(State(node): State<Arc<Replica>>, RawQuery(q): RawQuery) -> ApiResult<Json<Value>> {
    let pairs = query_pairs(q.as_deref())?;
    let status = match param(&pairs, "status") {
        None => None,
        Some(s) => Some(MessageStatus::parse(s).ok_or_else(|| {
            ApiError::bad_request(format!("status must be pending, processing, completed or dead_letter, not {s:?}"))
                .at_field("status")
        })?),
    };
    let filter = MessageFilter {
        queue: param(&pairs, "queue"),
        partition: param(&pairs, "partition"),
        namespace: param(&pairs, "namespace"),
        task: param(&pairs, "task"),
        status,
        from_ms: param_time(&pairs, "from")?,
        to_ms: param_time(&pairs, "to")?,
    };
    let limit = query_u64(&pairs, "limit", 1, PAGE_MAX)?.unwrap_or(PAGE_DEFAULT) as usize;
    let offset = query_u64(&pairs, "offset", 0, OFFSET_MAX)?.unwrap_or(0) as usize;
    let (rows, mix) = {
        let m = node.tenant_state();
        let now = node.read_time(m.now_ms);
        (views::messages(&m, &filter, offset, limit, now), views::reader_mix(&m, filter.queue))
    };
    let mut messages = Vec::with_capacity(rows.len());
    for r in rows {
        let (b, producer_sub) = read_record(&node, r.meta.pos, r.meta.len)?;
        let data = payload_value(&b.payload);
        messages.push(json!({
            "id": uuid_string(&b.id),
            "transactionId": b.transaction_id,
            "txnHash": txn_hash_hex(r.meta.txn()),
            "traceId": b.trace_id.as_ref().map(uuid_string),
            "producerSub": producer_sub,
            "queue": r.queue,
            "partition": r.partition,
            "partitionId": r.partition_id.to_string(),
            "queuePath": format!("{}/{}", r.queue, r.partition),
            "namespace": r.namespace,
            "task": r.task,
            "offset": r.offset,
            "status": r.status.as_str(),
            "createdAt": format_iso(r.meta.created_ms),
            "segment": { "pos": r.meta.pos, "len": r.meta.len },
            "payload": data.clone(),
            "data": data,
        }));
    }
    Ok(Json(json!({
        "messages": messages,
        "total": messages.len(),
        "pagination": { "limit": limit, "offset": offset },
        "mode": mode_json(mix),
    })))
}

/// `GET /api/v1/messages/{partitionId}/{transactionId}`: one kept message.
/// `consumerGroups` lists the groups with a cursor in its partition:
/// `committed` is the group's last settled offset (-1 when none),
/// `consumed` whether it is past this message, `leaseExpiresAt` the expiry
/// of a live lease covering it. `retryCount` is the attempts of its
/// dead-letter row, or else the failures counted against it so far.
pub async fn detail(
    State(node): State<Arc<Replica>>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> ApiResult<Json<Value>> {
    let Path((pid, txn)) = path.map_err(bad_path)?;
    let not_found = || ApiError::new(crate::http::codes::MESSAGE_NOT_FOUND, "Message not found");
    // A partition id is a decimal number; anything else names no message.
    let pid: u64 = pid.parse().map_err(|_| not_found())?;
    let (found, mut out) = {
        let m = node.tenant_state();
        let s = &*m;
        let now = node.read_time(s.now_ms);
        let found = views::locate(s, pid, &txn).ok_or_else(not_found)?;
        let q = &s.queues[&found.queue_id];
        let p = &q.partitions[found.pidx as usize];
        let groups = views::groups_on_message(q, found.pidx, found.offset, now);
        let dead = s.dead_letter(pid, &txn);
        let failures = groups.iter().map(|g| g.failures).max().unwrap_or(0);
        let entries: Vec<Value> = groups
            .iter()
            .map(|g| {
                json!({
                    "name": g.name,
                    "committed": g.committed,
                    "consumed": g.consumed,
                    "leaseExpiresAt": g.lease_expires_ms.map(format_iso),
                    "queueMode": g.name == QUEUE_MODE_GROUP,
                })
            })
            .collect();
        let out = json!({
            "transactionId": txn,
            "partitionId": pid.to_string(),
            "partition": p.name,
            "queue": q.name,
            "queuePath": format!("{}/{}", q.name, p.name),
            "namespace": q.namespace,
            "task": q.task,
            "offset": found.offset,
            "status": QueueView::new(q, now).status(found.pidx, found.offset).as_str(),
            "errorMessage": dead.and_then(|d| d.error.clone()),
            "retryCount": dead.map_or(failures, |d| d.attempts),
            "failedGroup": dead.map(|d| d.group.clone()),
            "createdAt": format_iso(found.meta.created_ms),
            "queueConfig": options_json(&q.options),
            "mode": mode_json(views::reader_mix(s, Some(&q.name))),
            "consumerGroups": entries,
        });
        (found, out)
    };
    let (b, producer_sub) = read_record(&node, found.meta.pos, found.meta.len)?;
    // The index is keyed by a hash of the id; the body has the id itself.
    if b.transaction_id != txn {
        return Err(not_found());
    }
    let data = payload_value(&b.payload);
    out["id"] = json!(uuid_string(&b.id));
    out["traceId"] = json!(b.trace_id.as_ref().map(uuid_string));
    out["producerSub"] = json!(producer_sub);
    out["payload"] = data.clone();
    out["data"] = data;
    Ok(Json(out))
}

//! Consumer-group and dead-letter maintenance: delete a group (on one queue
//! or all), seek, move a subscription, delete or replay a dead-letter row.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use regina_state::command::{PushItem, SeekTarget};
use regina_state::{Command, Outcome};
use regina_types::time::{format_iso, parse_iso};
use regina_types::{validate_name, NameKind};

use crate::http::error::{ApiError, ApiResult};
use crate::http::input::{body_bytes, json_body, query_bool, query_pairs};
use crate::http::render::uuid_string;
use regina_node::Replica;

fn group_name(g: &str) -> ApiResult<()> {
    validate_name(NameKind::ConsumerGroup, g).map_err(ApiError::from_name)
}

async fn changed(node: &Replica, cmd: Command) -> ApiResult<u64> {
    match node.propose(cmd).await? {
        Outcome::Changed { count } => Ok(count),
        other => Err(ApiError::internal(format!("maintenance answered {other:?}"))),
    }
}

pub async fn delete_group(
    State(node): State<Arc<Replica>>,
    Path(group): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    delete(node, group, None, q).await
}

pub async fn delete_group_on_queue(
    State(node): State<Arc<Replica>>,
    Path((group, queue)): Path<(String, String)>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    validate_name(NameKind::Queue, &queue).map_err(ApiError::from_name)?;
    delete(node, group, Some(queue), q).await
}

async fn delete(node: Arc<Replica>, group: String, queue: Option<String>, q: Option<String>) -> ApiResult<Response> {
    group_name(&group)?;
    let delete_metadata = query_bool(&query_pairs(q.as_deref())?, "deleteMetadata")?.unwrap_or(true);
    let cmd = Command::DeleteGroup { group: group.clone(), queue: queue.clone(), delete_metadata };
    let n = changed(&node, cmd).await?;
    Ok(axum::Json(json!({
        "success": true,
        "consumerGroup": group,
        "queue": queue,
        "deletedPartitions": n,
        "metadataDeleted": delete_metadata,
    }))
    .into_response())
}

pub async fn seek(
    State(node): State<Arc<Replica>>,
    Path((group, queue)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let target = seek_target(&group, &queue, body)?;
    let has_partitions = node.tenant_state().queue(&queue).is_some_and(|q| !q.partitions.is_empty());
    if !has_partitions {
        return Err(ApiError::new(crate::http::codes::NOT_FOUND, format!("queue {queue} has no partitions to seek")));
    }
    let n = changed(&node, Command::Seek { group: group.clone(), queue: queue.clone(), target }).await?;
    Ok(seek_answer(&group, &queue, None, target, n))
}

/// `POST /api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek`:
/// the same seek on one partition; the group's other cursors and leases
/// stay as they are.
pub async fn seek_partition(
    State(node): State<Arc<Replica>>,
    Path((group, queue, partition)): Path<(String, String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let target = seek_target(&group, &queue, body)?;
    validate_name(NameKind::Partition, &partition).map_err(|e| ApiError::from_name(e).at_field("partition"))?;
    let exists = node.tenant_state().queue(&queue).is_some_and(|q| q.partition_by_name(&partition).is_some());
    if !exists {
        return Err(ApiError::new(
            crate::http::codes::NOT_FOUND,
            format!("queue {queue} has no partition {partition:?} to seek"),
        ));
    }
    let cmd =
        Command::SeekPartition { group: group.clone(), queue: queue.clone(), partition: partition.clone(), target };
    let n = changed(&node, cmd).await?;
    Ok(seek_answer(&group, &queue, Some(&partition), target, n))
}

/// A seek's names, checked, and its target: `{"toEnd": true}`,
/// `{"timestamp": ISO}`, or an empty body (the end).
fn seek_target(group: &str, queue: &str, body: Result<Bytes, BytesRejection>) -> ApiResult<SeekTarget> {
    group_name(group)?;
    validate_name(NameKind::Queue, queue).map_err(ApiError::from_name)?;
    let bytes = body_bytes(body)?;
    let b: Map<String, Value> = json_body(&bytes, true)?;
    match (b.get("toEnd"), b.get("timestamp")) {
        (Some(Value::Bool(true)), _) => Ok(SeekTarget::End),
        (_, Some(Value::String(ts))) => Ok(SeekTarget::Time(parse_iso(ts).ok_or_else(|| {
            ApiError::bad_request(format!("timestamp {ts:?} is not an ISO-8601 time")).at_field("timestamp")
        })?)),
        (None, None) if b.is_empty() => Ok(SeekTarget::End),
        _ => Err(ApiError::bad_request("a seek needs {\"toEnd\": true} or {\"timestamp\": \"<ISO-8601>\"}")),
    }
}

fn seek_answer(group: &str, queue: &str, partition: Option<&str>, target: SeekTarget, n: u64) -> Response {
    let (to_end, ts) = match target {
        SeekTarget::End => (true, None),
        SeekTarget::Time(ms) => (false, Some(format_iso(ms))),
    };
    let mut answer = json!({
        "success": true,
        "consumerGroup": group,
        "queueName": queue,
        "seekToEnd": to_end,
        "targetTimestamp": ts,
        "partitionsUpdated": n,
        "updated": n,
    });
    if let Some(p) = partition {
        answer["partitionName"] = json!(p);
    }
    axum::Json(answer).into_response()
}

pub async fn set_subscription(
    State(node): State<Arc<Replica>>,
    Path(group): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    group_name(&group)?;
    let bytes = body_bytes(body)?;
    let b: Map<String, Value> = json_body(&bytes, false)?;
    let Some(Value::String(ts)) = b.get("subscriptionTimestamp") else {
        return Err(ApiError::bad_request("subscriptionTimestamp (an ISO-8601 time) is required")
            .at_field("subscriptionTimestamp"));
    };
    let from_ms = parse_iso(ts).ok_or_else(|| {
        ApiError::bad_request(format!("{ts:?} is not an ISO-8601 time")).at_field("subscriptionTimestamp")
    })?;
    let n = changed(&node, Command::SetSubscription { group: group.clone(), from_ms }).await?;
    Ok(axum::Json(json!({
        "success": true,
        "consumerGroup": group,
        // The time as the caller wrote it: clients compare it as a string.
        "newTimestamp": ts,
        "rowsUpdated": n,
    }))
    .into_response())
}

fn partition_id(s: &str) -> ApiResult<u64> {
    s.parse().map_err(|_| ApiError::new(crate::http::codes::NOT_FOUND, "Message not found"))
}

pub async fn delete_dead_letter(
    State(node): State<Arc<Replica>>,
    Path((pid, txn)): Path<(String, String)>,
) -> ApiResult<Response> {
    let partition_id = partition_id(&pid)?;
    let cmd = Command::DeleteDeadLetter { partition_id, transaction_id: txn.clone() };
    match node.propose(cmd).await? {
        Outcome::Found(true) => {
            Ok(axum::Json(json!({ "success": true, "partitionId": pid, "transactionId": txn })).into_response())
        }
        Outcome::Found(false) => {
            Err(ApiError::new(crate::http::codes::NOT_FOUND, "no dead-letter row for that message"))
        }
        other => Err(ApiError::internal(format!("delete answered {other:?}"))),
    }
}

pub async fn retry_dead_letter(
    State(node): State<Arc<Replica>>,
    Path((pid, txn)): Path<(String, String)>,
) -> ApiResult<Response> {
    replay_dead_letter(&node, partition_id(&pid)?, txn).await
}

/// Pushes a dead-lettered message again at the end of its partition and
/// drops its row, in one entry.
pub async fn replay_dead_letter(node: &Replica, partition_id: u64, txn: String) -> ApiResult<Response> {
    let pid = partition_id.to_string();
    let (entry, queue) = {
        let m = node.tenant_state();
        let Some(e) = m.dead_letter(partition_id, &txn).cloned() else {
            return Err(ApiError::new(
                crate::http::codes::NOT_FOUND,
                "no dead-letter row for that message; retry replays DLQ rows",
            ));
        };
        let (qid, _) = m.partition_ids[&partition_id];
        (e, m.queues[&qid].name.clone())
    };
    // The replay keeps the payload as stored (sealed or not).
    // A damaged body is not pushed again as if it were the message: the row
    // stays, for inspection and delete.
    let body = crate::http::render::stored_body(node, entry.pos, entry.len)?.map_err(|d| {
        ApiError::new(crate::http::codes::UNREADABLE_BODY, format!("the dead-lettered body is damaged: {}", d.reason))
    })?;
    let item = PushItem {
        queue,
        partition: entry.partition.clone(),
        transaction_id: body.transaction_id,
        trace_id: body.trace_id,
        message_id: *regina_node::ids::new_id().as_bytes(),
        payload: body.payload,
    };
    let cmd = Command::RetryDeadLetter { partition_id, transaction_id: txn.clone(), item: item.clone() };
    match node.propose(cmd).await? {
        Outcome::Push(r) => Ok(axum::Json(json!({
            "success": true,
            "partitionId": pid,
            "transactionId": txn,
            "messageId": uuid_string(&item.message_id),
            "offset": r.first().map(|p| p.offset),
        }))
        .into_response()),
        Outcome::Found(false) => {
            Err(ApiError::new(crate::http::codes::NOT_FOUND, "no dead-letter row for that message"))
        }
        other => Err(ApiError::internal(format!("retry answered {other:?}"))),
    }
}

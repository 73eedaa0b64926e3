//! The routes of the clients' stream SDKs, `/streams/v1/*`. The windowing
//! runs in the client; the broker keeps each query's state and commits each
//! cycle as one log entry.
//!
//! - `POST /streams/v1/queries`: register a query (one entry); 409 when the
//!   name holds another chain shape and the call does not ask for `reset`.
//! - `POST /streams/v1/state/get`: state rows of one partition (a read,
//!   served after a read index).
//! - `POST /streams/v1/cycle`: state changes, sink pushes and the source ack,
//!   all or nothing (one entry). A judged refusal (the lease is gone, a sink
//!   is full) answers 200 `success: false`, as the clients expect; bad input
//!   and limits are 4xx.
//! - `POST /streams/v1/claim`: empty-batch leases on idle partitions (one
//!   entry), so a runner can close windows nobody sends messages to.
//! - `POST /streams/v1/state/partitions`: the partitions holding a query's
//!   state, in partition id order, a page at a time (a read).

pub(crate) mod input;

use crate::http::codes::{self, Code};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use regina_state::outcome::PushStatus;
use regina_state::streams::claim::ClaimOutcome;
use regina_state::streams::cycle::{CycleOutcome, CycleRefusal};
use regina_state::streams::read::RowFilter;
use regina_state::streams::register::RegisterOutcome;
use regina_state::streams::{CycleCmd, StreamCmd, StreamOutcome};
use regina_state::{Command, Outcome};
use regina_types::time::format_iso;

use crate::http::error::{ApiError, ApiResult};
use crate::http::input::body_bytes;
use crate::http::render::uuid_string;
use regina_node::Replica;

pub fn routes() -> crate::http::Routes {
    crate::http::Routes::default()
        .route("/streams/v1/queries", post(register))
        .route("/streams/v1/state/get", post(state_get))
        .route("/streams/v1/cycle", post(cycle))
        .route("/streams/v1/claim", post(claim))
        .route("/streams/v1/state/partitions", post(partitions))
}

/// The write routes: always one log entry, so linearizable without a read
/// index.
pub fn is_logged(path: &str) -> bool {
    matches!(path, "/streams/v1/queries" | "/streams/v1/cycle" | "/streams/v1/claim")
}

async fn call(node: &Replica, cmd: StreamCmd) -> ApiResult<StreamOutcome> {
    match node.propose(Command::Stream(cmd)).await? {
        Outcome::Stream(out) => Ok(out),
        other => Err(ApiError::internal(format!("a streams call answered {other:?}"))),
    }
}

fn no_such_query(id: &str) -> Response {
    let body = json!({
        "success": false,
        "code": codes::NO_SUCH_QUERY.name,
        "error": format!("no stream query has id {id}"),
        "rows": [],
        "partitions": [],
    });
    (codes::NO_SUCH_QUERY.status, axum::Json(body)).into_response()
}

async fn register(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> ApiResult<Response> {
    let bytes = body_bytes(body)?;
    let cmd = input::register(&bytes, regina_node::ids::new_id().to_string())?;
    let (name, hash) = (cmd.name.clone(), cmd.config_hash.clone());
    let StreamOutcome::Register(out) = call(&node, StreamCmd::Register(cmd)).await? else {
        return Err(ApiError::internal("a registration answered something else"));
    };
    Ok(match out {
        RegisterOutcome::Registered { query_id, fresh, reset } => axum::Json(json!({
            "success": true,
            "query_id": query_id,
            "name": name,
            "config_hash": hash,
            "fresh": fresh,
            "reset": reset,
        }))
        .into_response(),
        RegisterOutcome::Conflict { query_id, error } => (
            codes::CONFIG_HASH_MISMATCH.status,
            axum::Json(json!({
                "success": false,
                "code": codes::CONFIG_HASH_MISMATCH.name,
                "query_id": query_id,
                "name": name,
                "error": error,
            })),
        )
            .into_response(),
    })
}

async fn state_get(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> ApiResult<Response> {
    let bytes = body_bytes(body)?;
    let req = input::state_get(&bytes)?;
    let state = node.tenant_state();
    let Some(query) = state.streams.query(&req.query_id) else { return Ok(no_such_query(&req.query_id)) };
    let filter =
        RowFilter { keys: &req.keys, key_prefix: req.key_prefix.as_deref(), ripe_at_or_before: req.ripe_at_or_before };
    let mut rows = Vec::new();
    for (key, row) in query.rows(req.partition_id, &filter) {
        let text = std::str::from_utf8(&row.value).map_err(|e| ApiError::internal(format!("a state row: {e}")))?;
        let value = RawValue::from_string(text.to_string())
            .map_err(|e| ApiError::internal(format!("a state row is not JSON: {e}")))?;
        rows.push(json!({ "key": key, "value": value, "updated_at": format_iso(row.updated_ms) }));
    }
    Ok(axum::Json(json!({ "success": true, "rows": rows })).into_response())
}

async fn partitions(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> ApiResult<Response> {
    let bytes = body_bytes(body)?;
    let req = input::partitions(&bytes)?;
    let state = node.tenant_state();
    let Some(query) = state.streams.query(&req.query_id) else { return Ok(no_such_query(&req.query_id)) };
    let untouched_since = req.untouched_for_ms.map(|ms| node.read_time(state.now_ms).saturating_sub(ms));
    let (held, more) = query.held_partitions(req.after, untouched_since, req.limit);
    let listed: Vec<Value> = held
        .iter()
        .map(|h| {
            let name = state
                .partition_ids
                .get(&h.partition_id)
                .and_then(|(qid, pidx)| state.queues.get(qid).map(|q| q.partitions[*pidx as usize].name.clone()))
                .unwrap_or_default();
            json!({
                "partition_id": h.partition_id.to_string(),
                "partition": name,
                "queue": query.source_queue,
                "updated_at": format_iso(h.updated_ms),
            })
        })
        .collect();
    let next = more.then(|| held.last().map(|h| h.partition_id.to_string())).flatten();
    Ok(axum::Json(json!({ "success": true, "partitions": listed, "next": next })).into_response())
}

async fn claim(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> ApiResult<Response> {
    let bytes = body_bytes(body)?;
    let cmd = input::claim(&bytes, regina_node::ids::new_id().to_string())?;
    let (query_id, lease_seconds) = (cmd.query_id.clone(), cmd.lease_ms / 1000);
    let StreamOutcome::Claim(out) = call(&node, StreamCmd::Claim(cmd)).await? else {
        return Err(ApiError::internal("a claim answered something else"));
    };
    let ClaimOutcome::Done { lease_id, expires_ms, now_ms, partitions } = out else {
        return Ok(no_such_query(&query_id));
    };
    let listed: Vec<Value> = partitions
        .iter()
        .map(|p| {
            let mut v = json!({
                "partition_id": p.partition_id.to_string(),
                "partition": p.partition,
                "status": p.status.as_str(),
            });
            if p.status == regina_state::streams::claim::ClaimStatus::Claimed {
                v["lease_expires_at"] = json!(format_iso(expires_ms));
            }
            v
        })
        .collect();
    Ok(axum::Json(json!({
        "success": true,
        "lease_id": lease_id.unwrap_or_default(),
        "lease_seconds": lease_seconds,
        "now_ms": now_ms,
        "partitions": listed,
    }))
    .into_response())
}

async fn cycle(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> ApiResult<Response> {
    let bytes = body_bytes(body)?;
    let mut cmd = input::cycle(&bytes)?;
    crate::http::routes::push::seal_items(&node, cmd.pushes.iter_mut());
    let echo = Echo::of(&cmd);
    let StreamOutcome::Cycle(out) = call(&node, StreamCmd::Cycle(cmd.clone())).await? else {
        return Err(ApiError::internal("a cycle answered something else"));
    };
    Ok(match out {
        CycleOutcome::Committed { source_queue, state_ops_applied, pushes, ack, duplicate } => {
            let push_results: Vec<Value> = pushes
                .iter()
                .zip(&cmd.pushes)
                .map(|(r, item)| {
                    json!({
                        "queue": item.queue,
                        "partition": item.partition,
                        "ok": r.status != PushStatus::Full,
                        "status": if r.status == PushStatus::Queued { "queued" } else { "duplicate" },
                        "messageId": r.message_id.as_ref().map(uuid_string),
                        "transactionId": item.transaction_id,
                        "partitionId": r.partition_id.to_string(),
                        "offset": r.offset,
                    })
                })
                .collect();
            let ack_result = ack.map(
                |a| json!({ "success": true, "count": a.count, "lease_released": a.lease_released, "dlq": false }),
            );
            axum::Json(json!({
                "success": true,
                "query_id": echo.query_id,
                "partition_id": echo.partition_id,
                "queueName": source_queue,
                "state_ops_applied": state_ops_applied,
                "push_results": push_results,
                "ack_result": ack_result,
                "duplicate": duplicate,
            }))
            .into_response()
        }
        CycleOutcome::Refused { reason, error } => {
            let status = cycle_refusal_code(reason).map_or(StatusCode::OK, |c| c.status);
            let body = json!({
                "success": false,
                "code": reason.as_str(),
                "reason": reason.as_str(),
                "error": format!("{error}; the cycle rolled back"),
                "query_id": echo.query_id,
                "partition_id": echo.partition_id,
                "state_ops_applied": 0,
                "push_results": [],
                "ack_result": null,
            });
            (status, axum::Json(body)).into_response()
        }
    })
}

/// What a cycle answer repeats of its request.
struct Echo {
    query_id: String,
    partition_id: String,
}

impl Echo {
    fn of(cmd: &CycleCmd) -> Echo {
        Echo { query_id: cmd.query_id.clone(), partition_id: cmd.partition_id.to_string() }
    }
}

/// The refusals of a cycle that are errors (the others are verdicts in a
/// 200 answer), from the one table.
fn cycle_refusal_code(reason: CycleRefusal) -> Option<&'static Code> {
    match reason {
        CycleRefusal::NoSuchQuery => Some(codes::NO_SUCH_QUERY),
        CycleRefusal::NotSourcePartition => Some(codes::NOT_SOURCE_PARTITION),
        CycleRefusal::TooManyRows => Some(codes::TOO_MANY_STATE_ROWS),
        _ => None,
    }
}

#[cfg(test)]
mod refusal_tests {
    use super::*;

    #[test]
    fn cycle_refusals_that_are_errors_carry_their_table_code() {
        for r in [CycleRefusal::NoSuchQuery, CycleRefusal::NotSourcePartition, CycleRefusal::TooManyRows] {
            assert_eq!(cycle_refusal_code(r).map(|c| c.name), Some(r.as_str()), "{r:?}");
        }
    }
}

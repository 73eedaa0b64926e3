//! Traces: `POST /api/v1/traces` records an event against a message;
//! `GET /api/v1/traces/{partitionId}/{transactionId}`,
//! `GET /api/v1/traces/names` and `GET /api/v1/traces/by-name/{name}` read
//! them back (rows in snake_case, as the dashboards read them).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{json, Value};

use regina_state::traces::TraceEvent;
use regina_state::Command;
use regina_types::limits::{TRACE_DATA_BYTES_MAX, TRACE_NAMES_MAX};
use regina_types::time::format_iso;
use regina_types::{validate_name, NameKind, QUEUE_MODE_GROUP};

use crate::http::error::{ApiError, ApiResult};
use crate::http::input::{body_bytes, json_body, query_pairs, query_u64};
use crate::http::render::uuid_string;
use regina_node::Replica;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TraceBody {
    transaction_id: String,
    partition_id: Value,
    #[serde(default)]
    consumer_group: Option<String>,
    #[serde(default)]
    trace_names: Option<Vec<String>>,
    #[serde(default)]
    event_type: Option<String>,
    #[serde(default)]
    data: Value,
}

pub async fn record(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> ApiResult<Response> {
    let bytes = body_bytes(body)?;
    let b: TraceBody = json_body(&bytes, false)?;
    let partition_id = match &b.partition_id {
        Value::String(s) => s.parse::<u64>().ok(),
        Value::Number(n) => n.as_u64(),
        _ => None,
    }
    .ok_or_else(|| ApiError::bad_request("partitionId must be a partition id string").at_field("partitionId"))?;
    if b.transaction_id.is_empty() || b.transaction_id.len() > regina_types::limits::TRANSACTION_ID_BYTES_MAX {
        return Err(ApiError::bad_request("transactionId must be a non-empty string within the limit")
            .at_field("transactionId"));
    }
    let names = b.trace_names.unwrap_or_default();
    if names.len() > TRACE_NAMES_MAX {
        return Err(
            ApiError::bad_request(format!("at most {TRACE_NAMES_MAX} traceNames per event")).at_field("traceNames")
        );
    }
    for n in &names {
        validate_name(NameKind::Task, n).map_err(ApiError::from_name)?;
    }
    let data = serde_json::to_vec(&b.data).map_err(|e| ApiError::bad_body(e.to_string()))?;
    if data.len() > TRACE_DATA_BYTES_MAX {
        return Err(ApiError::too_large(format!(
            "trace data is {} bytes; the limit is {TRACE_DATA_BYTES_MAX}",
            data.len()
        )));
    }
    let id = *regina_node::ids::new_id().as_bytes();
    let event = TraceEvent {
        id,
        partition_id,
        transaction_id: b.transaction_id,
        group: b.consumer_group.filter(|g| !g.is_empty()).unwrap_or_else(|| QUEUE_MODE_GROUP.into()),
        names,
        event_type: b.event_type.filter(|t| !t.is_empty()).unwrap_or_else(|| "info".into()),
        data,
        created_ms: node.stamp(),
    };
    node.propose(Command::RecordTrace(event)).await?;
    Ok((StatusCode::CREATED, axum::Json(json!({ "success": true, "traceId": uuid_string(&id) }))).into_response())
}

fn row(e: &TraceEvent) -> Value {
    json!({
        "id": uuid_string(&e.id),
        "transaction_id": e.transaction_id,
        "partition_id": e.partition_id.to_string(),
        "consumer_group": e.group,
        "trace_names": e.names,
        "event_type": e.event_type,
        "data": serde_json::from_slice::<Value>(&e.data).unwrap_or(Value::Null),
        "created_at": format_iso(e.created_ms),
    })
}

fn page(pairs: &[(String, String)]) -> ApiResult<(usize, usize)> {
    let limit = query_u64(pairs, "limit", 1, 1000)?.unwrap_or(100) as usize;
    let offset = query_u64(pairs, "offset", 0, u32::MAX as u64)?.unwrap_or(0) as usize;
    Ok((limit, offset))
}

pub async fn for_message(
    State(node): State<Arc<Replica>>,
    Path((pid, txn)): Path<(String, String)>,
) -> ApiResult<Response> {
    let partition_id: u64 =
        pid.parse().map_err(|_| ApiError::bad_request("partitionId must be a partition id").at_field("partitionId"))?;
    let m = node.tenant_state();
    let traces: Vec<Value> = m.traces.for_message(partition_id, &txn).map(row).collect();
    Ok(axum::Json(json!({ "traces": traces, "total": traces.len() })).into_response())
}

pub async fn names(State(node): State<Arc<Replica>>, RawQuery(q): RawQuery) -> ApiResult<Response> {
    let (limit, offset) = page(&query_pairs(q.as_deref())?)?;
    let all = node.tenant_state().traces.names();
    let rows: Vec<Value> = all
        .iter()
        .skip(offset)
        .take(limit)
        .map(|n| {
            json!({
                "trace_name": n.name,
                "trace_count": n.trace_count,
                "message_count": n.message_count,
                "last_seen": format_iso(n.last_seen_ms),
            })
        })
        .collect();
    Ok(axum::Json(json!({
        "trace_names": rows,
        "total": all.len(),
        "pagination": { "limit": limit, "offset": offset, "total": all.len() },
    }))
    .into_response())
}

pub async fn by_name(
    State(node): State<Arc<Replica>>,
    Path(name): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    let (limit, offset) = page(&query_pairs(q.as_deref())?)?;
    let m = node.tenant_state();
    let all: Vec<&TraceEvent> = m.traces.by_name(&name).collect();
    let rows: Vec<Value> = all.iter().rev().skip(offset).take(limit).map(|e| row(e)).collect();
    Ok(axum::Json(json!({
        "traces": rows,
        "total": all.len(),
        "pagination": { "limit": limit, "offset": offset, "total": all.len() },
    }))
    .into_response())
}

//! `POST /api/v1/push` (JSON): one log entry for the whole request, one
//! answer per item in request order.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

use regina_state::command::{PushCmd, PushItem};
use regina_state::outcome::PushStatus;
use regina_state::{BodyRecord, Command, Outcome};
use regina_types::limits::{PAYLOAD_BYTES_MAX, PUSH_ITEMS_MAX, TRANSACTION_ID_BYTES_MAX};
use regina_types::{validate_name, NameKind, DEFAULT_PARTITION};

use super::error::{ApiError, ApiResult};
use super::input::{body_bytes, json_body};
use super::render::uuid_string;
use crate::node::Node;

#[derive(Deserialize)]
struct PushBody<'a> {
    #[serde(borrow)]
    items: Vec<ItemBody<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ItemBody<'a> {
    pub(super) queue: String,
    #[serde(default)]
    partition: Option<String>,
    #[serde(default, borrow)]
    payload: Option<&'a RawValue>,
    #[serde(default)]
    transaction_id: Option<String>,
    #[serde(default)]
    trace_id: Option<serde_json::Value>,
}

pub async fn push(
    State(node): State<Arc<Node>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let bytes = body_bytes(body)?;
    let parsed: PushBody = json_body(&bytes, false)?;
    if parsed.items.is_empty() {
        return Err(ApiError::bad_request("items must hold at least one item"));
    }
    if parsed.items.len() > PUSH_ITEMS_MAX {
        return Err(ApiError::too_large(format!(
            "{} items in one push; the limit is {PUSH_ITEMS_MAX}",
            parsed.items.len()
        )));
    }
    let items = parsed
        .items
        .iter()
        .enumerate()
        .map(|(i, it)| to_item(i, it))
        .collect::<ApiResult<Vec<_>>>()?;
    let names: Vec<(String, String)> = items
        .iter()
        .map(|i| (i.queue.clone(), i.transaction_id.clone()))
        .collect();
    let outcome = node.propose(Command::Push(PushCmd { items })).await?;
    let Outcome::Push(results) = outcome else {
        return Err(ApiError::internal(format!("push answered {outcome:?}")));
    };
    let mut out = Vec::with_capacity(results.len());
    for (i, (r, (queue, txn))) in results.iter().zip(names).enumerate() {
        let id = match r.message_id {
            Some(id) => id,
            None => original_id(&node, r.pos, r.len)?,
        };
        out.push(json!({
            "index": i,
            "message_id": uuid_string(&id),
            "transaction_id": txn,
            "transactionId": txn,
            "queueName": queue,
            "partitionId": r.partition_id.to_string(),
            "offset": r.offset,
            "status": match r.status { PushStatus::Queued => "queued", PushStatus::Duplicate => "duplicate" },
        }));
    }
    Ok((StatusCode::CREATED, axum::Json(out)).into_response())
}

/// The id of an already stored message, read from its body.
fn original_id(node: &Node, pos: u64, len: u32) -> ApiResult<[u8; 16]> {
    let bytes = node
        .shared
        .read_body(pos, len)
        .map_err(|e| ApiError::internal(format!("reading a body: {e}")))?;
    BodyRecord::decode(&bytes)
        .map(|b| b.id)
        .ok_or_else(|| ApiError::internal("a stored body is unreadable"))
}

pub(super) fn to_item(i: usize, it: &ItemBody) -> ApiResult<PushItem> {
    let at = |e: String| format!("items[{i}]: {e}");
    validate_name(NameKind::Queue, &it.queue).map_err(|e| ApiError {
        message: at(e.to_string()),
        ..ApiError::from_name(e)
    })?;
    let partition = match it.partition.as_deref() {
        None | Some("") => DEFAULT_PARTITION.to_string(),
        Some(p) => {
            validate_name(NameKind::Partition, p).map_err(|e| ApiError {
                message: at(e.to_string()),
                ..ApiError::from_name(e)
            })?;
            p.to_string()
        }
    };
    let transaction_id = match it.transaction_id.as_deref() {
        None | Some("") => uuid::Uuid::now_v7().to_string(),
        Some(t) if t.len() > TRANSACTION_ID_BYTES_MAX => {
            return Err(ApiError::too_large(at(format!(
                "transactionId is {} bytes; the limit is {TRANSACTION_ID_BYTES_MAX}",
                t.len()
            ))))
        }
        Some(t) => t.to_string(),
    };
    let payload = it
        .payload
        .map(|p| p.get().as_bytes().to_vec())
        .unwrap_or_else(|| b"null".to_vec());
    if payload.len() > PAYLOAD_BYTES_MAX {
        return Err(ApiError::too_large(at(format!(
            "payload is {} bytes; the limit is {PAYLOAD_BYTES_MAX}",
            payload.len()
        ))));
    }
    let trace_id = match &it.trace_id {
        Some(serde_json::Value::String(s)) => uuid::Uuid::parse_str(s).ok().map(|u| *u.as_bytes()),
        _ => None,
    };
    Ok(PushItem {
        queue: it.queue.clone(),
        partition,
        transaction_id,
        trace_id,
        message_id: *uuid::Uuid::now_v7().as_bytes(),
        payload,
    })
}

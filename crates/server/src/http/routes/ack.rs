//! `POST /api/v1/ack`, `POST /api/v1/ack/batch` and
//! `POST /api/v1/lease/{leaseId}/extend`. Refusals of individual acks and of
//! renewals are answers, not errors: HTTP 200 with `success: false`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use regina_state::command::{AckCmd, AckItem, AckStatus};
use regina_state::outcome::{AckResult, ERR_UNRESOLVABLE};
use regina_state::{Command, Outcome};
use regina_types::limits::{ACK_BATCH_MAX, ACK_ERROR_BYTES_MAX, LEASE_SECONDS_MAX, TRANSACTION_ID_BYTES_MAX};
use regina_types::time::format_iso;
use regina_types::{validate_name, NameKind, QUEUE_MODE_GROUP};

use crate::http::error::{ApiError, ApiResult};
use crate::http::input::{body_bytes, json_body};
use regina_node::Replica;

/// Longest lease id accepted in a path or an ack.
const LEASE_ID_BYTES_MAX: usize = 128;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AckBody {
    pub(crate) transaction_id: String,
    partition_id: serde_json::Value,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    pub(crate) consumer_group: Option<String>,
    #[serde(default)]
    lease_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BatchBody {
    acknowledgments: Vec<AckBody>,
    #[serde(default)]
    consumer_group: Option<String>,
}

pub async fn ack_one(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> ApiResult<Response> {
    let bytes = body_bytes(body)?;
    let b: AckBody = json_body(&bytes, false)?;
    let group = b.consumer_group.clone();
    settle(node, vec![b], group).await
}

pub async fn ack_batch(State(node): State<Arc<Replica>>, body: Result<Bytes, BytesRejection>) -> ApiResult<Response> {
    let bytes = body_bytes(body)?;
    let b: BatchBody = json_body(&bytes, false)?;
    if b.acknowledgments.len() > ACK_BATCH_MAX {
        return Err(ApiError::too_large(format!(
            "{} acknowledgments in one call; the limit is {ACK_BATCH_MAX}",
            b.acknowledgments.len()
        )));
    }
    settle(node, b.acknowledgments, b.consumer_group).await
}

/// An ack item the broker can judge, or the refusal it gets without a log
/// entry (a partition id that names no partition).
pub(crate) enum Judged {
    Item(AckItem),
    Refused,
}

async fn settle(node: Arc<Replica>, acks: Vec<AckBody>, group: Option<String>) -> ApiResult<Response> {
    let group = match group.as_deref() {
        None | Some("") => QUEUE_MODE_GROUP.to_string(),
        Some(g) => {
            validate_name(NameKind::ConsumerGroup, g).map_err(ApiError::from_name)?;
            g.to_string()
        }
    };
    let judged = acks.iter().enumerate().map(|(i, a)| judge(i, a)).collect::<ApiResult<Vec<_>>>()?;
    let items: Vec<AckItem> =
        judged.iter().filter_map(|j| if let Judged::Item(i) = j { Some(i.clone()) } else { None }).collect();
    let mut results = if items.is_empty() {
        Vec::new()
    } else {
        match node.propose(Command::Ack(AckCmd { group, items })).await? {
            Outcome::Ack(r) => r,
            other => return Err(ApiError::internal(format!("ack answered {other:?}"))),
        }
    }
    .into_iter();
    let out: Vec<_> = judged
        .iter()
        .zip(&acks)
        .enumerate()
        .map(|(i, (j, a))| {
            let r = match j {
                Judged::Item(_) => results.next().unwrap_or_else(|| AckResult::refused("no result")),
                Judged::Refused => AckResult::refused(ERR_UNRESOLVABLE),
            };
            AckAnswer {
                index: i,
                transaction_id: &a.transaction_id,
                success: r.success,
                error: r.error,
                lease_released: r.lease_released,
                dlq: r.dlq,
                noop: r.noop,
            }
        })
        .collect();
    Ok(crate::http::render::json_answer(axum::http::StatusCode::OK, &out))
}

/// One element of a batch ack's answer.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct AckAnswer<'a> {
    index: usize,
    transaction_id: &'a str,
    success: bool,
    error: Option<String>,
    lease_released: bool,
    dlq: bool,
    noop: bool,
}

pub(crate) fn judge(i: usize, a: &AckBody) -> ApiResult<Judged> {
    let at = |field: &str, m: &str| {
        ApiError::bad_request(format!("acknowledgments[{i}]: {m}")).at_field(format!("acknowledgments[{i}].{field}"))
    };
    if a.transaction_id.is_empty() || a.transaction_id.len() > TRANSACTION_ID_BYTES_MAX {
        return Err(at("transactionId", "transactionId must be a non-empty string within the limit"));
    }
    let pid = match &a.partition_id {
        serde_json::Value::String(s) => s.parse::<u64>().ok(),
        serde_json::Value::Number(n) => n.as_u64(),
        _ => return Err(at("partitionId", "partitionId must be a string")),
    };
    let status = match a.status.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("completed") | Some("complete") | Some("success") | Some("") => AckStatus::Completed,
        Some("failed") | Some("fail") | Some("failure") => AckStatus::Failed,
        Some("retry") => AckStatus::Retry,
        Some("dlq") => AckStatus::Dlq,
        Some(other) => {
            return Err(at("status", &format!("status {other:?} is not one of completed, failed, retry, dlq")))
        }
    };
    if let Some(l) = &a.lease_id {
        if l.len() > LEASE_ID_BYTES_MAX {
            return Err(at("leaseId", "leaseId is too long"));
        }
    }
    let Some(partition_id) = pid else {
        return Ok(Judged::Refused);
    };
    let error = a.error.as_ref().map(|e| truncate(e, ACK_ERROR_BYTES_MAX));
    Ok(Judged::Item(AckItem {
        partition_id,
        transaction_id: a.transaction_id.clone(),
        status,
        error,
        lease_id: a.lease_id.clone().filter(|l| !l.is_empty()),
    }))
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// The extend body: empty or `{}` renews by the lease's own length;
/// `{"seconds": N}` renews by N seconds from now.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExtendBody {
    #[serde(default)]
    seconds: Option<u64>,
}

pub async fn extend_lease(
    State(node): State<Arc<Replica>>,
    Path(lease_id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let bytes = body_bytes(body)?;
    let ExtendBody { seconds } = json_body(&bytes, true)?;
    let duration_ms = match seconds {
        None => None,
        Some(s) if (1..=LEASE_SECONDS_MAX).contains(&s) => Some(s * 1000),
        Some(s) => {
            return Err(ApiError::bad_request(format!("seconds must be from 1 to {LEASE_SECONDS_MAX}, not {s}"))
                .at_field("seconds"));
        }
    };
    if lease_id.is_empty() || lease_id.len() > LEASE_ID_BYTES_MAX || lease_id.chars().any(char::is_control) {
        return Err(ApiError::bad_request(format!(
            "lease id must be 1 to {LEASE_ID_BYTES_MAX} bytes without control characters"
        )));
    }
    let known = node.tenant_state().leases.contains_key(&lease_id);
    let r = if known {
        let cmd = match duration_ms {
            None => Command::ExtendLease { lease_id: lease_id.clone() },
            Some(duration_ms) => Command::ExtendLeaseFor { lease_id: lease_id.clone(), duration_ms },
        };
        match node.propose(cmd).await? {
            Outcome::Extend(r) => r,
            other => return Err(ApiError::internal(format!("extend answered {other:?}"))),
        }
    } else {
        Default::default()
    };
    let expires = r.expires_ms.map(format_iso);
    let mut body = json!({
        "leaseId": lease_id,
        "success": r.renewed > 0,
        "renewed": r.renewed,
        "newExpiresAt": expires,
        "expiresAt": expires,
        "lease_expires_at": expires,
    });
    if r.renewed == 0 {
        body["error"] = json!("lease is unknown, expired or already settled");
    }
    Ok(axum::Json(body).into_response())
}

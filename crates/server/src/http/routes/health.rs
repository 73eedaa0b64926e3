//! `GET /health`: is this node serving, and where does it stand in its Raft
//! group (role, leader, term, commit and applied indexes, lag), and whether
//! its storage takes writes (a failed WAL, a disk past its high watermark or
//! out of space:
//! 503 with the reason). Answered by every node itself, never forwarded.
//! `raft` repeats the essentials under the names of Queen's `/health`
//! (`role`, `leader`, `term`, `applied`, `commit`, `lag`, `storageReady`,
//! `apply`).

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use regina_node::Replica;

pub async fn health(State(node): State<Arc<Replica>>) -> Response {
    let poisoned = node.storage_poisoned();
    let short = node.storage_short();
    let disk = node.disk();
    let full = disk.full || short.is_some();
    let mut body = crate::http::raft_views::raft_view(&node).await;
    let healthy = poisoned.is_none() && !full && !body["leader"].is_null();
    let status = match (healthy, poisoned.is_some(), full) {
        (true, _, _) => "healthy",
        (false, true, _) => "storage_failed",
        (false, false, true) => "storage_full",
        (false, false, false) => "unhealthy",
    };
    let extra = json!({
        "status": status,
        "engine": "regina",
        "version": env!("CARGO_PKG_VERSION"),
        "storageError": poisoned,
        "storageFull": full,
        "storageShort": short,
        "disk": { "usedPct": disk.used_pct, "highPct": disk.high_pct, "lowPct": disk.low_pct, "full": disk.full },
    });
    // Queen's block, under Queen's names, beside Regina's own fields.
    let queen = json!({
        "role": if body["role"] == "shutdown" { json!("stopped") } else { body["role"].clone() },
        "leader": !body["leader"].is_null(),
        "term": body["term"],
        "applied": body["appliedIndex"],
        "commit": body["commitIndex"],
        "lag": body["lag"],
        "storageReady": poisoned.is_none() && !full,
        "apply": { "failure": null, "skipped": 0 },
    });
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
        body.insert("raft".into(), queen);
    }
    let status = if healthy { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, axum::Json(body)).into_response()
}

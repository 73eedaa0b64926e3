//! `GET /health`: is this node serving, and where is its log.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::node::Node;

pub async fn health(State(node): State<Arc<Node>>) -> Response {
    let metrics = node.raft.metrics().borrow().clone();
    let poisoned = node.log.poisoned();
    let leader = metrics.current_leader;
    let healthy = poisoned.is_none() && leader.is_some();
    let body = json!({
        "status": if healthy { "healthy" } else { "unhealthy" },
        "engine": "regina",
        "version": env!("CARGO_PKG_VERSION"),
        "nodeId": metrics.id,
        "role": format!("{:?}", metrics.state).to_lowercase(),
        "leader": leader,
        "term": metrics.current_term,
        "lastLogIndex": metrics.last_log_index,
        "appliedIndex": metrics.last_applied.map(|l| l.index),
        "snapshotIndex": metrics.snapshot.map(|l| l.index),
        "storageError": poisoned,
    });
    let status = if healthy { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, axum::Json(body)).into_response()
}
